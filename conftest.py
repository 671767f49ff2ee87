"""Project-wide pytest set-up.

``tests/nbval_tolerance.py`` makes nbval compare notebook outputs with stated tolerances
(integers and text exactly, floats within rtol/atol plus one unit in the last printed
digit, figures by the fraction of changed pixels): see its docstring. ``pytester`` runs
nbval on small notebooks to show that each kind of comparison fails on a real change.
"""

from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

pytest_plugins = ["tests.nbval_tolerance", "pytester"]


# Slow by place: the notebooks, the browser tests of the built book and the published weights
# (tests/pretrained/). Elsewhere a test that trains, generates at length, runs gradcheck or reads the
# whole book carries @pytest.mark.slow, or its file a module-level ``pytestmark``.
SLOW_FOLDERS = ("tests/book/browser/", "tests/pretrained/")


# fmt: off
# Groups for pytest-xdist (`--dist loadgroup`, given by the Makefile's test target): a notebook's cells share one
# kernel, so each file is one group (the built book is shared by the workers: the ``site`` fixture). Groups are
# handed out in this order, longest first (measured with --durations), so that the two workers finish together;
# the rest follow in collection order.
LONG_GROUPS = ["notebooks/08_language_model.ipynb", "tests/book/browser/test_a11y.py", "tests/book/test_grade.py",
               "notebooks/06_rnn_gradients.ipynb", "notebooks/04_transformer_block.ipynb",
               "notebooks/05_encoder_decoder.ipynb", "tests/book/browser/test_site.py", "tests/book/test_nbgrader.py",
               "notebooks/03_positional_encodings.ipynb", "notebooks/01_attention.ipynb"]
# fmt: on


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Mark as ``slow`` the notebooks and the tests of the folders above, and give every test its
    pytest-xdist group (its file, above).

    ``pytest -m "not slow"`` is then the fast tier: the package's own tests (README, "Two commands").
    """
    root = Path(str(config.rootpath))
    for item in items:
        path = Path(str(item.fspath))
        where = path.relative_to(root).as_posix()
        if path.suffix == ".ipynb" or where.startswith(SLOW_FOLDERS):
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(where))
    rank = {name: i for i, name in enumerate(LONG_GROUPS)}

    def order(item):
        (mark,) = [m.args[0] for m in item.iter_markers("xdist_group")]
        return rank.get(mark, len(rank))

    items.sort(key=order)  # stable: a notebook's cells keep their order


def pytest_runtest_setup(item):
    """A test marked ``needs(reason)`` (tests/conftest.py) with a reason skips, or fails when the run
    must be complete (``skip_or_fail``)."""
    for mark in item.iter_markers("needs"):
        if mark.args and mark.args[0] is not None:
            skip_or_fail(mark.args[0])

"""Project-wide pytest set-up.

``tests/nbval_tolerance.py`` makes nbval compare notebook outputs with stated tolerances
(integers and text exactly, floats within rtol/atol plus one unit in the last printed
digit, figures by the fraction of changed pixels): see its docstring. ``pytester`` runs
nbval on small notebooks to show that each kind of comparison fails on a real change.
"""

from pathlib import Path

import pytest

pytest_plugins = ["tests.nbval_tolerance", "pytester"]


SLOW_FILES = {
    "test_notebook_hygiene.py",
    "test_prose_numbers.py",
    "test_student_edition.py",
    "test_nbval_tolerance.py",
    "test_site.py",
}


def pytest_collection_modifyitems(config, items):
    """Mark as ``slow`` the notebooks, the browser tests and the tests that read or build the notebooks.

    ``pytest -m "not slow"`` is then the fast tier: the package's own tests (README, "Tests").
    """
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" or path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)

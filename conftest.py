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


# fmt: off
# Whole files: notebooks and the book (nbval, hygiene, prose numbers, student edition, browser),
# and the tests that load published weights or train.
SLOW_FILES = {"test_notebook_hygiene.py", "test_prose_numbers.py", "test_student_edition.py",
              "test_nbval_tolerance.py", "test_site.py", "test_pretrained.py", "test_smollm2.py",
              "test_seq2seq_training.py", "test_live_export.py", "test_launch_buttons.py",
              "test_checkpoints.py"}
# Single tests that train a model, generate at length or run gradcheck on a whole layer
# (each took more than 10 s on a loaded 2-core machine): "name" or "name[parameters]".
SLOW_TESTS = {
    "test_tiny_model_learns_to_reverse_a_fixed_batch", "test_overfits_one_batch",
    "test_generate_with_and_without_cache_agree[learned]",
    "test_generate_with_and_without_cache_agree[untied-mqa]",
    "test_generate_with_and_without_cache_agree[sinusoidal]",
    "test_generate_with_and_without_cache_agree[post-norm]",
    "test_gru_generate_continues_the_state", "test_mha_gradcheck_inputs_and_parameters",
    "test_sample_next_token", "test_plot_score_bias_per_head_limits_match_numpy",
    "test_train_is_seeded_and_learns", "test_shift_by_k_is_one_rotation_for_every_position",
    "test_train_delayed_recall_learns_a_short_lag",
    "test_sliding_window_without_cache_and_training_mode_restored",
    "test_self_attention_without_positions_is_permutation_equivariant",
    "test_causal_future_keys_never_change_earlier_outputs", "test_gradcheck[pre-norm]",
    "test_logits_do_not_depend_on_future_tokens",
}


# Groups for pytest-xdist (`--dist loadgroup`, see pyproject.toml): a notebook's cells share one kernel
# and the built book is built once, so each file is one group and every test of the built site (the
# ``site`` fixture) one more. Groups are handed out in this order, longest first, so that the two
# workers finish together; the rest follow in collection order.
LONG_GROUPS = ["site", "notebooks/08_language_model.ipynb", "notebooks/06_rnn_gradients.ipynb",
               "notebooks/04_transformer_block.ipynb", "notebooks/05_encoder_decoder.ipynb",
               "notebooks/03_positional_encodings.ipynb", "notebooks/01_attention.ipynb"]
# fmt: on


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Mark as ``slow`` the notebooks, the book's tests and the long package tests listed above, and
    give every test its pytest-xdist group (above).

    ``pytest -m "not slow"`` is then the fast tier: the package's own tests (README, "Tests").
    """
    root = Path(str(config.rootpath))
    for item in items:
        path = Path(str(item.fspath))
        named = item.name in SLOW_TESTS or getattr(item, "originalname", None) in SLOW_TESTS
        if path.suffix == ".ipynb" or path.name in SLOW_FILES or "browser" in path.parts or named:
            item.add_marker(pytest.mark.slow)
        uses_site = "site" in getattr(item, "fixturenames", ())
        group = "site" if uses_site else path.relative_to(root).as_posix()
        item.add_marker(pytest.mark.xdist_group(group))
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

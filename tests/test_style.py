"""The code is formatted and linted by ruff, with the configuration in pyproject.toml.

The package, the tests, the scripts and the benchmarks keep to 100 columns (pyproject.toml);
the chapters' code cells to 76 (notebooks/ruff.toml), the width the book's code column shows
without a scroll bar. ``make test`` runs this file like any other; to fix a failure, run
``ruff format . && ruff check --fix .`` for Python files and ``python scripts/format_notebooks.py``
for the chapters (it keeps their stored outputs byte for byte), from the repository root.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff(*args: str) -> subprocess.CompletedProcess:
    """Run the pinned ruff (requirements.lock) from the repository root."""
    exe = shutil.which("ruff") or f"{sys.executable} -m ruff"
    return subprocess.run(
        [*exe.split(), *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "args",
    [("format", "--check", "."), ("check", ".")],
    ids=["formatted", "lint-clean"],
)
def test_ruff(args):
    result = ruff(*args)
    assert result.returncode == 0, f"ruff {' '.join(args)}:\n{result.stdout}{result.stderr}"


def test_notebooks_use_the_column_width():
    """The nested configuration applies to the chapters (ruff reports the line length it used)."""
    chapter = next((ROOT / "notebooks").glob("*.ipynb"))
    result = ruff("check", "--show-settings", str(chapter))
    assert "linter.line_length = 76" in result.stdout, result.stdout[-2000:]

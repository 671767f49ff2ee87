"""The code is formatted and linted by ruff, with the configuration in pyproject.toml.

The package, the tests, the scripts and the benchmarks keep to 100 columns (pyproject.toml);
the chapters' code cells to 76 (notebooks/ruff.toml), the width the book's code column shows
without a scroll bar. ``make test`` runs this file like any other; to fix a failure, run
``ruff format . && ruff check --fix .`` for Python files and ``python scripts/format_notebooks.py``
for the chapters (it keeps their stored outputs byte for byte), from the repository root.
The README's layout table must name every module of the package's subpackages.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("package", ["nn", "models", "pretrained", "training"])
def test_readme_layout_lists_every_module(package):
    """The README's layout row of ``transformer_lite/<package>/`` names each of its modules, and
    no module that is not there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `transformer_lite/{package}/` \|(.*)\|$", readme, re.M)
    assert row, f"README.md: no layout row for transformer_lite/{package}/"
    listed = set(re.findall(r"`(\w+\.py)`", row.group(1)))
    present = {p.name for p in (ROOT / "transformer_lite" / package).glob("*.py")}
    present.discard("__init__.py")
    assert listed == present, f"README lists {sorted(listed)}, the folder has {sorted(present)}"


def test_no_module_imports_a_private_name_of_another():
    """No ``from .x import _y`` in the package: a name another module needs is not private (a
    module's own leading underscore, as in ``exercises/_checking.py``, says the module is internal,
    and its siblings may import the module itself: ``from . import _checking``)."""
    found = []
    for path in sorted((ROOT / "transformer_lite").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.level > 0):
                continue
            base = path.parents[node.level - 1].joinpath(*(node.module or "").split("."))
            private = [
                a.name
                for a in node.names
                if a.name.startswith("_")
                and not (base / f"{a.name}.py").is_file()
                and not (base / a.name).is_dir()
            ]
            if private:
                where = path.relative_to(ROOT)
                found.append(
                    f"{where}:{node.lineno} {'.' * node.level}{node.module or ''} {private}"
                )
    assert not found, "private names imported across modules:\n" + "\n".join(found)

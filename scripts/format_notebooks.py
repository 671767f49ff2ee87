"""Format and lint the chapters' code cells with ruff, leaving every stored output untouched.

``ruff format`` and ``ruff check --fix`` rewrite a whole notebook file, outputs included, and
re-serialise floats in the stored plotly figures (0.24750000000000003 becomes
0.24750000000000005): a different number. This script lets ruff work on a copy and then
copies only the code cells' sources back, writing the notebook as Jupyter does (one-space
indent, UTF-8). The settings are notebooks/ruff.toml; ``tests/book/test_style.py`` checks the result.

Usage (from the repository root)::

    python scripts/format_notebooks.py [notebooks/NN_name.ipynb ...]   # default: every chapter
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def ruff_sources(paths: list[Path]) -> dict[Path, list[str]]:
    """The code cells' sources of each notebook after ``ruff check --fix`` and ``ruff format``."""
    # The copies sit in a folder inside notebooks/, so that ruff finds notebooks/ruff.toml.
    with tempfile.TemporaryDirectory(dir=NOTEBOOKS, prefix=".ruff-") as tmp:
        copies = []
        for path in paths:
            copies.append(Path(tmp) / path.name)
            shutil.copyfile(path, copies[-1])
        # --fix first (import order), then the formatter; check's exit code reports what is left.
        subprocess.run(["ruff", "check", "--fix", "-q", *map(str, copies)], check=False)
        subprocess.run(["ruff", "format", "-q", *map(str, copies)], check=True)
        return {
            path: [
                "".join(cell["source"])
                for cell in json.loads(copy.read_text(encoding="utf-8"))["cells"]
                if cell["cell_type"] == "code"
            ]
            for path, copy in zip(paths, copies, strict=True)
        }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebook files (default: notebooks/*.ipynb)")
    args = parser.parse_args(argv)
    paths = [Path(p).resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path, sources in ruff_sources(paths).items():
        nb = json.loads(path.read_text(encoding="utf-8"))
        code_cells = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
        changed = 0
        for cell, source in zip(code_cells, sources, strict=True):
            if "".join(cell["source"]) != source:
                cell["source"] = source.splitlines(keepends=True)
                changed += 1
        if changed:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {changed} code cells reformatted")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

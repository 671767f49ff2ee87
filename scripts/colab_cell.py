"""Insert (or update) the first cell of every chapter that installs the package when the notebook runs on Colab.

The Colab launch button (book/_ext/launch_config.py) opens a chapter straight from GitHub, where
``import transformer_lite`` would fail. This cell, tagged ``remove-cell`` (hidden in the book), does
nothing outside Colab; on Colab it clones the repository, installs the data packages without their
declared dependencies and the package itself, and puts the clone on ``sys.path`` (Colab already has
PyTorch, NumPy, matplotlib, plotly, safetensors and tokenizers). Run it once the repository has its
public address, no re-execution is needed: the cell has no output.

    python scripts/colab_cell.py --url https://github.com/OWNER/REPO notebooks/*.ipynb
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

CELL_ID = "colab-setup"
TEMPLATE = """import sys

if "google.colab" in sys.modules:  # on Colab only: install this book's package and its data
    import os
    import subprocess

    REPOSITORY = "{url}"
    subprocess.run(["git", "clone", "--depth", "1", REPOSITORY, "/content/transformer_lite"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--require-hashes", "-r",
                    "/content/transformer_lite/requirements-nodeps.txt"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "/content/transformer_lite"], check=True)
    sys.path.insert(0, "/content/transformer_lite")
    os.chdir("/content/transformer_lite/notebooks")  # the chapters read ../tests/golden/..."""


def colab_cell(url: str) -> nbformat.NotebookNode:
    """The cell, for the public https address ``url`` of the repository.

    Raises:
        ValueError: if ``url`` is not ``https://HOST/OWNER/REPO``.
    """
    if not re.fullmatch(r"https://[A-Za-z0-9.-]+/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"colab_cell: expected https://HOST/OWNER/REPO, received {url!r}")
    cell = nbformat.v4.new_code_cell(TEMPLATE.format(url=url))
    cell.id = CELL_ID
    cell.metadata["tags"] = ["remove-cell"]
    return cell


def insert(path: Path, url: str) -> None:
    """Put the cell first in the notebook at ``path`` (replacing an earlier version of it)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if c.get("id") != CELL_ID]
    nb.cells.insert(1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0, colab_cell(url))
    nbformat.validate(nb)
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="public https address of the repository")
    p.add_argument("notebooks", nargs="+", type=Path)
    args = p.parse_args(argv)
    for path in args.notebooks:
        insert(path, args.url)
    return 0


if __name__ == "__main__":
    sys.exit(main())

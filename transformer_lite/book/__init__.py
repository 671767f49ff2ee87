"""The old name of :mod:`transformer_lite.chapters`, kept for one term: remove after the spring 2027 term.

Student-edition notebooks handed out before the rename import ``transformer_lite.book.exercises``;
``scripts/grade.py`` grades them. Every ``transformer_lite.book.X`` import returns the module
``transformer_lite.chapters.X`` itself (one module object, not a copy). New code imports ``chapters``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

_OLD, _NEW = __name__, "transformer_lite.chapters"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(_OLD + "."):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(_NEW + spec.name[len(_OLD) :])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())


def __getattr__(name: str):
    return getattr(importlib.import_module(_NEW), name)

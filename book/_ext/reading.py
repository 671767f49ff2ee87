"""Sphinx extension: what the book shows of the cells meant for a running kernel (issue 24, reading).

* Kernel-only explorer cells are left out. Each chapter's explorer
  (``transformer_lite.chapters.explorers``: ipywidgets sliders that recompute) is a code cell tagged
  ``remove-output``: the book cannot run it, so myst-nb showed its code with nothing under it, an
  empty-looking cell in seven chapters. The text before each one says that it needs a running kernel
  and that the book does not show it. Such a cell (tag ``remove-output`` and code that uses
  ``explorers``) is removed from the book; the notebooks keep it.
* An exercise checker's output says what it checked. In the book, each checker ran on the solution
  hidden above it, so its stored line "check_layer_norm: all checks passed" read as if the reader's
  code had passed before the reader had written any. The book (not the notebook, whose stored output
  nbval compares) says so: "check_layer_norm: all checks passed on the solution hidden above (run the
  cell in Jupyter to check your own code)".
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

TAG = "tag_remove-output"
PASSED = re.compile(r"^(\w+): all checks passed$")
ON_SOLUTION = "all checks passed on the solution hidden above (run the cell in Jupyter to check your own code)"


def _says_what_it_checked(cell: nodes.Element) -> None:
    for block in cell.findall(nodes.literal_block):
        if "output" not in block.get("classes", []):
            continue
        lines = block.astext().splitlines()
        if not any(PASSED.match(line.strip()) for line in lines):
            continue
        new = "\n".join(
            PASSED.sub(lambda m: f"{m.group(1)}: {ON_SOLUTION}", line.strip())
            if PASSED.match(line.strip())
            else line
            for line in lines
        )
        block.children = [nodes.Text(new)]
        block.rawsource = new


class ReadingTransforms(SphinxTransform):
    default_priority = 400

    def apply(self, **kwargs) -> None:
        for cell in list(self.document.findall(nodes.container)):
            classes = cell.get("classes", [])
            if "cell" not in classes:
                continue
            code = "".join(
                b.astext()
                for b in cell.findall(nodes.literal_block)
                if "output" not in b.get("classes", [])
            )
            if TAG in classes and "explorer" in code:
                cell.parent.remove(cell)
            elif "check_" in code:
                _says_what_it_checked(cell)


def setup(app):
    app.add_transform(ReadingTransforms)
    # env_version: a change of what the transforms do must re-read every page, not only the changed
    # ones (Sphinx keeps the transformed doctrees of unchanged pages between builds).
    return {
        "version": "1.1",
        "env_version": 2,
        "parallel_read_safe": True,
        "parallel_write_safe": True,
    }

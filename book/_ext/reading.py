"""Sphinx extension: the book leaves out the code cells that only work in a running kernel.

Each chapter's explorer (``transformer_lite.book.explorers``: ipywidgets sliders that recompute) is a
code cell tagged ``remove-output``: the book cannot run it, so myst-nb showed its code with nothing
under it, an empty-looking cell in seven chapters (issue 24, reading). The text before each one says
that it needs a running kernel and that the book does not show it. This transform removes such a
cell (tag ``remove-output`` and code that uses ``explorers``) from the book; the notebooks keep it.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.transforms import SphinxTransform

TAG = "tag_remove-output"


class RemoveKernelOnlyCells(SphinxTransform):
    default_priority = 400

    def apply(self, **kwargs) -> None:
        for cell in list(self.document.findall(nodes.container)):
            classes = cell.get("classes", [])
            if "cell" not in classes or TAG not in classes:
                continue
            code = "".join(b.astext() for b in cell.findall(nodes.literal_block))
            if "explorer" in code:
                cell.parent.remove(cell)


def setup(app):
    app.add_transform(RemoveKernelOnlyCells)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

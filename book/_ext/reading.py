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
* A figure keeps its place while it loads. myst-nb writes a stored PNG as
  ``<img loading="lazy" style="width: Wpx; height: Hpx;">`` (half the retina PNG's pixels), and
  ``book/_static/outputs.css`` lets the height follow a narrower column (``height: auto``); but an
  image without ``width``/``height`` attributes has no height until it has loaded, so on a phone the
  text jumped as the reader scrolled past lazily loaded figures and an in-page link landed above its
  section. The same numbers are added as attributes, from which the browser reserves the box
  (``aspect-ratio: auto W / H``) before the file arrives.
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


_SIZED_IMG = re.compile(
    r'<img ([^>]*?)style="width: (\d+(?:\.\d+)?)px; height: (\d+(?:\.\d+)?)px;"'
)


def _with_size_attributes(html: str) -> str:
    """Each ``<img>`` sized by an inline style also gets ``width`` and ``height`` attributes."""

    def sized(m: re.Match) -> str:
        width, height = round(float(m.group(2))), round(float(m.group(3)))
        return f'<img {m.group(1)}width="{width}" height="{height}" style="width: {m.group(2)}px; height: {m.group(3)}px;"'

    return _SIZED_IMG.sub(sized, html)


def _reserve_figure_boxes(app, pagename, templatename, context, doctree) -> None:
    if "body" in context:
        context["body"] = _with_size_attributes(context["body"])


def setup(app):
    app.add_transform(ReadingTransforms)
    app.connect("html-page-context", _reserve_figure_boxes)
    # env_version: a change of what the transforms do must re-read every page, not only the changed
    # ones (Sphinx keeps the transformed doctrees of unchanged pages between builds).
    return {
        "version": "1.2",
        "env_version": 3,
        "parallel_read_safe": True,
        "parallel_write_safe": True,
    }

"""The chapters as stored: what nbval does not check but the book shows.

Oracle: the notebook files themselves and book/_toc.yml. Every code cell was executed, in
order; no stored error; no stderr text reaches the book (a warning printed by a cell would
be rendered on the page) unless the cell is a progress-bar cell tagged ``remove-stderr``;
every PNG figure carries alt text and its text is legible on a phone (below); every chapter is in the
table of contents.
"""

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from transformer_lite.chapters.viz._style import (
    PHONE_COLUMN_PX,
    SMALLEST_TEXT_KEY,
    TEXT_SIZE_KEY,
)

pytestmark = pytest.mark.slow  # reads, executes or builds the whole book

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _code_cells(path):
    return [
        c
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code" and "".join(c["source"]).strip()
    ]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_executed_in_order_without_errors(path):
    counts = [c["execution_count"] for c in _code_cells(path)]
    assert None not in counts, f"{path.name}: a code cell was never executed"
    assert counts == sorted(counts), f"{path.name}: cells were not executed top to bottom"
    errors = [o for c in _code_cells(path) for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, f"{path.name}: stored error {errors[0]['ename']}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_stderr_reaches_the_book(path):
    for cell in _code_cells(path):
        stderr = "".join("".join(o["text"]) for o in cell["outputs"] if o.get("name") == "stderr")
        if stderr:
            tags = cell["metadata"].get("tags", [])
            assert "remove-stderr" in tags and "nbval-ignore-output" in tags, (
                f"{path.name}: a cell prints to stderr, which the book would show: {stderr[:200]!r}"
            )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_test_markers_are_tags_not_comments(path):
    """nbval reads markers from cell tags too; a ``# NBVAL_...`` comment would be shown to readers."""
    for cell in _code_cells(path):
        assert "NBVAL_" not in "".join(cell["source"]), (
            f"{path.name}: use a cell tag (nbval-ignore-output, nbval-skip, ...) instead of a comment"
        )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_has_alt_text(path):
    for cell in _code_cells(path):
        if any("image/png" in o.get("data", {}) for o in cell["outputs"]):
            alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.strip()) > 20, (
                f"{path.name}: a figure without alt text: {''.join(cell['source'])[:80]!r}"
            )


def test_every_chapter_is_in_the_table_of_contents():
    toc = (ROOT / "book" / "_toc.yml").read_text()
    listed = {
        line.split("file:")[1].strip() for line in toc.splitlines() if "file: notebooks/" in line
    }
    assert listed == {f"notebooks/{p.stem}" for p in CHAPTERS}


# Every figure is shrunk to the text column of a 390 px phone (viz.PHONE_COLUMN_PX); its smallest text
# must still be 9 CSS px there (issue 24), and so at least that on a laptop's wider column. The size is
# measured from the figure itself when the notebook stores it: viz.use_book_figures() draws the figure
# once more, notes the size of every string drawn, and writes the smallest, in CSS px at the phone's
# column, into the PNG's text chunk viz._style.TEXT_SIZE_KEY (tests/chapters/test_viz_style.py checks
# the measure against hand-computed cases). A PNG without it was not made by the book's settings.


def _pngs(path):
    """(cell id, PIL image) of every stored PNG."""
    for cell in _code_cells(path):
        for out in cell["outputs"]:
            png = out.get("data", {}).get("image/png")
            if png:
                yield cell.get("id"), Image.open(io.BytesIO(base64.b64decode(png)))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_figure_text_is_legible_on_a_phone(path):
    small = []
    for cell_id, image in _pngs(path):
        recorded = image.text.get(TEXT_SIZE_KEY)
        assert recorded is not None, (
            f"{path.name} {cell_id}: a PNG without its text size: the chapter's setup cell must call "
            f"viz.use_book_figures() before the first figure"
        )
        if float(recorded) < 9:
            small.append(f"{cell_id}: {recorded} px ({image.text.get(SMALLEST_TEXT_KEY)!r})")
    assert not small, (
        f"{path.name}: figures whose smallest text is under 9 CSS px on a {PHONE_COLUMN_PX} px phone "
        f"column (larger text, or a narrower figure): {small}"
    )

"""The chapters as stored: what nbval does not check but the book shows.

Oracle: the notebook files themselves and book/_toc.yml. Every code cell was executed, in
order; no stored error; no stderr text reaches the book (a warning printed by a cell would
be rendered on the page) unless the cell is a progress-bar cell tagged ``remove-stderr``;
every PNG figure carries alt text and fits the book's column (below); every chapter is in the
table of contents.
"""

import base64
import json
import struct
from pathlib import Path

import pytest

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


# The book's text column is 688 CSS px wide on a laptop; a figure drawn wider is shrunk, its text with it.
# The chapters draw figures at most 6.9 in wide (viz.COLUMN_WIDTH) at 100 dpi, stored at twice the
# pixels ("retina"); matplotlib's tight bounding box adds about 0.1 in on each side, so a figure's
# natural width on the page is at most 712 CSS px. A wider figure is allowed only where its smallest
# text, written here from the cell's code, still reaches 9 CSS px once shrunk to the column:
# pt * 100/72 * 688 / width >= 9.
COLUMN_PX, MAX_NATURAL_PX = 688, 712
WIDER = {  # (chapter, cell id) -> smallest font size in the figure (pt)
    ("02_causal_masks", "cell-12"): 10,  # plot_mask of a padded sentence: 10 pt ticks
    ("02_causal_masks", "cell-20"): 10,  # two masks side by side, 8 in: 10 pt
    ("04_transformer_block", "cell-04"): 10,  # the block diagram, 7.5 in: 10 pt
}


def _png_widths(path):
    """(cell id, natural width in CSS px) of every stored PNG (retina: half its pixels)."""
    for cell in _code_cells(path):
        for out in cell["outputs"]:
            png = out.get("data", {}).get("image/png")
            if png:
                (width,) = struct.unpack(">I", base64.b64decode(png)[16:20])  # IHDR width
                yield cell.get("id"), width / 2


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_figures_fit_the_column(path):
    for cell_id, width in _png_widths(path):
        smallest = WIDER.get((path.stem, cell_id))
        if smallest is None:
            assert width <= MAX_NATURAL_PX, (
                f"{path.name} {cell_id}: a figure {width:.0f} px wide is shrunk to the {COLUMN_PX} px column "
                f"with its text; draw it at most 6.9 in wide (viz.COLUMN_WIDTH)"
            )
        else:
            px = smallest * 100 / 72 * min(1, COLUMN_PX / width)
            assert px >= 9, (
                f"{path.name} {cell_id}: its {smallest} pt text is {px:.1f} px at the column"
            )

"""viz.plot_attention and viz.plot_head_grid on a phone: text of at least 9 CSS px, labels that do not
collide, weights that fit their cells (issue 24).

Oracles:

* the size of the smallest text on the page, in CSS px at the phone's column, measured by
  ``viz.smallest_text_px`` (tested against hand-computed figures in test_viz_style.py), for the
  shapes, token labels and arguments the chapters pass: chapter 1's toy weights (3 x 3, annotated),
  the explorer's and the two heads' 13 MiniLM tokens, the 6 x 12 grid of heads with [CLS] and [SEP]
  labelled; chapter 5's cross-attention (7 queries, 6 keys) and chapter 8's 26 SmolLM2 tokens on
  axes that the chapter lays out;
* the rendered extents of the texts themselves (matplotlib's window extents, in display pixels):
  neighbouring token labels must not overlap, an annotated weight must lie inside its cell;
* for text on a caller's axes, the chapter's font size itself: unshrunk (an unlimited column),
  the smallest text is ``font.size`` points, at 12 pt and at 14 pt.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_lite.chapters import viz
from transformer_lite.chapters.viz.ch1_attention import widest_legible

MINILM_TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired", ".", "[SEP]"]  # fmt: skip
SMOL_TOKENS = [" To", " be", ",", " or", " not", " to", " be", ",", " that", " is", " the", " question", "."] * 2  # fmt: skip


@pytest.fixture(autouse=True)
def _book_settings():
    with plt.rc_context():
        viz.use_book_figures(font_size=12)
        yield
    plt.close("all")


def _weights(*shape, seed=0):
    return torch.softmax(3 * torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), -1)


def _overlapping_neighbours(labels, fig):
    """Neighbouring tick labels that touch: two parallel lines of text, whose anchors are ``d`` apart
    (display px), are ``|d| |sin(angle between d and the text)|`` apart across the text; they touch
    when that is less than the height of a line of text (ascent and descent, unrotated)."""
    renderer = fig.canvas.get_renderer()
    labels = [t for t in labels if t.get_visible() and t.get_text()]
    touching = []
    for a, b in zip(labels, labels[1:]):
        (xa, ya), (xb, yb) = (t.get_transform().transform(t.get_position()) for t in (a, b))
        along = np.hypot(xb - xa, yb - ya)
        angle = np.arctan2(yb - ya, xb - xa) - np.deg2rad(a.get_rotation())
        height = max(
            renderer.get_text_width_height_descent(t.get_text(), t.get_fontproperties(), False)[1]
            for t in (a, b)
        )
        if along * abs(np.sin(angle)) < height:
            touching.append((a.get_text(), b.get_text()))
    return touching


# ------------------------------------------------------------------------- chapter 1's figures


@pytest.mark.parametrize(
    "shape, tokens, annotate",
    [((3, 3), ["tea", "is", "hot"], True), ((13, 13), MINILM_TOKENS, False)],
    ids=["ch1-toy-annotated", "ch1-explorer-13-tokens"],
)
def test_plot_attention_new_figure_is_legible_on_a_phone(shape, tokens, annotate):
    ax = viz.plot_attention(
        _weights(*shape), tokens, annotate=annotate, title="layer 0, head 2: where each token looks"
    )
    px, text = viz.smallest_text_px(ax.figure)
    assert px >= 9, f"{text!r} is {px:.2f} CSS px on a {viz.PHONE_COLUMN_PX} px phone column"
    ax.figure.draw_without_rendering()
    assert not _overlapping_neighbours(ax.get_xticklabels(), ax.figure)
    assert not _overlapping_neighbours(ax.get_yticklabels(), ax.figure)


@pytest.mark.parametrize("n", [3, 6])
def test_plot_attention_annotations_and_axis_labels_fit(n):
    ax = viz.plot_attention(_weights(n, n), [f"t{i}" for i in range(n)], annotate=True)
    fig = ax.figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    to_display = ax.transData.transform
    for text in ax.texts:
        j, i = text.get_position()  # cell (row i, column j) spans i +- 0.5, j +- 0.5
        (x0, y0), (x1, y1) = to_display((j - 0.5, i + 0.5)), to_display((j + 0.5, i - 0.5))
        box = text.get_window_extent(renderer)
        assert x0 < box.x0 and box.x1 < x1 and y0 < box.y0 and box.y1 < y1, text
    # "query (attending)" beside the heatmap, not beyond its top and bottom
    label, heatmap = ax.yaxis.label.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert heatmap.y0 <= label.y0 and label.y1 <= heatmap.y1
    assert viz.smallest_text_px(fig)[0] >= 9


def test_plot_head_grid_of_72_heads_with_landmarks_is_legible_on_a_phone():
    # chapter 1: MiniLM's 6 layers x 12 heads on 13 tokens, [CLS] and [SEP] labelled
    fig = viz.plot_head_grid(
        _weights(6, 12, 13, 13),
        MINILM_TOKENS,
        cell_size=0.52,
        tick_positions=[0, 12],
        title="All 72 heads on one sentence: diagonals (fixed-offset heads)\n"
        "and bright first columns ([CLS])",
    )
    px, text = viz.smallest_text_px(fig)
    assert px >= 9, f"{text!r} is {px:.2f} CSS px on a {viz.PHONE_COLUMN_PX} px phone column"
    heatmaps = [ax for ax in fig.axes if ax.get_images()]
    first_row = [ax.get_title() for ax in heatmaps[:12]]
    assert first_row == [str(h) for h in range(12)]  # too narrow for "head 11": numbered
    assert fig.get_suptitle() and heatmaps[0].get_ylabel() == "0"
    fig.draw_without_rendering()
    assert not _overlapping_neighbours(heatmaps[0].get_yticklabels(), fig)
    titles = [ax.title.get_window_extent(fig.canvas.get_renderer()) for ax in heatmaps[:12]]
    assert not any(a.overlaps(b) for a, b in zip(titles, titles[1:]))


def test_plot_head_grid_gives_every_labelled_token_room():
    # all 9 tokens labelled on squares asked to be tiny: the squares grow instead
    tokens = [f"tok{i}" for i in range(9)]
    fig = viz.plot_head_grid(_weights(2, 2, 9, 9), tokens, cell_size=0.3)
    fig.draw_without_rendering()
    first, last_row_first = fig.axes[0], fig.axes[2]
    assert not _overlapping_neighbours(first.get_yticklabels(), fig)
    assert not _overlapping_neighbours(last_row_first.get_xticklabels(), fig)
    assert viz.smallest_text_px(fig)[0] >= 9


# ------------------------------------------------- chapters 5 and 8: on axes the chapter lays out


@pytest.mark.parametrize("font_size", [12, 14])
def test_plot_attention_on_given_axes_writes_in_the_chapters_font(font_size):
    viz.use_book_figures(font_size=font_size)
    fig, ax = plt.subplots(figsize=(3, 3))
    queries, keys = ["BOS", "b", "e", "h", "e", "i", "b"], list("bieheb")
    viz.plot_attention(_weights(7, 6), queries, keys, title="head 0", ax=ax, annotate=True)
    unshrunk_px, text = viz.smallest_text_px(fig, column_px=float("inf"))
    assert unshrunk_px == pytest.approx(font_size * fig.dpi / 72), text


def test_chapter_5_cross_attention_figure_is_legible_at_the_legible_width():
    # chapter 5, cell-21: the head average and four heads of layer 2 (7 queries: BOS and 6 symbols;
    # 6 source symbols) in a mosaic as wide as a legible figure may be
    queries, keys = ["BOS", "b", "e", "h", "e", "i", "b"], list("bieheb")
    w = _weights(4, 7, 6)
    fig, axes = plt.subplot_mosaic(
        "AABC;AADE", figsize=(widest_legible(), 4.6), layout="constrained"
    )
    viz.plot_attention(w.mean(0), queries, keys, title="layer 2, mean over heads", ax=axes["A"], colorbar=False)  # fmt: skip
    for h, name in enumerate("BCDE"):
        viz.plot_attention(w[h], queries, keys, title=f"head {h}", ax=axes[name], colorbar=h == 3)
    assert viz.smallest_text_px(fig)[0] >= 9


def test_chapter_8_26_token_head_is_legible_at_the_legible_width():
    # chapter 8, cell-50: one SmolLM2 head on 26 tokens, on axes half a legible figure wide
    fig, axes = plt.subplots(1, 2, figsize=(widest_legible(), 6), layout="constrained")  # fmt: skip
    viz.plot_attention(_weights(26, 26), SMOL_TOKENS, ax=axes[0], colorbar=False, title="induction head")  # fmt: skip
    assert viz.smallest_text_px(fig)[0] >= 9

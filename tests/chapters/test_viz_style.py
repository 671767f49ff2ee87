"""viz.smallest_text_px: the size of a figure's smallest text once the book shows it in a column.

Oracle: hand-computed cases. A figure whose only text sits in an axes covering the whole figure
(axis off) has a tight bounding box equal to the figure, so its width on the page is known:
(width + 2 * savefig.pad_inches) * dpi CSS px; text of p pt is p * dpi / 72 px before shrinking.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt
import pytest

from transformer_lite.chapters.viz._style import PHONE_COLUMN_PX, smallest_text_px


def _figure(width_in: float, *texts: tuple[str, float]) -> plt.Figure:
    fig = plt.figure(figsize=(width_in, 2), dpi=100)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.add_patch(plt.Rectangle((0, 0), 1, 1, color="0.9"))
    for i, (text, size) in enumerate(texts):
        ax.text(0.5, 0.2 + 0.3 * i, text, fontsize=size, ha="center")
    return fig


@pytest.fixture(autouse=True)
def _close_figures():
    with plt.rc_context({"savefig.pad_inches": 0.1}):
        yield
    plt.close("all")


def test_a_figure_narrower_than_the_column_is_not_shrunk():
    # 3 in + 0.2 in of padding = 320 px < 358 px: 9 pt = 12.5 px
    px, text = smallest_text_px(_figure(3.0, ("large", 14), ("small", 9)))
    assert px == pytest.approx(12.5)
    assert text == "small"


def test_a_wider_figure_is_shrunk_with_its_text():
    # 7.96 in + 0.2 in = 816 px, shown at 358 px: 10 pt = 13.89 px * 358 / 816 = 6.09 px
    px, text = smallest_text_px(_figure(7.96, ("only", 10)))
    assert px == pytest.approx(10 * 100 / 72 * PHONE_COLUMN_PX / 816)
    assert text == "only"
    px, _ = smallest_text_px(_figure(7.96, ("only", 10)), column_px=688)
    assert px == pytest.approx(10 * 100 / 72 * 688 / 816)


def test_tick_labels_and_mathtext_count():
    fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
    ax.set_xlabel(r"$\alpha$", fontsize=7)
    ax.tick_params(labelsize=12)
    px, text = smallest_text_px(fig)
    assert (px, text) == (pytest.approx(7 * 100 / 72), r"$\alpha$")
    ax.set_xlabel("")
    px, text = smallest_text_px(fig)
    assert px == pytest.approx(12 * 100 / 72)  # a tick label


def test_superscripts_count_at_the_size_mathtext_draws_them():
    # a log axis labels its ticks "10^k": mathtext draws the exponent at 70 % of the label's size
    fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
    ax.set_yscale("log")
    ax.set_ylim(1e-5, 1)
    ax.tick_params(labelsize=12)
    ax.set_xticks([])
    px, text = smallest_text_px(fig)
    assert px == pytest.approx(0.7 * 12 * 100 / 72)
    assert "10^" in text


def test_blank_strings_and_figures_without_text():
    assert smallest_text_px(_figure(3.0, (" ", 4), ("x", 11)))[0] == pytest.approx(11 * 100 / 72)
    assert smallest_text_px(_figure(3.0))[0] == float("inf")

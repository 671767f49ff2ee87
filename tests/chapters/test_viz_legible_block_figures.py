"""The figures of chapters 4 and 5 drawn by the package (viz.plot_activations, viz.plot_norm_placement,
viz.plot_decoder_block) are legible on a phone at the sizes the chapters use, whatever the font size.

Oracles: viz.smallest_text_px (tested against hand-computed cases in test_viz_style.py) for the
size of the text once the figure is shrunk to the 358 px phone column, which issue 24 requires to
be at least 9 CSS px; ``rcParams["font.size"]`` for the size the labels must inherit; and the
drawn geometry itself: every label of a diagram's box lies inside that box, read back from the
renderer's bounding boxes (Agg backend).
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import FancyBboxPatch

from transformer_lite.chapters import viz
from transformer_lite.chapters.viz.ch5_encoder_decoder import DECODER_BLOCK_EM

LEGIBLE_PX = 9.0  # issue 24: no text under 9 CSS px at the phone's column


@pytest.fixture(autouse=True)
def _book_settings():
    with plt.rc_context():
        yield
    plt.close("all")


def _font(size: float) -> None:
    """What viz.use_book_figures(size) sets, without IPython."""
    plt.rcParams.update(
        {"figure.dpi": 100, "font.size": size, "axes.titlesize": size, "figure.titlesize": size + 1}
    )


def _labels_outside_their_boxes(ax: plt.Axes) -> list[str]:
    """The texts centred on a box (a FancyBboxPatch) whose drawn extent leaves that box."""
    renderer = ax.figure.canvas.get_renderer()
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    outside = []
    for text in ax.texts:
        x, y = text.get_position()
        for box in boxes:
            if box.get_x() < x < box.get_x() + box.get_width() and (
                box.get_y() < y < box.get_y() + box.get_height()
            ):
                inner = text.get_window_extent(renderer)
                outer = box.get_window_extent(renderer)
                if not (outer.x0 <= inner.x0 and inner.x1 <= outer.x1):
                    outside.append(text.get_text())
                if not (outer.y0 <= inner.y0 and inner.y1 <= outer.y1):
                    outside.append(text.get_text())
    return outside


@pytest.mark.parametrize("font_size", [10, 12, 14])
@pytest.mark.parametrize("shape", [(8, 16), (6, 16), (4, 8)])
def test_activations_alone_are_legible_on_a_phone(font_size, shape):
    _font(font_size)
    ax = viz.plot_activations(torch.randn(*shape), title="what to notice")
    px, text = viz.smallest_text_px(ax.figure)
    assert px >= LEGIBLE_PX, f"{text!r} is {px:.2f} px on the phone at {font_size} pt, {shape}"
    # the labels inherit the chapter's size rather than a fixed one
    assert ax.xaxis.label.get_size() == pytest.approx(font_size)
    assert all(t.get_size() == pytest.approx(font_size) for t in ax.get_yticklabels())


@pytest.mark.parametrize("font_size", [10, 12, 14])
def test_norm_placement_grows_with_the_font_and_stays_legible(font_size):
    _font(font_size)
    post_ax, pre_ax = viz.plot_norm_placement()
    fig = post_ax.figure
    fig.draw_without_rendering()
    px, text = viz.smallest_text_px(fig)
    assert px >= LEGIBLE_PX, f"{text!r} is {px:.2f} px on the phone at {font_size} pt"
    for ax in (post_ax, pre_ax):
        sizes = {t.get_text(): t.get_size() for t in ax.texts}
        assert sizes["LayerNorm"] == pytest.approx(font_size)
        assert _labels_outside_their_boxes(ax) == []


@pytest.mark.parametrize("font_size", [9, 12, 14])
def test_decoder_block_alone_is_legible_and_fits_its_boxes(font_size):
    _font(font_size)
    for norm_first in (False, True):
        ax = viz.plot_decoder_block(norm_first=norm_first)
        ax.figure.draw_without_rendering()
        px, text = viz.smallest_text_px(ax.figure)
        assert px >= LEGIBLE_PX, f"{text!r} is {px:.2f} px at {font_size} pt"
        assert all(t.get_size() >= font_size for t in ax.texts)
        assert _labels_outside_their_boxes(ax) == []


def test_two_decoder_blocks_side_by_side_fit_a_phone_at_12_pt():
    # chapter 5: post-norm and pre-norm side by side, each given DECODER_BLOCK_EM
    _font(12)
    em = 12 / 72
    fig, axes = plt.subplots(
        1,
        2,
        figsize=(2 * DECODER_BLOCK_EM[0] * em, DECODER_BLOCK_EM[1] * em),
        layout="constrained",
    )
    viz.plot_decoder_block(norm_first=False, ax=axes[0])
    viz.plot_decoder_block(norm_first=True, ax=axes[1])
    fig.draw_without_rendering()
    px, text = viz.smallest_text_px(fig)
    assert px >= LEGIBLE_PX, f"{text!r} is {px:.2f} px on the phone"
    for ax in axes:
        assert _labels_outside_their_boxes(ax) == []

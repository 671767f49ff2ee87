"""Tests for transformer_lite.chapters.viz.ch4_transformer_block.plot_norm_placement (chapter 4's diagram).

Oracle: the package's own blocks. Forward hooks on a 1-layer ``EncoderTagger`` record the order
in which its LayerNorms, attention and feed-forward network run, post-norm and pre-norm (the
pre-norm stack's final LayerNorm included); the diagram's boxes, read back from the matplotlib text
objects bottom to top (Agg backend, no display), must name the same operations in the same order.
The residual arrows must end at the "+" circles, and the two colours must keep 3:1 contrast against
white (WCAG 2.1 relative luminance, computed here from the hex codes).
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import Circle, FancyArrowPatch

from transformer_lite import LayerNorm, MultiHeadAttention, PositionwiseFeedForward
from transformer_lite.chapters.viz.ch4_transformer_block import (
    POST_NORM_COLOUR,
    PRE_NORM_COLOUR,
    plot_norm_placement,
)
from transformer_lite.models.tagger import EncoderTagger, TaggerConfig, with_norm_first

NAMES = {
    LayerNorm: "LayerNorm",
    MultiHeadAttention: "self-attention",
    PositionwiseFeedForward: "feed-forward",
}


def executed_order(norm_first: bool) -> list[str]:
    """The operations of a 1-layer stack in the order its forward pass calls them."""
    torch.manual_seed(0)
    tagger = EncoderTagger(TaggerConfig(6, 9, 1, 8, 2, 16))
    model = with_norm_first(tagger, norm_first=norm_first)
    order, handles = [], []
    for module in model.encoder.modules():
        for kind, name in NAMES.items():
            if type(module) is kind:
                handles.append(module.register_forward_hook(lambda *_, n=name: order.append(n)))
    model(torch.zeros(1, 3, dtype=torch.long))
    for h in handles:
        h.remove()
    return order


def drawn_order(ax: plt.Axes) -> list[str]:
    """The box labels of one panel, bottom to top (input and output labels left out)."""
    texts = [t for t in ax.texts if t.get_text() in set(NAMES.values()) | {"final\nLayerNorm"}]
    texts.sort(key=lambda t: t.get_position()[1])
    return [t.get_text().replace("final\n", "") for t in texts]


@pytest.fixture
def panels():
    post_ax, pre_ax = plot_norm_placement()
    yield post_ax, pre_ax
    plt.close(post_ax.figure)


def test_boxes_follow_the_forward_pass(panels):
    post_ax, pre_ax = panels
    assert executed_order(False) == ["self-attention", "LayerNorm", "feed-forward", "LayerNorm"]
    assert drawn_order(post_ax) == executed_order(False)
    assert drawn_order(pre_ax) == executed_order(True)
    # only the pre-norm stack has a LayerNorm after its last block
    assert [t.get_text() for t in pre_ax.texts].count("final\nLayerNorm") == 1
    assert "final\nLayerNorm" not in [t.get_text() for t in post_ax.texts]


def test_residual_arrows_end_at_the_additions(panels):
    for ax in panels:
        circles = [p for p in ax.patches if isinstance(p, Circle)]
        assert len(circles) == 2  # one addition per sublayer
        ends = []
        for arrow in (p for p in ax.patches if isinstance(p, FancyArrowPatch)):
            (x_start, _), (x_end, y_end) = arrow._posA_posB  # data coordinates
            if x_start < x_end:  # the residual arrows point right, into a "+"
                ends.append(y_end)
        assert sorted(ends) == pytest.approx(sorted(c.center[1] for c in circles))


def _contrast_on_white(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return 1.05 / (luminance + 0.05)


def test_colours_keep_contrast_and_titles_use_them(panels):
    assert _contrast_on_white(POST_NORM_COLOUR) >= 3 and _contrast_on_white(PRE_NORM_COLOUR) >= 3
    post_ax, pre_ax = panels
    assert post_ax.title.get_text() == "post-norm" and pre_ax.title.get_text() == "pre-norm"
    assert matplotlib.colors.to_hex(pre_ax.title.get_color()) == PRE_NORM_COLOUR
    assert matplotlib.colors.to_hex(post_ax.title.get_color()) == POST_NORM_COLOUR

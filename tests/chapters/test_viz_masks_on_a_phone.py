"""Chapter 2's mask figures (``plot_mask``, ``plot_batch_masks``) read on a phone.

Oracle: ``viz.smallest_text_px`` (checked against hand-computed cases in test_viz_style.py) for the
size of the smallest text once the figure is shrunk to the 358 px phone column, and the labels'
own drawn boxes for whether neighbouring tick labels overlap. The masks and labels are those the
chapters pass: chapter 2's causal mask over six words and padding mask over thirteen BERT tokens,
chapter 5's three masks (encoder, decoder, cross-attention; the figure its cell draws for each
with ``plot_mask`` on a figure of its own), chapter 2's left-padded batch of three prompts. Each is
drawn at the chapters' font sizes (the book's figures at 12 pt; 10 pt as chapter 5 had it).
"""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from transformer_lite import causal_mask
from transformer_lite.chapters.viz import smallest_text_px
from transformer_lite.chapters.viz.ch2_causal_masks import CELL_EM, plot_batch_masks, plot_mask

LEGIBLE_PX = 9  # issue 24: no text under 9 CSS px at the phone's column width

WORDS = ["the", "cat", "sat", "on", "the", "mat"]
BERT = ["[CLS]", "attention", "is", "all", "you", "need", ".", "[SEP]"] + ["[PAD]"] * 5
SOURCE = ["g", "g", "i", "e"] + ["PAD"] * 8
TARGET = ["BOS", "e", "i", "g", "g", "EOS"] + ["PAD"] * 7


def _padding(n_real: int, L: int, S: int) -> torch.Tensor:
    return (torch.arange(S) < n_real).expand(L, S)


# (mask, query labels, key labels, title), as the chapters draw them
CHAPTER_MASKS = {
    "ch2-causal": (
        causal_mask(6),
        WORDS,
        WORDS,
        "Causal mask: each token sees itself\nand the past, never the future",
    ),
    "ch2-padding": (
        _padding(8, 13, 13),
        BERT,
        BERT,
        "Padding mask of the shorter sentence:\nno query may attend to [PAD]",
    ),
    "ch5-encoder": (_padding(4, 12, 12), SOURCE, SOURCE, "encoder self-attention:\nsource padding"),
    "ch5-decoder": (
        causal_mask(13) & _padding(6, 13, 13),
        TARGET,
        TARGET,
        "decoder self-attention:\ncausal, target padding",
    ),
    "ch5-cross": (
        _padding(4, 13, 12),
        TARGET,
        SOURCE,
        "cross-attention:\ntarget queries, source keys",
    ),
}


@pytest.fixture(params=[10, 12], ids=lambda pt: f"{pt}pt")
def font_size(request):
    """The rcParams viz.use_book_figures sets, for this test only."""
    size = request.param
    keys = {
        "figure.dpi": 100,
        "font.size": size,
        "axes.titlesize": size,
        "figure.titlesize": size + 1,
    }
    with plt.rc_context(keys):
        yield size
    plt.close("all")


def _apart(axis) -> bool:
    """No two tick labels of this drawn axis overlap. Upright labels: their boxes do not meet.
    Turned labels (parallel strips of text through equally spaced ticks): neighbouring strips'
    centre lines are at least one font size apart."""
    labels = [t for t in axis.get_ticklabels() if t.get_text()]
    angle = math.radians(labels[0].get_rotation())
    if angle == 0:
        boxes = [t.get_window_extent() for t in labels]
        return not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    ticks = axis.axes.transData.transform([(x, 0) for x in axis.get_majorticklocs()])[:, 0]
    spacing = min(abs(b - a) for a, b in zip(ticks, ticks[1:]))
    return spacing * math.sin(angle) >= labels[0].get_size() * axis.figure.dpi / 72


@pytest.mark.parametrize("name", CHAPTER_MASKS)
def test_plot_mask_is_legible_on_a_phone(name, font_size):
    mask, queries, keys, title = CHAPTER_MASKS[name]
    ax = plot_mask(mask, queries, keys, title=title)
    px, text = smallest_text_px(ax.figure)
    assert px >= LEGIBLE_PX, f"{name} at {font_size} pt: {text!r} is {px:.2f} px on a phone"
    ax.figure.canvas.draw()
    assert _apart(ax.xaxis) and _apart(ax.yaxis), name
    # cells CELL_EM font sizes wide, at least as tall: they grow with the text they carry
    width, height = ax.get_window_extent().size / ax.figure.dpi
    cell = CELL_EM * font_size / 72
    assert width == pytest.approx(mask.shape[1] * cell)
    assert height >= mask.shape[0] * cell * (1 - 1e-9)


def test_plot_mask_of_two_rows_keeps_its_axis_label_and_colour_key_readable(font_size):
    """A short mask (a decode step): the axes are at least as tall as the query-axis label."""
    ax = plot_mask(causal_mask(2, 5), ["pos 3", "pos 4"])
    ax.figure.canvas.draw()
    label, axes = ax.yaxis.label.get_window_extent(), ax.get_window_extent()
    assert axes.y0 <= label.y0 and label.y1 <= axes.y1
    assert _apart(ax.figure.axes[-1].yaxis)  # the colour key's two labels


def _batch():
    """Chapter 2's batch: prompts "KING", "ROMEO:", "O" left-padded to 6, then one decode step."""
    prompts, L = ["KING", "ROMEO:", "O"], 6
    real = torch.tensor([[j >= L - len(p) for j in range(L)] for p in prompts])
    grown = torch.cat((real, torch.ones(3, 1, dtype=torch.bool)), dim=1)
    keys = [["·"] * (L - len(p)) + list(p) for p in prompts]
    queries = [["pad"] * (L - len(p)) + [f"{c} @{i}" for i, c in enumerate(p)] for p in prompts]
    return (
        [causal_mask(L) & real[:, None, :], causal_mask(1, L + 1) & grown[:, None, :]],
        [queries, [["sp @4"], ["sp @6"], ["U @1"]]],
        [keys, [k + [n] for k, n in zip(keys, ["sp", "sp", "U"])]],
        ["prefill", "decode"],
        [f'row {b}: "{p}"' for b, p in enumerate(prompts)],
    )


def test_plot_batch_masks_is_legible_on_a_phone(font_size):
    fig = plot_batch_masks(
        *_batch(),
        title="Left padding: each row attends only to its own real tokens,"
        "\nat prefill and at the decode step",
    )
    px, text = smallest_text_px(fig)
    assert px >= LEGIBLE_PX, f"at {font_size} pt: {text!r} is {px:.2f} px on a phone"
    fig.canvas.draw()
    panels = [ax for ax in fig.axes if ax.images]
    for ax in panels:
        assert _apart(ax.xaxis) and _apart(ax.yaxis)
    # no panel's labels reach into another panel
    boxes = [ax.get_tightbbox() for ax in panels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])

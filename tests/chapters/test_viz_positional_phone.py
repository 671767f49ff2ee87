"""Chapter 3's figure functions keep their text legible on a phone (issue 24): plot_score_bias and
plot_accuracy_vs_length, called as chapter 3 calls them, at the text sizes of viz.use_book_figures.

Oracle: viz.smallest_text_px (tested on hand-computed cases in test_viz_style.py), the size in CSS px
of a figure's smallest string once the book shrinks it to the 358 px column of a phone; the book
asks for at least 9. The figure functions size their figures from plt.rcParams["font.size"], so the
check runs at two text sizes: the chapter's 12 pt, and 10 pt for a chapter with smaller text.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from transformer_lite import ClippedRelativePositionBias, T5RelativePositionBias, alibi_bias
from transformer_lite.chapters import viz

MIN_PX = 9  # issue 24: no text under 9 CSS px at the phone's column


@pytest.fixture(params=[12, 10], ids=lambda pt: f"{pt}pt")
def book_text(request):
    """The chapters' figure settings at ``request.param`` pt; rcParams restored afterwards."""
    with plt.rc_context():
        viz.use_book_figures(font_size=request.param)
        yield request.param
    plt.close("all")


def _t5_bias():
    t5 = T5RelativePositionBias(n_heads=4)
    with torch.no_grad():
        t5.weight.copy_(torch.randn(t5.weight.shape, generator=torch.Generator().manual_seed(0)))
        return t5(48)  # (1, 4, 48, 48)


def _clipped_bias():
    clipped = ClippedRelativePositionBias(n_heads=2, max_relative_position=3)
    with torch.no_grad():
        clipped.weight.normal_(generator=torch.Generator().manual_seed(1))
        return clipped(12)[0]  # (2, 12, 12)


# the three calls of chapter 3 (cells cell-32, cell-34, cell-36), and the defaults
SCORE_BIAS_CALLS = {
    "t5, 2 columns": lambda: viz.plot_score_bias(
        _t5_bias(), n_cols=2, cell_size=3.2, title="T5 bias, 48 positions:\nbands widen"
    ),
    "clipped, one row": lambda: viz.plot_score_bias(
        _clipped_bias(), cell_size=3.2, title="Clipped relative bias, k_max = 3:\nseven values"
    ),
    "alibi, per-head scales": lambda: viz.plot_score_bias(
        alibi_bias(8, 16)[:, [0, 2, 4, 7]],
        head_labels=["head 0: m = 1/2", "head 2: m = 1/8", "head 4: m = 1/32", "head 7: m = 1/256"],
        scale="per_head",
        n_cols=2,
        cell_size=2.6,
        title="ALiBi (causal), 16 positions:\nthe same ramp in every head",
    ),
    "defaults, 4 heads in a row": lambda: viz.plot_score_bias(alibi_bias(4, 6), title="t"),
}


@pytest.mark.parametrize("name", SCORE_BIAS_CALLS)
def test_plot_score_bias_text_is_legible_on_a_phone(book_text, name):
    fig = SCORE_BIAS_CALLS[name]()
    px, text = viz.smallest_text_px(fig)
    assert px >= MIN_PX, f"{name} at {book_text} pt: {text!r} shows at {px:.2f} px on a phone"


def test_plot_accuracy_vs_length_text_is_legible_on_a_phone(book_text):
    lengths = [16, 24, 32, 40, 48, 56, 64]  # chapter 3's evaluation lengths, L to 4L
    schemes = ["none", "learned", "sinusoidal", "ALiBi", "RoPE"]
    accuracy = {
        s: [{n: 0.3 + 0.1 * k + 0.01 * seed for n in lengths} for seed in range(3)]
        for k, s in enumerate(schemes)
    }
    ax = viz.plot_accuracy_vs_length(
        accuracy,
        train_length=16,
        chance=0.25,
        ceiling={n: 0.5 for n in lengths},
        title="Trained on at most L = 16 tokens: only ALiBi holds\nat 4L",
    )
    px, text = viz.smallest_text_px(ax.figure)
    assert px >= MIN_PX, f"at {book_text} pt: {text!r} shows at {px:.2f} px on a phone"

"""Chapters 6 and 7's figure functions on a phone: viz.plot_norms_vs_lag, plot_jacobian_terms,
plot_loglog_fit and plot_roofline, called as the chapters call them, and the log-axis labels they share
(_style.label_log_decades).

Oracle: viz.smallest_text_px (tests/chapters/test_viz_style.py checks it against hand-computed cases; it
counts mathtext at its smallest glyph, a log axis's "10^-5" at its exponent's 70 %), the book's
requirement of at least 9 CSS px on a 358 px phone column (issue 24), and the laptop column's width for
a figure's natural width; rcParams["font.size"] for every string drawn; for the tick labels, the
exponents and numbers written out by hand.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from transformer_lite.chapters import viz  # noqa: E402
from transformer_lite.chapters.viz._style import label_log_decades  # noqa: E402
from transformer_lite.chapters.viz.ch6_rnn_gradients import plot_jacobian_terms  # noqa: E402
from transformer_lite.chapters.viz.ch7_cost import plot_roofline  # noqa: E402

LAGS = np.arange(61)
LENGTHS = [128, 256, 512, 1024, 2048]
# the book's laptop column is 688 CSS px; a figure up to about this wide still reads at its size there
LAPTOP_MAX_PX = 712


def _norms_vs_lag():  # chapter 6, cell-10: three radii and their dashed references
    curves = {f"radius {r}": (LAGS, r**LAGS * 1.0) for r in (0.9, 1.0, 1.1)}
    curves["ref: radius^lag"] = (LAGS, 0.9**LAGS * 1.0)
    return viz.plot_norms_vs_lag(
        curves,
        title="Small inputs: the norm follows radius^lag\nuntil the state grows",
        ylabel="log10 ||dh_T / dh_(T-k)||",
        xlabel="lag k (steps back from the last state)",
    ).figure


def _jacobian_terms():  # chapter 6's gated figure, one column of it: twelve decades, as the default GRU
    measured = (LAGS, 0.63**LAGS)
    approximations = {
        "copy term alone": (LAGS, 0.53**LAGS),
        "copy + candidate": (LAGS, 0.62**LAGS),
    }
    axes = plot_jacobian_terms(
        measured, approximations, title="default GRU", ylabel="log10 ||dh_T / dh_(T-k)||"
    )
    return axes[0].figure


def _loglog_fit():  # chapter 7, the time figure
    x = np.array(LENGTHS, dtype=float)
    series = {
        "direct attention": 1e-4 * x**2,
        "tiled attention": 2e-4 * x**1.9,
        "RNN forward": 0.03 * x,
    }
    return viz.plot_loglog_fit(
        x,
        series,
        min_x=256,
        xlabel="sequence length L",
        ylabel="fastest wall time (ms)",
        title="Attention's time grows about as L², the RNN's about as L",
    ).figure


def _roofline():  # chapter 7, the roofline: three kernels and three stages
    return plot_roofline(
        81.8e9,
        16.1e9,
        {
            "direct, L = 4096": (15.9, 52e9),
            "tiled, blocks of 256": (115.8, 46e9),
            "decode step, 32768 keys": (0.51, 7.7e9),
        },
        minor={
            "direct's scores": (31.0, 81e9),
            "direct's softmax": (0.62, 5.5e9),
            "direct's weighted sum": (31.0, 62e9),
        },
        title="Left of the ridge, memory-bound: the decode step and the softmax;\n"
        "the matrix products, and direct attention as a whole, lie right of it",
    ).figure


FIGURES = {
    "plot_norms_vs_lag": _norms_vs_lag,
    "plot_jacobian_terms": _jacobian_terms,
    "plot_loglog_fit": _loglog_fit,
    "plot_roofline": _roofline,
}


@pytest.fixture(autouse=True)
def _restore_rcparams():
    with plt.rc_context():
        yield
    plt.close("all")


# 12 pt: the size chapters 6 and 7 use; 10 and 14: a new figure scales with the text, so any chapter
# can call these functions
@pytest.mark.parametrize("font_size", [10, 12, 14])
@pytest.mark.parametrize("name", FIGURES)
def test_smallest_text_is_legible_on_a_phone(name, font_size):
    # outside IPython this sets the rcParams only (the fixture restores them)
    viz.use_book_figures(font_size=font_size)
    fig = FIGURES[name]()
    px, text = viz.smallest_text_px(fig)
    assert px >= 9, f"{name} at {font_size} pt: {text!r} is {px:.2f} CSS px on a phone, under 9"
    # and at the chapters' sizes not shrunk on a laptop: its natural width, cut to its text, fits the
    # laptop column (at 14 pt a figure is larger by design)
    width_px = (
        fig.get_tightbbox(fig.canvas.get_renderer()).width + 2 * plt.rcParams["savefig.pad_inches"]
    ) * fig.dpi
    if font_size <= 12:
        assert width_px <= LAPTOP_MAX_PX, f"{name} at {font_size} pt: {width_px:.0f} px wide"


@pytest.mark.parametrize("name", FIGURES)
def test_no_text_is_smaller_than_the_figure_text_size(name):
    viz.use_book_figures(font_size=12)
    fig = FIGURES[name]()
    fig.canvas.draw()  # makes the tick labels
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert len(texts) >= 8, "the axis labels, the title and the tick labels"
    too_small = {t.get_text(): t.get_fontsize() for t in texts if t.get_fontsize() < 12}
    assert not too_small, f"{name}: text under the figure's 12 pt: {too_small}"


def _tick_labels(axis) -> list[str]:
    """The labels of ``axis``'s visible ticks (major and minor) that are drawn, with text."""
    lo, hi = sorted(axis.get_view_interval())
    ticks = axis.get_major_ticks() + axis.get_minor_ticks()
    return [
        t.label1.get_text()
        for t in ticks
        if t.label1.get_visible() and t.label1.get_text() and lo <= t.get_loc() <= hi
    ]


@pytest.mark.parametrize(
    ("y_range", "exponent", "expected"),
    [
        # twelve decades: round exponents, a few (matplotlib: 10^0, 10^-3, ... in mathtext)
        (
            (1e-12, 1),
            True,
            [
                "0",
                "\N{MINUS SIGN}2",
                "\N{MINUS SIGN}4",
                "\N{MINUS SIGN}6",
                "\N{MINUS SIGN}8",
                "\N{MINUS SIGN}10",
                "\N{MINUS SIGN}12",
            ],
        ),
        # under two decades: fractional exponents (matplotlib: 10^0, 10^-1 and unlabelled minor ticks)
        (
            (0.07, 1),
            True,
            [
                "\N{MINUS SIGN}1",
                "\N{MINUS SIGN}0.8",
                "\N{MINUS SIGN}0.6",
                "\N{MINUS SIGN}0.4",
                "\N{MINUS SIGN}0.2",
                "0",
            ],
        ),
        # a few decades, plain numbers
        ((0.3, 150), False, ["1", "10", "100"]),
        # fewer than three decades in view: 1-2-5 steps, or finer (one decade tick alone, "1", left
        # chapter 4's gradient norms between 0.4 and 1.6 without a scale)
        ((0.05, 2), False, ["0.05", "0.1", "0.2", "0.5", "1", "2"]),
        ((0.4, 1.6), False, ["0.4", "0.6", "0.8", "1"]),
    ],
)
def test_log_decades_are_labelled_at_full_size(y_range, exponent, expected):
    viz.use_book_figures(font_size=12)
    fig, ax = plt.subplots(figsize=(2.5, 3))  # narrower than the phone column: not shrunk
    ax.semilogy([0, 1], y_range)
    ax.set_ylim(*y_range)
    label_log_decades(ax.yaxis, exponent=exponent)
    fig.canvas.draw()
    assert sorted(_tick_labels(ax.yaxis)) == sorted(expected)
    # no mathtext: every tick label at the text size
    px, text = viz.smallest_text_px(fig)
    assert px == pytest.approx(12 * 100 / 72), text


def test_norm_axes_are_labelled_with_exponents():
    viz.use_book_figures(font_size=12)
    ax_norms = _jacobian_terms().axes[0]
    ax_norms.figure.canvas.draw()
    labels = _tick_labels(ax_norms.yaxis)
    # 0.53 ** 60 = 10^-16.5 the lowest curve: every five decades from 0
    assert sorted(labels) == sorted(["0"] + [f"\N{MINUS SIGN}{e}" for e in (5, 10, 15)]), labels
    assert all("$" not in label for label in labels)
    ax = _norms_vs_lag().axes[0]
    ax.figure.canvas.draw()
    assert "0" in _tick_labels(ax.yaxis) and "$" not in "".join(_tick_labels(ax.yaxis))

"""Static figures (matplotlib) of chapter 6, ``notebooks/06_rnn_gradients.ipynb``:
gradient norms against the lag, and how much of a measured norm an approximation explains.

All text is drawn at the figure's font size (``rcParams``, set by ``viz.use_book_figures``), and a new
figure's size scales with it, so its smallest text stays legible on a phone at any size. The norms span
many decades: their axis is labelled with the exponents (``-6`` for ``10^-6``, at the full text size; a
``10^-6`` tick draws its exponent at 70 %), and the y label says "log10".
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ._style import LINE_COLORS, MARKERS, figure_size, label_line_axes, label_log_decades

__all__ = ["plot_norms_vs_lag", "plot_jacobian_terms"]


def _curve(caller: str, label: str, lags, norms) -> tuple[np.ndarray, np.ndarray]:
    lags, norms = np.asarray(lags, dtype=float).ravel(), np.asarray(norms, dtype=float).ravel()
    if lags.shape != norms.shape:
        raise ValueError(f"{caller}: curve {label!r} has {lags.size} lags but {norms.size} norms")
    return lags, norms


def _legend(ax: plt.Axes, legend: bool) -> None:
    """The legend at the figure's font size (``rcParams["legend.fontsize"]``), or none."""
    if legend:
        ax.legend(fontsize=plt.rcParams["legend.fontsize"])
    elif ax.get_legend() is not None:
        ax.get_legend().remove()


def plot_norms_vs_lag(
    curves: dict,
    title: str = "",
    ax: plt.Axes | None = None,
    ylabel: str = "log10 of the gradient norm",
    xlabel: str = "lag (steps between the two positions)",
    markevery: int = 6,
    legend: bool = True,
) -> plt.Axes:
    """Gradient norms against lag on a logarithmic y axis (ticks: log10 of the norm), one line per curve.

    Args:
        curves: ``{label: (lags, norms)}``, each a 1-D tensor/array of equal length; a label starting with
            ``"ref:"`` is drawn dashed grey (a reference such as ``radius**lag``), without the prefix.
        title: what the reader should notice.
        ax: axes to draw on (a new figure if None).
        ylabel, xlabel: axis labels; the y ticks are exponents, so ``ylabel`` should say "log10".
        markevery: a marker every this many points (lines stay tellable apart in grey scale).
        legend: draw the legend in the axes (False when the figure carries one legend for all panels).

    Returns:
        The axes.

    Raises:
        ValueError: if a curve's lags and norms differ in length.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=figure_size(6, 4))
    i = 0
    for label, (lags, norms) in curves.items():
        lags, norms = _curve("plot_norms_vs_lag", label, lags, norms)
        if label.startswith("ref:"):
            ax.semilogy(lags, norms, "--", color="0.45", lw=1.2, label=label[4:].strip())
            continue
        ax.semilogy(
            lags,
            norms,
            color=LINE_COLORS[i % 6],
            marker=MARKERS[i % 6],
            markevery=markevery,
            ms=5,
            lw=1.8,
            label=label,
        )
        i += 1
    label_line_axes(ax, xlabel, ylabel, title)
    label_log_decades(ax.yaxis, exponent=True)
    _legend(ax, legend)
    return ax


def plot_jacobian_terms(
    measured: tuple,
    approximations: dict,
    axes=None,
    title: str = "",
    ylabel: str = "log10 of the gradient norm",
    xlabel: str = "lag k",
    markevery: int = 6,
    legend: bool = True,
) -> np.ndarray:
    """A measured norm against the lag beside approximations of it, and each approximation's share of it.

    Top panel (log y, ticks: log10 of the norm): the measured norm drawn thick, light and underneath, with markers, so that an
    approximation lying on it stays visible; each approximation thin on top (the last one dashed black).
    Bottom panel (linear y): approximation / measured at every lag, with the line 1 (explains all of it).

    Args:
        measured: ``(lags, norms)``, 1-D of equal length, e.g. ``||dh_T / dh_(T-k)||`` from the full Jacobians.
        approximations: ``{label: (lags, norms)}`` on the same lags, e.g. the product of the copy terms alone.
        axes: two axes (norms, ratio), e.g. a column of ``plt.subplots(2, n, sharex=True)``; a new figure if None.
        title: the top panel's title.
        ylabel, xlabel: the top panel's y label (its ticks are exponents: say "log10"; if empty, the bottom panel has none either) and the bottom
            panel's x label.
        markevery: a marker every this many points.
        legend: draw the legend in the top panel (False when the figure carries one legend for all panels).

    Returns:
        The two axes, ``array([ax_norms, ax_ratio])``.

    Raises:
        ValueError: if a curve's lags and norms differ in length, or an approximation's lags are not the measured ones.
    """
    if axes is None:
        _, axes = plt.subplots(
            2,
            1,
            figsize=figure_size(6, 5),
            sharex=True,
            height_ratios=(2, 1),
            constrained_layout=True,
        )
    ax_norms, ax_ratio = axes
    lags, norms = _curve("plot_jacobian_terms", "measured", *measured)
    ax_norms.semilogy(
        lags,
        norms,
        color=LINE_COLORS[0],
        alpha=0.45,
        lw=6,
        marker="o",
        ms=8,
        markevery=markevery,
        solid_capstyle="round",
        label="measured",
        zorder=1,
    )
    styles = [
        dict(color=LINE_COLORS[2], ls="-", marker="s", ms=5, markevery=markevery),
        dict(color="black", ls="--", marker=None),
    ]
    for i, (label, (a_lags, a_norms)) in enumerate(approximations.items()):
        a_lags, a_norms = _curve("plot_jacobian_terms", label, a_lags, a_norms)
        if not np.array_equal(a_lags, lags):
            raise ValueError(
                f"plot_jacobian_terms: curve {label!r} is not on the measured curve's lags"
            )
        style = (
            styles[1]
            if i == len(approximations) - 1
            else styles[0] | {"color": LINE_COLORS[(2 + i) % 6]}
        )
        ax_norms.semilogy(a_lags, a_norms, lw=1.4, label=label, zorder=3, **style)
        ax_ratio.plot(a_lags, a_norms / norms, lw=1.4, zorder=3, **style)
    ax_ratio.axhline(1.0, color=LINE_COLORS[0], alpha=0.45, lw=6, zorder=1)
    label_line_axes(ax_norms, "", ylabel, title)
    label_log_decades(ax_norms.yaxis, exponent=True)
    _legend(ax_norms, legend)
    ax_ratio.set_xlabel(xlabel)
    ax_ratio.set_ylabel("share of measured" if ylabel else "")
    ax_ratio.set_ylim(bottom=0)
    ax_ratio.grid(True, which="major", alpha=0.3)
    return np.asarray(axes)

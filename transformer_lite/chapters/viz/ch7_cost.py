"""Static figures (matplotlib) of chapter 7, ``notebooks/07_cost.ipynb``:
measured cost on log-log axes, with fitted slopes, and a roofline.

All text is drawn at the figure's font size (``rcParams``, set by ``viz.use_book_figures``), and a new
figure's size scales with it, so its smallest text stays legible on a phone at any size. Log axes carry
plain numbers (``0.1``, ``1``, ``10``: a ``10^-1`` tick draws its exponent at 70 %).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullLocator

from ._style import LINE_COLORS, MARKERS, figure_size, label_line_axes, label_log_decades

__all__ = ["fit_loglog_slope", "plot_loglog_fit", "plot_roofline"]


def fit_loglog_slope(x, y, min_x: float | None = None) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (the exponent p in ``y ~ c x^p``).

    Args:
        x, y: positive values of equal length (at least two points with ``x >= min_x``).
        min_x: ignore points with smaller ``x`` (fixed overheads dominate short inputs).

    Returns:
        The slope as a float.

    Raises:
        ValueError: on non-positive values, unequal lengths or fewer than two points.
    """
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(
            f"fit_loglog_slope: expected x and y of equal length, received {x.size} and {y.size}"
        )
    keep = np.ones_like(x, dtype=bool) if min_x is None else x >= min_x
    if keep.sum() < 2 or (x[keep] <= 0).any() or (y[keep] <= 0).any():
        raise ValueError("fit_loglog_slope: expected at least two points, all positive")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def plot_loglog_fit(
    x,
    series: dict,
    title: str = "",
    ax: plt.Axes | None = None,
    min_x: float | None = None,
    xlabel: str = "L",
    ylabel: str = "",
) -> plt.Axes:
    """Several measured series against ``x`` on log-log axes, each with its fitted slope in the legend.

    The fitted line ``c x^p`` (from :func:`fit_loglog_slope` over ``x >= min_x``) is drawn dotted
    over the points it was fitted to.

    Args:
        x: the common positive x values.
        series: ``{label: y values}``.
        title, xlabel, ylabel: labels.
        ax: axes to draw on (a new figure if None).
        min_x: fit only points with ``x >= min_x``.

    Returns:
        The axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=figure_size(6, 4))
    x = np.asarray(x, dtype=float)
    for i, (label, y) in enumerate(series.items()):
        y = np.asarray(y, dtype=float)
        p = fit_loglog_slope(x, y, min_x)
        keep = np.ones_like(x, dtype=bool) if min_x is None else x >= min_x
        c = np.exp(np.mean(np.log(y[keep]) - p * np.log(x[keep])))
        color = LINE_COLORS[i % 6]
        ax.loglog(x, y, marker=MARKERS[i % 6], color=color, lw=1.5, label=f"{label}: slope {p:.2f}")
        ax.loglog(x[keep], c * x[keep] ** p, ":", color=color, lw=1.2)
    ax.set_xticks(x, [f"{v:g}" for v in x])  # label the measured lengths only
    ax.xaxis.set_minor_locator(NullLocator())
    label_log_decades(ax.yaxis)  # 0.1, 1, 10 at the text size
    label_line_axes(ax, xlabel, ylabel, title)
    ax.legend(fontsize=plt.rcParams["legend.fontsize"])  # the figure's text size, as the ticks
    return ax


def plot_roofline(
    peak_flops: float,
    bandwidth: float,
    kernels: dict,
    title: str = "",
    ax: plt.Axes | None = None,
    minor: dict | None = None,
) -> plt.Axes:
    """A roofline on log-log axes: attainable GFLOP/s ``min(peak, bandwidth * I)`` against the
    arithmetic intensity ``I`` (FLOP per byte), the ridge point ``I = peak / bandwidth`` marked,
    and measured kernels as points.

    Args:
        peak_flops: the compute ceiling, FLOP/s.
        bandwidth: the memory ceiling, bytes/s.
        kernels: ``{label: (intensity, achieved FLOP/s)}``, drawn as large markers.
        title: the title.
        ax: axes to draw on (a new figure if None).
        minor: like ``kernels``, drawn as small hollow markers (e.g. a kernel's stages).

    Returns:
        The axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=figure_size(6.5, 4.5))
    ridge = peak_flops / bandwidth
    points = list(kernels.values()) + list((minor or {}).values())
    lo = min([ridge] + [i for i, _ in points]) / 4
    hi = max([ridge] + [i for i, _ in points]) * 4
    x = np.geomspace(lo, hi, 200)
    ax.loglog(x, np.minimum(peak_flops, bandwidth * x) / 1e9, color="0.2", lw=2, label="roofline")
    ax.axvline(ridge, color="0.4", ls=":", lw=1.2)
    ys = [peak_flops] + [a for _, a in points]
    y_lo, y_hi = min(ys) / 3 / 1e9, max(ys) * 2 / 1e9
    ax.annotate(
        f"ridge point\n{ridge:.1f} FLOP/byte",
        (ridge, y_lo),
        xytext=(-5, 6),
        textcoords="offset points",
        ha="right",
    )
    for i, (label, (intensity, achieved)) in enumerate(kernels.items()):
        ax.loglog(
            intensity,
            achieved / 1e9,
            MARKERS[i % 6],
            color=LINE_COLORS[i % 6],
            ms=9,
            ls="none",
            label=label,
        )
    for j, (label, (intensity, achieved)) in enumerate((minor or {}).items()):
        k = len(kernels) + j
        ax.loglog(
            intensity,
            achieved / 1e9,
            MARKERS[k % 6],
            mfc="none",
            color=LINE_COLORS[k % 6],
            ms=6,
            ls="none",
            label=label,
        )
    ax.set_xlim(lo, hi)
    ax.set_ylim(y_lo, y_hi)
    label_log_decades(ax.xaxis)
    label_log_decades(ax.yaxis)
    label_line_axes(ax, "arithmetic intensity (FLOP per byte of main memory)", "GFLOP/s", title)
    ax.legend(fontsize=plt.rcParams["legend.fontsize"], loc="lower right")
    return ax

"""Static figures (matplotlib) of chapter 7, ``notebooks/07_cost.ipynb``:
measured cost on log-log axes, with fitted slopes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullLocator

from ._style import _LINE_COLORS, _MARKERS, _label_line_axes

__all__ = ["fit_loglog_slope", "plot_loglog_fit"]


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
        _, ax = plt.subplots(figsize=(6, 4))
    x = np.asarray(x, dtype=float)
    for i, (label, y) in enumerate(series.items()):
        y = np.asarray(y, dtype=float)
        p = fit_loglog_slope(x, y, min_x)
        keep = np.ones_like(x, dtype=bool) if min_x is None else x >= min_x
        c = np.exp(np.mean(np.log(y[keep]) - p * np.log(x[keep])))
        color = _LINE_COLORS[i % 6]
        ax.loglog(
            x, y, marker=_MARKERS[i % 6], color=color, lw=1.5, label=f"{label}: slope {p:.2f}"
        )
        ax.loglog(x[keep], c * x[keep] ** p, ":", color=color, lw=1.2)
    ax.set_xticks(x, [f"{v:g}" for v in x])  # label the measured lengths only
    ax.xaxis.set_minor_locator(NullLocator())
    return _label_line_axes(ax, xlabel, ylabel, title)

"""Static figures (matplotlib) of chapter 6, ``notebooks/06_rnn_gradients.ipynb``:
gradient norms against the lag.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ._style import _LINE_COLORS, _MARKERS, _label_line_axes

__all__ = ["plot_norms_vs_lag"]


def plot_norms_vs_lag(
    curves: dict,
    title: str = "",
    ax: plt.Axes | None = None,
    ylabel: str = "gradient norm",
    xlabel: str = "lag (steps between the two positions)",
    markevery: int = 6,
) -> plt.Axes:
    """Gradient norms against lag on a logarithmic y axis, one line per labelled curve.

    Args:
        curves: ``{label: (lags, norms)}``, each a 1-D tensor/array of equal length; a label starting with
            ``"ref:"`` is drawn dashed grey (a reference such as ``radius**lag``), without the prefix.
        title: what the reader should notice.
        ax: axes to draw on (a new figure if None).
        ylabel, xlabel: axis labels.
        markevery: a marker every this many points (lines stay tellable apart in grey scale).

    Returns:
        The axes.

    Raises:
        ValueError: if a curve's lags and norms differ in length.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    i = 0
    for label, (lags, norms) in curves.items():
        lags, norms = np.asarray(lags, dtype=float).ravel(), np.asarray(norms, dtype=float).ravel()
        if lags.shape != norms.shape:
            raise ValueError(
                f"plot_norms_vs_lag: curve {label!r} has {lags.size} lags but {norms.size} norms"
            )
        if label.startswith("ref:"):
            ax.semilogy(lags, norms, "--", color="0.45", lw=1.2, label=label[4:].strip())
            continue
        ax.semilogy(
            lags,
            norms,
            color=_LINE_COLORS[i % 6],
            marker=_MARKERS[i % 6],
            markevery=markevery,
            ms=5,
            lw=1.8,
            label=label,
        )
        i += 1
    return _label_line_axes(ax, xlabel, ylabel, title)

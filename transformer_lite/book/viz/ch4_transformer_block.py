"""Static figures (matplotlib) of chapter 4, ``notebooks/04_transformer_block.ipynb``:
activations as a heatmap.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from torch import Tensor

from ._style import _as_2d

__all__ = ["plot_activations"]


def plot_activations(
    x: Tensor | np.ndarray,
    title: str = "",
    ax: plt.Axes | None = None,
    limit: float | None = None,
    cmap: str = "RdBu_r",
    colorbar_label: str = "value",
) -> plt.Axes:
    """Heatmap of one example's activations, positions as rows and features as columns.

    Signed values get a diverging colormap with symmetric limits, so white is exactly 0.

    Args:
        x: ``(L, D)`` activations of one example.
        title: what the reader should notice.
        ax: axes to draw on (a new figure if None).
        limit: colour range ``[-limit, limit]`` (default: the largest absolute value).
        cmap: a diverging, colour-blind-safe colormap.
        colorbar_label: label of the colorbar.

    Returns:
        The axes.

    Raises:
        ValueError: if ``x`` is not 2-D.
    """
    a = _as_2d(x)
    limit = float(np.abs(a).max()) if limit is None else float(limit)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.5 + 0.3 * a.shape[1], 0.8 + 0.3 * a.shape[0]))
    im = ax.imshow(a, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xlabel("feature")
    ax.set_ylabel("position")
    ax.set_yticks(range(a.shape[0]))
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, label=colorbar_label, fraction=0.046, pad=0.04)
    return ax

"""What the figures of several chapters share: mask colours, line colours and markers, axis labels."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from torch import Tensor

__all__ = ["COLUMN_WIDTH", "MASK_CMAP"]

# Inches: the book's column (688 px) shows a figure this wide at 100 %; a wider one is shrunk, and
# its text with it. At this width 9 pt text is 12.5 px high, the least the figures use.
COLUMN_WIDTH = 6.9

# Two colours from the ends of cividis: dark blue = blocked, yellow = may attend.
MASK_CMAP = ListedColormap([plt.get_cmap("cividis")(0.0), plt.get_cmap("cividis")(1.0)])


def as_2d(weights: Tensor | np.ndarray) -> np.ndarray:
    w = (
        weights.detach().cpu().double().numpy()
        if isinstance(weights, Tensor)
        else np.asarray(weights, dtype=float)
    )
    if w.ndim != 2:
        raise ValueError(f"expected a 2-D (L, S) array, received shape {w.shape}")
    return w


# distinguishable, colour-blind safe
LINE_COLORS = [
    "#3b528b",
    "#21918c",
    "#d8576b",
    "#e6a100",
    "#5ec962",
    "#440154",
]
MARKERS = ["o", "s", "D", "^", "v", "P"]


def label_line_axes(ax: plt.Axes, xlabel: str, ylabel: str, title: str) -> plt.Axes:
    """Axis labels, a major-tick grid, the title (if any) and the legend of a line plot."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=9)
    return ax

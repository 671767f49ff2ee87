"""Static figures (matplotlib) of chapter 4, ``notebooks/04_transformer_block.ipynb``:
activations as a heatmap, and the post-norm / pre-norm block diagram with the two variants' colours.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch import Tensor

from ._style import PHONE_COLUMN_PX, as_2d, draw_add, draw_box

__all__ = ["POST_NORM_COLOUR", "PRE_NORM_COLOUR", "plot_activations", "plot_norm_placement"]


def _legible_width(font_size: float) -> float:
    """The widest figure (in) whose ``font_size`` pt text is still 9 CSS px on the phone column.

    A figure ``w`` inches wide is stored ``w + 0.2`` in wide (its padding) at 100 px per inch and
    shrunk to the column: ``font_size * 100 / 72 * PHONE_COLUMN_PX / (100 * (w + 0.2)) >= 9``.
    Less 3 % for the rounding of the tight bounding box.
    """
    return 0.97 * (font_size * PHONE_COLUMN_PX / (72 * 9) - 0.2)


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
        ax: axes to draw on (a new figure if None, its cells sized from ``rcParams["font.size"]``
            and no wider than keeps that text 9 px high on a phone).
        limit: colour range ``[-limit, limit]`` (default: the largest absolute value).
        cmap: a diverging, colour-blind-safe colormap.
        colorbar_label: label of the colorbar.

    Returns:
        The axes.

    Raises:
        ValueError: if ``x`` is not 2-D.
    """
    a = as_2d(x)
    limit = float(np.abs(a).max()) if limit is None else float(limit)
    if ax is None:
        # cells and margins in units of the text size, the width at most what keeps it legible
        em = plt.rcParams["font.size"] / 72  # inches
        width = min(6.0 * em + 2.2 * em * a.shape[1], _legible_width(plt.rcParams["font.size"]))
        _, ax = plt.subplots(
            figsize=(width, 4.5 * em + 1.8 * em * a.shape[0]), layout="constrained"
        )
    im = ax.imshow(a, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xlabel("feature")
    ax.set_ylabel("position")
    ax.set_yticks(range(a.shape[0]))
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, label=colorbar_label, fraction=0.046, pad=0.04)
    return ax


# The two variants' line colours in the chapter's figures: navy (cividis's dark end) and the
# Okabe-Ito vermillion, both colour-blind safe, far apart in hue and lightness, and above the 3:1
# contrast against white that WCAG 2.1 (1.4.11) asks of graphical objects (15.7:1 and 3.9:1).
POST_NORM_COLOUR = "#00224e"
PRE_NORM_COLOUR = "#d55e00"

# box fills of the block diagram: cividis shades (as chapter 5's decoder diagram) and a light grey
_FILL = {
    "attn": plt.get_cmap("cividis")(0.2),
    "ff": plt.get_cmap("cividis")(0.75),
    "norm": "#e4e4e4",
}
_TEXT = {"attn": "white", "ff": "black", "norm": "black"}
_LABEL = {"attn": "self-attention", "ff": "feed-forward", "norm": "LayerNorm"}
_RESIDUAL = "#5a5a5a"  # the identity paths: 6.9:1 against white


def _block_items(norm_first: bool) -> tuple[list[str], list[tuple[int, int]]]:
    """Kinds bottom to top, and the residual connections as (branch item, add item) indices."""
    if norm_first:
        items = ["in", "norm", "attn", "add", "norm", "ff", "add", "final", "out"]
        return items, [(0, 3), (3, 6)]
    items = ["in", "attn", "add", "norm", "ff", "add", "norm", "out"]
    return items, [(0, 2), (3, 5)]


def plot_norm_placement(
    axes: tuple[plt.Axes, plt.Axes] | None = None, fontsize: float | None = None
) -> tuple[plt.Axes, plt.Axes]:
    """Post-norm and pre-norm stacks side by side, in the manner of Xiong et al. (2020), Fig. 1.

    Drawn bottom to top (data flows upwards). Each column is one block, repeated N times (the
    dashed frame), and each sublayer is wrapped in a residual connection (grey: the identity path).
    Post-norm (Vaswani et al., 2017) puts the LayerNorm after each addition, so the last block
    already ends with one; pre-norm puts it before each sublayer, leaves the residual stream with
    nothing but additions on it, and needs one more LayerNorm after the last block (drawn outside
    the frame), as GPT-2 and :class:`~transformer_lite.models.encoder_decoder.TransformerEncoder`
    with ``norm_first=True`` add.

    Args:
        axes: two axes to draw on, post-norm then pre-norm (a new figure if None, 0.48 x 0.56 in
            per point of ``fontsize``: the boxes fit their labels, and at 100 dpi squeezed to a
            358 px phone column the text is about 10 px high whatever the size).
        fontsize: of the box labels (titles 1 pt larger); default ``rcParams["font.size"]``.

    Returns:
        The two axes.
    """
    fontsize = plt.rcParams["font.size"] if fontsize is None else fontsize
    if axes is None:
        # drawn for 10 pt text in 4.8 x 5.6 in: the figure grows with the text
        scale = fontsize / 10
        _, axes = plt.subplots(1, 2, figsize=(4.8 * scale, 5.6 * scale), layout="constrained")
    step, half_w, half_h, radius = 1.0, 0.95, 0.3, 0.2
    n_rows = max(len(_block_items(v)[0]) for v in (False, True))
    for ax, norm_first in zip(axes, (False, True)):
        items, residuals = _block_items(norm_first)
        ys = [k * step for k in range(len(items))]

        def extent(k):  # half height of item k
            return {"in": 0.2, "out": 0.2, "add": radius}.get(items[k], half_h)

        for k, (kind, y) in enumerate(zip(items, ys)):
            if kind in ("in", "out"):
                label = "input x" if kind == "in" else "output"
                ax.text(0, y, label, ha="center", va="center", fontsize=fontsize)
            elif kind == "add":
                draw_add(ax, y, radius, fontsize)
            else:
                fill = "norm" if kind == "final" else kind
                draw_box(
                    ax,
                    y,
                    half_w,
                    half_h,
                    "round,pad=0.03",
                    facecolor=_FILL[fill],
                    edgecolor=PRE_NORM_COLOUR if kind == "final" else "black",
                    linewidth=2.5 if kind == "final" else 1.0,
                )
                label = "final\nLayerNorm" if kind == "final" else _LABEL[kind]
                ax.text(0, y, label, ha="center", va="center", fontsize=fontsize, color=_TEXT[fill])
            if k:
                ax.add_patch(
                    FancyArrowPatch(
                        (0, ys[k - 1] + extent(k - 1)),
                        (0, y - extent(k)),
                        arrowstyle="-|>",
                        mutation_scale=1.2 * fontsize,
                        color="black",
                        shrinkA=0,
                        shrinkB=0,
                    )
                )
        left = -half_w - 0.35
        for branch, add in residuals:
            yb = (ys[branch] + ys[branch + 1]) / 2  # where the path splits off
            ax.plot([0, left, left], [yb, yb, ys[add]], color=_RESIDUAL, linewidth=1.6)
            ax.add_patch(
                FancyArrowPatch(
                    (left, ys[add]),
                    (-radius, ys[add]),
                    arrowstyle="-|>",
                    mutation_scale=1.2 * fontsize,
                    color=_RESIDUAL,
                    linewidth=1.6,
                    shrinkA=0,
                    shrinkB=0,
                )
            )
        # the block, repeated N times: from the first sublayer's item to the last addition/norm
        last = items.index("final") - 1 if norm_first else len(items) - 2
        bottom, top = (ys[0] + ys[1]) / 2 - 0.05, ys[last] + extent(last) + 0.15
        ax.add_patch(
            FancyBboxPatch(
                (left - 0.15, bottom),
                half_w + 0.15 - (left - 0.15),
                top - bottom,
                boxstyle="round,pad=0.02",
                facecolor="none",
                edgecolor="black",
                linestyle="--",
                linewidth=1.0,
            )
        )
        ax.text(
            half_w + 0.25, (bottom + top) / 2, "× N", ha="left", va="center", fontsize=fontsize + 1
        )
        ax.set_xlim(left - 0.3, half_w + 0.95)
        ax.set_ylim(-0.5, (n_rows - 1) * step + 0.4)
        ax.set_aspect("equal")
        ax.axis("off")
        name = "pre-norm" if norm_first else "post-norm"
        colour = PRE_NORM_COLOUR if norm_first else POST_NORM_COLOUR
        ax.set_title(name, fontsize=fontsize + 1, color=colour, fontweight="bold")
    return axes[0], axes[1]

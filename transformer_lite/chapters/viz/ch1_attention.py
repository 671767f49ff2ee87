"""Static figures (matplotlib) of chapter 1, ``notebooks/01_attention.ipynb``:
attention heatmaps, one head or all heads of all layers.

Their text inherits the chapter's sizes (``plt.rcParams["font.size"]``, set by
:func:`~transformer_lite.chapters.viz.use_book_figures`), and the figures they create size their
cells in ems of that font, so a token label always has room. A new figure is as wide as its cells
ask but never wider than its text allows: shown in the phone's column, the chapter's font must
still measure :data:`MIN_TEXT_PX` CSS px (:func:`widest_legible`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import Tensor

from ._style import COLUMN_WIDTH, PHONE_COLUMN_PX, as_2d

__all__ = ["plot_attention", "plot_head_grid"]

# CSS px: the smallest text the book allows on a phone (issue 24)
MIN_TEXT_PX = 9
# ems of the chapter's font: room for one token label beside the next (a label is about 1.2 em
# high; a label turned by 60 degrees takes 1.2 / sin 60 = 1.4 em along the axis)
LABEL_PITCH = 1.5
# ems: a cell that holds its weight written out ("0.42" is about 2.3 em wide)
ANNOTATED_CELL = 3.0


def _em() -> float:
    """Inches per em of the chapter's font."""
    return plt.rcParams["font.size"] / 72


def widest_legible() -> float:
    """The widest tight figure (inches) whose ``font.size`` text still measures ``MIN_TEXT_PX``
    once shrunk to the phone column, and that the laptop column shows at full size.

    The page shows a figure ``tight + 2 * savefig.pad_inches`` wide; on the phone it is shrunk to
    ``PHONE_COLUMN_PX``, so ``pt`` points become ``pt / 72 * PHONE_COLUMN_PX / width`` px.
    """
    page_width = min(COLUMN_WIDTH, plt.rcParams["font.size"] * PHONE_COLUMN_PX / (72 * MIN_TEXT_PX))
    return page_width - 2 * plt.rcParams["savefig.pad_inches"]


def _fit_cells(
    fig: plt.Figure,
    ax: plt.Axes,
    cells: tuple[int, int],
    axes_grid: tuple[int, int],
    cell: float,
    min_cell: float,
) -> None:
    """Resize ``fig`` (constrained layout) so that its heatmaps have square cells of ``cell`` inches,
    smaller if the figure would be wider than :func:`widest_legible`, but not under ``min_cell``.

    ``ax`` is one of ``axes_grid`` = (rows, columns) equal axes, each ``cells`` = (rows, columns)
    cells. What is not heatmap (labels, titles, colorbar) keeps its size: it is measured from the
    laid-out figure, twice, since the colorbar's share of the figure moves a little with its size.
    """
    (rows, cols), (n_down, n_across) = cells, axes_grid
    for _ in range(2):
        fig.draw_without_rendering()  # runs the constrained layout
        width, height = fig.get_size_inches()
        box = ax.get_window_extent()  # display px
        data_w, data_h = n_across * box.width / fig.dpi, n_down * box.height / fig.dpi
        around = fig.get_tightbbox().width - data_w  # labels, titles, colorbar
        widest = widest_legible() - 0.02  # inches: a margin for the layout's last moves
        size = max(min_cell, min(cell, (widest - around) / (n_across * cols)))
        fig.set_size_inches(
            width - data_w + n_across * cols * size, height - data_h + n_down * rows * size
        )


def plot_attention(
    weights: Tensor | np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    title: str = "",
    ax: plt.Axes | None = None,
    cmap: str = "viridis",
    vmax: float | None = 1.0,
    annotate: bool = False,
    colorbar: bool = True,
) -> plt.Axes:
    """Heatmap of one head's attention weights, queries as rows and keys as columns.

    A new figure (``ax=None``) gets square cells of 2 ems of the chapter's font (3 when annotated),
    narrower if the figure would otherwise be too wide for its text to stay legible on a phone, but
    never under the 1.5 ems a token label needs. On a given ``ax`` the caller's layout decides.

    Args:
        weights: ``(L, S)`` weights (rows sum to 1).
        query_tokens: ``L`` labels for the rows.
        key_tokens: ``S`` labels for the columns (defaults to ``query_tokens``).
        title: what the reader should notice.
        ax: axes to draw on (a new figure if None).
        cmap: a perceptually uniform, colour-blind-safe colormap.
        vmax: upper end of the colour scale (1.0 so that heads are comparable; None = data maximum).
        annotate: print each weight in its cell (for small matrices).
        colorbar: draw a colorbar labelled "attention weight".

    Returns:
        The axes.

    Raises:
        ValueError: if the number of labels does not match the shape of ``weights``.
    """
    w = as_2d(weights)
    key_tokens = list(query_tokens) if key_tokens is None else list(key_tokens)
    if w.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"plot_attention: weights of shape {w.shape} need {w.shape[0]} query labels and "
            f"{w.shape[1]} key labels, received {len(query_tokens)} and {len(key_tokens)}"
        )
    new_figure = ax is None
    if new_figure:
        _, ax = plt.subplots(layout="constrained")
    im = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(w.shape[1]), key_tokens, rotation=60, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(w.shape[0]), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                v = w[i, j]
                light = v > 0.6 * (vmax or w.max())  # viridis is light at its top
                ax.text(
                    j, i, f"{v:.2f}", ha="center", va="center", color="black" if light else "white"
                )
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="attention weight")
    if new_figure:
        # and tall enough for the label "query (attending)", about 11 em long
        cell = max(ANNOTATED_CELL if annotate else 2.0, 11 / w.shape[0]) * _em()
        _fit_cells(ax.figure, ax, w.shape, (1, 1), cell, LABEL_PITCH * _em())
    return ax


def plot_head_grid(
    attentions: Sequence[Tensor] | Tensor,
    tokens: Sequence[str],
    title: str = "",
    cmap: str = "viridis",
    cell_size: float = 1.15,
    tick_positions: Sequence[int] | None = None,
) -> plt.Figure:
    """All heads of all layers as a grid of small heatmaps (rows = layers, columns = heads).

    Every text is in the chapter's font (``plt.rcParams["font.size"]``). Squares too narrow for
    "head 11" are numbered, with "head" written once above them and "layer" once beside them.

    Args:
        attentions: ``n_layers`` tensors of shape ``(H, L, L)`` (one example), or one ``(n_layers, H, L, L)`` tensor.
        tokens: ``L`` token labels, shown on the axes of the first column and the last row.
        title: what the reader should notice.
        cmap: colour-blind-safe colormap; one shared scale from 0 to 1.
        cell_size: inches per small heatmap, reduced when needed so that the figure's text stays
            legible on a phone (:func:`widest_legible`: 6.4 in at 12 pt), but never below what the
            labelled tokens need (1.5 em each) or a head's number.
        tick_positions: the positions whose token is written on the axes (default: all). When many
            heads must fit the book's column, label a few landmarks (e.g. ``[0, L - 1]`` for
            ``[CLS]`` and ``[SEP]``) rather than squares too large for the page.

    Returns:
        The figure.

    Raises:
        ValueError: if the attention tensors are not ``(n_layers, H, L, L)`` with ``L == len(tokens)``,
            or a tick position is outside ``[0, L)``.
    """
    if not isinstance(attentions, Tensor):
        shapes = {tuple(a.shape) for a in attentions}
        if len(shapes) != 1:
            raise ValueError(
                f"plot_head_grid: expected every layer's weights to share one shape (H, L, L), "
                f"received {sorted(shapes)}"
            )
        attentions = torch.stack(list(attentions))
    A = attentions
    if A.dim() != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] != len(tokens):
        raise ValueError(
            f"plot_head_grid: expected (n_layers, H, L, L) with L = {len(tokens)}, "
            f"received {tuple(A.shape)}"
        )
    n_layers, H, L = A.shape[:3]
    ticks = list(range(L)) if tick_positions is None else sorted(int(p) for p in tick_positions)
    if any(not 0 <= p < L for p in ticks):
        raise ValueError(f"plot_head_grid: expected tick positions in [0, {L}), received {ticks}")
    em = _em()
    # the closest two labelled positions must be LABEL_PITCH apart
    closest = min((b - a for a, b in zip(ticks, ticks[1:])), default=L)
    for_labels = LABEL_PITCH * em * L / closest
    # "head 11" is about 4 em wide: in narrower squares, numbers, and the words once for all
    compact = min(max(cell_size, for_labels), widest_legible() / H) < 4.5 * em
    min_cell = max(for_labels, (2.0 if compact else 4.5) * em)

    fig = plt.figure(layout="constrained")
    grid = fig.subfigures(1, 1)  # a subfigure: its own title ("head") under the figure's
    axes = grid.subplots(n_layers, H, squeeze=False, sharex=True, sharey=True)
    for layer in range(n_layers):
        for head in range(H):
            ax = axes[layer, head]
            im = ax.imshow(
                A[layer, head].detach().cpu().double().numpy(),
                cmap=cmap,
                vmin=0,
                vmax=1,
                aspect="auto",  # square: _fit_cells sizes the figure for it
            )
            ax.tick_params(length=0, pad=1)
            if layer == 0:
                ax.set_title(str(head) if compact else f"head {head}")
            if head == 0:
                if compact:
                    ax.set_ylabel(str(layer), rotation=0, ha="right", va="center")
                else:
                    ax.set_ylabel(f"layer {layer}")
    if compact:
        grid.suptitle("head", fontsize=plt.rcParams["axes.titlesize"])
        grid.supylabel("layer", fontsize=plt.rcParams["axes.labelsize"])
    # The axes share their ticks, and shared inner axes hide their labels: the tokens appear on the
    # first column (queries) and the last row (keys) only; under the first square only when the
    # squares are small (labels overhanging a square would push its neighbours apart).
    labels = [tokens[p] for p in ticks]
    axes[0, 0].set_yticks(ticks, labels)
    axes[-1, 0].set_xticks(ticks, labels)
    for ax in axes[-1]:
        ax.tick_params(axis="x", labelrotation=90, labelbottom=not compact or ax is axes[-1, 0])
    if compact and len(ticks) <= 2:  # landmarks: the first and last inside the square's edges
        for ax in axes[:, 0]:
            for label, p in zip(ax.get_yticklabels(), ticks):
                label.set_va({0: "top", L - 1: "bottom"}.get(p, "center"))
        for label, p in zip(axes[-1, 0].get_xticklabels(), ticks):
            label.set_ha({0: "left", L - 1: "right"}.get(p, "center"))
    fig.supxlabel("key (attended to);\nin each small square the rows are the queries")
    if title:
        fig.suptitle(title)
    if compact:  # below the grid, beside the key labels: the width is for the heads
        grid.colorbar(
            im, ax=axes, label="attention weight", location="bottom", shrink=0.4, aspect=30
        )
    else:
        grid.colorbar(im, ax=axes, label="attention weight", fraction=0.02, pad=0.02)
    _fit_cells(fig, axes[0, 0], (1, 1), (n_layers, H), cell_size, min_cell)
    return fig

"""Static figures (matplotlib) of chapter 1, ``notebooks/01_attention.ipynb``:
attention heatmaps, one head or all heads of all layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import Tensor

from ._style import COLUMN_WIDTH, as_2d

__all__ = ["plot_attention", "plot_head_grid"]


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
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.42 * w.shape[1], 0.8 + 0.38 * w.shape[0]))
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
                ax.text(
                    j,
                    i,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if v > 0.6 * (vmax or w.max()) else "white",
                )
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="attention weight", fraction=0.046, pad=0.04)
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

    Args:
        attentions: ``n_layers`` tensors of shape ``(H, L, L)`` (one example), or one ``(n_layers, H, L, L)`` tensor.
        tokens: ``L`` token labels, shown on the axes of the first column and the last row.
        title: what the reader should notice.
        cmap: colour-blind-safe colormap; one shared scale from 0 to 1.
        cell_size: inches per small heatmap, reduced when needed so that the figure is at most
            6.9 in wide (the book's column: a wider figure is shrunk, and its labels with it).
        tick_positions: the positions whose token is written on the axes (default: all). When many
            heads must fit the book's column, label a few landmarks (e.g. ``[0, L - 1]`` for
            ``[CLS]`` and ``[SEP]``) in a legible size rather than every token in an illegible one.

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
    n_layers, H = A.shape[:2]
    ticks = list(range(len(tokens))) if tick_positions is None else [int(p) for p in tick_positions]
    size, head_size = (5, 9) if tick_positions is None else (7, 8)  # few labels: legible ones
    if any(not 0 <= p < len(tokens) for p in ticks):
        raise ValueError(
            f"plot_head_grid: expected tick positions in [0, {len(tokens)}), received {ticks}"
        )
    cell_size = min(cell_size, (COLUMN_WIDTH - 1.6) / H)
    fig, axes = plt.subplots(
        n_layers,
        H,
        figsize=(cell_size * H + 1.6, cell_size * n_layers + 1.2),
        squeeze=False,
        sharex=True,
        sharey=True,
        layout="constrained",
    )
    for layer in range(n_layers):
        for head in range(H):
            ax = axes[layer, head]
            im = ax.imshow(
                A[layer, head].detach().cpu().double().numpy(), cmap=cmap, vmin=0, vmax=1
            )
            ax.tick_params(length=0, pad=1, labelsize=size)
            if layer == 0:
                ax.set_title(f"head {head}", fontsize=head_size)
            if head == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=9)
    # The axes share their ticks, and shared inner axes hide their labels: the tokens appear on the
    # first column (queries) and the last row (keys) only.
    labels = [tokens[p] for p in ticks]
    axes[0, 0].set_yticks(ticks, labels, fontsize=size)
    axes[-1, 0].set_xticks(ticks, labels, fontsize=size)
    for ax in axes[-1]:
        ax.tick_params(axis="x", labelrotation=90)
    fig.supxlabel("key (attended to); in each small square the rows are the queries")
    if title:
        fig.suptitle(title)
    fig.colorbar(im, ax=axes, label="attention weight", fraction=0.02, pad=0.02)
    return fig

"""Figures for the chapters: attention heatmaps, head grids and mask pictures.

All figures use colour-blind-safe colormaps (viridis / cividis), label both
axes with tokens, carry a colorbar, and take a title that says what to notice.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from torch import Tensor

__all__ = ["plot_attention", "plot_head_grid", "plot_mask", "MASK_CMAP"]

# Two colours from the ends of cividis: dark blue = blocked, yellow = may attend.
MASK_CMAP = ListedColormap([plt.get_cmap("cividis")(0.0), plt.get_cmap("cividis")(1.0)])


def _as_2d(weights: Tensor | np.ndarray) -> np.ndarray:
    w = weights.detach().cpu().double().numpy() if isinstance(weights, Tensor) else np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"expected a 2-D (L, S) array, received shape {w.shape}")
    return w


def plot_attention(weights: Tensor | np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str] | None = None,
                   title: str = "", ax: plt.Axes | None = None, cmap: str = "viridis", vmax: float | None = 1.0,
                   annotate: bool = False, colorbar: bool = True) -> plt.Axes:
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
    w = _as_2d(weights)
    key_tokens = list(query_tokens) if key_tokens is None else list(key_tokens)
    if w.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"plot_attention: weights of shape {w.shape} need {w.shape[0]} query labels and "
                         f"{w.shape[1]} key labels, received {len(query_tokens)} and {len(key_tokens)}")
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
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if v > 0.6 * (vmax or w.max()) else "white")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="attention weight", fraction=0.046, pad=0.04)
    return ax


def plot_head_grid(attentions: Sequence[Tensor] | Tensor, tokens: Sequence[str], title: str = "",
                   cmap: str = "viridis", cell_size: float = 1.15) -> plt.Figure:
    """All heads of all layers as a grid of small heatmaps (rows = layers, columns = heads).

    Args:
        attentions: ``n_layers`` tensors of shape ``(H, L, L)`` (one example), or one ``(n_layers, H, L, L)`` tensor.
        tokens: ``L`` token labels, shown on the axes of the first column and the last row.
        title: what the reader should notice.
        cmap: colour-blind-safe colormap; one shared scale from 0 to 1.
        cell_size: inches per small heatmap.

    Returns:
        The figure.

    Raises:
        ValueError: if the attention tensors are not ``(n_layers, H, L, L)`` with ``L == len(tokens)``.
    """
    if not isinstance(attentions, Tensor):
        shapes = {tuple(a.shape) for a in attentions}
        if len(shapes) != 1:
            raise ValueError(f"plot_head_grid: expected every layer's weights to share one shape (H, L, L), "
                             f"received {sorted(shapes)}")
        attentions = torch.stack(list(attentions))
    A = attentions
    if A.dim() != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] != len(tokens):
        raise ValueError(f"plot_head_grid: expected (n_layers, H, L, L) with L = {len(tokens)}, "
                         f"received {tuple(A.shape)}")
    n_layers, H = A.shape[:2]
    fig, axes = plt.subplots(n_layers, H, figsize=(cell_size * H + 1.6, cell_size * n_layers + 1.2),
                             squeeze=False, sharex=True, sharey=True, layout="constrained")
    for layer in range(n_layers):
        for head in range(H):
            ax = axes[layer, head]
            im = ax.imshow(A[layer, head].detach().cpu().double().numpy(), cmap=cmap, vmin=0, vmax=1)
            ax.tick_params(length=0, pad=1, labelsize=5)
            if layer == 0:
                ax.set_title(f"head {head}", fontsize=9)
            if head == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=9)
    # The axes share their ticks, and shared inner axes hide their labels: the tokens appear on the
    # first column (queries) and the last row (keys) only.
    axes[0, 0].set_yticks(range(len(tokens)), tokens, fontsize=5)
    axes[-1, 0].set_xticks(range(len(tokens)), tokens, fontsize=5)
    for ax in axes[-1]:
        ax.tick_params(axis="x", labelrotation=90)
    fig.supxlabel("key (attended to); in each small square the rows are the queries")
    if title:
        fig.suptitle(title)
    fig.colorbar(im, ax=axes, label="attention weight", fraction=0.02, pad=0.02)
    return fig


def plot_mask(mask: Tensor, query_tokens: Sequence[str] | None = None, key_tokens: Sequence[str] | None = None,
              title: str = "", ax: plt.Axes | None = None) -> plt.Axes:
    """Picture of a boolean mask (``True`` = may attend) with a two-colour legend bar.

    Args:
        mask: bool ``(L, S)``.
        query_tokens, key_tokens: labels (default: positions 0, 1, ...).
        title: what the reader should notice.
        ax: axes to draw on.

    Returns:
        The axes.

    Raises:
        ValueError: if ``mask`` is not a 2-D bool tensor or labels do not match it.
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() != 2:
        raise ValueError(f"plot_mask: expected a 2-D bool tensor, received "
                         f"{getattr(mask, 'dtype', type(mask))} of shape {tuple(getattr(mask, 'shape', ()))}")
    L, S = mask.shape
    query_tokens = [str(i) for i in range(L)] if query_tokens is None else list(query_tokens)
    key_tokens = [str(j) for j in range(S)] if key_tokens is None else list(key_tokens)
    if len(query_tokens) != L or len(key_tokens) != S:
        raise ValueError(f"plot_mask: mask of shape {(L, S)} needs {L} query and {S} key labels, "
                         f"received {len(query_tokens)} and {len(key_tokens)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.6 + 0.42 * S, 0.8 + 0.38 * L))
    im = ax.imshow(mask.cpu().numpy().astype(float), cmap=MASK_CMAP, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(S), key_tokens, rotation=60 if max(map(len, key_tokens)) > 2 else 0, ha="right"
                  if max(map(len, key_tokens)) > 2 else "center", rotation_mode="anchor")
    ax.set_yticks(range(L), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    cbar = ax.figure.colorbar(im, ax=ax, ticks=[0.25, 0.75], fraction=0.046, pad=0.04)
    cbar.ax.set_yticklabels(["False:\nblocked", "True:\nmay attend"])
    return ax

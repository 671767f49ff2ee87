"""Static figures (matplotlib) of chapter 2, ``notebooks/02_causal_masks.ipynb``:
a bool mask as a picture, and the masks of a left-padded batch at each stage of generation.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from torch import Tensor

from ._style import MASK_CMAP

__all__ = ["plot_mask", "plot_batch_masks"]


def plot_mask(
    mask: Tensor,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    title: str = "",
    ax: plt.Axes | None = None,
) -> plt.Axes:
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
        raise ValueError(
            f"plot_mask: expected a 2-D bool tensor, received "
            f"{getattr(mask, 'dtype', type(mask))} of shape {tuple(getattr(mask, 'shape', ()))}"
        )
    L, S = mask.shape
    query_tokens = [str(i) for i in range(L)] if query_tokens is None else list(query_tokens)
    key_tokens = [str(j) for j in range(S)] if key_tokens is None else list(key_tokens)
    if len(query_tokens) != L or len(key_tokens) != S:
        raise ValueError(
            f"plot_mask: mask of shape {(L, S)} needs {L} query and {S} key labels, "
            f"received {len(query_tokens)} and {len(key_tokens)}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(1.6 + 0.42 * S, 0.8 + 0.38 * L))
    im = ax.imshow(mask.cpu().numpy().astype(float), cmap=MASK_CMAP, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(
        range(S),
        key_tokens,
        rotation=60 if max(map(len, key_tokens)) > 2 else 0,
        ha="right" if max(map(len, key_tokens)) > 2 else "center",
        rotation_mode="anchor",
    )
    ax.set_yticks(range(L), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    cbar = ax.figure.colorbar(im, ax=ax, ticks=[0.25, 0.75], fraction=0.046, pad=0.04)
    cbar.ax.set_yticklabels(["False:\nblocked", "True:\nmay attend"])
    return ax


def plot_batch_masks(
    masks: Sequence[Tensor],
    query_labels: Sequence[Sequence[Sequence[str]]],
    key_labels: Sequence[Sequence[Sequence[str]]],
    stage_names: Sequence[str],
    row_titles: Sequence[str],
    title: str = "",
    cell_size: float = 0.14,
) -> plt.Figure:
    """The bool masks of every row of a batch at several stages (prefill, decode steps), one panel each.

    Figure row ``s`` shows stage ``s`` (e.g. the prompt at prefill, then one decode step with the
    cache), figure column ``b`` the batch's row ``b``; one two-colour bar serves every panel. Each
    figure row is as tall as its number of queries, so a one-query decode step is a thin strip.

    Args:
        masks: one bool ``(B, L_s, S_s)`` tensor per stage (``True`` = may attend), the same B.
        query_labels: ``query_labels[s][b]``: ``L_s`` labels of the queries of row ``b``.
        key_labels: ``key_labels[s][b]``: ``S_s`` labels of the keys of row ``b``.
        stage_names: one name per stage, put in front of the query-axis label.
        row_titles: one title per row of the batch, above its column.
        title: what the reader should notice (the figure's title).
        cell_size: inches per mask cell; the default fits three rows of seven keys in the book's
            6.2-in column.

    Returns:
        The figure.

    Raises:
        ValueError: if a mask is not a 3-D bool tensor, the stages disagree on B, or a label list
            does not match its mask.
    """
    n_stages = len(masks)
    if n_stages == 0 or len(stage_names) != n_stages:
        raise ValueError(
            f"plot_batch_masks: expected one stage name per mask, received {len(stage_names)} "
            f"names for {n_stages} masks"
        )
    for s, m in enumerate(masks):
        if not isinstance(m, Tensor) or m.dtype != torch.bool or m.dim() != 3:
            raise ValueError(
                f"plot_batch_masks: expected masks[{s}] a 3-D bool tensor (B, L, S), received "
                f"{getattr(m, 'dtype', type(m))} of shape {tuple(getattr(m, 'shape', ()))}"
            )
    B = masks[0].shape[0]
    if any(m.shape[0] != B for m in masks) or len(row_titles) != B:
        raise ValueError(
            f"plot_batch_masks: expected every mask and row_titles to have B = {B} rows, received "
            f"{[m.shape[0] for m in masks]} and {len(row_titles)} titles"
        )
    for s, m in enumerate(masks):
        L, S = m.shape[1:]
        for b in range(B):
            nq, nk = len(query_labels[s][b]), len(key_labels[s][b])
            if (nq, nk) != (L, S):
                raise ValueError(
                    f"plot_batch_masks: masks[{s}] row {b} of shape {(L, S)} needs {L} query and "
                    f"{S} key labels, received {nq} and {nk}"
                )
    # + room for the key labels under each panel; at least 4 rows tall, so the axis label fits
    heights = [max(m.shape[1], 2) + 2.2 for m in masks]
    width = max(m.shape[2] for m in masks)
    fig, axes = plt.subplots(
        n_stages,
        B,
        # cell_size inches per cell, plus room for each panel's query labels
        figsize=(1.0 + B * (0.75 + cell_size * width), 1.1 + cell_size * sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
        constrained_layout=True,
    )
    for s, m in enumerate(masks):
        for b in range(B):
            ax = axes[s, b]
            im = ax.imshow(m[b].cpu().numpy().astype(float), cmap=MASK_CMAP, vmin=0, vmax=1)
            # short labels (a character, "pad") stay upright; longer ones turn
            upright = max(map(len, key_labels[s][b]), default=0) <= 3
            ax.set_xticks(range(m.shape[2]), key_labels[s][b], rotation=0 if upright else 90)
            ax.set_yticks(range(m.shape[1]), query_labels[s][b])
            ax.set_xlabel("key (column)")
            if b == 0:
                ax.set_ylabel(f"{stage_names[s]}\nquery")
            if s == 0:
                ax.set_title(row_titles[b])
    cbar = fig.colorbar(im, ax=axes, ticks=[0.25, 0.75], fraction=0.025, pad=0.02)
    cbar.ax.set_yticklabels(["False:\nblocked", "True:\nmay attend"])
    if title:
        fig.suptitle(title)
    return fig

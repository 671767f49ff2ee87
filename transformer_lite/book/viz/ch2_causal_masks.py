"""Static figures (matplotlib) of chapter 2, ``notebooks/02_causal_masks.ipynb``:
a bool mask as a picture.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from torch import Tensor

from ._style import MASK_CMAP

__all__ = ["plot_mask"]


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

"""Small measurements on attention weights, used by the chapters to find and score head patterns.

Sources for the patterns: Clark et al. (2019), "What Does BERT Look At?"
(previous-token heads, heavy attention to [CLS]/[SEP]); Kovaleva et al. (2019);
Xiao et al. (2024) (attention sinks).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["offset_score", "previous_token_score", "key_score"]


def _check_square(weights: Tensor) -> None:
    if weights.dim() < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"expected self-attention weights of shape (..., L, L), received {tuple(weights.shape)}")


def offset_score(weights: Tensor, offset: int) -> Tensor:
    """Mean weight that each query ``i`` puts on key ``i + offset``, over the queries where that key exists.

    Args:
        weights: self-attention weights ``(..., L, L)`` (rows = queries, columns = keys).
        offset: key position relative to the query (-1 = previous token, 0 = itself, +1 = next).

    Returns:
        Tensor of shape ``(...)``: the mean of ``weights[..., i, i + offset]``; a value
        near 1 means the head almost always attends to that relative position.

    Raises:
        ValueError: if ``weights`` is not square in its last two dimensions or ``|offset| >= L``.
    """
    _check_square(weights)
    L = weights.shape[-1]
    if abs(offset) >= L:
        raise ValueError(f"offset_score: expected |offset| < L = {L}, received offset={offset}")
    return torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1).mean(dim=-1)


def previous_token_score(weights: Tensor) -> Tensor:
    """:func:`offset_score` with ``offset=-1``: how much a head looks at the token just before each query."""
    return offset_score(weights, -1)


def key_score(weights: Tensor, key_index: int) -> Tensor:
    """Mean weight that all queries put on one key (e.g. ``0`` for ``[CLS]``, ``-1`` for ``[SEP]``).

    Args:
        weights: attention weights ``(..., L, S)``.
        key_index: the key's position (negative counts from the end).

    Returns:
        Tensor of shape ``(...)``: ``weights[..., :, key_index].mean(-1)``.

    Raises:
        ValueError: if ``key_index`` is outside ``[-S, S)``.
    """
    if weights.dim() < 2:
        raise ValueError(f"key_score: expected weights of shape (..., L, S), received {tuple(weights.shape)}")
    S = weights.shape[-1]
    if not -S <= key_index < S:
        raise ValueError(f"key_score: expected key_index in [{-S}, {S}), received {key_index}")
    return weights[..., :, key_index].mean(dim=-1)

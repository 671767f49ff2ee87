"""Positional information for the input representations.

Self-attention with shared projections is permutation-equivariant: it cannot
tell positions apart unless position is added somewhere. This module holds the
learned absolute position embedding used by BERT and GPT-2 (Devlin et al.,
2019; Radford et al., 2019); Vaswani et al. (2017, Sec. 3.5) report learned
embeddings and fixed sinusoids giving nearly identical results.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LearnedPositionalEmbedding"]


class LearnedPositionalEmbedding(nn.Module):
    """A learned vector per absolute position ``0 .. max_len - 1``.

    Args:
        max_len: number of positions with a learned vector.
        d_model: width D of each vector.

    Attributes:
        weight: ``(max_len, d_model)`` parameter, initialised N(0, 0.02^2) as in GPT-2.

    Raises:
        ValueError: if ``max_len`` or ``d_model`` is not positive.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        if max_len < 1 or d_model < 1:
            raise ValueError(f"LearnedPositionalEmbedding: expected positive max_len and d_model, "
                             f"received {max_len}, {d_model}")
        self.max_len, self.d_model = max_len, d_model
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, seq_len: int, offset: int = 0) -> Tensor:
        """Embeddings of positions ``offset .. offset + seq_len - 1``.

        Args:
            seq_len: number of positions L.
            offset: first position (e.g. the number of cached tokens when decoding).

        Returns:
            ``(seq_len, d_model)`` tensor, to be added to token embeddings ``(B, L, D)`` by broadcasting.

        Raises:
            ValueError: if ``offset + seq_len > max_len`` (no embedding was learned
                for those positions) or ``seq_len < 1`` or ``offset < 0``.
        """
        if seq_len < 1 or offset < 0:
            raise ValueError(f"LearnedPositionalEmbedding: expected seq_len >= 1 and offset >= 0, "
                             f"received seq_len={seq_len}, offset={offset}")
        if offset + seq_len > self.max_len:
            raise ValueError(f"LearnedPositionalEmbedding: positions up to {offset + seq_len - 1} requested, but only "
                             f"max_len={self.max_len} positions (0..{self.max_len - 1}) have embeddings")
        return self.weight[offset:offset + seq_len]  # (L, D)

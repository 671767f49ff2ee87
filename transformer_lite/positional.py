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

__all__ = ["LearnedPositionalEmbedding", "RotaryEmbedding", "apply_rotary"]


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


def apply_rotary(x: Tensor, positions: Tensor, base: float = 10000.0, interleaved: bool = True) -> Tensor:
    """Rotate feature pairs of ``x`` by angles proportional to their positions (RoPE).

    Source: Su et al. (2021/2024), "RoFormer: Enhanced Transformer with Rotary Position
    Embedding", Eq. (34). Pair ``j`` (``j = 0 .. d/2 - 1``) of the vector at position ``m``
    is rotated by the angle ``m * theta_j`` with ``theta_j = base^(-2j/d)``:

        out_a = x_a cos(m theta_j) - x_b sin(m theta_j)
        out_b = x_a sin(m theta_j) + x_b cos(m theta_j)

    Applied to queries and keys, the score ``q_m . k_n`` then depends on the positions only
    through ``m - n``.

    Args:
        x: ``(..., L, d)`` floating tensor, ``d`` even (e.g. queries ``(B, H, L, d_head)``).
        positions: ``(L,)`` integer (or float) positions of the L rows.
        base: the wavelength base (10000 in RoFormer; SmolLM2 uses 100000).
        interleaved: pair features ``(2j, 2j+1)`` as in the paper (and llama.cpp/GGUF
            weights) if True; pair ``(j, j + d/2)`` as in GPT-NeoX and Hugging Face's
            ``rotate_half`` if False.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Raises:
        ValueError: if ``d`` is odd, ``x`` has fewer than 2 dimensions, or ``positions`` is not ``(L,)``.
    """
    if x.dim() < 2 or x.shape[-1] % 2 != 0:
        raise ValueError(f"apply_rotary: expected x of shape (..., L, d) with d even, received {tuple(x.shape)}")
    L, d = x.shape[-2], x.shape[-1]
    if positions.dim() != 1 or positions.shape[0] != L:
        raise ValueError(f"apply_rotary: expected positions of shape ({L},), received {tuple(positions.shape)}")
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    theta = base ** (-torch.arange(0, d, 2, dtype=compute, device=x.device) / d)  # (d/2,)
    angles = positions.to(device=x.device, dtype=compute)[:, None] * theta  # (L, d/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    xc = x.to(compute)
    if interleaved:
        a, b = xc[..., 0::2], xc[..., 1::2]  # (..., L, d/2) each: features 2j and 2j+1
    else:
        a, b = xc[..., : d // 2], xc[..., d // 2:]  # features j and j + d/2
    ra, rb = a * cos - b * sin, a * sin + b * cos
    if interleaved:
        out = torch.stack((ra, rb), dim=-1).flatten(-2)  # back to (..., L, d), pairs interleaved
    else:
        out = torch.cat((ra, rb), dim=-1)
    return out.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE; Su et al., RoFormer, Eq. 34) as a module without parameters.

    Args:
        d_head: width of each head's queries and keys (even).
        base: wavelength base (10000 in the paper).
        interleaved: pair layout, see :func:`apply_rotary`.

    Raises:
        ValueError: if ``d_head`` is not a positive even number.
    """

    def __init__(self, d_head: int, base: float = 10000.0, interleaved: bool = True) -> None:
        super().__init__()
        if d_head < 2 or d_head % 2 != 0:
            raise ValueError(f"RotaryEmbedding: expected a positive even d_head, received {d_head}")
        self.d_head, self.base, self.interleaved = d_head, base, interleaved

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Rotate ``x`` of shape ``(..., L, d_head)`` whose rows sit at positions ``offset .. offset + L - 1``.

        Raises:
            ValueError: if the last dimension of ``x`` is not ``d_head`` or ``offset`` is negative.
        """
        if x.shape[-1] != self.d_head or offset < 0:
            raise ValueError(f"RotaryEmbedding: expected x of shape (..., L, {self.d_head}) and offset >= 0, "
                             f"received {tuple(x.shape)} and offset={offset}")
        positions = torch.arange(offset, offset + x.shape[-2], device=x.device)
        return apply_rotary(x, positions, base=self.base, interleaved=self.interleaved)

    def extra_repr(self) -> str:
        return f"d_head={self.d_head}, base={self.base}, interleaved={self.interleaved}"

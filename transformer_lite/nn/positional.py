"""Positional information for the input representations (and, for RoPE, for queries and keys).

Self-attention with shared projections is permutation-equivariant: it cannot
tell positions apart unless position is added somewhere. This module holds the
fixed sinusoidal encoding of Vaswani et al. (2017, Sec. 3.5), the learned
absolute position embedding used by BERT and GPT-2 (Devlin et al., 2019;
Radford et al., 2019) -- Vaswani et al. report the two giving nearly identical
results -- and the rotary embedding (RoPE) of Su et al. Position information
added to the attention *scores* (relative biases, ALiBi) is in
:mod:`transformer_lite.nn.relative_position`.

The sinusoid and RoPE turn pair ``i`` of features by the same angle per position,
``omega_i = base^(-2i/d)``: :func:`rotation_frequencies` computes it for both.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..checks import (
    check_dropout,
    check_last_dim,
    check_nonnegative_int,
    check_positions,
    check_positive_int,
    check_positive_sizes,
    check_sequences,
    owner_name,
)
from .dtypes import angle_dtype

__all__ = [
    "rotation_frequencies",
    "sinusoidal_positional_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "apply_rotary",
]


def rotation_frequencies(
    d: int,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    """Angle per position of each feature pair: ``omega_i = base^(-2i/d)``, ``i = 0 .. ceil(d/2) - 1``.

    Source: Vaswani et al. (2017), Sec. 3.5 (the sinusoid's ``pos / 10000^(2i/d_model)``);
    Su et al. (RoFormer), Eq. (15) (RoPE's ``theta_i = 10000^(-2(i-1)/d)``, ``i`` counted from 1).

    Args:
        d: the number of features (``d_model`` for the sinusoid, ``d_head`` for RoPE); the callers check it.
        base: the wavelength base (10000 in both papers).
        dtype, device: of the result.

    Returns:
        ``(ceil(d/2),)`` radians per position, from 1 down to almost ``1/base``.
    """
    # (ceil(d/2),): 2i / d for pair i
    return base ** (-torch.arange(0, d, 2, dtype=dtype, device=device) / d)


def _sinusoid_rows(positions: Tensor, d_model: int, base: float) -> Tensor:
    """Rows of the sinusoidal table for the given positions, in float64: ``(len(positions), d_model)``."""
    # omega_i, radians per position
    freq = rotation_frequencies(d_model, base, device=positions.device)
    angles = positions.to(torch.float64)[:, None] * freq  # (L, ceil(D/2))
    # (L, ceil(D/2), 2): (sin, cos) of pair i
    pairs = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1)
    # Flatten the pairs in order: sin_0, cos_0, sin_1, cos_1, ... For odd D the final cosine is cut off,
    # so the last feature is a sine.
    return pairs.flatten(-2)[:, :d_model]  # (L, 2 * ceil(D/2)) -> (L, D)


def sinusoidal_positional_encoding(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """The fixed sinusoidal position encoding, one row per position ``0 .. seq_len - 1``.

    Source: Vaswani et al. (2017), "Attention Is All You Need", Sec. 3.5:

        PE[pos, 2i]     = sin(pos / base^(2i / d_model))
        PE[pos, 2i + 1] = cos(pos / base^(2i / d_model))

    with ``base = 10000``. Features come in interleaved (sin, cos) pairs; pair
    ``i`` turns at ``omega_i = base^(-2i/d_model)`` radians per position, so its
    wavelength is ``2 pi base^(2i/d_model)`` positions (from ``2 pi`` for
    ``i = 0`` up to almost ``2 pi base``). For an odd ``d_model`` the last
    feature is the sine of a pair whose cosine does not fit. Because each pair
    is a point on a circle, ``PE[pos + k]`` is ``PE[pos]`` with every pair
    rotated by the angle ``k omega_i``: the same linear map for every ``pos``
    (for an odd ``d_model`` this holds for all features but the last).

    Args:
        seq_len: number of positions L (rows), ``>= 1``.
        d_model: number of features D (columns), ``>= 1``, odd allowed.
        base: the wavelength base (10000 in the paper).
        dtype: floating dtype of the result (computed in float64, then cast).
        device: device of the result.

    Returns:
        Tensor ``(seq_len, d_model)`` with values in [-1, 1]; angles are in radians.

    Raises:
        ValueError: for sizes, a ``base`` or a ``dtype`` other than the above.
    """
    check_positive_int(sinusoidal_positional_encoding, "seq_len", seq_len)
    _check_table(sinusoidal_positional_encoding, d_model, base, dtype)
    positions = torch.arange(seq_len, device=device)
    return _sinusoid_rows(positions, d_model, base).to(dtype)


def _check_table(owner, d_model: int, base: float, dtype: torch.dtype = torch.float64) -> None:
    """The checks of the sinusoid's width, base and dtype, for the function and the module."""
    check_positive_int(owner, "d_model", d_model)
    if not (base > 1 and dtype.is_floating_point):
        raise ValueError(
            f"{owner_name(owner)}: expected base > 1 and a floating dtype, received base={base!r}, dtype {dtype}"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding to a batch of embeddings, then applies dropout.

    Source: Vaswani et al. (2017), Sec. 3.5 (the sum of token embedding and
    position encoding) and Sec. 5.4 (dropout on that sum, rate 0.1 in the base
    model). The encoding is :func:`sinusoidal_positional_encoding`; it has no
    parameters. The rows needed are computed on each call, in float64, then
    cast to the dtype of the input, so the values are as exact as that dtype
    allows whatever ``.to(...)`` was applied to the module.

    Args:
        d_model: width D of the embeddings.
        max_len: number of positions ``0 .. max_len - 1`` this module accepts
            (a limit chosen for the model, not a property of the sinusoid).
        dropout: dropout probability on the sum (training only).
        base: wavelength base (10000 in the paper).

    Raises:
        ValueError: for sizes, a dropout or a ``base`` other than the above.
    """

    def __init__(
        self, d_model: int, max_len: int, dropout: float = 0.0, base: float = 10000.0
    ) -> None:
        super().__init__()
        check_positive_int(self, "max_len", max_len)
        check_dropout(self, dropout)
        _check_table(self, d_model, base)
        self.d_model, self.max_len, self.base = d_model, max_len, base
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``dropout(x + PE[offset : offset + L])``.

        Args:
            x: ``(B, L, d_model)`` floating embeddings.
            offset: absolute position of the first row of ``x`` (e.g. the
                number of tokens already decoded when feeding one new token).

        Returns:
            ``(B, L, d_model)``, dtype of ``x``.

        Raises:
            ValueError: for an ``x`` of another shape or dtype, or positions past ``max_len``.
        """
        check_sequences(self, self.d_model, x=x)
        L = x.shape[1]
        check_positions(self, offset, L, self.max_len)
        positions = torch.arange(offset, offset + L, device=x.device)
        # (L, D), broadcast over B
        pe = _sinusoid_rows(positions, self.d_model, self.base).to(x.dtype)
        return self.dropout(x + pe)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base}"


class LearnedPositionalEmbedding(nn.Module):
    """A learned vector per absolute position ``0 .. max_len - 1``, added to the embeddings.

    Source: Devlin et al. (2019), Sec. 3.2 (BERT), and Radford et al. (2019) (GPT-2): one
    trained vector per position instead of a formula. Called as
    :class:`SinusoidalPositionalEncoding` and :class:`RotaryEmbedding` are: ``forward(x, offset)``.

    Args:
        d_model: width D of each vector (first, as in every module of the package).
        max_len: number of positions with a learned vector.

    Attributes:
        weight: ``(max_len, d_model)`` parameter, initialised N(0, 0.02^2) as in GPT-2.

    Raises:
        ValueError: for sizes that are not positive ints.
    """

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        check_positive_sizes(self, d_model=d_model, max_len=max_len)
        self.max_len, self.d_model = max_len, d_model
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Return ``x + weight[offset : offset + L]``.

        Args:
            x: ``(B, L, d_model)`` embeddings.
            offset: absolute position of the first row of ``x`` (e.g. the number of cached
                tokens when decoding).

        Returns:
            ``(B, L, d_model)``.

        Raises:
            ValueError: for an ``x`` of another shape, or positions past ``max_len``.
        """
        check_sequences(self, self.d_model, min_len=1, x=x)
        L = x.shape[1]
        check_positions(self, offset, L, self.max_len)
        return x + self.weight[offset : offset + L]  # (L, D) broadcast over B


def apply_rotary(
    x: Tensor, positions: Tensor, base: float = 10000.0, interleaved: bool = True
) -> Tensor:
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
        ValueError: for an ``x`` or ``positions`` of other shapes.
    """
    if x.dim() < 2 or x.shape[-1] % 2 != 0 or tuple(positions.shape) != x.shape[-2:-1]:
        raise ValueError(
            f"apply_rotary: expected x of shape (..., L, d) with d even and positions of shape (L,), received {tuple(x.shape)} and {tuple(positions.shape)}"
        )
    d = x.shape[-1]
    compute = angle_dtype(x.dtype)
    theta = rotation_frequencies(d, base, compute, x.device)  # (d/2,)
    angles = positions.to(device=x.device, dtype=compute)[:, None] * theta  # (L, d/2)
    return _rotate(x, torch.cos(angles), torch.sin(angles), interleaved)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    """Rotate the feature pairs of ``x`` ``(..., L, d)`` by the angles whose ``cos``/``sin`` are ``(L, d/2)``."""
    d = x.shape[-1]
    xc = x.to(cos.dtype)
    if interleaved:
        a, b = xc[..., 0::2], xc[..., 1::2]  # (..., L, d/2) each: features 2j and 2j+1
    else:
        a, b = xc[..., : d // 2], xc[..., d // 2 :]  # features j and j + d/2
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
        ValueError: for a ``d_head`` that is not positive and even.
    """

    def __init__(self, d_head: int, base: float = 10000.0, interleaved: bool = True) -> None:
        super().__init__()
        if d_head < 2 or d_head % 2 != 0:
            raise ValueError(
                f"{type(self).__name__}: expected a positive even d_head, received {d_head}"
            )
        self.d_head, self.base, self.interleaved = d_head, base, interleaved
        # cos and sin of the angles of positions 0 .. n - 1, per (dtype, device), each (n, d_head/2);
        # grown (doubled) when a longer context asks for more. Not a buffer: not saved, not cast by .to().
        self._cos_sin: dict[tuple[torch.dtype, torch.device], tuple[Tensor, Tensor]] = {}

    def cos_sin(
        self, end: int, dtype: torch.dtype, device: torch.device | str
    ) -> tuple[Tensor, Tensor]:
        """Cached ``cos`` and ``sin`` of the angles ``m theta_j`` for positions ``m = 0 .. n - 1``, ``n >= end``.

        Computed once per dtype and device (and again, for twice the length, when a longer
        context needs more rows), with the operations of :func:`apply_rotary`, so a slice of
        the cache equals what :func:`apply_rotary` computes for those positions.

        Returns:
            ``(cos, sin)``, each ``(n, d_head/2)`` with ``n >= end``.
        """
        key = (dtype, torch.device(device))
        cached = self._cos_sin.get(key)
        if cached is None or cached[0].shape[0] < end:
            n = max(end, 2 * cached[0].shape[0] if cached is not None else end)
            # Normal tensors even when first called under inference_mode, so that training can reuse them.
            with torch.inference_mode(False), torch.no_grad():
                theta = rotation_frequencies(self.d_head, self.base, dtype, device)  # (d/2,)
                angles = torch.arange(n, device=device).to(dtype)[:, None] * theta  # (n, d/2)
                cached = self._cos_sin[key] = (torch.cos(angles), torch.sin(angles))
        return cached

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Rotate ``x`` of shape ``(..., L, d_head)`` whose rows sit at positions ``offset .. offset + L - 1``.

        Equal to ``apply_rotary(x, arange(offset, offset + L), base, interleaved)``, with the
        cosines and sines read from a cache instead of recomputed at every call (a decoding
        step with a key/value cache calls this twice per layer).

        Raises:
            ValueError: for an ``x`` of another width or a negative ``offset``.
        """
        check_last_dim(self, x, self.d_head)
        check_nonnegative_int(self, "offset", offset)
        end = offset + x.shape[-2]
        cos, sin = self.cos_sin(end, angle_dtype(x.dtype), x.device)
        return _rotate(x, cos[offset:end], sin[offset:end], self.interleaved)

    def extra_repr(self) -> str:
        return f"d_head={self.d_head}, base={self.base}, interleaved={self.interleaved}"

"""Position information added to the attention scores: learned relative biases and ALiBi.

Instead of adding a vector to each token's embedding, these methods add a
number ``M[h, i, j]`` to the score of query ``i`` and key ``j`` in head ``h``,
chosen by the *relative* position ``j - i`` only:

    softmax(Q K^T / sqrt(d_k) + M) V,   M[h, i, j] = f_h(j - i)

(``M`` as on the book's notation page: the additive mask; ``B`` is the batch size.)
The two bias modules and :func:`alibi_bias` return ``M`` as a float tensor
of shape ``(1, H, L, S)``, ready to pass as ``attn_mask`` to
:func:`~transformer_lite.nn.attention.scaled_dot_product_attention` or
:class:`~transformer_lite.nn.attention.MultiHeadAttention` (float masks are added
to the scores). The leading axis of size 1 broadcasts over the batch; it is
there because ``MultiHeadAttention`` reads a 3-D mask as ``(B, L, S)``, so an
``(H, L, S)`` bias would be taken per example, not per head. Use ``bias[0]``
for an ``(H, L, S)`` picture.

Positions follow :func:`~transformer_lite.nn.masks.causal_mask`: with ``S`` keys
and ``L`` queries, key ``j`` sits at position ``j`` and query ``i`` at position
``S - L + i`` (bottom-right alignment: the queries are the last ``L`` positions,
as in a decoding step that reuses a key/value cache).

Sources: Shaw, Uszkoreit & Vaswani (2018), "Self-Attention with Relative
Position Representations" (clipping); Raffel et al. (2020), "Exploring the
Limits of Transfer Learning with a Unified Text-to-Text Transformer" (T5),
Sec. 2.1 (bucketed scalar biases); Press, Smith & Lewis (2022), "Train Short,
Test Long: Attention with Linear Biases Enables Input Length Extrapolation"
(ALiBi), Sec. 3.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..checks import check_int_at_least, check_positive_int, owner_name

__all__ = [
    "relative_positions",
    "t5_relative_bucket",
    "T5RelativePositionBias",
    "ClippedRelativePositionBias",
    "alibi_slopes",
    "alibi_bias",
]


def relative_positions(
    L: int, S: int | None = None, device: torch.device | str | None = None
) -> Tensor:
    """Relative position ``j - (S - L + i)`` of key ``j`` seen from query ``i``.

    Negative entries are keys in the past of the query, ``0`` the query's own
    position, positive entries keys in its future. Queries are aligned
    bottom-right, as in :func:`~transformer_lite.nn.masks.causal_mask`.

    Args:
        L: number of queries, ``>= 1``.
        S: number of keys, ``>= 1``; defaults to ``L``.
        device: device of the result.

    Returns:
        int64 tensor ``(L, S)``; with ``L == S`` entry ``[i, j]`` is ``j - i``.

    Raises:
        ValueError: for a size that is not a positive int.
    """
    S = L if S is None else S
    for name, n in (("L", L), ("S", S)):
        check_positive_int(relative_positions, name, n)
    query_pos = torch.arange(S - L, S, device=device)  # (L,): absolute positions of the queries
    key_pos = torch.arange(S, device=device)  # (S,)
    return key_pos[None, :] - query_pos[:, None]  # (L, S)


def t5_relative_bucket(
    relative_position: Tensor,
    n_buckets: int = 32,
    max_distance: int = 128,
    bidirectional: bool = True,
) -> Tensor:
    """Map relative positions ``j - i`` to T5's buckets: exact for short distances, log-spaced for long ones.

    Source: Raffel et al. (2020), Sec. 2.1 (32 buckets, "logarithmically up to
    an offset of 128 beyond which we assign all relative positions to the same
    embedding"); the bucket boundaries follow the public T5 code.

    Let ``n = n_buckets // 2`` if ``bidirectional`` else ``n = n_buckets``, and
    ``n_exact = n // 2``. A distance ``d`` goes to

    * bucket ``d`` if ``d < n_exact`` (one bucket per distance);
    * otherwise bucket ``n_exact + floor(log(d / n_exact) / log(max_distance / n_exact) * (n - n_exact))``,
      capped at ``n - 1``: every distance ``>= max_distance`` lands in the last bucket.

    Bidirectional: ``d = |j - i|``, and keys after the query (``j - i > 0``)
    use the upper half (``n`` is added to their bucket). Unidirectional (for a
    decoder): ``d = max(i - j, 0)``; keys in the future share bucket 0 with the
    query's own position (a causal mask hides them anyway).

    Args:
        relative_position: integer tensor of ``j - i`` values, any shape
            (e.g. :func:`relative_positions`).
        n_buckets: number of buckets (even if ``bidirectional``), at least 4
            (bidirectional) or 2 (unidirectional).
        max_distance: distance from which on everything shares the last bucket;
            must exceed ``n_exact``.
        bidirectional: whether keys before and after the query get separate buckets.

    Returns:
        int64 tensor of the same shape, values in ``0 .. n_buckets - 1``.
        The logarithm is taken in float64, so a distance on a boundary (e.g.
        16 with 32 buckets and max_distance 128: bucket 10) is not moved down
        a bucket by rounding.

    Raises:
        ValueError: for a ``relative_position`` or options other than the above.
    """
    if not isinstance(relative_position, Tensor) or relative_position.dtype not in _INTEGERS:
        got = getattr(relative_position, "dtype", type(relative_position).__name__)
        raise ValueError(
            f"t5_relative_bucket: expected an integer tensor of relative positions, received {got}"
        )
    _check_buckets(t5_relative_bucket, n_buckets, max_distance, bidirectional)
    return _bucket(relative_position, n_buckets, max_distance, bidirectional)


_INTEGERS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _check_buckets(owner, n_buckets: int, max_distance: int, bidirectional: bool) -> None:
    """T5's bucket options: at least 2 buckets (4 and an even number if bidirectional), and a
    ``max_distance`` beyond the ``n_exact`` buckets of one distance each."""
    check_int_at_least(owner, "n_buckets", n_buckets, 4 if bidirectional else 2)
    if bidirectional and n_buckets % 2:
        raise ValueError(
            f"{owner_name(owner)}: expected an even n_buckets when bidirectional, received {n_buckets}"
        )
    n_exact = (n_buckets // 2 if bidirectional else n_buckets) // 2
    check_int_at_least(owner, "max_distance", max_distance, n_exact + 1)


def _bucket(relative_position: Tensor, n_buckets: int, max_distance: int, bidirectional: bool):
    """:func:`t5_relative_bucket` of checked arguments."""
    rel = relative_position.long()
    if bidirectional:
        n = n_buckets // 2
        half = (rel > 0).long() * n  # keys after the query use buckets n .. 2n - 1
        dist = rel.abs()
    else:
        n = n_buckets
        half = torch.zeros_like(rel)
        dist = (-rel).clamp(min=0)  # how far back the key is; future keys count as distance 0
    n_exact = n // 2  # distances 0 .. n_exact - 1 have a bucket each
    # Log-spaced buckets for d >= n_exact. Clamping first keeps log() finite for the short distances,
    # whose value is discarded by the where() below.
    far = dist.clamp(min=n_exact).double()
    steps = torch.log(far / n_exact) / math.log(max_distance / n_exact) * (n - n_exact)
    log_bucket = (n_exact + steps.floor().long()).clamp(max=n - 1)
    return half + torch.where(dist < n_exact, dist, log_bucket)


class T5RelativePositionBias(nn.Module):
    """A learned scalar per head and per T5 bucket of relative position, added to the scores.

    Source: Raffel et al. (2020), Sec. 2.1: "each 'embedding' is simply a
    scalar that is added to the corresponding logit"; the weights are shared
    by all layers in T5 (here: one module, shared if you pass its output to
    every layer). Buckets: :func:`t5_relative_bucket`. Unlike T5, the scores
    here are scaled by ``1 / sqrt(d_k)`` before the bias is added.

    Args:
        n_heads: number of heads H.
        n_buckets: number of buckets (32 in T5).
        max_distance: distance beyond which all positions share one bucket (128 in T5).
        bidirectional: True for an encoder, False for a decoder.

    Attributes:
        weight: ``(n_buckets, n_heads)`` parameter, initialised N(0, 0.02^2).

    Raises:
        ValueError: for ``n_heads`` or bucket options other than the above.
    """

    def __init__(
        self, n_heads: int, n_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
    ) -> None:
        super().__init__()
        check_positive_int(self, "n_heads", n_heads)
        _check_buckets(self, n_buckets, max_distance, bidirectional)
        self.n_heads, self.n_buckets = n_heads, n_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.weight = nn.Parameter(torch.randn(n_buckets, n_heads) * 0.02)

    def forward(self, L: int, S: int | None = None) -> Tensor:
        """The bias for ``L`` queries and ``S`` keys (default ``S = L``), aligned bottom-right.

        Returns:
            ``(1, H, L, S)`` in the dtype of ``weight``: ``weight[bucket(j - i), h]``.

        Raises:
            ValueError: for a size that is not a positive int.
        """
        rel = relative_positions(L, S, self.weight.device)  # (L, S)
        buckets = _bucket(rel, self.n_buckets, self.max_distance, self.bidirectional)  # (L, S)
        # (L, S, H) -> (H, L, S) -> (1, H, L, S)
        return self.weight[buckets].permute(2, 0, 1).unsqueeze(0)

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, n_buckets={self.n_buckets}, max_distance={self.max_distance}, "
            f"bidirectional={self.bidirectional}"
        )


class ClippedRelativePositionBias(nn.Module):
    """A learned scalar per head and per clipped relative position ``clip(j - i, -k, k)``.

    Source: Shaw, Uszkoreit & Vaswani (2018), Sec. 3.2: relative positions
    are clipped to ``[-k, k]``, so ``2k + 1`` values are learned and every key
    farther than ``k`` shares the value of distance ``k`` (on its side).
    Shaw et al. learn a *vector* per clipped distance, added to the keys (and
    values) inside the dot product; this module keeps their clipping but
    learns one *scalar* per head added to the score, the form T5 later used.

    Args:
        n_heads: number of heads H.
        max_relative_position: the clipping distance ``k >= 1``.

    Attributes:
        weight: ``(2k + 1, n_heads)``; row ``r`` belongs to relative position ``r - k``.
            Initialised N(0, 0.02^2).

    Raises:
        ValueError: for sizes that are not positive ints.
    """

    def __init__(self, n_heads: int, max_relative_position: int) -> None:
        super().__init__()
        check_positive_int(self, "n_heads", n_heads)
        check_positive_int(self, "max_relative_position", max_relative_position)
        self.n_heads, self.max_relative_position = n_heads, max_relative_position
        self.weight = nn.Parameter(torch.randn(2 * max_relative_position + 1, n_heads) * 0.02)

    def forward(self, L: int, S: int | None = None) -> Tensor:
        """The bias for ``L`` queries and ``S`` keys (default ``S = L``), aligned bottom-right.

        Returns:
            ``(1, H, L, S)`` in the dtype of ``weight``: ``weight[clip(j - i, -k, k) + k, h]``.

        Raises:
            ValueError: for a size that is not a positive int.
        """
        k = self.max_relative_position
        # (L, S), values 0 .. 2k
        index = relative_positions(L, S, self.weight.device).clamp(-k, k) + k
        # (L, S, H) -> (H, L, S) -> (1, H, L, S)
        return self.weight[index].permute(2, 0, 1).unsqueeze(0)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, max_relative_position={self.max_relative_position}"


def alibi_slopes(
    n_heads: int, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> Tensor:
    """The fixed per-head slopes ``m_h`` of ALiBi.

    Source: Press et al. (2022), Sec. 3: for ``H`` heads, a power of 2, the
    slopes are the geometric sequence ``m_h = 2^(-8(h+1)/H)`` for heads
    ``h = 0, ..., H - 1``, counted from 0 as in the book (the paper counts
    from 1 and writes ``2^(-8h/H)``); for H = 8: 1/2, 1/4, ..., 1/256. For
    other ``H`` this follows the authors' reference code: heads
    ``h = 0, ..., P - 1`` take the slopes of ``P = 2^floor(log2 H)`` heads,
    ``2^(-8(h+1)/P)``, and heads ``h = P, ..., H - 1`` take every other slope
    of the ``2P``-head sequence, ``2^(-8(2(h-P)+1)/(2P))``, values that fall
    between the first ones. E.g. H = 6: 1/4, 1/16, 1/64, 1/256, 1/2, 1/8.

    Args:
        n_heads: number of heads H, ``>= 1``.
        dtype: floating dtype of the result.
        device: device of the result.

    Returns:
        Tensor ``(H,)`` of slopes in (0, 1).

    Raises:
        ValueError: for an ``n_heads`` that is not a positive int.
    """
    check_positive_int(alibi_slopes, "n_heads", n_heads)

    def geometric(n: int) -> list[float]:  # 2^(-8(h+1)/n) for h = 0 .. n - 1
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    p = 1 << (n_heads.bit_length() - 1)  # the largest power of 2 <= n_heads
    # [0::2]: 0-based 0, 2, 4, ... of the 2P sequence
    slopes = geometric(p) + geometric(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes, dtype=torch.float64, device=device).to(dtype)


def alibi_bias(
    n_heads: int,
    L: int,
    S: int | None = None,
    causal: bool = True,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """ALiBi: a fixed penalty on the score, proportional to the distance between query and key.

    Source: Press et al. (2022), Sec. 3: the score of query ``i`` and key ``j``
    in head ``h`` gets ``-m_h * (i - j)`` (slopes from :func:`alibi_slopes`);
    no position is added to the embeddings.

    * ``causal=True`` (the paper's setting, a language model): entry
      ``[0, h, i, j]`` is ``-m_h * (p_i - j)`` for ``j <= p_i`` and ``-inf`` for
      ``j > p_i``, where ``p_i = S - L + i`` is the query's position
      (bottom-right alignment). The causal mask is therefore built in: this
      tensor alone is a complete causal ALiBi ``attn_mask``; also passing
      ``is_causal=True`` changes nothing.
    * ``causal=False`` (bidirectional; not in the paper, a common extension
      to encoders): ``-m_h * |p_i - j|``, symmetric, no ``-inf``.

    Adding a constant to a row does not change the softmax, so the paper's
    implementation trick of adding ``m_h * j`` to every row gives the same
    attention weights as the causal form here.

    Args:
        n_heads: number of heads H.
        L: number of queries, ``>= 1``.
        S: number of keys, ``>= 1``; defaults to ``L``.
        causal: causal (with ``-inf`` above the shifted diagonal) or bidirectional.
        dtype: floating dtype of the result.
        device: device of the result.

    Returns:
        ``(1, H, L, S)`` float tensor (values ``<= 0``; ``-inf`` only when ``causal``).

    Raises:
        ValueError: for sizes or a ``dtype`` other than the above.
    """
    if not dtype.is_floating_point:
        raise ValueError(f"alibi_bias: expected a floating dtype, received {dtype}")
    slopes = alibi_slopes(n_heads, dtype=torch.float64, device=device)[:, None, None]  # (H, 1, 1)
    # (L, S): j - p_i, negative for keys in the past
    rel = relative_positions(L, S, device).double()
    if causal:
        # (H, L, S); keys after the query are forbidden
        bias = (slopes * rel).masked_fill(rel > 0, float("-inf"))
    else:
        bias = slopes * (0.0 - rel.abs())  # (H, L, S); "0.0 -" keeps the diagonal at +0.0, not -0.0
    return bias.unsqueeze(0).to(dtype)  # (1, H, L, S)

"""Memory-efficient attention: the same output as direct attention, without the L x S matrix.

Direct attention (:func:`transformer_lite.scaled_dot_product_attention`) builds
all ``L * S`` scores, so its storage grows as ``L * S``. Here the queries and
keys are cut into blocks and one ``(block, block)`` tile of scores exists at a
time. The softmax over a row is assembled tile by tile with the *online
softmax* of Milakov & Gimelshein (2018), "Online normalizer calculation for
softmax", Algorithm 3: keep a running maximum ``m`` and a running sum
``l = sum_j exp(s_j - m)``; when a new tile raises the maximum from ``m`` to
``m'``, multiply what has been accumulated so far by ``exp(m - m')``. Carrying
the weighted sum of values along in the same way gives attention, as in
FlashAttention (Dao et al., 2022, "FlashAttention: Fast and Memory-Efficient
Exact Attention with IO-Awareness", Algorithm 1). Our loop order, queries
outside and keys inside, is the one of FlashAttention-2 (Dao, 2023, Algorithm 1).

The arithmetic is the same as the direct one's (time still grows as
``L * S``); only the storage changes: besides the inputs and the ``(..., L,
d_v)`` output, the extra memory is a few tiles and per-row statistics.
Chapter 7 measures that claim on the CPU with
:func:`transformer_lite.chapters.measure.peak_allocated_bytes`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..checks import check_attention_inputs
from .dtypes import compute_dtype
from .masks import attention_bias

__all__ = ["memory_efficient_attention"]


def memory_efficient_attention(
    query: Tensor,  # query .. is_causal: the arguments of scaled_dot_product_attention
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    block_size: int | tuple[int, int] = 256,
) -> Tensor:
    """``softmax(Q K^T / sqrt(d_k) + M) V`` computed tile by tile, never storing the ``L x S`` scores.

    Equal (up to rounding) to the output of
    :func:`transformer_lite.scaled_dot_product_attention` with the same
    arguments; see the module docstring for the method (online softmax,
    Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022, Algorithm 1).

    Only the output is returned. The attention weights form an ``L x S``
    matrix; returning them would mean storing exactly what this function
    exists to avoid. (Each tile's weights are known only up to the final
    normalizer while the loop runs; FlashAttention recomputes them from the
    saved row log-sum-exp when its backward pass needs them.)

    Args:
        query: ``(..., L, d_k)`` floating tensor.
        key: ``(..., S, d_k)``, same dtype.
        value: ``(..., S, d_v)``, same dtype.
        attn_mask: optional mask broadcastable to ``(..., L, S)``, with the
            package convention: bool ``True`` = may attend; float = added to
            the scores (``-inf`` forbids; NaN and ``+inf`` are refused). It is
            turned into its additive form once, in its own shape
            (:func:`~transformer_lite.nn.masks.attention_bias`), and read one tile
            at a time (a broadcast mask such as ``(B, 1, 1, S)`` is never expanded
            in memory).
        is_causal: also forbid the future, with the bottom-right alignment
            of :func:`transformer_lite.nn.masks.causal_mask`: query ``i`` may see
            keys ``0 .. S - L + i``. Tiles that lie entirely in the forbidden
            region are skipped, which saves about half the work when ``L = S``.
        block_size: rows per query block and keys per key block: an int for
            both, or a pair ``(query block, key block)``. Need not divide ``L``
            or ``S``. Larger blocks mean fewer Python iterations and more
            memory per tile ``(..., block, block)``.

    Returns:
        ``(..., L, d_v)`` in the input dtype (float16/bfloat16 are computed in
        float32 and cast back). A query with no allowed key gets a zero output
        (not NaN).

    Memory:
        Besides inputs and output, about three ``(..., block_q, block_k)``
        tiles and ``(..., block_q, d_v)`` accumulators at a time, when run
        under ``torch.no_grad()``. With autograd recording, every tile is kept
        for the backward pass, so training memory is *not* reduced by this
        function (FlashAttention's backward recomputes the tiles instead).

    Raises:
        ValueError: for inputs, a mask or a ``block_size`` other than the above.
    """
    batch = check_attention_inputs(memory_efficient_attention, query, key, value, attn_mask)
    block_q, block_k = _block_sizes(block_size)
    in_dtype = query.dtype
    compute = compute_dtype(in_dtype)
    q, k, v = query.to(compute), key.to(compute), value.to(compute)
    L, S, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # scale once: (..., L, d_k)
    # The caller's mask as the additive M of attention_bias, in its own (broadcast) shape; the
    # causal part is not built as an L x S tensor but filled in tile by tile below.
    mask = attention_bias(attn_mask, False, L, S, dtype=compute)
    if mask is not None:
        mask = mask.reshape((1,) * max(0, 2 - mask.dim()) + tuple(mask.shape))  # at least 2-D
        mask = mask.expand(*mask.shape[:-2], L, S)  # a view: broadcast rows/columns, no copy

    out = q.new_zeros(*batch, L, d_v)  # (..., L, d_v)
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        q_blk = q[..., i0:i1, :]  # (..., bq, d_k)
        m = q.new_full((*batch, i1 - i0, 1), float("-inf"))  # running row maximum
        l = q.new_zeros(*batch, i1 - i0, 1)  # running sum of exp(score - m)
        acc = q.new_zeros(*batch, i1 - i0, d_v)  # running sum of exp(score - m) * value
        for j0 in range(0, S, block_k):
            j1 = min(j0 + block_k, S)
            if is_causal and j0 > (i1 - 1) + (S - L):
                break  # this tile and every later one lie entirely in the future of this query block
            s = q_blk @ k[..., j0:j1, :].transpose(-2, -1)  # (..., bq, bk)
            if mask is not None:
                tile = mask[..., i0:i1, j0:j1]  # (..., bq, bk), a view
                s = s + tile  # 0 = allowed, -inf = forbidden
            if is_causal:
                rows = torch.arange(i0, i1, device=q.device)[:, None]  # (bq, 1) query index i
                cols = torch.arange(j0, j1, device=q.device)[None, :]  # (1, bk) key index j
                s = s.masked_fill(cols > rows + (S - L), float("-inf"))  # bottom-right aligned
            # Online softmax update. m_new is -inf only if every key seen so far in
            # this row is forbidden; shift by 0 then, so exp(-inf - 0) = 0, not NaN.
            m_new = torch.maximum(m, s.detach().amax(dim=-1, keepdim=True))  # (..., bq, 1)
            shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - shift)  # (..., bq, bk), forbidden entries exactly 0
            rescale = torch.exp(m - shift)  # (..., bq, 1), <= 1; 0 while the row was empty
            l = rescale * l + p.sum(dim=-1, keepdim=True)
            acc = rescale * acc + p @ v[..., j0:j1, :]  # (..., bq, d_v)
            m = m_new
        # Normalize once at the end; a row with no allowed key has l = 0 and acc = 0.
        out[..., i0:i1, :] = acc / torch.where(l > 0, l, torch.ones_like(l))
    return out.to(in_dtype)


def _block_sizes(block_size: int | tuple[int, int]) -> tuple[int, int]:
    sizes = (block_size, block_size) if not isinstance(block_size, tuple) else block_size
    if len(sizes) != 2 or any(
        isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes
    ):
        raise ValueError(
            f"memory_efficient_attention: expected block_size to be a positive int or a pair of positive ints (query block, key block), received {block_size!r}"
        )
    return sizes

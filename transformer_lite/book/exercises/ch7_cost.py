"""Exercise checkers of chapter 7, ``notebooks/07_cost.ipynb``:
merging two blocks' online-softmax statistics.

How a checker reports: see :mod:`transformer_lite.book.exercises`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ._checking import _call, _check_tensor, _checker, _close, _diagnose, _gen

__all__ = [
    "check_online_softmax_merge",
]


# --------------------------------------------------------------------------- chapter 7: online softmax


def _block_stats(scores: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Running statistics of one key block: row max m, l = sum exp(s - m), acc = sum exp(s - m) v."""
    m = scores.amax(dim=-1, keepdim=True)  # (..., L, 1)
    p = torch.exp(scores - m)  # (..., L, S_block)
    return m, p.sum(dim=-1, keepdim=True), p @ v  # (..., L, 1), (..., L, 1), (..., L, d_v)


@_checker("check_online_softmax_merge")
def check_online_softmax_merge(fn: Callable) -> None:
    """Check ``fn(stats_a, stats_b) -> (m, l, acc)``: merge two key blocks' online-softmax statistics.

    Each block ``X`` of keys contributes, for every query row, ``m_X = max_j s_j`` ``(..., L, 1)``,
    ``l_X = sum_j exp(s_j - m_X)`` ``(..., L, 1)`` and ``acc_X = sum_j exp(s_j - m_X) v_j`` ``(..., L, d_v)``
    over the keys ``j`` of the block. The merge must return the statistics of the union: ``m = max(m_a, m_b)``,
    ``l = exp(m_a - m) l_a + exp(m_b - m) l_b``, ``acc = exp(m_a - m) acc_a + exp(m_b - m) acc_b``, so that
    ``acc / l`` is the attention output over both blocks (Milakov & Gimelshein, 2018, Algorithm 3; Dao et al.,
    2022, Algorithm 1). Cases include a row whose maximum lies in the second block and one where it stays in the
    first, scores shifted by 60, a single query row, and blocks of unequal size.

    Raises:
        AssertionError: naming the likely mistake (no rescaling, rescaling by ``exp(m - m_old)``, keeping the
            first block's maximum, rescaling ``l`` but not ``acc``, returning the normalized output).
    """
    g = _gen(29)
    for batch, L, S_a, S_b, d_v, shift in [
        ((), 4, 3, 5, 2, 0.0),
        ((2,), 1, 4, 4, 3, 0.0),
        ((2, 3), 3, 2, 6, 5, 60.0),
        ((), 5, 1, 1, 1, 0.0),
    ]:
        case = f"scores of shape {(*batch, L, S_a)} and {(*batch, L, S_b)}, values with d_v = {d_v}"
        s_a = 2.0 * torch.randn(*batch, L, S_a, generator=g, dtype=torch.float64) + shift
        s_b = 2.0 * torch.randn(*batch, L, S_b, generator=g, dtype=torch.float64) + shift
        s_b[..., 0, 0] = s_a[..., 0, :].amax(-1) + 3.0  # row 0: the maximum moves to block b
        if L > 1:
            s_a[..., 1, 0] = s_b[..., 1, :].amax(-1) + 3.0  # row 1: it stays in block a
        v_a = torch.randn(*batch, S_a, d_v, generator=g, dtype=torch.float64)
        v_b = torch.randn(*batch, S_b, d_v, generator=g, dtype=torch.float64)
        a, b = _block_stats(s_a, v_a), _block_stats(s_b, v_b)
        result = _call(fn, tuple(t.clone() for t in a), tuple(t.clone() for t in b))
        if not isinstance(result, tuple) or len(result) != 3:
            raise AssertionError(
                f"for {case}: expected a tuple (m, l, acc), received {type(result).__name__}"
            )
        m, l, acc = result
        for name, value, shape in (
            ("m", m, (*batch, L, 1)),
            ("l", l, (*batch, L, 1)),
            ("acc", acc, (*batch, L, d_v)),
        ):
            _check_tensor(value, name, shape, case)
        # the union, computed at once
        ref = _block_stats(torch.cat([s_a, s_b], -1), torch.cat([v_a, v_b], -2))
        # attention output
        full = torch.softmax(torch.cat([s_a, s_b], -1), -1) @ torch.cat([v_a, v_b], -2)
        if all(_close(got, want) for got, want in zip(result, ref)):
            continue
        (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
        m_new = torch.maximum(m_a, m_b)
        ea, eb = torch.exp(m_a - m_new), torch.exp(m_b - m_new)
        if _close(acc, full) and not _close(acc, ref[2]):
            raise AssertionError(
                f"wrong acc for {case}. Likely mistake: returned the normalized output acc / l; "
                "return the unnormalized acc (divide only once, after the last block)"
            )
        if _close(l, ea * l_a + eb * l_b) and _close(acc, acc_a + acc_b):
            raise AssertionError(
                f"wrong acc for {case}. Likely mistake: rescaled l but not acc; both sums were "
                "taken relative to their own block's maximum, so both need exp(m_X - m)"
            )
        if not _close(m, ref[0]) and _close(m, m_a):
            raise AssertionError(
                f"wrong m for {case}. Likely mistake: kept the first block's maximum; the running "
                "maximum is max(m_a, m_b) (the second block may hold a larger score)"
            )
        variants = {
            "no rescaling: each block's sums are relative to its own maximum; multiply them by exp(m_X - m) "
            "before adding": (l_a + l_b, acc_a + acc_b),
            "rescaled by exp(m - m_X) instead of exp(m_X - m): the factor must be <= 1": (
                l_a / ea + l_b / eb,
                acc_a / ea + acc_b / eb,
            ),
        }
        for mistake, (vl, vacc) in variants.items():
            if _close(l, vl) or _close(acc, vacc):
                raise AssertionError(f"wrong l or acc for {case}. Likely mistake: {mistake}")
        for name, got, want in zip(("m", "l", "acc"), result, ref):
            if not _close(got, want):
                raise _diagnose(got, {}, case, name, want)

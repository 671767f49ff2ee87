"""Exercise checkers of chapter 7, ``notebooks/07_cost.ipynb``:
merging two blocks' online-softmax statistics; attention computed tile by tile with the online softmax.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ...nn.attention import scaled_dot_product_attention
from ...nn.masks import causal_mask
from . import _checking as checking

__all__ = [
    "check_online_softmax_merge",
    "check_tiled_attention",
]


# --------------------------------------------------------------------------- chapter 7: online softmax


def _block_stats(scores: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Running statistics of one key block: row max m, l = sum exp(s - m), acc = sum exp(s - m) v."""
    m = scores.amax(dim=-1, keepdim=True)  # (..., L, 1)
    p = torch.exp(scores - m)  # (..., L, S_block)
    return m, p.sum(dim=-1, keepdim=True), p @ v  # (..., L, 1), (..., L, 1), (..., L, d_v)


@checking.checker("check_online_softmax_merge")
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
    g = checking.gen(29)
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
        result = checking.call(fn, tuple(t.clone() for t in a), tuple(t.clone() for t in b))
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
            checking.check_tensor(value, name, shape, case)
        # the union, computed at once
        ref = _block_stats(torch.cat([s_a, s_b], -1), torch.cat([v_a, v_b], -2))
        # attention output
        full = torch.softmax(torch.cat([s_a, s_b], -1), -1) @ torch.cat([v_a, v_b], -2)
        if all(checking.close(got, want) for got, want in zip(result, ref)):
            continue
        (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
        m_new = torch.maximum(m_a, m_b)
        ea, eb = torch.exp(m_a - m_new), torch.exp(m_b - m_new)
        if checking.close(acc, full) and not checking.close(acc, ref[2]):
            raise AssertionError(
                f"wrong acc for {case}. Likely mistake: returned the normalized output acc / l; "
                "return the unnormalized acc (divide only once, after the last block)"
            )
        if checking.close(l, ea * l_a + eb * l_b) and checking.close(acc, acc_a + acc_b):
            raise AssertionError(
                f"wrong acc for {case}. Likely mistake: rescaled l but not acc; both sums were "
                "taken relative to their own block's maximum, so both need exp(m_X - m)"
            )
        if not checking.close(m, ref[0]) and checking.close(m, m_a):
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
            if checking.close(l, vl) or checking.close(acc, vacc):
                raise AssertionError(f"wrong l or acc for {case}. Likely mistake: {mistake}")
        for name, got, want in zip(("m", "l", "acc"), result, ref):
            if not checking.close(got, want):
                raise checking.diagnose(got, {}, case, name, want)


# --------------------------------------------------------------------------- chapter 7: tiled attention


def _tiled_variant(q, k, v, block, mask=None, is_causal=False, mistake=None):
    """Tiled attention with the online softmax, written out as the package's loop, or with one classic
    mistake. ``q (..., L, d_k)``, ``k (..., S, d_k)``, ``v (..., S, d_v)``, ``mask`` None or ``(L, S)``."""
    L, S, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 if mistake == "no scale" else d_k**-0.5
    drop_q = mistake in ("partial dropped", "partial queries dropped")
    drop_k = mistake in ("partial dropped", "partial keys dropped")
    out = q.new_zeros(*q.shape[:-1], v.shape[-1])  # (..., L, d_v)
    for i0 in range(0, L - block + 1 if drop_q else L, block):
        i1 = min(i0 + block, L)
        q_blk = q[..., i0:i1, :] * scale  # (..., bq, d_k)
        m = q.new_full((*q.shape[:-2], i1 - i0, 1), float("-inf"))
        l = q.new_zeros(*q.shape[:-2], i1 - i0, 1)
        acc = q.new_zeros(*q.shape[:-2], i1 - i0, v.shape[-1])
        for j0 in range(0, S - block + 1 if drop_k else S, block):
            j1 = min(j0 + block, S)
            s = q_blk @ k[..., j0:j1, :].transpose(-2, -1)  # (..., bq, bk)
            if mask is not None:
                tile = mask[..., i0:i1, j0:j1]
                if tile.dtype != torch.bool:
                    s = s + tile
                else:
                    s = s.masked_fill(tile if mistake == "inverted" else ~tile, float("-inf"))
            if is_causal:
                rows = torch.arange(i1 - i0)[:, None] + (
                    0 if mistake in ("local", "local rows") else i0
                )
                cols = torch.arange(j1 - j0)[None, :] + (
                    0 if mistake in ("local", "local cols") else j0
                )
                offset = 0 if mistake == "top-left" else S - L
                s = s.masked_fill(cols > rows + offset, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., bq, 1)
            # a row with no allowed key so far (m_new = -inf) is shifted by 0
            shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - shift)  # (..., bq, bk)
            rescale = torch.exp(m - shift)  # (..., bq, 1)
            l = (1.0 if mistake in ("l", "both") else rescale) * l + p.sum(dim=-1, keepdim=True)
            if mistake == "per block":  # each block's own weighted average, never divided again
                acc = rescale * acc + p @ v[..., j0:j1, :] / p.sum(dim=-1, keepdim=True)
            elif mistake == "per block, old l":  # the running output normalized, l_old forgotten
                acc = (rescale * acc + p @ v[..., j0:j1, :]) / l
            else:
                acc = (1.0 if mistake in ("acc", "both") else rescale) * acc + p @ v[..., j0:j1, :]
            m = m_new
        if mistake in ("per block", "per block, old l"):
            out[..., i0:i1, :] = acc
        else:
            out[..., i0:i1, :] = acc / torch.where(l > 0, l, torch.ones_like(l))
    return out


_OVERFLOW = (
    "the running maximum not carried (or not subtracted): with scores around 1000, exp(s) overflows "
    "float64 (its largest value is about exp(709)); keep m = max(m_old, max of the tile) from tile to "
    "tile, exponentiate s - m, and rescale what was accumulated by exp(m_old - m) <= 1"
)
_NOT_OFFSET = (
    "causal mask not offset per tile: the tile (i0, j0) holds queries i0 .. and keys j0 ..; compare "
    "the absolute indices, key j0 + c is forbidden for query i0 + r when j0 + c > i0 + r + (S - L)"
)
_PER_BLOCK = (
    "normalized per block instead of at the end: each tile's sums are relative to the running maximum "
    "and only the last l is the full normalizer; carry the unnormalized acc and divide by l once, "
    "after the last key block"
)
_PARTIAL = (
    "last partial block dropped{}: when block_size does not divide L or S the last block is shorter; "
    "loop with range(0, S, block_size) and slice to min(j0 + block_size, S)"
)
_TILED_MISTAKES = {
    "old sum not rescaled: l was summed relative to the old maximum; multiply it by exp(m_old - m_new) "
    "before adding the tile's exp(s - m_new)": "l",
    "accumulator not rescaled: acc was summed relative to the old maximum; multiply it by "
    "exp(m_old - m_new) before adding the tile's exp(s - m_new) @ v": "acc",
    "neither the sum nor the accumulator rescaled when the maximum grows: multiply both by "
    "exp(m_old - m_new)": "both",
    _PER_BLOCK: "per block",
    _PER_BLOCK + " (o = (exp(m_old - m) o + P V) / l forgets the old l)": "per block, old l",
    _PARTIAL.format(""): "partial dropped",
    _PARTIAL.format(" (the keys' last block)"): "partial keys dropped",
    _PARTIAL.format(" (the queries' last block)"): "partial queries dropped",
    "scores not scaled: divide them by sqrt(d_k)": "no scale",
    _NOT_OFFSET: "local",
    _NOT_OFFSET + " (the rows are local)": "local rows",
    _NOT_OFFSET + " (the columns are local)": "local cols",
    "causal mask aligned top-left (torch's is_causal): the L queries are the last L of the S "
    "positions; query i sees keys 0 .. i + S - L": "top-left",
    "inverted mask polarity: True means 'may attend'; block the scores where the mask is False": "inverted",
}

# (batch, L, S, d_k, d_v, block_size, kind): blocks that do and do not divide L and S (3, 1, S, > S)
_TILED_CASES = [
    ((2,), 5, 7, 4, 3, 3, None),
    ((), 4, 4, 3, 2, 1, None),
    ((2, 2), 3, 6, 4, 5, 6, None),
    ((2,), 4, 6, 4, 3, 10, None),
    ((2,), 5, 7, 2, 3, 3, "large"),  # scores around 1000
    ((), 6, 6, 4, 3, 4, "causal"),
    ((2,), 3, 8, 4, 3, 3, "causal"),  # L != S: bottom-right
    ((2,), 5, 7, 4, 3, 3, "bool"),
    ((2,), 4, 6, 4, 3, 4, "float"),
    ((2,), 6, 7, 4, 3, 2, "padded"),  # the first tile of every row masked, and one row fully masked
    ((2,), 5, 3, 4, 3, 2, "causal"),  # L > S: queries 0 and 1 see no key
]


def _tiled_inputs(batch, L, S, d_k, d_v, kind, g):
    q = torch.randn(*batch, L, d_k, generator=g, dtype=torch.float64) * 1.5
    k = torch.randn(*batch, S, d_k, generator=g, dtype=torch.float64) * 1.5
    v = torch.randn(*batch, S, d_v, generator=g, dtype=torch.float64)
    mask = None
    if kind == "large":  # rows whose tile maxima rise and rows whose maxima fall, by hundreds
        q[..., 0] = torch.tensor([30.0, -30.0, 25.0, -28.0, 20.0])[:L]
        k[..., 0] = torch.linspace(-40.0, 40.0, S, dtype=torch.float64)
    elif kind == "bool":
        mask = torch.rand(L, S, generator=g) < 0.6
        mask[:, 0], mask[:, -1] = True, False  # every row has an allowed and a forbidden key
    elif kind == "float":
        mask = torch.randn(L, S, generator=g, dtype=torch.float64)
        mask[torch.rand(L, S, generator=g) < 0.3] = float("-inf")
        mask[:, -1] = 0.5  # no row forbids every key
    elif kind == "padded":  # two padding keys on the left; row 3 may attend to nothing
        mask = torch.rand(L, S, generator=g) < 0.7
        mask[:, :2], mask[:, 2] = False, True
        mask[3] = False
    return q, k, v, mask


def _tiled_case(batch, L, S, d_k, d_v, block, kind) -> str:
    text = f"query {(*batch, L, d_k)}, key {(*batch, S, d_k)}, value {(*batch, S, d_v)}, block_size={block}"
    return (
        text
        + {
            None: "",
            "causal": ", is_causal=True",
            "bool": f", bool mask {(L, S)}",
            "float": f", float mask {(L, S)} (added to the scores)",
            "large": ", no mask, scores around 1000",
            "padded": f", bool mask {(L, S)} whose first {min(block, 2)} key(s) are masked in every row "
            "and whose row 3 is all False",
        }[kind]
    )


_EMPTY_TILE = (
    "a tile in which all of a row's keys are masked gives NaN: its maximum is -inf, and exp(s - m) with "
    "m = -inf is exp(-inf + inf); subtract 0 instead while the running maximum is still -inf, so that "
    "the masked scores give exp(-inf) = 0"
)


def _check_nonfinite(out: Tensor, mask, is_causal: bool, L: int, S: int, kind, case: str) -> None:
    """Name the mistakes that give NaN or inf."""
    bad = ~torch.isfinite(out.double())
    if not bad.any():
        return
    if kind == "large":
        raise AssertionError(f"the output has NaN or inf for {case}. Likely mistake: {_OVERFLOW}")
    allowed = (
        torch.ones(L, S, dtype=torch.bool)
        if mask is None
        else (mask if mask.dtype == torch.bool else ~torch.isneginf(mask))
    )
    if is_causal:
        allowed = allowed & causal_mask(L, S)
    empty = ~allowed.any(-1)  # (L,): rows with no allowed key
    bad_rows = bad.reshape(-1, L, out.shape[-1]).any(0).any(-1)  # (L,)
    if not (bad_rows & ~empty).any():
        raise AssertionError(
            f"the output has NaN for {case}, in rows whose keys are all masked. Likely mistake: a fully "
            "masked row gives NaN: its l stays 0 and acc / l is 0/0; return a zero output there (divide "
            "only where l > 0), as tl.scaled_dot_product_attention does"
        )
    if kind == "padded" or mask is not None or is_causal:
        raise AssertionError(
            f"the output has NaN for {case}, in rows that have allowed keys. Likely mistake: {_EMPTY_TILE}"
        )
    raise AssertionError(
        f"the output has NaN or inf for {case} (no mask, small scores). Likely mistake: the rescale factor "
        "is exp(m_old - m_new), at most 1, and 0 on the first tile (m_old = -inf); exp(m_new - m_old) "
        "overflows"
    )


@checking.checker("check_tiled_attention")
def check_tiled_attention(fn: Callable) -> None:
    """Check ``fn(query, key, value, block_size, attn_mask=None, is_causal=False) -> output``: attention
    computed tile by tile with the online softmax, never holding the ``L x S`` scores.

    ``query (..., L, d_k)``, ``key (..., S, d_k)``, ``value (..., S, d_v)``; ``attn_mask`` ``None`` or an
    ``(L, S)`` bool mask (``True`` = may attend) or float mask (added to the scores); ``is_causal`` the
    causal mask aligned bottom-right (query ``i`` sees keys ``0 .. i + S - L``). The queries are cut into
    blocks of ``block_size`` rows and the keys into blocks of ``block_size`` keys (the last block of
    each may be shorter). Expected: ``output (..., L, d_v)`` equal, in float64, to the output of the
    direct attention, :func:`~transformer_lite.nn.attention.scaled_dot_product_attention` (which the
    package's :func:`~transformer_lite.nn.efficient_attention.memory_efficient_attention` equals), and
    the gradients with respect to query, key and value equal to the direct attention's. Cases: block sizes 1, 3 (dividing
    neither L nor S), S and larger than S; a causal mask with ``L = S``, ``L < S`` and ``L > S`` (whose
    first queries see no key: a zero output, as the package defines it); bool and float masks; a mask
    whose first tile hides every key of a row, and a fully masked row; scores around 1000 (Milakov &
    Gimelshein, 2018; Dao et al., 2022, Algorithm 1).

    Raises:
        AssertionError: naming the likely mistake (the running maximum not carried, the old sum or the
            accumulator not rescaled by exp(m_old - m_new), normalized per block instead of at the end,
            the last partial block dropped, the causal mask not offset per tile or aligned top-left, the
            scores not scaled, inverted mask polarity, NaN for a fully masked row or tile, gradients cut).
    """
    g = checking.gen(47)
    for batch, L, S, d_k, d_v, block, kind in _TILED_CASES:
        case = _tiled_case(batch, L, S, d_k, d_v, block, kind)
        q, k, v, mask = _tiled_inputs(batch, L, S, d_k, d_v, kind, g)
        is_causal = kind == "causal"
        kwargs = {"attn_mask": None if mask is None else mask.clone(), "is_causal": is_causal}
        with torch.no_grad():
            out = checking.call(fn, q.clone(), k.clone(), v.clone(), block, **kwargs)
        if isinstance(out, tuple):
            raise AssertionError(
                f"for {case}: expected the output tensor alone (the tiled attention never holds the "
                f"weights), received a tuple of {len(out)}"
            )
        checking.check_tensor(out, "output", (*batch, L, d_v), case)
        expected = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)[0]
        if not checking.close(out, expected):
            _check_nonfinite(out, mask, is_causal, L, S, kind, case)
            if kind == "padded" and bool((out.double()[..., :3, :] == 0).all()):
                raise AssertionError(
                    f"wrong output for {case}: zero in rows that have allowed keys. Likely mistake: "
                    f"{_EMPTY_TILE} (a NaN that a final torch.where(l > 0, ...) turned into zeros)"
                )
            variants = {
                msg: _tiled_variant(q, k, v, block, mask, is_causal, m)
                for msg, m in _TILED_MISTAKES.items()
            }
            raise checking.diagnose(out, variants, case, "output", expected)
        if kind in (None, "causal", "padded") and block in (2, 3):
            upstream = torch.randn(*batch, L, d_v, generator=g, dtype=torch.float64)
            _check_nan_grads(fn, block, (q, k, v), upstream, case, kwargs)
            checking.compare_input_grads(
                _Positional(fn, block),
                _Positional(_direct, block),
                (q, k, v),
                ("query", "key", "value"),
                upstream,
                case,
                **kwargs,
            )


def _check_nan_grads(fn: Callable, block: int, inputs, upstream: Tensor, case: str, kwargs) -> None:
    """A NaN that the forward hides (``torch.where``) still reaches the gradients: name where it comes from."""
    _, grads = checking.input_grads(_Positional(fn, block), inputs, upstream, **kwargs)
    if any(gr is not None and torch.isnan(gr).any() for gr in grads):
        raise AssertionError(
            f"the gradients are NaN for {case}, although the output is right. Likely mistake: a tile in "
            "which all of a row's keys are masked gives NaN (exp(s - m) with m = -inf is exp(-inf + inf)), "
            "or a fully masked row divides 0 by 0; torch.where hides a NaN in the forward pass but not in "
            "the backward: subtract 0 while the running maximum is -inf, and divide only where l > 0"
        )


def _direct(q, k, v, block_size, attn_mask=None, is_causal=False):
    return scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)[0]


class _Positional:
    """``fn(q, k, v, block_size, **kwargs)`` as a callable of ``(q, k, v, **kwargs)``, masks cloned."""

    def __init__(self, fn: Callable, block: int) -> None:
        self.fn, self.block = fn, block

    def __call__(self, q, k, v, attn_mask=None, is_causal=False):
        mask = None if attn_mask is None else attn_mask.clone()
        return self.fn(q, k, v, self.block, attn_mask=mask, is_causal=is_causal)

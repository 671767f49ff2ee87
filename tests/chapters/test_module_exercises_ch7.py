"""The tiled-attention exercise of chapter 7: check_tiled_attention.

Oracle: a learner-style tiled attention written here from the online softmax (Milakov & Gimelshein,
2018, Algorithm 3; Dao et al., 2022, Algorithm 1), independently of the checker's variant helper,
with one switch per classic mistake; the package's ``tl.memory_efficient_attention`` under the same
call; and a version that tiles the keys only. The right functions must pass and print "all checks
passed"; each deliberately wrong one must be rejected with an AssertionError naming its mistake; a
stub raising NotImplementedError must print "not implemented yet". The checker's oracle, the direct
attention, is compared with torch's fused attention here too.
"""

import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

import transformer_lite as tl
from tests.conftest import CheckerCases, assert_leaves_global_random_state, assert_not_implemented
from transformer_lite.chapters.exercises import check_tiled_attention

CASES = CheckerCases()
check = check_tiled_attention
NEG_INF = float("-inf")


@dataclass(frozen=True)
class Tiling:
    """How ``tiled`` computes: the defaults are the algorithm, and each classic mistake turns one
    switch (or two)."""

    subtract_max: bool = True  # exp(s - m) with the running maximum m, not exp(s)
    carry_max: bool = True  # m is the maximum over all tiles so far, not over this tile
    rescale: str = "exp(m_old - m)"  # the factor of the old sum and accumulator
    rescale_l: bool = True  # the old sum of exponentials rescaled
    rescale_acc: bool = True  # the old accumulator rescaled
    normalize: str = "at the end"  # divided by the sum once, after the last tile
    keep_partial: bool = True  # the last, shorter tile kept
    tile_offsets: bool = True  # the causal mask at the tile's own rows and columns
    bottom_right: bool = True  # the causal mask aligned bottom-right when L != S
    guard_empty_row: bool = True  # a row with no key allowed gives zeros, not NaN
    guard_empty_tile: bool = True  # a tile with no key allowed for a row gives no NaN
    scale: bool = True  # scores divided by sqrt(d_k)
    polarity: bool = True  # bool True = may attend
    tile_queries: bool = True  # the queries tiled too (else the keys only)


def tiled(q, k, v, block_size, attn_mask=None, is_causal=False, how=Tiling()):
    """Attention over tiles of ``block_size`` queries x ``block_size`` keys, with the online softmax."""
    L, S = q.shape[-2], k.shape[-2]
    if how.scale:
        q = q / math.sqrt(q.shape[-1])
    q_step = block_size if how.tile_queries else L
    stop_q = L - L % q_step if not how.keep_partial else L
    stop_k = S - S % block_size if not how.keep_partial else S
    rows_out = []
    for i0 in range(0, stop_q, q_step):
        qi = q[..., i0 : i0 + q_step, :]  # (..., bq, d_k)
        bq = qi.shape[-2]
        m = torch.full((*qi.shape[:-1], 1), NEG_INF, dtype=q.dtype)
        l = torch.zeros_like(m)
        acc = torch.zeros(*qi.shape[:-1], v.shape[-1], dtype=q.dtype)
        for j0 in range(0, stop_k, block_size):
            kj, vj = k[..., j0 : j0 + block_size, :], v[..., j0 : j0 + block_size, :]
            s = qi @ kj.transpose(-2, -1)  # (..., bq, bk)
            bk = s.shape[-1]
            if attn_mask is not None:
                tile = attn_mask[i0 : i0 + bq, j0 : j0 + bk]
                if tile.dtype == torch.bool:
                    s = s.masked_fill(~tile if how.polarity else tile, NEG_INF)
                else:
                    s = s + tile
            if is_causal:
                r = torch.arange(bq)[:, None] + (i0 if how.tile_offsets else 0)
                c = torch.arange(bk)[None, :] + (j0 if how.tile_offsets else 0)
                s = s.masked_fill(c > r + (S - L if how.bottom_right else 0), NEG_INF)
            tile_max = s.amax(-1, keepdim=True)
            m_new = torch.maximum(m, tile_max) if how.carry_max else tile_max
            if not how.subtract_max:
                m_new = torch.zeros_like(m_new)
            shift = m_new
            if how.guard_empty_tile:
                shift = torch.where(m_new == NEG_INF, torch.zeros_like(m_new), m_new)
            p = torch.exp(s - shift)
            factor = (
                torch.exp(m - shift) if how.rescale == "exp(m_old - m)" else torch.exp(shift - m)
            )
            if not how.subtract_max:
                factor = torch.ones_like(factor)
            l_new = (factor * l if how.rescale_l else l) + p.sum(-1, keepdim=True)
            if how.normalize == "own block":
                acc = factor * acc + (p @ vj) / p.sum(-1, keepdim=True)
            elif how.normalize == "running":
                acc = (factor * acc + p @ vj) / l_new
            else:
                acc = (factor * acc if how.rescale_acc else acc) + p @ vj
            m, l = m_new, l_new
        if how.normalize != "at the end":
            rows_out.append(acc)
        elif how.guard_empty_row:
            rows_out.append(torch.where(l > 0, acc / torch.where(l > 0, l, 1.0), 0.0))
        else:
            rows_out.append(acc / l)
    out = torch.cat(rows_out, dim=-2) if rows_out else q.new_zeros(*q.shape[:-1], v.shape[-1])
    if out.shape[-2] < L:  # the dropped last query block: rows of zeros
        out = torch.cat((out, q.new_zeros(*q.shape[:-2], L - out.shape[-2], v.shape[-1])), -2)
    return out


@CASES.passes(check)
def tiled_reference(q, k, v, block_size, attn_mask=None, is_causal=False):
    return tiled(q, k, v, block_size, attn_mask, is_causal)


@CASES.passes(check)
def tiled_keys_only(q, k, v, block_size, attn_mask=None, is_causal=False):
    return tiled(q, k, v, block_size, attn_mask, is_causal, Tiling(tile_queries=False))


@CASES.passes(check)
def package_memory_efficient(q, k, v, block_size, attn_mask=None, is_causal=False):
    return tl.memory_efficient_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, block_size=block_size
    )


def mistake(phrase, **switches):
    """Register ``tiled`` with one switch turned as a wrong answer whose message contains ``phrase``."""
    name = "_".join(f"{k}_{v}" for k, v in switches.items()).replace(" ", "_").replace("(", "")
    name = name.replace(")", "").replace("-", "_")

    def fn(q, k, v, block_size, attn_mask=None, is_causal=False):
        return tiled(q, k, v, block_size, attn_mask, is_causal, Tiling(**switches))

    fn.__name__ = fn.__qualname__ = name
    CASES.named(check, phrase)(fn)


mistake("running maximum not carried (or not subtracted)", subtract_max=False)
mistake("running maximum not carried (or not subtracted)", carry_max=False)
mistake("old sum not rescaled", rescale_l=False)
mistake("accumulator not rescaled", rescale_acc=False)
mistake("neither the sum nor the accumulator rescaled", rescale_l=False, rescale_acc=False)
mistake("normalized per block instead of at the end", normalize="own block")
mistake("normalized per block instead of at the end", normalize="running")
mistake("last partial block dropped", keep_partial=False)
mistake("causal mask not offset per tile", tile_offsets=False)
mistake("causal mask aligned top-left", bottom_right=False)
mistake("scores not scaled", scale=False)
mistake("inverted mask polarity", polarity=False)
mistake("a fully masked row gives NaN", guard_empty_row=False)
mistake("a tile in which all of a row's keys are masked gives NaN", guard_empty_tile=False)
mistake("the rescale factor is exp(m_old - m_new)", rescale="exp(m - m_old)", guard_empty_row=False)


@CASES.named(check, "last partial block dropped")
def tiled_partial_keys_dropped(q, k, v, block_size, attn_mask=None, is_causal=False):
    """Only the keys' last block is dropped (the queries' is kept)."""
    S = k.shape[-2]
    keep = S - S % block_size or S  # every key when the block is larger than S
    mask = None if attn_mask is None else attn_mask[:, :keep]
    if is_causal:  # the causal mask of the full S, cut to the kept keys
        cm = tl.causal_mask(q.shape[-2], S)[:, :keep]
        mask = cm if mask is None else (mask & cm if mask.dtype == torch.bool else mask)
    return tiled(q, k[..., :keep, :], v[..., :keep, :], block_size, mask, False)


@CASES.named(check, "no gradient reached the query")
def tiled_detached(q, k, v, block_size, attn_mask=None, is_causal=False):
    return tiled(q, k, v, block_size, attn_mask, is_causal).detach()


test_right_answers_pass, test_mistakes_are_named = CASES.tests()


def test_checker_tries_block_sizes_masks_and_large_scores():
    seen = []

    def recording(q, k, v, block_size, attn_mask=None, is_causal=False):
        L, S = q.shape[-2], k.shape[-2]
        seen.append((L, S, block_size, attn_mask, is_causal, (q @ k.transpose(-2, -1)).abs().max()))
        return tiled_reference(q, k, v, block_size, attn_mask, is_causal)

    check(recording)
    blocks = {(b, L % b != 0, S % b != 0, b > S) for L, S, b, *_ in seen}
    assert any(b == 1 for b, *_ in blocks) and any(b > 1 and nl and ns for b, nl, ns, _ in blocks)
    assert any(b > S for L, S, b, *_ in seen) and any(b == S for L, S, b, *_ in seen)
    assert any(c and L < S for L, S, _, _, c, _ in seen) and any(
        c and L > S for L, S, _, _, c, _ in seen
    )
    assert any(
        m is not None and m.dtype == torch.bool and not m.any(-1).all() for _, _, _, m, *_ in seen
    )
    assert any(m is not None and m.is_floating_point() for _, _, _, m, *_ in seen)
    assert max(s for *_, s in seen) > 1000  # scores that overflow exp in float64


@pytest.mark.parametrize("is_causal, L, S", [(False, 5, 7), (True, 3, 8), (True, 6, 6)])
def test_the_oracle_agrees_with_torch_and_the_package(is_causal, L, S):
    """The checker's oracle (direct attention) against torch's fused attention (bottom-right causal
    bias) and the package's tiled attention, in float64."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, n, 4, dtype=torch.float64) for n in (L, S, S))
    direct = tl.scaled_dot_product_attention(q, k, v, is_causal=is_causal)[0]
    bias = tl.causal_mask(L, S) if is_causal else None
    torch.testing.assert_close(direct, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    for block in (1, 3, S, S + 3):
        torch.testing.assert_close(
            direct, tl.memory_efficient_attention(q, k, v, is_causal=is_causal, block_size=block)
        )
        torch.testing.assert_close(direct, tiled_reference(q, k, v, block, is_causal=is_causal))


def test_stub_prints_not_implemented(capsys):
    assert_not_implemented(check, capsys)


def test_checker_leaves_the_global_random_state_alone():
    assert_leaves_global_random_state(check, tiled_reference)

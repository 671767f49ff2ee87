"""Tests for transformer_lite.nn.attention: scaled_dot_product_attention and MultiHeadAttention.

Oracles, from the most to the least independent:

1. tiny cases whose softmax is computed by hand with ``math.exp``;
2. in float64, ``torch.nn.functional.scaled_dot_product_attention`` (output)
   and an explicit ``torch.softmax`` formula (weights);
3. in float64 with copied weights, ``torch.nn.MultiheadAttention`` (outputs
   and per-head weights), remembering that its boolean masks mean
   True = blocked, the opposite of ours;
4. numerics (large logits, half precision), gradcheck, dropout and every
   error path.

Properties over random shapes live in test_properties.py.
"""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import F64, close
from transformer_lite import (
    MultiHeadAttention,
    bool_to_additive_mask,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)


def rand(*shape, dtype=F64, seed=None, gen=None):
    if gen is None:
        gen = torch.Generator().manual_seed(0 if seed is None else seed)
    return torch.randn(*shape, dtype=dtype, generator=gen)


def reference_weights(q, k, mask=None):
    """softmax(q k^T / sqrt(d_k) + B) with torch.softmax: an independent statement of Eq. (1)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + (
            bool_to_additive_mask(mask, q.dtype) if mask.dtype == torch.bool else mask
        )
    return torch.softmax(scores, dim=-1)


# --------------------------------------------------------------------------- 1. by hand


def _softmax_by_hand(scores):
    exps = [math.exp(s) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def test_sdpa_one_query_by_hand():
    q = torch.tensor([[1.0, 0.0]], dtype=F64)  # (L=1, d_k=2)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=F64)  # (S=3, 2)
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=F64)  # (S=3, d_v=2)
    r = math.sqrt(2.0)
    w = _softmax_by_hand([1 / r, 0 / r, 1 / r])
    out_expected = [w[0] * 1 + w[1] * 3 + w[2] * 5, w[0] * 2 + w[1] * 4 + w[2] * 6]

    out, weights = scaled_dot_product_attention(q, k, v)

    assert weights.shape == (1, 3) and out.shape == (1, 2)
    close(weights, torch.tensor([w], dtype=F64), msg="weights: is the scale 1/sqrt(d_k)?")
    close(out, torch.tensor([out_expected], dtype=F64))


def test_sdpa_two_queries_with_a_mask_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=F64)  # (L=2, 2)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=F64)  # (S=3, 2)
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=F64)
    mask = torch.tensor([[True, True, True], [True, False, True]])  # query 1 may not see key 1
    r = math.sqrt(2.0)
    w0 = _softmax_by_hand([1 / r, 0 / r, 1 / r])
    w1_allowed = _softmax_by_hand([0 / r, 2 / r])  # keys 0 and 2 only
    w1 = [w1_allowed[0], 0.0, w1_allowed[1]]
    out_expected = [
        [sum(w[j] * v[j, c].item() for j in range(3)) for c in range(2)] for w in (w0, w1)
    ]

    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)

    close(weights, torch.tensor([w0, w1], dtype=F64))
    assert weights[1, 1].item() == 0.0, "a forbidden key must get exactly zero weight"
    close(out, torch.tensor(out_expected, dtype=F64))


def test_sdpa_float_mask_is_added_to_scores_by_hand():
    q = torch.tensor([[1.0, 1.0]], dtype=F64)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)
    v = torch.tensor([[10.0], [20.0]], dtype=F64)
    bias = torch.tensor([[0.5, -1.0]], dtype=F64)
    r = math.sqrt(2.0)
    w = _softmax_by_hand([1 / r + 0.5, 1 / r - 1.0])
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    close(weights, torch.tensor([w], dtype=F64))
    close(out, torch.tensor([[10 * w[0] + 20 * w[1]]], dtype=F64))


# --------------------------------------------------------------------------- 2. F.sdpa oracle


@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_sdpa_matches_torch_without_mask(batch):
    gen = torch.Generator().manual_seed(1)
    q, k, v = rand(*batch, 4, 5, gen=gen), rand(*batch, 6, 5, gen=gen), rand(*batch, 6, 3, gen=gen)
    out, weights = scaled_dot_product_attention(q, k, v)
    close(out, F.scaled_dot_product_attention(q, k, v))
    close(weights, reference_weights(q, k))


def _random_bool_mask(shape, gen):
    """Random True/False mask with at least one True per row (torch returns NaN for empty rows)."""
    mask = torch.rand(shape, generator=gen) < 0.6
    mask[..., 0] |= ~mask.any(dim=-1)
    return mask


@pytest.mark.parametrize("mask_shape", [(4, 6), (2, 1, 4, 6), (2, 3, 4, 6)])
def test_sdpa_matches_torch_with_bool_mask(mask_shape):
    gen = torch.Generator().manual_seed(2)
    q, k, v = rand(2, 3, 4, 5, gen=gen), rand(2, 3, 6, 5, gen=gen), rand(2, 3, 6, 3, gen=gen)
    mask = _random_bool_mask(mask_shape, gen)
    assert not mask.all(), "the test needs at least one forbidden key"
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    close(weights, reference_weights(q, k, mask))
    assert (weights[~mask.expand_as(weights)] == 0).all()


def test_sdpa_matches_torch_with_float_mask():
    gen = torch.Generator().manual_seed(3)
    q, k, v = rand(2, 4, 5, gen=gen), rand(2, 6, 5, gen=gen), rand(2, 6, 3, gen=gen)
    bias = rand(2, 4, 6, gen=gen)
    bias[:, 1, 2] = float("-inf")
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    close(weights, reference_weights(q, k, bias))
    assert (weights[:, 1, 2] == 0).all()


def test_sdpa_bool_and_equivalent_float_mask_agree():
    gen = torch.Generator().manual_seed(4)
    q, k, v = rand(3, 4, 5, gen=gen), rand(3, 6, 5, gen=gen), rand(3, 6, 3, gen=gen)
    mask = _random_bool_mask((3, 4, 6), gen)
    a = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    b = scaled_dot_product_attention(q, k, v, attn_mask=bool_to_additive_mask(mask, F64))
    close(a[0], b[0])
    close(a[1], b[1])


def test_sdpa_is_causal_matches_torch_when_l_equals_s():
    gen = torch.Generator().manual_seed(5)
    q, k, v = rand(2, 3, 5, 4, gen=gen), rand(2, 3, 5, 4, gen=gen), rand(2, 3, 5, 4, gen=gen)
    out, weights = scaled_dot_product_attention(q, k, v, is_causal=True)
    close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    close(weights, reference_weights(q, k, causal_mask(5)))
    assert (weights.triu(diagonal=1) == 0).all()


@pytest.mark.parametrize("L,S", [(2, 5), (1, 4), (3, 7)])
def test_sdpa_is_causal_with_more_keys_aligns_bottom_right(L, S):
    gen = torch.Generator().manual_seed(6)
    q, k, v = rand(2, L, 4, gen=gen), rand(2, S, 4, gen=gen), rand(2, S, 3, gen=gen)
    out, weights = scaled_dot_product_attention(q, k, v, is_causal=True)
    bottom_right = causal_mask(L, S)
    close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right))
    close(weights, reference_weights(q, k, bottom_right))
    # and it is NOT torch's top-left is_causal: the last query sees every key.
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(out, top_left)


def test_sdpa_is_causal_combines_with_attn_mask():
    gen = torch.Generator().manual_seed(7)
    q, k, v = rand(2, 4, 3, gen=gen), rand(2, 4, 3, gen=gen), rand(2, 4, 3, gen=gen)
    valid = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    pad = padding_mask(valid)[:, 0]  # (B, 1, S)
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True)
    both = pad & causal_mask(4)
    close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=both))
    close(weights, reference_weights(q, k, both))


def test_sdpa_broadcasts_batch_dims_like_torch():
    gen = torch.Generator().manual_seed(8)
    q, k, v = rand(2, 1, 4, 5, gen=gen), rand(1, 3, 6, 5, gen=gen), rand(1, 3, 6, 2, gen=gen)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4, 2) and weights.shape == (2, 3, 4, 6)
    qe, ke, ve = q.expand(2, 3, 4, 5), k.expand(2, 3, 6, 5), v.expand(2, 3, 6, 2)
    close(out, F.scaled_dot_product_attention(qe, ke, ve))
    close(weights, reference_weights(qe, ke))


# --------------------------------------------------------------------------- 3. nn.MultiheadAttention oracle


def _torch_mha(d_model=8, n_heads=2, bias=True, seed=0):
    torch.manual_seed(seed)
    m = nn.MultiheadAttention(d_model, n_heads, batch_first=True, bias=bias, dtype=F64).eval()
    with (
        torch.no_grad()
    ):  # the default init sets biases to 0: randomize them so that copying them is tested
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return m


def _compare_mha(theirs, query, key, value, our_mask=None, torch_kwargs=None, is_causal=False):
    ours = MultiHeadAttention.from_torch(theirs).eval()
    out, weights, _ = ours(query, key, value, attn_mask=our_mask, is_causal=is_causal)
    t_out, t_weights = theirs(
        query, key, value, need_weights=True, average_attn_weights=False, **(torch_kwargs or {})
    )
    close(out, t_out)
    close(weights, t_weights)
    return out, weights


@pytest.mark.parametrize("bias", [True, False])
def test_mha_self_attention_matches_torch(bias):
    theirs = _torch_mha(bias=bias)
    x = rand(3, 5, 8, seed=10)
    _compare_mha(theirs, x, x, x)


def test_mha_cross_attention_matches_torch():
    theirs = _torch_mha(d_model=12, n_heads=3)
    gen = torch.Generator().manual_seed(11)
    q, kv = rand(2, 4, 12, gen=gen), rand(2, 7, 12, gen=gen)
    _, weights = _compare_mha(theirs, q, kv, kv)
    assert weights.shape == (2, 3, 4, 7)


def test_mha_distinct_key_and_value_match_torch():
    theirs = _torch_mha()
    gen = torch.Generator().manual_seed(12)
    q, k, v = rand(2, 3, 8, gen=gen), rand(2, 6, 8, gen=gen), rand(2, 6, 8, gen=gen)
    _compare_mha(theirs, q, k, v)


def test_mha_bool_2d_mask_is_inverted_for_torch():
    theirs = _torch_mha()
    gen = torch.Generator().manual_seed(13)
    q, kv = rand(2, 4, 8, gen=gen), rand(2, 6, 8, gen=gen)
    mask = _random_bool_mask((4, 6), gen)  # ours: True = may attend
    _, weights = _compare_mha(theirs, q, kv, kv, our_mask=mask, torch_kwargs={"attn_mask": ~mask})
    assert (weights[..., ~mask] == 0).all()


def test_mha_causal_self_attention_matches_torch():
    theirs = _torch_mha()
    x = rand(2, 5, 8, seed=14)
    blocked = ~causal_mask(5)
    _compare_mha(theirs, x, x, x, is_causal=True, torch_kwargs={"attn_mask": blocked})
    _compare_mha(theirs, x, x, x, our_mask=causal_mask(5), torch_kwargs={"attn_mask": blocked})


def test_mha_per_example_3d_mask_matches_torch():
    theirs = _torch_mha(d_model=8, n_heads=2)
    gen = torch.Generator().manual_seed(15)
    q, kv = rand(3, 4, 8, gen=gen), rand(3, 5, 8, gen=gen)
    mask = _random_bool_mask((3, 4, 5), gen)  # (B, L, S), same for every head
    torch_mask = (~mask).repeat_interleave(2, dim=0)  # torch wants (B * H, L, S), True = blocked
    _compare_mha(theirs, q, kv, kv, our_mask=mask, torch_kwargs={"attn_mask": torch_mask})


def test_mha_per_head_4d_mask_matches_torch():
    theirs = _torch_mha(d_model=8, n_heads=2)
    gen = torch.Generator().manual_seed(16)
    q, kv = rand(3, 4, 8, gen=gen), rand(3, 5, 8, gen=gen)
    mask = _random_bool_mask((3, 2, 4, 5), gen)  # (B, H, L, S)
    _compare_mha(
        theirs, q, kv, kv, our_mask=mask, torch_kwargs={"attn_mask": ~mask.reshape(6, 4, 5)}
    )


def test_mha_float_mask_has_the_same_meaning_as_torch():
    theirs = _torch_mha()
    gen = torch.Generator().manual_seed(17)
    q, kv = rand(2, 4, 8, gen=gen), rand(2, 6, 8, gen=gen)
    bias = rand(4, 6, gen=gen)
    bias[0, 3] = float("-inf")
    _compare_mha(theirs, q, kv, kv, our_mask=bias, torch_kwargs={"attn_mask": bias})


@pytest.mark.parametrize("self_attention", [True, False])
def test_mha_padding_mask_matches_torch_key_padding_mask(self_attention):
    theirs = _torch_mha(d_model=12, n_heads=4)
    gen = torch.Generator().manual_seed(18)
    S = 6
    kv = rand(3, S, 12, gen=gen)
    q = kv if self_attention else rand(3, 4, 12, gen=gen)
    valid = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    _, weights = _compare_mha(
        theirs,
        q,
        kv,
        kv,
        our_mask=padding_mask(valid),
        torch_kwargs={"key_padding_mask": ~valid.bool()},
    )
    pad_keys = ~valid.bool()[:, None, None, :].expand_as(weights)
    assert (weights[pad_keys] == 0).all()


# --------------------------------------------------------------------------- 4. numerics


def test_sdpa_large_logits_are_finite_and_match_float64_reference():
    gen = torch.Generator().manual_seed(20)
    d_k = 4
    q = rand(2, 3, d_k, gen=gen) * 100
    k = rand(2, 5, d_k, gen=gen) * 100
    v = rand(2, 5, 3, gen=gen)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    assert scores.abs().max() > 5e3, "the test needs scores of order 1e4"
    out, weights = scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all(), (
        "subtract the row max before exp()"
    )
    close(weights, torch.softmax(scores, dim=-1))
    close(out, torch.softmax(scores, dim=-1) @ v)


def test_sdpa_large_logits_float32_finite():
    gen = torch.Generator().manual_seed(21)
    q, k, v = (
        (rand(2, 3, 4, gen=gen) * 100).float(),
        (rand(2, 5, 4, gen=gen) * 100).float(),
        rand(2, 5, 3, gen=gen),
    )
    out, weights = scaled_dot_product_attention(q, k, v.float())
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    ref = torch.softmax(q.double() @ k.double().transpose(-2, -1) / 2.0, dim=-1)
    torch.testing.assert_close(weights.double(), ref, atol=1e-3, rtol=0)


@pytest.mark.parametrize("dtype,atol", [(torch.float16, 5e-3), (torch.bfloat16, 4e-2)])
def test_sdpa_half_precision_is_finite_and_close_to_float32(dtype, atol):
    gen = torch.Generator().manual_seed(22)
    q, k, v = (
        rand(2, 2, 6, 8, gen=gen).float(),
        rand(2, 2, 7, 8, gen=gen).float(),
        rand(2, 2, 7, 8, gen=gen).float(),
    )
    q = q * 4  # sizeable logits, still representable in half precision
    mask = _random_bool_mask((6, 7), gen)
    out32, w32 = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out, weights = scaled_dot_product_attention(
        q.to(dtype), k.to(dtype), v.to(dtype), attn_mask=mask
    )
    assert out.dtype == dtype and weights.dtype == dtype
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(out.float(), out32, atol=atol, rtol=0)
    torch.testing.assert_close(weights.float(), w32, atol=atol, rtol=0)
    assert (weights[..., ~mask] == 0).all()


def test_sdpa_float16_scores_beyond_float16_range_are_computed_in_float32():
    # Each input is representable in float16, but q.k = 4 * 300 * 300 = 360000 > 65504 (float16 max):
    # computed in float16 the scores would be inf and the softmax NaN.
    q = torch.full((1, 2, 4), 300.0)
    q[0, 1] = -300.0
    k = torch.full((1, 3, 4), 300.0)
    k[0, 1] = 299.0
    v = torch.arange(6.0).reshape(1, 3, 2)
    out32, w32 = scaled_dot_product_attention(q, k, v)
    out, weights = scaled_dot_product_attention(q.half(), k.half(), v.half())
    assert out.dtype == torch.float16
    assert torch.isfinite(out).all() and torch.isfinite(weights).all(), (
        "compute half inputs in float32"
    )
    torch.testing.assert_close(out.float(), out32, atol=5e-3, rtol=0)
    torch.testing.assert_close(weights.float(), w32, atol=1e-3, rtol=0)


def test_sdpa_float_mask_all_minus_inf_row_gives_zeros():
    gen = torch.Generator().manual_seed(23)
    q, k, v = rand(3, 4, gen=gen), rand(5, 4, gen=gen), rand(5, 2, gen=gen)
    bias = torch.zeros(3, 5, dtype=F64)
    bias[1] = float("-inf")
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert (weights[1] == 0).all() and (out[1] == 0).all()
    close(out[[0, 2]], (torch.softmax(q @ k.T / 2.0, dim=-1) @ v)[[0, 2]])


def test_sdpa_fully_masked_rows_from_causal_mask_with_fewer_keys():
    gen = torch.Generator().manual_seed(24)
    q, k, v = rand(4, 3, gen=gen), rand(2, 3, gen=gen), rand(2, 3, gen=gen)
    out, weights = scaled_dot_product_attention(q, k, v, is_causal=True)  # rows 0 and 1 see nothing
    assert (out[:2] == 0).all() and (weights[:2] == 0).all()
    close(out[2:], F.scaled_dot_product_attention(q[2:], k, v, attn_mask=causal_mask(4, 2)[2:]))


# --------------------------------------------------------------------------- 5. gradients


def test_sdpa_gradcheck_with_mask_including_fully_masked_row():
    gen = torch.Generator().manual_seed(30)
    q = rand(2, 3, 4, gen=gen).requires_grad_()
    k = rand(2, 5, 4, gen=gen).requires_grad_()
    v = rand(2, 5, 2, gen=gen).requires_grad_()
    mask = _random_bool_mask((2, 3, 5), gen)
    mask[0, 1] = False  # one fully masked row
    bias = rand(2, 3, 5, gen=gen)

    def f(q, k, v):
        out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out, weights

    def g(q, k, v):
        return scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True)

    assert torch.autograd.gradcheck(f, (q, k, v))
    assert torch.autograd.gradcheck(g, (q, k, v))


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
def test_mha_gradcheck_inputs_and_parameters():
    torch.manual_seed(31)
    mha = MultiHeadAttention(4, 2).to(F64)
    gen = torch.Generator().manual_seed(31)
    q = rand(2, 3, 4, gen=gen).requires_grad_()
    kv = rand(2, 4, 4, gen=gen).requires_grad_()
    mask = _random_bool_mask((2, 3, 4), gen)
    names = [n for n, _ in mha.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in mha.parameters())

    def f(q, kv, *ps):
        out, _, _ = torch.func.functional_call(
            mha, dict(zip(names, ps)), (q, kv, kv), {"attn_mask": mask}
        )
        return out

    assert torch.autograd.gradcheck(f, (q, kv, *params))


def test_mha_gradients_match_torch():
    theirs = _torch_mha()
    ours = MultiHeadAttention.from_torch(theirs)
    x1 = rand(2, 5, 8, seed=32).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    mask = causal_mask(5)
    (ours(x1, x1, x1, attn_mask=mask)[0] ** 2).sum().backward()
    (theirs(x2, x2, x2, attn_mask=~mask)[0] ** 2).sum().backward()
    close(x1.grad, x2.grad)
    close(ours.q_proj.weight.grad, theirs.in_proj_weight.grad[:8])
    close(ours.v_proj.weight.grad, theirs.in_proj_weight.grad[16:])
    close(ours.out_proj.weight.grad, theirs.out_proj.weight.grad)


# --------------------------------------------------------------------------- 6. dropout


def test_mha_dropout_active_in_train_mode_only():
    torch.manual_seed(40)
    mha = MultiHeadAttention(8, 2, dropout=0.5).to(F64)
    x = rand(2, 6, 8, seed=40)
    mha.eval()
    eval_out, eval_w, _ = mha(x, x, x)
    eval_again, _, _ = mha(x, x, x)
    assert torch.equal(eval_out, eval_again), "eval mode must be deterministic"
    mha.train()
    torch.manual_seed(41)
    train_out, train_w, _ = mha(x, x, x)
    assert not torch.allclose(train_out, eval_out), (
        "dropout > 0 in train mode must change the output"
    )
    close(train_w, eval_w, msg="the returned weights are taken before dropout")


def test_mha_dropout_zero_train_equals_eval():
    torch.manual_seed(42)
    mha = MultiHeadAttention(8, 2, dropout=0.0).to(F64)
    x = rand(2, 6, 8, seed=42)
    out_train, w_train, _ = mha.train()(x, x, x)
    out_eval, w_eval, _ = mha.eval()(x, x, x)
    assert torch.equal(out_train, out_eval) and torch.equal(w_train, w_eval)


def test_sdpa_dropout_keeps_expectation_and_zeroes_weights():
    # Inverted dropout: kept weights are scaled by 1/(1-p), so the output is unbiased.
    q, k = torch.zeros(1, 4, dtype=F64), torch.zeros(1000, 4, dtype=F64)
    v = torch.ones(1000, 1, dtype=F64)
    torch.manual_seed(43)
    out, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    close(weights, torch.full((1, 1000), 1e-3, dtype=F64))  # before dropout
    assert 0.85 < out.item() < 1.15 and out.item() != 1.0


# --------------------------------------------------------------------------- 7. errors


def _qkv(q_shape=(2, 3, 4), k_shape=(2, 5, 4), v_shape=(2, 5, 6), dtype=F64):
    return (
        torch.zeros(q_shape, dtype=dtype),
        torch.zeros(k_shape, dtype=dtype),
        torch.zeros(v_shape, dtype=dtype),
    )


def test_sdpa_rejects_rank_1_inputs():
    q, k, v = _qkv()
    with pytest.raises(
        ValueError, match=r"expected query of shape \(\.\.\., len, dim\).*received shape \(4,\)"
    ):
        scaled_dot_product_attention(torch.zeros(4, dtype=F64), k, v)
    with pytest.raises(ValueError, match=r"expected value .*received shape \(6,\)"):
        scaled_dot_product_attention(q, k, torch.zeros(6, dtype=F64))


def test_sdpa_rejects_mismatched_d_k():
    q, _, v = _qkv()
    with pytest.raises(
        ValueError, match=r"share d_k.*expected key shape \(\.\.\., S, 4\), received \(2, 5, 3\)"
    ):
        scaled_dot_product_attention(q, torch.zeros(2, 5, 3, dtype=F64), v)


def test_sdpa_rejects_key_value_length_mismatch():
    q, k, _ = _qkv()
    with pytest.raises(
        ValueError, match=r"share S.*expected value shape \(\.\.\., 5, d_v\), received \(2, 4, 6\)"
    ):
        scaled_dot_product_attention(q, k, torch.zeros(2, 4, 6, dtype=F64))


def test_sdpa_rejects_non_broadcastable_batch_dims():
    q, k, v = _qkv(q_shape=(2, 3, 4), k_shape=(3, 5, 4), v_shape=(3, 5, 6))
    with pytest.raises(
        ValueError, match=r"batch dimensions do not broadcast: query \(2, 3, 4\), key \(3, 5, 4\)"
    ):
        scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("mask_shape", [(3, 4), (5, 3), (3, 2, 3, 5), (1, 1, 1, 3, 5)])
def test_sdpa_rejects_mask_of_wrong_shape(mask_shape):
    q, k, v = _qkv()
    mask = torch.ones(mask_shape, dtype=torch.bool)
    shape_text = re.escape(str(tuple(mask_shape)))
    with pytest.raises(
        ValueError,
        match=rf"broadcasts to \(\.\.\., L, S\) = \(2, 3, 5\) \(.*\), received {shape_text}",
    ):
        scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_sdpa_rejects_integer_mask():
    q, k, v = _qkv()
    with pytest.raises(
        ValueError, match=r"expected dtype torch.bool .* or a floating dtype .*received torch.int64"
    ):
        scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(3, 5, dtype=torch.int64))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_sdpa_rejects_nan_or_plus_inf_in_float_mask(bad):
    q, k, v = _qkv()
    mask = torch.zeros(3, 5, dtype=F64)
    mask[1, 2] = bad
    with pytest.raises(
        ValueError, match=r"float mask may hold finite values and -inf, received NaN or \+inf"
    ):
        scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_sdpa_rejects_non_tensor_mask():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"expected a bool or float Tensor, received list"):
        scaled_dot_product_attention(q, k, v, attn_mask=[[True] * 5] * 3)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_sdpa_rejects_dropout_out_of_range(p):
    q, k, v = _qkv()
    with pytest.raises(
        ValueError, match=rf"expected a dropout probability 0 <= p < 1, received {p}"
    ):
        scaled_dot_product_attention(q, k, v, dropout_p=p)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, True])
@pytest.mark.parametrize("n_kv_heads", [None, 1])
def test_attention_modules_reject_dropout_out_of_range_when_built(n_kv_heads, p):
    """p = 1 used to give all-zero weights in training, silently; now the constructor says so."""
    with pytest.raises(ValueError, match=r"MultiHeadAttention: expected a dropout probability"):
        MultiHeadAttention(8, 2, n_kv_heads, dropout=p)


def test_sdpa_rejects_mixed_dtypes():
    q, k, v = _qkv()
    with pytest.raises(
        ValueError, match=r"one dtype, received torch.float64, torch.float32, torch.float64"
    ):
        scaled_dot_product_attention(q, k.float(), v)


def test_sdpa_rejects_integer_inputs():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"expected a floating query, received dtype torch.int64"):
        scaled_dot_product_attention(q.long(), k, v)


@pytest.mark.parametrize(
    "d_model,n_heads,pattern",
    [
        (10, 3, r"d_model must be divisible by n_heads, received d_model=10, n_heads=3"),
        (0, 1, r"expected positive int d_model and n_heads, received 0, 1"),
        (8, 0, r"expected positive int d_model and n_heads, received 8, 0"),
    ],
)
def test_mha_constructor_errors(d_model, n_heads, pattern):
    with pytest.raises(ValueError, match=pattern):
        MultiHeadAttention(d_model, n_heads)


def test_mha_rejects_wrong_d_model_input():
    mha = MultiHeadAttention(8, 2)
    x = torch.zeros(2, 3, 8)
    with pytest.raises(
        ValueError, match=r"expected key of shape \(B, len, 8\), received \(2, 3, 6\)"
    ):
        mha(x, torch.zeros(2, 3, 6), x)


def test_mha_rejects_4d_input():
    mha = MultiHeadAttention(8, 2)
    x = torch.zeros(2, 3, 8)
    with pytest.raises(
        ValueError, match=r"expected query of shape \(B, len, 8\), received \(1, 2, 3, 8\)"
    ):
        mha(x[None], x, x)


def test_mha_rejects_1d_query_before_reading_its_shape():
    with pytest.raises(ValueError, match=r"expected query of shape \(B, len, 8\), received \(8,\)"):
        MultiHeadAttention(8, 2)(torch.zeros(8))


def test_mha_rejects_a_list_with_a_value_error():
    mha = MultiHeadAttention(8, 2)
    x = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match=r"expected key of shape \(B, len, 8\), received list"):
        mha(x, x.tolist(), x)


def test_mha_rejects_batch_mismatch():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(
        ValueError, match=r"expected one batch size B, received query \(2, 3, 8\), key \(3, 3, 8\)"
    ):
        mha(torch.zeros(2, 3, 8), torch.zeros(3, 3, 8), torch.zeros(3, 3, 8))


def test_mha_rejects_key_value_length_mismatch():
    mha = MultiHeadAttention(8, 2)
    x = torch.zeros(2, 3, 8)
    with pytest.raises(
        ValueError,
        match=r"key and value of one length S, received key \(2, 3, 8\) and value \(2, 4, 8\)",
    ):
        mha(x, x, torch.zeros(2, 4, 8))


@pytest.mark.parametrize("mask_shape", [(3,), (2, 2, 1, 3, 3), (2, 3, 3, 3)])
def test_mha_rejects_bad_mask_rank(mask_shape):
    mha = MultiHeadAttention(8, 2)
    x = torch.zeros(2, 3, 8)
    shape_text = re.escape(str(mask_shape))
    with pytest.raises(
        ValueError,
        match=rf"expected attn_mask of shape \(L, S\), \(B, L, S\), \(B, 1, L, S\) or "
        rf"\(B, 2, L, S\), received {shape_text}",
    ):
        mha(x, x, x, attn_mask=torch.ones(mask_shape, dtype=torch.bool))


def test_mha_rejects_mask_that_does_not_broadcast():
    mha = MultiHeadAttention(8, 2)
    x = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match=r"received \(2, 3\)"):
        # a (B, S) marker is not an (L, S) mask
        mha(x, x, x, attn_mask=torch.ones(2, 3, dtype=torch.bool))

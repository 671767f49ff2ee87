"""Property tests (hypothesis) over random shapes and masks, in float64.

Oracles here are laws that must hold for every input rather than reference
values: rows of attention weights sum to 1 over the allowed keys and are
exactly 0 on forbidden keys; a query with no allowed key gets zero weights, a
zero output and zero gradients (never NaN); with ``is_causal`` a change to a
future key/value never reaches an earlier query; without positional
information and without a mask, permuting the positions permutes the outputs
(and the weights on both axes). Where it is defined we also compare with
``torch.nn.functional.scaled_dot_product_attention``.

Inputs are drawn from a seeded torch.Generator (the seed is a hypothesis
integer), so every example has distinct random rows. Runs are reproducible:
``derandomize=True`` and no example database.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import F64, make_qkv, reproducible
from transformer_lite import (
    MultiHeadAttention,
    TransformerBlock,
    causal_mask,
    scaled_dot_product_attention,
)

PROPS = reproducible(max_examples=100)
FEW = settings(PROPS, max_examples=40)

batch_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
lengths = st.integers(1, 6)
dims = st.integers(1, 5)
seeds = st.integers(0, 2**31 - 1)
mask_densities = st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0])  # 0.0: every row fully masked
# the arguments of make_qkv: batch shape, L queries, S keys, d_k, d_v and the seed of the values
qkv_args = dict(batch=batch_shapes, L=lengths, S=lengths, d_k=dims, d_v=dims, seed=seeds)


def make_mask(shape, density, gen, per_batch):
    """Random bool mask (True = may attend) of shape (*batch, L, S), or (L, S) shared by the batch."""
    shape = shape if per_batch else shape[-2:]
    return torch.rand(shape, generator=gen) < density


@PROPS
@given(**qkv_args, density=mask_densities, per_batch=st.booleans())
def test_weights_sum_to_one_over_allowed_keys_and_are_zero_elsewhere(
    batch, L, S, d_k, d_v, seed, density, per_batch
):
    q, k, v, gen = make_qkv(batch, L, S, d_k, d_v, seed)
    mask = make_mask((*batch, L, S), density, gen, per_batch)
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    full_mask = mask.expand(*batch, L, S)

    assert out.shape == (*batch, L, d_v) and weights.shape == (*batch, L, S)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert (weights[~full_mask] == 0).all(), "forbidden keys must get exactly zero weight"
    assert (weights >= 0).all()
    has_key = full_mask.any(dim=-1)
    sums = weights.sum(dim=-1)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]), atol=1e-12, rtol=0)
    # where a query has at least one allowed key, torch's fused kernel agrees
    if has_key.any():
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(out[has_key], expected[has_key], atol=1e-12, rtol=1e-10)


@PROPS
@given(**qkv_args, density=mask_densities)
def test_fully_masked_rows_give_zeros_and_zero_finite_gradients(
    batch, L, S, d_k, d_v, seed, density
):
    q, k, v, gen = make_qkv(batch, L, S, d_k, d_v, seed)
    mask = make_mask((*batch, L, S), density, gen, per_batch=True)
    mask[..., 0, :] = False  # make sure at least one row is fully masked
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    empty = ~mask.any(dim=-1)  # (*batch, L)

    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert (weights[empty] == 0).all() and (out[empty] == 0).all()

    r_out = torch.randn(out.shape, dtype=F64, generator=gen)
    r_w = torch.randn(weights.shape, dtype=F64, generator=gen)
    ((out * r_out).sum() + (weights * r_w).sum()).backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert (q.grad[empty] == 0).all(), "a query that sees no key must get zero gradient"
    if not mask.any():
        assert (k.grad == 0).all() and (v.grad == 0).all()


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
@PROPS
@given(**qkv_args, p=st.integers(0, 5), with_mask=st.booleans())
def test_causal_future_keys_never_change_earlier_outputs(batch, L, S, d_k, d_v, seed, p, with_mask):
    p = p % S  # the key/value position to change
    q, k, v, gen = make_qkv(batch, L, S, d_k, d_v, seed)
    mask = make_mask((*batch, L, S), 0.7, gen, per_batch=True) if with_mask else None
    k2, v2 = k.clone(), v.clone()
    k2[..., p, :] = torch.randn(k2[..., p, :].shape, dtype=F64, generator=gen) * 3
    v2[..., p, :] = torch.randn(v2[..., p, :].shape, dtype=F64, generator=gen) * 3

    out1, w1 = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
    out2, w2 = scaled_dot_product_attention(q, k2, v2, attn_mask=mask, is_causal=True)

    # query i sits at absolute position S - L + i (bottom-right alignment); key p is in its future iff p > S - L + i
    before = torch.tensor([S - L + i < p for i in range(L)])
    torch.testing.assert_close(out1[..., before, :], out2[..., before, :], atol=1e-12, rtol=0)
    torch.testing.assert_close(w1[..., before, :], w2[..., before, :], atol=1e-12, rtol=0)
    assert (w1[..., before, p] == 0).all()
    # and the mask is not simply blocking everything: the last query can see key p
    if mask is None:
        assert (w1[..., -1, p] > 0).all()


@FEW
@given(
    L=st.integers(2, 6),
    n_heads=st.sampled_from([1, 2, 4]),
    seed=seeds,
    p=st.integers(0, 5),
    norm_first=st.booleans(),
    activation=st.sampled_from(["relu", "gelu"]),
)
def test_causal_block_future_token_never_changes_earlier_outputs(
    L, n_heads, seed, p, norm_first, activation
):
    p = p % L
    torch.manual_seed(seed)
    blk = (
        TransformerBlock(8, n_heads, 12, activation=activation, norm_first=norm_first)
        .to(F64)
        .eval()
    )
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, L, 8, dtype=F64, generator=gen)
    x2 = x.clone()
    x2[:, p] = torch.randn(2, 8, dtype=F64, generator=gen)
    y1, w1, _ = blk(x, is_causal=True)
    y2, w2, _ = blk(x2, is_causal=True)
    torch.testing.assert_close(y1[:, :p], y2[:, :p], atol=1e-12, rtol=0)
    torch.testing.assert_close(w1[:, :, :p], w2[:, :, :p], atol=1e-12, rtol=0)
    assert not torch.allclose(y1[:, p], y2[:, p]), "the changed position itself must change"


@FEW
@given(
    B=st.integers(1, 2),
    L=st.integers(2, 6),
    n_heads=st.sampled_from([1, 2, 4]),
    seed=seeds,
    data=st.data(),
)
def test_mha_self_attention_is_permutation_equivariant(B, L, n_heads, seed, data):
    perm = torch.tensor(data.draw(st.permutations(range(L))))
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, n_heads).to(F64).eval()
    x = torch.randn(B, L, 8, dtype=F64, generator=torch.Generator().manual_seed(seed))
    out, w, _ = mha(x, x, x)
    xp = x[:, perm]
    out_p, w_p, _ = mha(xp, xp, xp)
    torch.testing.assert_close(out_p, out[:, perm], atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(w_p, w[:, :, perm][:, :, :, perm], atol=1e-12, rtol=1e-10)


@FEW
@given(L=st.integers(1, 4), S=st.integers(2, 6), seed=seeds, data=st.data())
def test_mha_cross_attention_ignores_key_order(L, S, seed, data):
    # Permuting the key/value positions permutes the weight columns and leaves the output unchanged.
    perm = torch.tensor(data.draw(st.permutations(range(S))))
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2).to(F64).eval()
    gen = torch.Generator().manual_seed(seed)
    q, kv = (
        torch.randn(2, L, 8, dtype=F64, generator=gen),
        torch.randn(2, S, 8, dtype=F64, generator=gen),
    )
    out, w, _ = mha(q, kv, kv)
    out_p, w_p, _ = mha(q, kv[:, perm], kv[:, perm])
    torch.testing.assert_close(out_p, out, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(w_p, w[..., perm], atol=1e-12, rtol=1e-10)


@FEW
@given(
    B=st.integers(1, 2),
    L=st.integers(2, 6),
    seed=seeds,
    norm_first=st.booleans(),
    activation=st.sampled_from(["relu", "gelu"]),
    data=st.data(),
)
def test_block_is_permutation_equivariant_without_positions_or_mask(
    B, L, seed, norm_first, activation, data
):
    perm = torch.tensor(data.draw(st.permutations(range(L))))
    torch.manual_seed(seed)
    blk = TransformerBlock(8, 2, 12, activation=activation, norm_first=norm_first).to(F64).eval()
    x = torch.randn(B, L, 8, dtype=F64, generator=torch.Generator().manual_seed(seed))
    y, w, _ = blk(x)
    y_p, w_p, _ = blk(x[:, perm])
    torch.testing.assert_close(y_p, y[:, perm], atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(w_p, w[:, :, perm][:, :, :, perm], atol=1e-12, rtol=1e-10)


@FEW
@given(L=st.integers(2, 6), seed=seeds, data=st.data())
def test_causal_mask_breaks_permutation_equivariance(L, seed, data):
    # Sanity check of the law above: with a causal mask (positional information) it must NOT hold in general.
    perm = data.draw(st.permutations(range(L)))
    if perm == sorted(perm):
        perm = perm[1:] + perm[:1]
    perm = torch.tensor(perm)
    torch.manual_seed(seed)
    mha = MultiHeadAttention(8, 2).to(F64).eval()
    x = torch.randn(1, L, 8, dtype=F64, generator=torch.Generator().manual_seed(seed))
    out, _, _ = mha(x, x, x, attn_mask=causal_mask(L))
    xp = x[:, perm]
    out_p, _, _ = mha(xp, xp, xp, attn_mask=causal_mask(L))
    assert not torch.allclose(out_p, out[:, perm])

"""Tests for relative position biases and ALiBi (transformer_lite.nn.relative_position).

Oracles: the T5 bucket rule re-implemented here on Python ints with ``math.log``
(one distance at a time, written from the rule in Raffel et al. 2020 / the T5
code, not from our tensor code); bucket values checked by hand for a few
distances; Shaw-style clipping by hand; ALiBi slopes and biases by hand from
Press et al. (2022), Sec. 3; attention with the bias compared with the softmax
written out. Properties: the biases depend only on j - i (bottom-right aligned
when S > L), far distances use the clipped/last bucket without indexing out of
range, and a position-dependent bias breaks permutation equivariance.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import F64, close
from transformer_lite import (
    ClippedRelativePositionBias,
    MultiHeadAttention,
    T5RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    causal_mask,
    relative_positions,
    scaled_dot_product_attention,
    t5_relative_bucket,
)


def t5_bucket_scalar(rel, n_buckets, max_distance, bidirectional):
    """One relative position j - i -> bucket, on Python ints (the oracle)."""
    offset = 0
    if bidirectional:
        n = n_buckets // 2
        if rel > 0:
            offset = n
        d = abs(rel)
    else:
        n = n_buckets
        d = max(-rel, 0)
    exact = n // 2
    if d < exact:
        return offset + d
    b = exact + int(math.floor(math.log(d / exact) / math.log(max_distance / exact) * (n - exact)))
    return offset + min(b, n - 1)


# --------------------------------------------------------------------------- relative positions


def test_relative_positions_by_hand():
    assert torch.equal(relative_positions(3), torch.tensor([[0, 1, 2], [-1, 0, 1], [-2, -1, 0]]))
    # S > L: the 3 queries are the last 3 of 5 positions (2, 3, 4).
    assert torch.equal(
        relative_positions(3, 5),
        torch.tensor([[-2, -1, 0, 1, 2], [-3, -2, -1, 0, 1], [-4, -3, -2, -1, 0]]),
    )
    # The zero (the query's own position) sits where causal_mask's diagonal is.
    assert torch.equal(relative_positions(3, 5) <= 0, causal_mask(3, 5))


# --------------------------------------------------------------------------- T5 buckets

T5_BIDIRECTIONAL = {  # n_buckets=32, max_distance=128: 16 per side, 8 exact, log-spaced 8..15
    0: 0,
    -1: 1,
    -7: 7,
    -8: 8,
    -11: 8,
    -12: 9,
    -16: 10,
    -32: 12,
    -64: 14,
    -127: 15,
    -128: 15,
    -5000: 15,
    1: 17,
    7: 23,
    8: 24,
    16: 26,
    128: 31,
    5000: 31,
}
# -12: 8 + floor(log(12/8) / log(16) * 8) = 8 + floor(1.17) = 9;  -16: 8 + floor(0.25 * 8) = 10
# -127: 8 + floor(log(15.875) / log(16) * 8) = 8 + floor(7.98) = 15
T5_UNIDIRECTIONAL = {  # n_buckets=32: 16 exact (0..15), log-spaced 16..31
    0: 0,
    3: 0,
    500: 0,
    -1: 1,
    -15: 15,
    -16: 16,
    -32: 21,
    -64: 26,
    -127: 31,
    -128: 31,
    -(10**6): 31,
}
# -32: 16 + floor(log(2) / log(8) * 16) = 16 + floor(5.33) = 21;  -64: 16 + floor(10.67) = 26


@pytest.mark.parametrize(
    "bidirectional,table", [(True, T5_BIDIRECTIONAL), (False, T5_UNIDIRECTIONAL)]
)
def test_t5_buckets_hand_checked(bidirectional, table):
    rel = torch.tensor(list(table))
    got = t5_relative_bucket(rel, 32, 128, bidirectional)
    assert got.tolist() == list(table.values())
    assert got.tolist() == [t5_bucket_scalar(r, 32, 128, bidirectional) for r in table]


@pytest.mark.parametrize("n_buckets,max_distance", [(32, 128), (8, 16), (16, 20), (6, 9)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_scalar_oracle_and_stay_in_range(n_buckets, max_distance, bidirectional):
    rel = torch.arange(-3000, 3001)
    got = t5_relative_bucket(rel, n_buckets, max_distance, bidirectional)
    assert got.tolist() == [
        t5_bucket_scalar(r, n_buckets, max_distance, bidirectional) for r in rel.tolist()
    ]
    assert got.min() >= 0 and got.max() <= n_buckets - 1
    # every distance >= max_distance shares the last bucket of its side
    last_past = n_buckets // 2 - 1 if bidirectional else n_buckets - 1
    assert (got[rel <= -max_distance] == last_past).all()
    if bidirectional:
        assert (got[rel >= max_distance] == n_buckets - 1).all()


def test_t5_buckets_are_monotone_in_distance():
    dist = torch.arange(0, 400)
    past = t5_relative_bucket(-dist)
    future = t5_relative_bucket(dist[1:])
    assert (past.diff() >= 0).all() and (future.diff() >= 0).all()
    assert set(past.tolist()) == set(range(16)) and set(future.tolist()) == set(range(17, 32))


def test_t5_module_reads_its_table_by_bucket():
    torch.manual_seed(0)
    mod = T5RelativePositionBias(n_heads=3, n_buckets=8, max_distance=16).double()
    bias = mod(5, 7)
    assert bias.shape == (1, 3, 5, 7) and bias.dtype == F64
    rel = relative_positions(5, 7)
    for h in range(3):
        for i in range(5):
            for j in range(7):
                b = t5_bucket_scalar(int(rel[i, j]), 8, 16, True)
                assert bias[0, h, i, j] == mod.weight[b, h]


def test_t5_module_far_distances_use_the_last_bucket():
    mod = T5RelativePositionBias(n_heads=2, n_buckets=8, max_distance=16)
    with torch.no_grad():
        mod.weight.copy_(torch.arange(16.0).view(8, 2))
    bias = mod(300)[0]  # distances up to 299, far beyond max_distance = 16
    rel = relative_positions(300)
    assert torch.equal(
        bias[:, rel <= -16], mod.weight[3][:, None].expand(2, int((rel <= -16).sum()))
    )
    assert torch.equal(bias[:, rel >= 16], mod.weight[7][:, None].expand(2, int((rel >= 16).sum())))


def test_relative_biases_are_toeplitz_and_bottom_right_aligned():
    torch.manual_seed(1)
    for mod in (T5RelativePositionBias(2, 16, 32), ClippedRelativePositionBias(2, 3)):
        full = mod(6)
        close(mod(2, 6), full[:, :, -2:], msg="S > L: the queries are the last L positions")
        # constant along each diagonal: the bias depends on j - i only
        for off in range(-5, 6):
            diag = torch.diagonal(full[0], offset=off, dim1=-2, dim2=-1)  # (H, 6 - |off|)
            assert torch.equal(diag, diag[:, :1].expand_as(diag))


def test_t5_unidirectional_module():
    mod = T5RelativePositionBias(1, n_buckets=4, max_distance=8, bidirectional=False)
    with torch.no_grad():
        mod.weight.copy_(torch.tensor([[0.0], [1.0], [2.0], [3.0]]))
    # 4 buckets, 2 exact (distances 0, 1), then 2 + floor(log(d/2)/log(4) * 2): d=2,3 -> 2; d>=4 -> 3
    expected = torch.tensor(
        [
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0, 0.0, 0.0],
            [2.0, 1.0, 0.0, 0.0, 0.0],
            [2.0, 2.0, 1.0, 0.0, 0.0],
            [3.0, 2.0, 2.0, 1.0, 0.0],
        ]
    )
    assert torch.equal(mod(5)[0, 0], expected)


# --------------------------------------------------------------------------- Shaw-style clipping


def test_clipped_bias_by_hand_and_beyond_the_clip():
    mod = ClippedRelativePositionBias(n_heads=1, max_relative_position=2)
    with torch.no_grad():
        # rows: j - i = -2 .. 2
        mod.weight.copy_(torch.tensor([[-20.0], [-10.0], [0.0], [10.0], [20.0]]))
    expected = torch.tensor(
        [
            [0.0, 10.0, 20.0, 20.0, 20.0],
            [-10.0, 0.0, 10.0, 20.0, 20.0],
            [-20.0, -10.0, 0.0, 10.0, 20.0],
            [-20.0, -20.0, -10.0, 0.0, 10.0],
            [-20.0, -20.0, -20.0, -10.0, 0.0],
        ]
    )
    assert torch.equal(mod(5)[0, 0], expected)
    far = mod(400)[0, 0]  # distances far beyond the clip index the end rows, never out of range
    rel = relative_positions(400)
    assert (far[rel >= 2] == 20.0).all() and (far[rel <= -2] == -20.0).all()


# --------------------------------------------------------------------------- ALiBi


def test_alibi_slopes_for_8_heads_are_one_half_to_one_256th():
    assert torch.equal(
        alibi_slopes(8, dtype=F64), torch.tensor([1 / 2**h for h in range(1, 9)], dtype=F64)
    )


def test_alibi_slopes_other_head_counts():
    close(
        alibi_slopes(16, dtype=F64), torch.tensor([2 ** (-h / 2) for h in range(1, 17)], dtype=F64)
    )
    close(alibi_slopes(4, dtype=F64), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256], dtype=F64))
    close(alibi_slopes(1, dtype=F64), torch.tensor([1 / 256], dtype=F64))
    # not a power of 2: the 4-head slopes, then every other slope of the 8-head sequence
    close(
        alibi_slopes(6, dtype=F64),
        torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8], dtype=F64),
    )
    close(alibi_slopes(3, dtype=F64), torch.tensor([1 / 16, 1 / 256, 1 / 4], dtype=F64))
    close(
        alibi_slopes(12, dtype=F64),
        torch.tensor(
            [2**-h for h in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5], dtype=F64
        ),
    )
    assert alibi_slopes(8).dtype == torch.float32


def test_alibi_bias_by_hand():
    inf = float("inf")
    bias = alibi_bias(2, 3, dtype=F64)  # slopes 1/16, 1/256
    expected = torch.tensor(
        [
            [[0.0, -inf, -inf], [-1 / 16, 0.0, -inf], [-2 / 16, -1 / 16, 0.0]],
            [[0.0, -inf, -inf], [-1 / 256, 0.0, -inf], [-2 / 256, -1 / 256, 0.0]],
        ],
        dtype=F64,
    )[None]
    assert torch.equal(bias, expected)
    sym = alibi_bias(2, 3, causal=False, dtype=F64)
    assert torch.equal(
        sym[0, 0], torch.tensor([[0.0, -1, -2], [-1, 0, -1], [-2, -1, 0]], dtype=F64) / 16
    )
    assert not torch.signbit(sym[0, 0].diagonal()).any()  # +0.0 on the diagonal, not -0.0


def test_alibi_more_keys_than_queries_is_bottom_right_aligned():
    full = alibi_bias(4, 6, dtype=F64)
    close(alibi_bias(4, 2, 6, dtype=F64), full[:, :, -2:])
    assert torch.equal(torch.isfinite(alibi_bias(4, 2, 6))[0, 0], causal_mask(2, 6))
    # S < L: the first L - S queries have no key (all -inf), like causal_mask
    assert torch.equal(torch.isfinite(alibi_bias(1, 3, 2))[0, 0], causal_mask(3, 2))


def test_alibi_as_attn_mask_equals_softmax_written_out():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 5, 3, dtype=F64, generator=g) for _ in range(3))  # (B, H, L, d)
    bias = alibi_bias(4, 5, dtype=F64)
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=bias)
    slopes = alibi_slopes(4, dtype=F64)
    for h in range(4):
        for i in range(5):
            scores = torch.stack(
                [(q[:, h, i] * k[:, h, j]).sum(-1) for j in range(5)], dim=-1
            ) / math.sqrt(3)  # (B, 5)
            scores = scores - slopes[h] * (i - torch.arange(5, dtype=F64))
            scores[:, i + 1 :] = float("-inf")
            close(w[:, h, i], torch.softmax(scores, dim=-1))
    out_c, w_c = scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True)
    close(out_c, out)  # the causal mask is already inside the bias
    close(w_c, w)


# --------------------------------------------------------------------------- with MultiHeadAttention


def test_bias_in_multi_head_attention_is_per_head_even_when_batch_equals_heads():
    torch.manual_seed(3)
    mha = MultiHeadAttention(8, 2).to(F64).eval()
    rel = T5RelativePositionBias(2, 8, 16).double()
    with torch.no_grad():
        rel.weight.normal_()
    # B == H == 2: an (H, L, S) mask would be misread as (B, L, S)
    x = torch.randn(2, 5, 8, dtype=F64)
    bias = rel(5)
    _, w, _ = mha(x, x, x, attn_mask=bias)
    q = mha._split_heads(mha.q_proj(x))
    k = mha._split_heads(mha.k_proj(x))
    for b in range(2):
        for h in range(2):
            scores = q[b, h] @ k[b, h].T / math.sqrt(4) + bias[0, h]
            close(w[b, h], torch.softmax(scores, dim=-1))


def test_gradient_reaches_only_the_buckets_in_use():
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2).to(F64)
    rel = T5RelativePositionBias(2, 32, 128).double()
    x = torch.randn(1, 3, 8, dtype=F64)
    mha(x, x, x, attn_mask=rel(3))[0].square().sum().backward()
    used = {0, 1, 2, 17, 18}  # j - i in {-2, -1, 0, 1, 2}
    nonzero = {int(r) for r in (rel.weight.grad.abs().sum(1) > 0).nonzero().flatten()}
    assert nonzero == used


@pytest.mark.parametrize("kind", ["t5", "clipped", "alibi"])
def test_relative_bias_breaks_permutation_equivariance(kind):
    torch.manual_seed(5)
    mha = MultiHeadAttention(8, 2).to(F64).eval()
    x = torch.randn(2, 6, 8, dtype=F64)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    if kind == "alibi":
        bias = alibi_bias(2, 6, causal=False, dtype=F64)
    else:
        mod = (
            T5RelativePositionBias(2, 8, 16) if kind == "t5" else ClippedRelativePositionBias(2, 2)
        ).double()
        with torch.no_grad():
            mod.weight.normal_()
        bias = mod(6)
    y = mha(x, x, x, attn_mask=bias)[0]
    y_p = mha(x[:, perm], x[:, perm], x[:, perm], attn_mask=bias)[0]
    assert (y_p - y[:, perm]).abs().max() > 1e-3
    # Control: a bias that is the same for every (i, j) carries no position, and equivariance returns.
    flat = torch.full_like(bias, 0.7)
    close(
        mha(x[:, perm], x[:, perm], x[:, perm], attn_mask=flat)[0],
        mha(x, x, x, attn_mask=flat)[0][:, perm],
    )


@settings(max_examples=25, deadline=None, derandomize=True)
@given(L=st.integers(1, 12), extra=st.integers(0, 6), shift=st.integers(0, 20))
def test_relative_biases_are_shift_invariant(L, extra, shift):
    # The bias between two positions depends only on their distance: shifting both changes nothing.
    S = L + extra
    torch.manual_seed(L)
    t5, clip = T5RelativePositionBias(2, 8, 16), ClippedRelativePositionBias(2, 3)
    for bias_fn in (t5, clip, lambda L_, S_: alibi_bias(3, L_, S_)):
        small, big = bias_fn(L, S), bias_fn(L + shift, S + shift)
        close(big[:, :, -L:, -S:], small)


# --------------------------------------------------------------------------- errors


def test_errors():
    with pytest.raises(
        ValueError, match="integer tensor of relative positions, received torch.float32"
    ):
        t5_relative_bucket(torch.zeros(3))
    with pytest.raises(ValueError, match="even n_buckets when bidirectional, received 7"):
        t5_relative_bucket(torch.zeros(3, dtype=torch.long), n_buckets=7)
    with pytest.raises(ValueError, match="n_buckets to be an int >= 2, received 1"):
        t5_relative_bucket(torch.zeros(3, dtype=torch.long), n_buckets=1, bidirectional=False)
    with pytest.raises(ValueError, match="max_distance to be an int >= 9, received 8"):
        t5_relative_bucket(torch.zeros(3, dtype=torch.long), n_buckets=32, max_distance=8)
    with pytest.raises(ValueError, match="max_distance to be an int >= 9, received 4"):
        T5RelativePositionBias(2, 32, 4)
    with pytest.raises(ValueError, match="n_heads to be a positive int, received 0"):
        T5RelativePositionBias(0)
    with pytest.raises(ValueError, match="max_relative_position to be a positive int, received 0"):
        ClippedRelativePositionBias(2, 0)
    with pytest.raises(ValueError, match="L to be a positive int, received 0"):
        ClippedRelativePositionBias(2, 2)(0)
    with pytest.raises(ValueError, match="S to be a positive int, received -1"):
        relative_positions(3, -1)
    with pytest.raises(ValueError, match="n_heads to be a positive int, received 0"):
        alibi_slopes(0)
    with pytest.raises(ValueError, match="floating dtype, received torch.int64"):
        alibi_bias(2, 3, dtype=torch.int64)

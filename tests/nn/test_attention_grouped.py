"""Tests for transformer_lite.nn.attention.MultiHeadAttention with n_kv_heads: grouped-query attention.

Oracles, all in float64:

* ``n_kv_heads == n_heads`` is multi-head attention: compared with the repeat-kv reference
  below (no copy needed) and, bit for bit, with the cross-attention call ``m(x, x, x)``
  (the path tested against ``nn.MultiheadAttention``), with no mask, a causal mask and a
  padding mask;
* grouped heads: compared with a reference that copies each key/value head
  ``n_heads // n_kv_heads`` times (``repeat_interleave``, as Hugging Face's
  ``repeat_kv``) and calls ``torch.nn.functional.scaled_dot_product_attention``
  with an explicit boolean mask, with and without RoPE;
* the key/value cache: feeding a sequence in pieces gives the outputs and the
  keys/values of feeding it whole;
* properties: a future token never changes an earlier output, forbidden weights are
  exactly zero, rows sum to one; gradcheck; every error path.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import F64, close
from transformer_lite import (
    MultiHeadAttention,
    RotaryEmbedding,
    apply_rotary,
    causal_mask,
    padding_mask,
)


def make_gqa(d_model, n_heads, n_kv_heads, rotary=False, bias=False, seed=0):
    torch.manual_seed(seed)
    rot = RotaryEmbedding(d_model // n_heads, base=100.0) if rotary else None
    return MultiHeadAttention(d_model, n_heads, n_kv_heads, bias=bias, rotary=rot).double().eval()


def reference(m, x, mask, offset=0):
    """Copy each key/value head G times, then torch's fused attention (bool mask: True = may attend)."""
    B, L, _ = x.shape
    H, H_kv, d = m.n_heads, m.n_kv_heads, m.d_head
    q = m.q_proj(x).view(B, L, H, d).transpose(1, 2)
    k = m.k_proj(x).view(B, L, H_kv, d).transpose(1, 2)
    v = m.v_proj(x).view(B, L, H_kv, d).transpose(1, 2)
    if m.rotary is not None:
        pos = torch.arange(offset, offset + L)
        q = apply_rotary(q, pos, base=m.rotary.base)
        k = apply_rotary(k, pos, base=m.rotary.base)
    k = k.repeat_interleave(H // H_kv, dim=1)  # (B, H, L, d): query head h reads key head h // G
    v = v.repeat_interleave(H // H_kv, dim=1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return m.out_proj(out.transpose(1, 2).reshape(B, L, H * d))


@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding"])
@pytest.mark.parametrize("bias", [True, False])
def test_equal_heads_is_multi_head_attention(mask_kind, bias):
    m = make_gqa(12, 3, 3, bias=bias, seed=1)
    assert m.n_kv_heads == m.n_heads == 3 and m.group_size == 1
    x = torch.randn(3, 5, 12, dtype=F64)
    mask = {
        "none": None,
        "causal": causal_mask(5),
        "padding": padding_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])),
    }[mask_kind]
    out, weights, (k, v) = m(x, attn_mask=mask)
    close(out, reference(m, x, mask))
    cross_out, cross_weights, _ = m(x, x, x, attn_mask=mask)
    assert torch.equal(out, cross_out) and torch.equal(weights, cross_weights)
    assert k.shape == v.shape == (3, 3, 5, 4)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (6, 3), (6, 1), (9, 3)])
def test_grouped_matches_repeat_interleave_reference(heads, rotary):
    n_heads, n_kv = heads
    m = make_gqa(2 * n_heads * 2, n_heads, n_kv, rotary=rotary)
    x = torch.randn(2, 7, m.d_model, dtype=F64)
    out, weights, _ = m(x, is_causal=True)
    close(out, reference(m, x, causal_mask(7)))
    assert weights.shape == (2, n_heads, 7, 7)
    close(weights.sum(-1), torch.ones(2, n_heads, 7, dtype=F64))
    assert torch.all(weights.masked_select(~causal_mask(7)) == 0), (
        "future keys must get exactly zero weight"
    )


@pytest.mark.parametrize(
    "shape", ["(L, S)", "(B, L, S)", "(B, 1, L, S)", "(B, H, L, S)", "(B, 1, 1, S)"]
)
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_grouped_masks_of_every_shape_match_reference(shape, kind, is_causal):
    # G = 3 query heads per key/value head, so every mask shape is laid out for the groups.
    m = make_gqa(12, 6, 2, rotary=True)
    B, L, H = 2, 4, 6
    g = torch.Generator().manual_seed(3)
    sizes = {"(L, S)": (L, L), "(B, L, S)": (B, L, L), "(B, 1, L, S)": (B, 1, L, L),
             "(B, H, L, S)": (B, H, L, L), "(B, 1, 1, S)": (B, 1, 1, L)}[shape]  # fmt: skip
    allowed = torch.rand(sizes, generator=g) > 0.3
    allowed[..., 0] = True  # every query may see key 0: no row is empty
    mask = allowed if kind == "bool" else torch.randn(sizes, generator=g, dtype=F64)
    # the reference's mask (B, H, L, S): a 3-D mask is (B, L, S); the causal mask joins it
    ref = mask[:, None] if shape == "(B, L, S)" else mask
    ref = torch.zeros(B, H, L, L, dtype=F64) + (
        ref if kind == "float" else torch.zeros(ref.shape, dtype=F64).masked_fill(~ref, -torch.inf)
    )
    if is_causal:
        ref = ref.masked_fill(~causal_mask(L), -torch.inf)
    x = torch.randn(B, L, 12, generator=g, dtype=F64)
    out, weights, _ = m(x, attn_mask=mask, is_causal=is_causal)
    close(out, reference(m, x, ref))
    assert torch.all(weights.masked_select(torch.isneginf(ref)) == 0)


def test_kv_heads_are_shared_by_consecutive_query_heads():
    # Only key/value head 1 differs between the two inputs' projections -> only query heads 2, 3 (of 4, G = 2) move.
    m = make_gqa(8, 4, 2)
    x = torch.randn(1, 3, 8, dtype=F64)
    _, w1, _ = m(x)
    with torch.no_grad():
        m.k_proj.weight[2:4] += 1.0  # rows of key head 1 (d_head = 2)
    _, w2, _ = m(x)
    assert torch.allclose(w1[:, :2], w2[:, :2]) and not torch.allclose(w1[:, 2:], w2[:, 2:])


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("pieces", [[6], [1, 1, 1, 1, 1, 1], [4, 1, 1], [2, 3, 1]])
def test_cache_in_pieces_equals_whole_sequence(pieces, rotary):
    m = make_gqa(12, 6, 2, rotary=rotary)
    x = torch.randn(2, 6, 12, dtype=F64)
    full, full_weights, (full_k, full_v) = m(x, is_causal=True)
    past, start, outs = None, 0, []
    for n in pieces:
        out, weights, past = m(x[:, start : start + n], cache=past, is_causal=True)
        S = start + n
        assert weights.shape == (2, 6, n, S)
        close(weights, full_weights[:, :, start:S, :S])  # bottom-right aligned causal mask
        outs.append(out)
        start = S
    close(torch.cat(outs, dim=1), full)
    close(past[0], full_k)
    close(past[1], full_v)
    assert full_k.shape == (2, 2, 6, 2), "the cache holds n_kv_heads heads, not n_heads"


def test_cache_step_with_explicit_mask_matches_reference():
    m = make_gqa(8, 4, 1, rotary=True)  # multi-query attention
    x = torch.randn(1, 5, 8, dtype=F64)
    _, _, past = m(x[:, :3], is_causal=True)
    out, _, _ = m(x[:, 3:], cache=past, attn_mask=causal_mask(2, 5))
    close(out, reference(m, x, causal_mask(5))[:, 3:])


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    n_kv=st.sampled_from([1, 2, 4]),
    L=st.integers(2, 8),
    t=st.integers(0, 7),
    seed=st.integers(0, 1000),
)
def test_future_tokens_do_not_change_earlier_outputs(n_kv, L, t, seed):
    t = t % (L - 1)  # change position t + 1 .. L - 1, compare positions 0 .. t
    m = make_gqa(16, 4, n_kv, rotary=seed % 2 == 0, seed=seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, L, 16, generator=g, dtype=F64)
    y = x.clone()
    y[:, t + 1 :] = torch.randn(1, L - t - 1, 16, generator=g, dtype=F64)
    out_x, _, _ = m(x, is_causal=True)
    out_y, _, _ = m(y, is_causal=True)
    close(out_x[:, : t + 1], out_y[:, : t + 1])
    assert not torch.allclose(out_x[:, t + 1 :], out_y[:, t + 1 :])


def test_dropout_only_in_training_and_gradcheck():
    torch.manual_seed(0)
    m = MultiHeadAttention(8, 4, 2, dropout=0.5, bias=False, rotary=RotaryEmbedding(2)).double()
    x = torch.randn(2, 3, 8, dtype=F64, requires_grad=True)
    m.eval()
    close(m(x)[0], m(x)[0])
    assert torch.autograd.gradcheck(lambda t: m(t, is_causal=True)[0], (x,))
    m.train()
    assert not torch.allclose(m(x)[0], m.eval()(x)[0])


def test_errors():
    with pytest.raises(ValueError, match="positive"):
        MultiHeadAttention(8, 0)
    with pytest.raises(ValueError, match="d_model must be divisible by n_heads"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="n_heads must be divisible by n_kv_heads"):
        MultiHeadAttention(12, 6, 4)
    with pytest.raises(ValueError, match="RotaryEmbedding of d_head=2"):
        MultiHeadAttention(8, 4, rotary=RotaryEmbedding(4))
    m = MultiHeadAttention(8, 4, 2, bias=False)
    with pytest.raises(ValueError, match=r"\(B, len, 8\), received \(2, 3, 6\)"):
        m(torch.randn(2, 3, 6))
    k = torch.randn(2, 2, 5, 2)
    with pytest.raises(
        ValueError, match=r"cached key of shape .* = \(1, 2, 5, 2\), received \(2, 2, 5, 2\)"
    ):
        m(torch.randn(1, 3, 8), cache=(k, k))
    with pytest.raises(ValueError, match=r"cached value .* received \(2, 2, 4, 2\)"):
        m(torch.randn(2, 3, 8), cache=(k, torch.randn(2, 2, 4, 2)))
    with pytest.raises(ValueError, match="cached key"):
        m(torch.randn(2, 3, 8), cache=(torch.randn(2, 5, 2), k))
    with pytest.raises(ValueError, match="cached key of dtype torch.float32"):
        m(torch.randn(2, 3, 8), cache=(k.double(), k.double()))
    with pytest.raises(ValueError, match=r"attn_mask of shape .* received \(2, 3, 3, 3\)"):
        m(torch.randn(2, 3, 8), attn_mask=torch.ones(2, 3, 3, 3, dtype=torch.bool))


def test_cache_and_rotary_are_for_self_attention_only():
    """A cache or rotary positions with a key/value (cross-attention) is refused: the cached
    positions and the rotation offsets are those of the queries' own sequence."""
    x, mem = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    m = MultiHeadAttention(8, 4, 2, bias=False)
    _, _, past = m(x)
    with pytest.raises(ValueError, match="for self-attention: expected key=None and value=None"):
        m(x, mem, mem, cache=past)
    rot = MultiHeadAttention(8, 4, 2, rotary=RotaryEmbedding(2))
    with pytest.raises(ValueError, match="for self-attention"):
        rot(x, mem, mem)
    with pytest.raises(ValueError, match=r"expected key of shape \(B, len, 8\), received KeyValue"):
        m(x, past)  # the old positional past_kv now means `key`: refused, not silent


def test_returns_attention_output_with_the_memory_cache_in_cross_attention():
    """The result's fields (output, weights, cache); in cross-attention the cache holds the
    projected memory: keys and values of its S positions, (B, n_kv_heads, S, d_head)."""
    torch.manual_seed(3)
    m = MultiHeadAttention(8, 4, 2, bias=False).double()
    x, mem = torch.randn(2, 3, 8, dtype=F64), torch.randn(2, 5, 8, dtype=F64)
    r = m(x, mem, mem)
    assert type(r).__name__ == "AttentionOutput" and r._fields == ("output", "weights", "cache")
    assert r.output.shape == (2, 3, 8) and r.weights.shape == (2, 4, 3, 5)
    keys = m.k_proj(mem).view(2, 5, 2, 2).transpose(1, 2)  # (B, H_kv, S, d_head) by hand
    values = m.v_proj(mem).view(2, 5, 2, 2).transpose(1, 2)
    close(r.cache.keys, keys)
    close(r.cache.values, values)

"""Tests for the grouped-query side of transformer_lite.chapters.analysis (transformed values, value norms).

Oracles:

* a 4-head module with 2 key/value heads and hand-set weights, worked out on paper:
  query heads 0 and 1 must read key/value head 0, heads 2 and 3 key/value head 1
  (``h // G``; the other natural guess, ``h % G``, gives different vectors);
* for random shapes (hypothesis), the identity ``y_i = sum_h sum_j a^h_ij f_h(x_j) + b^O``
  against the module's own output in float64: the module computes it by folding the
  query heads of a group into one matrix product, the tool by copying each value head
  G times, so the two share no code;
* autograd: ``y_i`` is linear in the value vectors, so the gradient of ``<u, y_i>`` with
  respect to the weight ``a^h_ij`` (the weights passed in as a leaf tensor) is
  ``<u, f_h(x_j)>``;
* the hooks of ``attention_value_norms`` read, in a grouped-query block with rotary
  positions, the weights the block returns and the vectors of its normalized input.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lite import MultiHeadAttention, RotaryEmbedding, TransformerBlock
from transformer_lite.chapters.analysis import (
    attention_value_norms,
    norm_shares,
    transformed_values,
)


def _hand_module():
    """d_model = 4, four query heads of width 1, two key/value heads (G = 2), no biases.

    Value projection: v = (x_0, x_1), so kv head 0 holds x_0 and kv head 1 holds x_1.
    Output projection W = diag(1, 2, 3, 4): head h owns column h, (h + 1) e_h.
    So for x = (1, 10, 0, 0): f_0 = 1 * e_0, f_1 = 1 * 2 e_1, f_2 = 10 * 3 e_2, f_3 = 10 * 4 e_3.
    """
    m = MultiHeadAttention(4, 4, n_kv_heads=2, bias=False).double()
    with torch.no_grad():
        m.v_proj.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]))
        m.out_proj.weight.copy_(torch.diag(torch.tensor([1.0, 2.0, 3.0, 4.0])))
    return m


def test_grouped_transformed_values_by_hand():
    x = torch.tensor([[[1.0, 10.0, 0.0, 0.0]]], dtype=torch.float64)  # (B=1, S=1, D=4)
    with torch.no_grad():
        f = transformed_values(_hand_module(), x)
    assert f.shape == (1, 4, 1, 4)  # (B, H, S, D)
    expected = torch.tensor(
        [[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 30.0, 0.0], [0.0, 0.0, 0.0, 40.0]],
        dtype=torch.float64,
    )
    torch.testing.assert_close(f[0, :, 0], expected)
    torch.testing.assert_close(
        f.norm(dim=-1)[0, :, 0], torch.tensor([1.0, 2.0, 30.0, 40.0], dtype=torch.float64)
    )


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 2),
    L=st.integers(1, 5),
    n_kv_heads=st.sampled_from([1, 2, 3]),
    group_size=st.sampled_from([1, 2, 3]),
    d_head=st.sampled_from([2, 4]),
    bias=st.booleans(),
    rotary=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_grouped_transformed_values_rebuild_the_attention_output(
    B, L, n_kv_heads, group_size, d_head, bias, rotary, seed
):
    torch.manual_seed(seed)
    n_heads = n_kv_heads * group_size
    rope = RotaryEmbedding(d_head) if rotary else None
    m = MultiHeadAttention(n_heads * d_head, n_heads, n_kv_heads, bias=bias, rotary=rope).double()
    x = torch.randn(B, L, n_heads * d_head, dtype=torch.float64)
    with torch.no_grad():
        out, w, _ = m(x, is_causal=True)  # (B, L, D), (B, H, L, L)
        f = transformed_values(m, x)  # (B, H, L, D)
    rebuilt = torch.einsum("bhls,bhsd->bld", w, f)
    if bias:
        rebuilt = rebuilt + m.out_proj.bias
    torch.testing.assert_close(rebuilt, out)


def test_grouped_transformed_values_are_the_gradient_of_the_output_by_each_weight():
    torch.manual_seed(0)
    m = MultiHeadAttention(12, 6, n_kv_heads=2, bias=False).double()
    x = torch.randn(1, 5, 12, dtype=torch.float64)
    u = torch.randn(12, dtype=torch.float64)
    with torch.no_grad():
        _, w, _ = m(x, is_causal=True)
    a = w.clone().requires_grad_(True)  # (1, H, L, S), a leaf
    # the output written from the module's own pieces: y = out_proj(merge_h(sum_j a_hij v_kv(h)j))
    v = m.v_proj(x).view(1, 5, 2, 2).transpose(1, 2)  # (1, H_kv, S, d_head)
    per_head = [a[:, h] @ v[:, h // 3] for h in range(6)]  # each (1, L, d_head)
    y = m.out_proj(torch.cat(per_head, dim=-1))  # (1, L, D)
    (y[0, 4] @ u).backward()
    f = transformed_values(m, x).detach()  # (1, H, S, D)
    # d<u, y_4>/d a_h,4,j = <u, f_h(x_j)>; other queries' weights get no gradient
    torch.testing.assert_close(a.grad[0, :, 4], f[0] @ u)
    assert torch.all(a.grad[0, :, :4] == 0)


def test_grouped_transformed_values_reject_a_wrong_width():
    with pytest.raises(
        ValueError, match=r"expected value of shape \(B, S, 4\), received \(1, 3, 6\)"
    ):
        transformed_values(_hand_module(), torch.ones(1, 3, 6, dtype=torch.float64))


def test_attention_value_norms_read_a_grouped_query_block():
    torch.manual_seed(0)
    block = TransformerBlock(8, 4, 16, norm_first=True, n_kv_heads=2, rotary=RotaryEmbedding(2))
    block = block.double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    with torch.no_grad():
        weights, norms = attention_value_norms(block, x, is_causal=True)
        _, expected_w, _ = block(x, is_causal=True)
        expected_norms = transformed_values(block.self_attn, block.norm1(x)).norm(dim=-1)
    assert len(weights) == len(norms) == 1
    torch.testing.assert_close(weights[0], expected_w)
    torch.testing.assert_close(norms[0], expected_norms)
    # the shares of one query's row sum to 1
    torch.testing.assert_close(
        norm_shares(weights[0], norms[0]).sum(-1), torch.ones(2, 4, 5, dtype=torch.float64)
    )
    assert not block.self_attn._forward_hooks  # hooks removed


def test_attention_value_norms_refuse_cached_keys_and_values():
    torch.manual_seed(0)
    m = MultiHeadAttention(4, 2, n_kv_heads=1, bias=False).double()
    x = torch.randn(1, 3, 4, dtype=torch.float64)
    with torch.no_grad():
        _, _, past = m(x, is_causal=True)
    with pytest.raises(ValueError, match="without a cache"):
        attention_value_norms(m, x[:, :1], cache=past)
    assert not m._forward_hooks  # hooks removed even so

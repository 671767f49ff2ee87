"""Tests for transformer_lite.nn.masks.

Oracle: literal tensors written out by hand (True = may attend, the package
convention), and, for the causal mask, the definition "query i sits at
absolute position S - L + i and may see keys 0 .. S - L + i" evaluated with
plain Python loops.
"""

import pytest
import torch

from transformer_lite import attention_bias, bool_to_additive_mask, causal_mask, padding_mask

T, F_ = True, False


def test_causal_mask_square_is_lower_triangular():
    expected = torch.tensor([[T, F_, F_], [T, T, F_], [T, T, T]])
    got = causal_mask(3)
    assert got.dtype == torch.bool
    assert torch.equal(got, expected)


def test_causal_mask_more_keys_than_queries_aligns_bottom_right():
    # 2 queries at absolute positions 2 and 3 of a 4-token sequence (e.g. a decode step with a cache).
    expected = torch.tensor([[T, T, T, F_], [T, T, T, T]])
    assert torch.equal(causal_mask(2, 4), expected), (
        "causal_mask(L, S) with S > L must align bottom-right (query i at position S - L + i); "
        "top-left alignment, as torch's is_causal=True, would give [[T, F, F, F], [T, T, F, F]]"
    )


def test_causal_mask_fewer_keys_than_queries_first_rows_all_false():
    # 4 queries at absolute positions -2, -1, 0, 1 against keys 0, 1.
    expected = torch.tensor([[F_, F_], [F_, F_], [T, F_], [T, T]])
    assert torch.equal(causal_mask(4, 2), expected)


@pytest.mark.parametrize("L,S", [(1, 1), (1, 5), (5, 1), (3, 7), (7, 3), (6, 6)])
def test_causal_mask_matches_definition(L, S):
    expected = torch.tensor(
        [[j <= S - L + i for j in range(S)] for i in range(L)], dtype=torch.bool
    )
    assert torch.equal(causal_mask(L, S), expected)


def test_causal_mask_square_equals_torch_top_left_when_l_equals_s():
    # torch's own helper returns a float mask with -inf above the diagonal (i.e. "blocked").
    torch_blocked = torch.nn.Transformer.generate_square_subsequent_mask(5) == float("-inf")
    assert torch.equal(causal_mask(5), ~torch_blocked)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3", None])
def test_causal_mask_rejects_non_positive_or_non_int_length(bad):
    with pytest.raises(ValueError, match=r"causal_mask: expected L to be a positive int, received"):
        causal_mask(bad, 3)


@pytest.mark.parametrize("bad,shown", [(0, "0"), (2.5, "2.5")])
def test_causal_mask_error_names_the_received_value(bad, shown):
    with pytest.raises(ValueError, match=rf"expected L to be a positive int, received {shown}"):
        causal_mask(bad)
    with pytest.raises(ValueError, match=rf"expected S to be a positive int, received {shown}"):
        causal_mask(3, bad)


def test_padding_mask_bool_and_int_inputs():
    valid = torch.tensor([[1, 1, 0], [1, 0, 0]])
    expected = torch.tensor([[[[T, T, F_]]], [[[T, F_, F_]]]])
    for v in (valid, valid.bool()):
        got = padding_mask(v)
        assert got.dtype == torch.bool
        assert got.shape == (2, 1, 1, 3)
        assert torch.equal(got, expected)


def test_padding_mask_broadcasts_per_example_over_heads_and_queries():
    valid = torch.tensor([[1, 1, 0], [1, 0, 0]])
    scores_shape = (2, 4, 5, 3)  # (B, H, L, S)
    full = padding_mask(valid).expand(scores_shape)
    for b in range(2):
        for h in range(4):
            for i in range(5):
                assert torch.equal(full[b, h, i], valid[b].bool())


def test_padding_mask_rejects_3d_input():
    with pytest.raises(
        ValueError,
        match=r"expected valid of shape \(B, S\), a bool tensor or integers 0/1, received shape \(2, 3, 4\)",
    ):
        padding_mask(torch.ones(2, 3, 4, dtype=torch.bool))


def test_padding_mask_rejects_1d_input():
    with pytest.raises(ValueError, match=r"received shape \(3,\)"):
        padding_mask(torch.ones(3, dtype=torch.bool))


@pytest.mark.parametrize(
    "valid,dtype_name",
    [(torch.tensor([[1.0, 0.0]]), "torch.float32"), (torch.tensor([[1, 2]]), "torch.int64")],
)
def test_padding_mask_rejects_non_0_1_values(valid, dtype_name):
    with pytest.raises(
        ValueError,
        match=rf"a bool tensor or integers 0/1, received shape \(1, 2\) dtype {dtype_name}",
    ):
        padding_mask(valid)


def test_bool_to_additive_mask_literal():
    mask = torch.tensor([[T, F_], [F_, T]])
    inf = float("-inf")
    got = bool_to_additive_mask(mask, dtype=torch.float64)
    assert got.dtype == torch.float64
    assert torch.equal(got, torch.tensor([[0.0, inf], [inf, 0.0]], dtype=torch.float64))


def test_bool_to_additive_mask_rejects_float_mask():
    with pytest.raises(
        ValueError,
        match=r"expected a bool mask and a floating dtype, received a mask of dtype torch.float32",
    ):
        bool_to_additive_mask(torch.zeros(2, 2))


def test_bool_to_additive_mask_rejects_integer_dtype():
    with pytest.raises(
        ValueError,
        match=r"expected a bool mask and a floating dtype, received a mask of dtype torch.bool and dtype torch.int64",
    ):
        bool_to_additive_mask(torch.ones(2, 2, dtype=torch.bool), dtype=torch.int64)


# --------------------------------------------------------------------------- attention_bias


def _additive_by_hand(allowed):
    """0 where allowed, -inf elsewhere, element by element (no mask helper of the package)."""
    return torch.tensor(
        [0.0 if a else float("-inf") for a in allowed.flatten().tolist()], dtype=torch.float64
    ).reshape(allowed.shape)


def test_attention_bias_nothing_masked_is_none():
    assert attention_bias(None, False, 4, 4, dtype=torch.float32) is None
    # a single query is the last position: it sees every key, so causal masks nothing
    assert attention_bias(None, True, 1, 6, dtype=torch.float32) is None


@pytest.mark.parametrize("L, S", [(3, 3), (2, 5), (4, 2)])
def test_attention_bias_causal_is_bottom_right_by_hand(L, S):
    # query i sits at absolute position S - L + i and may see keys j <= S - L + i
    allowed = torch.tensor([[j <= S - L + i for j in range(S)] for i in range(L)])
    got = attention_bias(None, True, L, S, dtype=torch.float64)
    assert got.dtype == torch.float64 and torch.equal(got, _additive_by_hand(allowed))


def test_attention_bias_bool_and_float_masks_combined_with_causal():
    gen = torch.Generator().manual_seed(0)
    mask = torch.rand(2, 3, 4, generator=gen) > 0.3  # (B, L, S), one per sequence
    causal = torch.tensor([[j <= 1 + i for j in range(4)] for i in range(3)])
    got = attention_bias(mask, True, 3, 4, dtype=torch.float64, heads=True)
    assert got.shape == (2, 1, 3, 4)  # the head axis added: the same mask for every head
    assert torch.equal(got[:, 0], _additive_by_hand(mask & causal))
    plain = attention_bias(mask, False, 3, 4, dtype=torch.float64)  # no head axis: as given
    assert plain.shape == (2, 3, 4) and torch.equal(plain, _additive_by_hand(mask))
    flt = torch.randn(1, 2, 3, 4, generator=gen)  # float: added as given, cast to the dtype
    got = attention_bias(flt, True, 3, 4, dtype=torch.float64, heads=True)
    assert torch.equal(got, flt.double() + _additive_by_hand(causal))

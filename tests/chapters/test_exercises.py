"""Tests for transformer_lite.chapters.exercises: the checkers must accept right answers and name wrong ones.

Oracle: for every checker, small functions written the way a learner would
write them, independently of the checker's own variant helpers:

* a correct reference implementation, written from the paper's formula, which
  must pass and print "all checks passed";
* one deliberately wrong implementation per classic mistake, which must be
  rejected with an AssertionError whose message names *that* mistake (we match
  a distinctive substring of the expected message);
* a stub raising NotImplementedError, which must print "not implemented yet"
  and return None, so that a student notebook still runs top to bottom.

Where a natural wrong implementation is not named correctly, the test is
marked ``xfail(strict=True)`` with the message the checker gives instead: the
gap stays documented, and the mark fails loudly once the checker is fixed.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import transformer_lite
from tests.conftest import CheckerCases, assert_not_implemented
from transformer_lite.chapters.exercises import (
    check_cached_causal_attention,
    check_causal_mask,
    check_layer_norm,
    check_scaled_dot_product_attention,
    check_sinusoidal_positional_encoding,
    check_split_merge_heads,
)

CASES = CheckerCases()


def _not_implemented(*args, **kwargs):
    raise NotImplementedError


def _assert_passes(check, capsys, *fns):
    assert check(*fns) is None
    assert "all checks passed" in capsys.readouterr().out


# =========================================================================== scaled dot-product attention
# Each learner function: (query (..., L, d_k), key (..., S, d_k), value (..., S, d_v), attn_mask bool (L, S)
# with True = may attend) -> (output (..., L, d_v), weights (..., L, S)).


@CASES.passes(check_scaled_dot_product_attention)
def attention_reference(query, key, value, attn_mask=None):
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., L, S)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:  # a float mask is added to the scores
        scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    # A query with no allowed key: softmax gives 0/0 = NaN there; define its weights as zeros.
    allowed = torch.isfinite(scores).any(dim=-1, keepdim=True)
    weights = torch.where(allowed, weights, torch.zeros_like(weights))
    return weights @ value, weights


def _bool_mask_only(query, key, value, attn_mask=None):
    """Right for a bool mask; a float mask goes through ``~``, which torch refuses for floats."""
    scores = _scores(query, key)
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ value, weights


def _scores(query, key, divisor=None):
    """Q K^T / divisor, the first line of each learner attention below (divisor sqrt(d_k) unless given)."""
    return (
        query @ key.transpose(-2, -1) / (math.sqrt(query.shape[-1]) if divisor is None else divisor)
    )


def _attend(scores, value, blocked=None, fill=float("-inf"), dim=-1):
    """Fill the ``blocked`` scores with ``fill``, softmax over ``dim``, weigh the values: (output, weights)."""
    if blocked is not None:
        scores = scores.masked_fill(blocked, fill)
    weights = torch.softmax(scores, dim=dim)
    return weights @ value, weights


def _forbidden(attn_mask):
    # True = may attend, so the forbidden keys are ~mask
    return None if attn_mask is None else ~attn_mask


@CASES.named(
    check_scaled_dot_product_attention,
    match="row 2 is all False .*Likely mistake: a fully masked row gives NaN: the softmax of a row of all -inf is 0/0; return zeros for such rows",
)
def attention_nan_on_fully_masked_row(query, key, value, attn_mask=None):
    # Right wherever a query keeps at least one key; a query with none gets softmax(all -inf) = NaN.
    return _attend(_scores(query, key), value, _forbidden(attn_mask))


@CASES.named(
    check_scaled_dot_product_attention,
    match=r"must get zero weights and a zero output, received weights summing to 1\. Likely mistake: .*large finite number \(e\.g\. -1e9\) instead of -inf",
)
def attention_minus_1e9(query, key, value, attn_mask=None):
    # A large finite number instead of -inf: exact in float64 when a row keeps a key, uniform when it keeps none.
    return _attend(_scores(query, key), value, _forbidden(attn_mask), fill=-1e9)


@CASES.named(check_scaled_dot_product_attention, match="wrong output .*must get a zero output")
def attention_zero_weights_but_output_left_over(query, key, value, attn_mask=None):
    # Zeroes the weights of a fully masked row but returns the output of the unmasked row there.
    output, weights = attention_reference(query, key, value, attn_mask)
    if attn_mask is not None:
        empty = ~attn_mask.any(dim=-1)
        output[..., empty, :] = attention_reference(query, key, value)[0][..., empty, :]
    return output, weights


@CASES.named(check_scaled_dot_product_attention, match="Likely mistake: no scaling")
def attention_no_scaling(query, key, value, attn_mask=None):
    return _attend(_scores(query, key, divisor=1.0), value, _forbidden(attn_mask))


@CASES.named(
    check_scaled_dot_product_attention,
    match=r"Likely mistake: scaled by d_k instead of sqrt\(d_k\)",
)
def attention_scaled_by_d_k(query, key, value, attn_mask=None):
    return _attend(_scores(query, key, divisor=query.shape[-1]), value, _forbidden(attn_mask))


@CASES.named(
    check_scaled_dot_product_attention, match="Likely mistake: softmax over the wrong axis"
)
def attention_softmax_over_queries(query, key, value, attn_mask=None):
    return _attend(_scores(query, key), value, _forbidden(attn_mask), dim=-2)


@CASES.named(check_scaled_dot_product_attention, match="Likely mistake: inverted mask polarity")
def attention_inverted_mask(query, key, value, attn_mask=None):
    # Uses the nn.MultiheadAttention convention (True = blocked) by mistake.
    return _attend(_scores(query, key), value, blocked=attn_mask)


@CASES.named(check_scaled_dot_product_attention, match="Likely mistake: inverted mask polarity")
def attention_inverted_mask_nan_safe(query, key, value, attn_mask=None):
    # Same mistake, but fully blocked rows are turned from NaN into zeros, as the package reference does.
    _, weights = _attend(_scores(query, key), value, blocked=attn_mask)
    weights = torch.nan_to_num(weights, nan=0.0)
    return weights @ value, weights


@CASES.named(check_scaled_dot_product_attention, match="Likely mistake: a future-position leak")
def attention_mask_ignored(query, key, value, attn_mask=None):
    return _attend(_scores(query, key), value)


@CASES.named(
    check_scaled_dot_product_attention, match="Likely mistake: mask applied after the softmax"
)
def attention_mask_after_softmax(query, key, value, attn_mask=None):
    _, weights = _attend(_scores(query, key), value)
    if attn_mask is not None:
        weights = weights.masked_fill(~attn_mask, 0.0)
    return weights @ value, weights


@CASES.named(
    check_scaled_dot_product_attention,
    match="Likely mistake: multiplied the values by the transposed weights",
)
def attention_output_from_transposed_weights(query, key, value, attn_mask=None):
    _, weights = attention_reference(query, key, value, attn_mask)
    return weights.transpose(-2, -1) @ value, weights


@CASES.named(check_scaled_dot_product_attention, match="Likely mistake: .*transpos")
def attention_returns_transposed_weights(query, key, value, attn_mask=None):
    output, weights = attention_reference(query, key, value, attn_mask)
    return output, weights.transpose(-2, -1)


@CASES.named(
    check_scaled_dot_product_attention,
    match=r"expected a tuple \(output, weights\), received Tensor",
)
def attention_returns_only_output(query, key, value, attn_mask=None):
    return attention_reference(query, key, value, attn_mask)[0]


@CASES.named(
    check_scaled_dot_product_attention,
    match=r"float mask .*raised TypeError.*Likely mistake: a float attn_mask is not handled: add it to the scores",
)
def attention_bool_mask_only(query, key, value, attn_mask=None):
    return _bool_mask_only(query, key, value, attn_mask)


@CASES.named(check_scaled_dot_product_attention, match="Likely mistake: float mask ignored")
def attention_float_mask_ignored(query, key, value, attn_mask=None):
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = None
    return _bool_mask_only(query, key, value, attn_mask)


@CASES.named(check_scaled_dot_product_attention, match="Likely mistake: float mask subtracted")
def attention_float_mask_subtracted(query, key, value, attn_mask=None):
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        weights = torch.softmax(_scores(query, key) - attn_mask, dim=-1).nan_to_num(0.0)
        return weights @ value, weights
    return _bool_mask_only(query, key, value, attn_mask)


def _masks_the_attention_checker_tries():
    """The attn_mask of every call check_scaled_dot_product_attention makes (None where it passes none)."""
    masks = []

    def recording(query, key, value, attn_mask=None):
        masks.append(attn_mask)
        return attention_reference(query, key, value, attn_mask)

    check_scaled_dot_product_attention(recording)
    return masks


def test_attention_checker_tries_a_float_mask():
    calls = _masks_the_attention_checker_tries()
    floats = [m for m in calls if m is not None and m.is_floating_point()]
    assert floats and torch.isneginf(floats[0]).any() and torch.isfinite(floats[0]).any()


def test_attention_package_function_passes(capsys):
    _assert_passes(
        check_scaled_dot_product_attention,
        capsys,
        lambda q, k, v, attn_mask=None: transformer_lite.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask
        ),
    )


def test_attention_checker_tries_a_fully_masked_row():
    # The NaN-returning implementation is right on every other case, so it fails only because of that row.
    calls = _masks_the_attention_checker_tries()
    assert any(m is not None and (~m.any(dim=-1)).any() for m in calls)


def test_attention_unrelated_values_report_largest_difference():
    def unrelated(query, key, value, attn_mask=None):
        L, S = query.shape[-2], key.shape[-2]
        # rows sum to 1/2
        weights = torch.full((*query.shape[:-2], L, S), 1.0 / S, dtype=query.dtype) * 0.5
        return weights @ value, weights

    with pytest.raises(AssertionError, match="largest difference"):
        check_scaled_dot_product_attention(unrelated)


def test_attention_wrong_shape_reports_expected_shape():
    def output_without_last_dim(query, key, value, attn_mask=None):
        output, weights = attention_reference(query, key, value, attn_mask)
        return output.sum(-1), weights

    with pytest.raises(AssertionError, match=r"output for .*expected shape"):
        check_scaled_dot_product_attention(output_without_last_dim)


# =========================================================================== causal mask
# fn(L) -> bool (L, L), True = may attend: query i (row) sees keys j <= i (columns).


@CASES.passes(check_causal_mask)
def causal_mask_reference(L):
    return torch.arange(L)[:, None] >= torch.arange(L)[None, :]


@CASES.named(check_causal_mask, match="Likely mistake: diagonal shifted down")
def causal_mask_without_diagonal(L):
    return torch.tril(torch.ones(L, L, dtype=torch.bool), diagonal=-1)


@CASES.named(check_causal_mask, match="Likely mistake: diagonal shifted up")
def causal_mask_one_step_ahead(L):
    return torch.tril(torch.ones(L, L, dtype=torch.bool), diagonal=1)


@CASES.named(check_causal_mask, match="Likely mistake: transposed")
def causal_mask_transposed(L):
    return torch.triu(torch.ones(L, L, dtype=torch.bool))


@CASES.named(check_causal_mask, match="Likely mistake: inverted polarity")
def causal_mask_inverted(L):
    return torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)  # True = blocked


@CASES.named(check_causal_mask, match="expected dtype torch.bool")
def causal_mask_float(L):
    return torch.tril(torch.ones(L, L))


@CASES.named(check_causal_mask, match="Likely mistake: everything allowed")
def causal_mask_all_true(L):
    return torch.ones(L, L, dtype=torch.bool)


def test_causal_mask_unknown_mistake_points_at_an_entry():
    def first_key_blocked(L):
        mask = causal_mask_reference(L)
        mask[:, 0] = False
        return mask

    with pytest.raises(AssertionError, match=r"entry \(query 0, key 0\) should be True"):
        check_causal_mask(first_key_blocked)


def test_causal_mask_wrong_shape_reports_expected_shape():
    with pytest.raises(AssertionError, match=r"expected shape \(5, 5\), received \(5, 6\)"):
        check_causal_mask(lambda L: torch.ones(L, L + 1, dtype=torch.bool).tril())


# =========================================================================== layer norm
# fn(x (..., D), weight (D,), bias (D,), eps) -> (..., D), normalized over the last dimension (features).


@CASES.passes(check_layer_norm)
def layer_norm_reference(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased: divide by D
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def _normalize(x, eps, dim=-1, unbiased=False):
    """(x - mean) / sqrt(var + eps) over ``dim``: the shared core of the learner layer norms below."""
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    return (x - mean) / torch.sqrt(var + eps)


@CASES.named(check_layer_norm, match="Likely mistake: unbiased variance")
def layer_norm_unbiased_variance(x, weight, bias, eps=1e-5):
    return _normalize(x, eps, unbiased=True) * weight + bias  # torch's default var divides by D - 1


@CASES.named(check_layer_norm, match="Likely mistake: epsilon outside the square root")
def layer_norm_eps_outside_sqrt(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (std + eps) * weight + bias


@CASES.named(check_layer_norm, match="Likely mistake: normalizing over the wrong axis")
def layer_norm_over_positions(x, weight, bias, eps=1e-5):
    return _normalize(x, eps, dim=-2) * weight + bias


@CASES.named(check_layer_norm, match="Likely mistake: normalizing over the wrong axis")
def layer_norm_over_batch(x, weight, bias, eps=1e-5):
    return _normalize(x, eps, dim=0) * weight + bias


@CASES.named(check_layer_norm, match="Likely mistake: forgot the learned scale and shift")
def layer_norm_without_affine(x, weight, bias, eps=1e-5):
    return _normalize(x, eps)


@CASES.named(check_layer_norm, match="Likely mistake: eps ignored")
def layer_norm_hard_coded_eps(x, weight, bias, eps=1e-5):
    return _normalize(x, 1e-5) * weight + bias


@CASES.named(check_layer_norm, match="Likely mistake: .*eps")
def layer_norm_no_eps_at_all(x, weight, bias, eps=1e-5):
    return _normalize(x, 0.0) * weight + bias


def test_layer_norm_torch_functional_passes(capsys):
    _assert_passes(
        check_layer_norm,
        capsys,
        lambda x, weight, bias, eps=1e-5: F.layer_norm(x, x.shape[-1:], weight, bias, eps),
    )


def test_layer_norm_unrelated_values_report_largest_difference():
    with pytest.raises(AssertionError, match="largest difference"):
        check_layer_norm(lambda x, weight, bias, eps=1e-5: x * 2.0 + 1.0)


def test_layer_norm_wrong_shape_reports_expected_shape():
    with pytest.raises(AssertionError, match=r"expected shape \(2, 3, 5\), received \(2, 3\)"):
        check_layer_norm(lambda x, weight, bias, eps=1e-5: x.mean(dim=-1))


# =========================================================================== sinusoidal positional encoding
# fn(seq_len, d_model) -> (seq_len, d_model):
# PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).


@CASES.passes(check_sinusoidal_positional_encoding)
def positional_encoding_reference(seq_len, d_model):
    """The formula entry by entry, with Python floats; an odd d_model ends on a sine."""
    pe = torch.zeros(seq_len, d_model, dtype=torch.float64)
    for pos in range(seq_len):
        for j in range(d_model):
            two_i = j - j % 2  # features 2i and 2i+1 share the frequency of pair i
            angle = pos / 10000 ** (two_i / d_model)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


@CASES.passes(check_sinusoidal_positional_encoding)
def positional_encoding_float32(seq_len, d_model):
    """The vectorised form of the annotated transformer, in the default float32."""
    position = torch.arange(seq_len).unsqueeze(1)  # (L, 1)
    # (ceil(D/2),)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def _angles(seq_len, d_model, base=10000.0, start=0):
    pos = torch.arange(start, start + seq_len, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    return pos / base ** (two_i / d_model)  # (L, ceil(D/2))


def _interleaved(angles, d_model, even=torch.sin, odd=torch.cos):
    """Features 2i from ``even(angles)``, features 2i+1 from ``odd(angles)``: float64 (L, d_model)."""
    pe = torch.zeros(angles.shape[0], d_model, dtype=torch.float64)
    pe[:, 0::2] = even(angles)
    pe[:, 1::2] = odd(angles[:, : d_model // 2])
    return pe


@CASES.named(
    check_sinusoidal_positional_encoding,
    match="Likely mistake: sin and cos halves concatenated instead of interleaved",
)
def positional_encoding_concatenated(seq_len, d_model):
    angles = _angles(seq_len, d_model)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)[:, :d_model]


@CASES.named(check_sinusoidal_positional_encoding, match="Likely mistake: wrong base")
def positional_encoding_base_1000(seq_len, d_model):
    return _interleaved(_angles(seq_len, d_model, base=1000.0), d_model)


@CASES.named(check_sinusoidal_positional_encoding, match="Likely mistake: off-by-one position")
def positional_encoding_positions_from_1(seq_len, d_model):
    return _interleaved(_angles(seq_len, d_model, start=1), d_model)


@CASES.named(check_sinusoidal_positional_encoding, match="Likely mistake: sin and cos swapped")
def positional_encoding_sin_cos_swapped(seq_len, d_model):
    return _interleaved(_angles(seq_len, d_model), d_model, even=torch.cos, odd=torch.sin)


@CASES.named(
    check_sinusoidal_positional_encoding, match="Likely mistake: wrong exponent: use 2i/d_model"
)
def positional_encoding_exponent_i(seq_len, d_model):
    pos = torch.arange(seq_len, dtype=torch.float64)[:, None]
    i = torch.arange((d_model + 1) // 2, dtype=torch.float64)  # pair index i, used where 2i belongs
    return _interleaved(pos / 10000 ** (i / d_model), d_model)


def test_positional_encoding_reference_handles_odd_d_model():
    # Hand check of the reference itself: d_model=3 has one full pair and a trailing sine.
    pe = positional_encoding_reference(2, 3)
    expected = torch.tensor(
        [[0.0, 1.0, 0.0], [math.sin(1.0), math.cos(1.0), math.sin(1 / 10000 ** (2 / 3))]],
        dtype=torch.float64,
    )
    torch.testing.assert_close(pe, expected)


def test_positional_encoding_unrelated_values_report_largest_difference():
    with pytest.raises(AssertionError, match="largest difference"):
        check_sinusoidal_positional_encoding(lambda seq_len, d_model: torch.zeros(seq_len, d_model))


def test_positional_encoding_wrong_shape_reports_expected_shape():
    with pytest.raises(AssertionError, match=r"expected shape \(6, 8\), received \(8, 6\)"):
        check_sinusoidal_positional_encoding(
            lambda seq_len, d_model: positional_encoding_reference(seq_len, d_model).T
        )


# =========================================================================== split / merge heads
# split_fn(x (B, L, D), n_heads) -> (B, H, L, D/H); merge_fn((B, H, L, D/H)) -> (B, L, D).


def split_heads_reference(x, n_heads):
    B, L, D = x.shape
    # (B, L, H, d_head) -> (B, H, L, d_head)
    return x.view(B, L, n_heads, D // n_heads).transpose(1, 2)


def merge_heads_reference(heads):
    B, H, L, d_head = heads.shape
    # (B, H, L, d_head) -> (B, L, H, d_head) -> (B, L, D)
    return heads.transpose(1, 2).reshape(B, L, H * d_head)


def split_heads_straight_reshape(x, n_heads):
    B, L, D = x.shape
    return x.reshape(B, n_heads, L, D // n_heads)


def merge_heads_without_transpose(heads):
    B, H, L, d_head = heads.shape
    return heads.reshape(B, L, H * d_head)


def merge_heads_transpose_then_view(heads):
    # Passes on the checker's input, but crashes on the contiguous (B, H, L, d_head) output of weights @ value.
    B, H, L, d_head = heads.shape
    return heads.transpose(1, 2).view(B, L, H * d_head)


def test_split_merge_reference_passes(capsys):
    _assert_passes(check_split_merge_heads, capsys, split_heads_reference, merge_heads_reference)


def test_split_straight_reshape_is_named():
    with pytest.raises(
        AssertionError, match=r"split_fn is wrong .*reshaped straight to \(B, H, L, d_head\)"
    ):
        check_split_merge_heads(split_heads_straight_reshape, merge_heads_reference)


def test_merge_without_transpose_is_named():
    with pytest.raises(AssertionError, match=r"merge_fn is wrong .*transpose\(1, 2\) back first"):
        check_split_merge_heads(split_heads_reference, merge_heads_without_transpose)


def test_merge_that_only_works_on_non_contiguous_input_is_rejected():
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        # contiguous, as weights @ value is
        merge_heads_transpose_then_view(torch.randn(2, 3, 5, 4))
    with pytest.raises(AssertionError, match="raised RuntimeError.*use reshape"):
        check_split_merge_heads(split_heads_reference, merge_heads_transpose_then_view)


def test_split_unrelated_values_report_largest_difference():
    with pytest.raises(AssertionError, match="largest difference"):
        check_split_merge_heads(
            lambda x, n_heads: torch.zeros_like(split_heads_reference(x, n_heads)),
            merge_heads_reference,
        )


def test_merge_unrelated_values_report_largest_difference():
    with pytest.raises(AssertionError, match="largest difference"):
        check_split_merge_heads(split_heads_reference, lambda heads: -merge_heads_reference(heads))


def test_split_wrong_shape_reports_expected_shape():
    def split_without_transpose(x, n_heads):
        B, L, D = x.shape
        return x.view(B, L, n_heads, D // n_heads)

    with pytest.raises(
        AssertionError,
        match=r"split_fn output .*expected shape \(2, 3, 5, 4\), received \(2, 5, 3, 4\)",
    ):
        check_split_merge_heads(split_without_transpose, merge_heads_reference)


@pytest.mark.parametrize(
    "split_fn, merge_fn",
    [(_not_implemented, merge_heads_reference), (split_heads_reference, _not_implemented)],
    ids=["split-stub", "merge-stub"],
)
def test_split_merge_not_implemented_prints_and_returns_none(split_fn, merge_fn, capsys):
    assert check_split_merge_heads(split_fn, merge_fn) is None
    assert "not implemented yet" in capsys.readouterr().out


# =========================================================================== cached causal attention
# fn(query (..., L, d), key, value (..., S, d)) -> output (..., L, d); the queries are the LAST L positions,
# so query i (absolute position S - L + i) sees keys 0 .. S - L + i (bottom-right alignment).


@CASES.passes(check_cached_causal_attention)
def cached_attention_reference(query, key, value):
    L, S = query.shape[-2], key.shape[-2]
    query_position = S - L + torch.arange(L)  # (L,) absolute positions of the new queries
    allowed = torch.arange(S)[None, :] <= query_position[:, None]  # (L, S), True = may attend
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ value


@CASES.named(check_cached_causal_attention, match="Likely mistake: top-left alignment")
def cached_attention_top_left(query, key, value):
    return F.scaled_dot_product_attention(query, key, value, is_causal=True)


@CASES.named(check_cached_causal_attention, match="Likely mistake: no causal mask")
def cached_attention_no_mask(query, key, value):
    return F.scaled_dot_product_attention(query, key, value)


def test_cached_attention_package_function_returning_a_tuple_passes(capsys):
    _assert_passes(
        check_cached_causal_attention,
        capsys,
        lambda q, k, v: transformer_lite.scaled_dot_product_attention(q, k, v, is_causal=True),
    )


def test_cached_attention_unrelated_values_report_largest_difference():
    with pytest.raises(AssertionError, match="largest difference"):
        check_cached_causal_attention(lambda q, k, v: torch.zeros_like(q))


def test_cached_attention_wrong_shape_reports_expected_shape():
    def attends_from_every_key_position(query, key, value):  # computes outputs for all S positions
        return F.scaled_dot_product_attention(key, key, value, is_causal=True)

    with pytest.raises(AssertionError, match=r"expected shape \(1, 4\), received \(6, 4\)"):
        check_cached_causal_attention(attends_from_every_key_position)


@pytest.mark.parametrize(
    "check",
    [
        check_scaled_dot_product_attention,
        check_causal_mask,
        check_layer_norm,
        check_sinusoidal_positional_encoding,
        check_cached_causal_attention,
    ],
)
def test_stub_prints_not_implemented(check, capsys):
    assert_not_implemented(check, capsys)


test_right_answers_pass, test_mistakes_are_named = CASES.tests()

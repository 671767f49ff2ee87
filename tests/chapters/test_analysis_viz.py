"""Tests for transformer_lite.chapters.analysis (head scores) and transformer_lite.chapters.viz (figures).

Oracles:

* analysis: a 3x3 weights matrix whose diagonals are read off by hand, e.g.
  the previous-token score is the mean of the first sub-diagonal; the
  transformed value vectors f_h(x) of a 2-head module with hand-set weights,
  worked out on paper; and, for random shapes (hypothesis), the identity
  y_i = sum_h sum_j a^h_ij f_h(x_j) + b^O against the module's own output in float64;
* viz: what a reader sees, read back from the matplotlib objects (Agg
  backend, no display): tick labels are the tokens passed in, both axes are
  labelled, a colorbar exists (the figure holds 2+ axes), and label-count or
  dimension mismatches raise ValueError. Every figure is closed after its test.
* plot_score_bias with ``scale="per_head"``: each panel's colour limits are read
  back and compared with the head's own finite min and max, computed here with
  numpy from the tensor drawn (and, for ALiBi, from the closed form
  ``min = -m_h (L - 1)``, ``m_h = 2^(-8(h+1)/H)``, ``max = 0``).
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_lite import MultiHeadAttention, TransformerBlock, causal_mask
from transformer_lite.chapters.analysis import (
    attention_value_norms,
    key_score,
    norm_shares,
    offset_score,
    previous_token_score,
    transformed_values,
)
from transformer_lite.chapters.viz import plot_attention, plot_head_grid, plot_mask, plot_score_bias
from transformer_lite.nn.relative_position import alibi_bias

# Rows = queries, columns = keys; each row sums to 1.
#   main diagonal (offset 0):   1.0, 0.4, 0.2   -> mean 1.6 / 3
#   sub-diagonal (offset -1):   0.6, 0.7        -> mean 0.65
#   offset -2:                  0.1             -> mean 0.1
#   super-diagonal (offset +1): 0.0, 0.0        -> mean 0.0
#   key 0 column:  1.0, 0.6, 0.1 -> mean 1.7 / 3;  key -1 column: 0.0, 0.0, 0.2 -> mean 0.2 / 3
W = torch.tensor([[1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [0.1, 0.7, 0.2]], dtype=torch.float64)
TOKENS = ["the", "cat", "sat"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(labels):
    return [t.get_text() for t in labels]


# =========================================================================== analysis


@pytest.mark.parametrize(
    "offset, expected", [(0, 1.6 / 3), (-1, 0.65), (-2, 0.1), (1, 0.0), (2, 0.0)]
)
def test_offset_score_is_mean_of_the_diagonal(offset, expected):
    score = offset_score(W, offset)
    assert score.shape == ()
    assert score.item() == pytest.approx(expected)


def test_previous_token_score_is_offset_minus_one():
    assert previous_token_score(W).item() == pytest.approx(0.65)
    # A perfect previous-token head (every query after the first looks only one step back) scores 1.
    perfect = torch.tensor(
        [[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    )
    assert previous_token_score(perfect).item() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "key_index, expected", [(0, 1.7 / 3), (1, 1.1 / 3), (2, 0.2 / 3), (-1, 0.2 / 3), (-3, 1.7 / 3)]
)
def test_key_score_is_mean_of_the_column(key_index, expected):
    assert key_score(W, key_index).item() == pytest.approx(expected)


def test_key_score_accepts_more_keys_than_queries():
    weights = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]])  # (L=2, S=4)
    assert key_score(weights, 3).item() == pytest.approx(0.2)


def test_scores_keep_the_leading_dimensions():
    # (layers=2, heads=3, L, L): head (0, 0) is W, head (1, 2) the identity, the others all zero.
    batch = torch.zeros(2, 3, 3, 3, dtype=torch.float64)
    batch[0, 0] = W
    batch[1, 2] = torch.eye(3, dtype=torch.float64)
    prev, diag, first = previous_token_score(batch), offset_score(batch, 0), key_score(batch, 0)
    assert prev.shape == diag.shape == first.shape == (2, 3)
    assert prev[0, 0].item() == pytest.approx(0.65)
    assert diag[1, 2].item() == pytest.approx(1.0)
    assert first[0, 0].item() == pytest.approx(1.7 / 3)
    assert first[1, 2].item() == pytest.approx(1 / 3)


@pytest.mark.parametrize("offset", [3, -3, 10])
def test_offset_score_rejects_offset_outside_the_matrix(offset):
    with pytest.raises(ValueError, match=rf"\|offset\| < L = 3, received offset={offset}"):
        offset_score(W, offset)


@pytest.mark.parametrize(
    "weights",
    [torch.ones(3, 4), torch.ones(2, 3, 4), torch.ones(3)],
    ids=["2x3x4-not-square", "batched-not-square", "1-D"],
)
def test_offset_score_rejects_non_square_weights(weights):
    with pytest.raises(
        ValueError, match=r"expected self-attention weights of shape \(\.\.\., L, L\)"
    ):
        offset_score(weights, 0)
    with pytest.raises(ValueError, match=r"\(\.\.\., L, L\)"):
        previous_token_score(weights)


@pytest.mark.parametrize("key_index", [3, -4])
def test_key_score_rejects_index_outside_the_keys(key_index):
    with pytest.raises(ValueError, match=rf"key_index in \[-3, 3\), received {key_index}"):
        key_score(W, key_index)


def test_key_score_rejects_1d_weights():
    with pytest.raises(ValueError, match=r"expected weights of shape \(\.\.\., L, S\)"):
        key_score(torch.ones(3), 0)


def _hand_module():
    """d_model = 2, two heads of width 1, hand-set weights (nn.Linear computes x @ W^T + b).

    Value projection: v = (x_0, 2 x_1) + (0, 1), so x = (1, 1) gives v = (1, 3): head 0 holds 1, head 1 holds 3.
    Output projection W = [[1, 3], [2, 0]]: head 0 owns column 0, (1, 2); head 1 owns column 1, (3, 0).
    So f_0(x) = 1 * (1, 2) = (1, 2), length sqrt(5); f_1(x) = 3 * (3, 0) = (9, 0), length 9.
    For x = (0, 0): v = (0, 1), f_0 = (0, 0), f_1 = (3, 0).
    """
    m = MultiHeadAttention(2, 2).double()
    with torch.no_grad():
        m.v_proj.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        m.v_proj.bias.copy_(torch.tensor([0.0, 1.0]))
        m.out_proj.weight.copy_(torch.tensor([[1.0, 3.0], [2.0, 0.0]]))
        m.out_proj.bias.copy_(torch.tensor([5.0, -5.0]))  # not part of f_h
    return m


def test_transformed_values_by_hand():
    x = torch.tensor([[[1.0, 1.0], [0.0, 0.0]]], dtype=torch.float64)  # (B=1, S=2, D=2)
    with torch.no_grad():
        f = transformed_values(_hand_module(), x)
    assert f.shape == (1, 2, 2, 2)  # (B, H, S, D)
    # head 1
    expected = torch.tensor(
        [
            [
                [[1.0, 2.0], [0.0, 0.0]],  # head 0: positions 0 and 1
                [[9.0, 0.0], [3.0, 0.0]],
            ]
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(f, expected)
    torch.testing.assert_close(
        f.norm(dim=-1), torch.tensor([[[5**0.5, 0.0], [9.0, 3.0]]], dtype=torch.float64)
    )


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 2),
    L=st.integers(1, 4),
    S=st.integers(1, 5),
    n_heads=st.sampled_from([1, 2, 3]),
    d_head=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_transformed_values_rebuild_the_attention_output(B, L, S, n_heads, d_head, seed):
    torch.manual_seed(seed)
    m = MultiHeadAttention(n_heads * d_head, n_heads).double()
    query = torch.randn(B, L, n_heads * d_head, dtype=torch.float64)
    memory = torch.randn(B, S, n_heads * d_head, dtype=torch.float64)
    with torch.no_grad():
        out, w, _ = m(query, memory, memory)  # (B, L, D), (B, H, L, S)
        f = transformed_values(m, memory)  # (B, H, S, D)
    # sum over heads and keys, plus b^O
    rebuilt = torch.einsum("bhls,bhsd->bld", w, f) + m.out_proj.bias
    torch.testing.assert_close(rebuilt, out)


def test_transformed_values_rejects_a_wrong_width():
    with pytest.raises(
        ValueError, match=r"expected value of shape \(B, S, 2\), received \(1, 3, 4\)"
    ):
        transformed_values(_hand_module(), torch.ones(1, 3, 4, dtype=torch.float64))


def test_norm_shares_by_hand():
    # Row 0: weights (0.5, 0.5), lengths (1, 3): terms 0.5, 1.5 of a sum 2 -> shares 0.25, 0.75.
    # Row 1: weights (0.2, 0.8): terms 0.2, 2.4 of 2.6 -> 1/13, 12/13. Row 2: fully masked -> zeros.
    weights = torch.tensor([[0.5, 0.5], [0.2, 0.8], [0.0, 0.0]], dtype=torch.float64)
    shares = norm_shares(weights, torch.tensor([1.0, 3.0], dtype=torch.float64))
    torch.testing.assert_close(
        shares, torch.tensor([[0.25, 0.75], [1 / 13, 12 / 13], [0.0, 0.0]], dtype=torch.float64)
    )
    # Equal lengths leave the weights unchanged.
    torch.testing.assert_close(
        norm_shares(weights[:2], torch.full((2,), 7.0, dtype=torch.float64)), weights[:2]
    )


def test_norm_shares_broadcast_per_head_lengths():
    weights = torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]]], dtype=torch.float64)  # (H=2, L=1, S=2)
    lengths = torch.tensor([[1.0, 3.0], [3.0, 1.0]], dtype=torch.float64)  # (H=2, S=2)
    torch.testing.assert_close(
        norm_shares(weights, lengths),
        torch.tensor([[[0.25, 0.75]], [[0.75, 0.25]]], dtype=torch.float64),
    )


@pytest.mark.parametrize("norms", [torch.ones(3), torch.ones(4, 2)], ids=["wrong-S", "wrong-batch"])
def test_norm_shares_rejects_mismatched_norms(norms):
    with pytest.raises(ValueError, match="norm_shares"):
        norm_shares(torch.ones(2, 3, 2), norms)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_attention_value_norms_read_the_vectors_the_weights_multiply(norm_first):
    torch.manual_seed(0)
    block = TransformerBlock(6, 2, 12, norm_first=norm_first).double().eval()
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    with torch.no_grad():
        weights, norms = attention_value_norms(block, x)
        _, expected_w, _ = block(x)
        attended = block.norm1(x) if norm_first else x  # what self_attn receives
        expected_norms = transformed_values(block.self_attn, attended).norm(dim=-1)
    assert len(weights) == len(norms) == 1
    torch.testing.assert_close(weights[0], expected_w)
    torch.testing.assert_close(norms[0], expected_norms)
    assert not block.self_attn._forward_hooks  # hooks removed


def test_attention_value_norms_rejects_a_model_without_attention():
    with pytest.raises(ValueError, match="contains no MultiHeadAttention"):
        attention_value_norms(torch.nn.Linear(2, 2), torch.ones(1, 2))


# =========================================================================== viz.plot_attention


def test_plot_attention_labels_ticks_axes_and_colorbar():
    ax = plot_attention(W, TOKENS, ["k0", "k1", "k2"], title="previous-token head")
    assert _texts(ax.get_yticklabels()) == TOKENS
    assert _texts(ax.get_xticklabels()) == ["k0", "k1", "k2"]
    assert ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_title() == "previous-token head"
    assert len(ax.figure.axes) >= 2  # the heatmap and its colorbar
    assert ax.figure.axes[-1].get_ylabel() == "attention weight"
    np.testing.assert_allclose(ax.get_images()[0].get_array(), W.numpy())


def test_plot_attention_key_tokens_default_to_query_tokens_and_accept_numpy():
    ax = plot_attention(W.numpy(), TOKENS)
    assert _texts(ax.get_xticklabels()) == TOKENS
    assert _texts(ax.get_yticklabels()) == TOKENS


def test_plot_attention_draws_on_given_axes_without_colorbar():
    fig, ax = plt.subplots()
    assert plot_attention(W, TOKENS, ax=ax, colorbar=False) is ax
    assert len(fig.axes) == 1


def test_plot_attention_annotate_writes_every_weight():
    ax = plot_attention(W, TOKENS, annotate=True)
    assert sorted(_texts(ax.texts)) == sorted(f"{v:.2f}" for v in W.flatten().tolist())


def test_plot_attention_rectangular_weights():
    weights = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]])
    ax = plot_attention(weights, ["q0", "q1"], ["a", "b", "c", "d"])
    assert _texts(ax.get_yticklabels()) == ["q0", "q1"]
    assert _texts(ax.get_xticklabels()) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "query_tokens, key_tokens",
    [(["a", "b"], None), (TOKENS, ["a", "b"]), (TOKENS + ["x"], TOKENS)],
    ids=["too-few-queries", "too-few-keys", "too-many-queries"],
)
def test_plot_attention_rejects_label_count_mismatch(query_tokens, key_tokens):
    with pytest.raises(
        ValueError, match=r"plot_attention: weights of shape \(3, 3\) need 3 query labels"
    ):
        plot_attention(W, query_tokens, key_tokens)


@pytest.mark.parametrize("weights", [torch.ones(3), torch.ones(1, 3, 3)], ids=["1-D", "3-D"])
def test_plot_attention_rejects_wrong_dims(weights):
    with pytest.raises(ValueError, match=r"expected a 2-D \(L, S\) array"):
        plot_attention(weights, TOKENS)


# =========================================================================== viz.plot_head_grid


def test_plot_head_grid_layout_labels_and_colorbar():
    attentions = torch.softmax(
        torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    fig = plot_head_grid(attentions, ["a", "b", "c", "d"], title="all heads")
    heatmaps = [ax for ax in fig.axes if ax.get_images()]
    assert len(heatmaps) == 2 * 3
    assert len(fig.axes) == 2 * 3 + 1  # one shared colorbar
    assert fig.axes[-1].get_ylabel() == "attention weight"
    assert [ax.get_title() for ax in heatmaps[:3]] == ["head 0", "head 1", "head 2"]
    assert [heatmaps[0].get_ylabel(), heatmaps[3].get_ylabel()] == ["layer 0", "layer 1"]
    assert fig.get_supxlabel()
    assert fig.get_suptitle() == "all heads"


def test_plot_head_grid_accepts_a_list_of_layers():
    # n_layers tensors of (H, L, L)
    layers = [
        torch.full((2, 3, 3), 1 / 3),
        torch.full((2, 3, 3), 1 / 3),
    ]
    fig = plot_head_grid(layers, TOKENS)
    assert len([ax for ax in fig.axes if ax.get_images()]) == 4


def test_plot_head_grid_shows_tokens_on_first_column_and_last_row():
    fig = plot_head_grid(torch.full((2, 2, 3, 3), 1 / 3), TOKENS)
    # row-major: layer 0 heads 0-1, layer 1 heads 0-1
    heatmaps = [ax for ax in fig.axes if ax.get_images()]
    assert _texts(heatmaps[0].get_yticklabels()) == TOKENS  # first column
    assert _texts(heatmaps[2].get_xticklabels()) == TOKENS  # last row


@pytest.mark.parametrize(
    "attentions",
    [
        torch.ones(3, 3, 3),
        torch.ones(1, 1, 2, 3, 3),
        torch.ones(1, 2, 3, 4),
        torch.ones(1, 2, 4, 4),
    ],
    ids=["3-D", "5-D-with-batch", "not-square", "L-differs-from-tokens"],
)
def test_plot_head_grid_rejects_wrong_dims(attentions):
    with pytest.raises(
        ValueError, match=r"plot_head_grid: expected \(n_layers, H, L, L\) with L = 3"
    ):
        plot_head_grid(attentions, TOKENS)


def test_plot_head_grid_labels_only_the_chosen_tick_positions():
    fig = plot_head_grid(torch.full((2, 2, 3, 3), 1 / 3), TOKENS, tick_positions=[0, 2])
    heatmaps = [ax for ax in fig.axes if ax.get_images()]
    assert _texts(heatmaps[0].get_yticklabels()) == [TOKENS[0], TOKENS[2]]
    assert _texts(heatmaps[2].get_xticklabels()) == [TOKENS[0], TOKENS[2]]
    assert list(heatmaps[2].get_xticks()) == [0, 2]
    with pytest.raises(ValueError, match=r"tick positions in \[0, 3\), received \[0, 3\]"):
        plot_head_grid(torch.full((2, 2, 3, 3), 1 / 3), TOKENS, tick_positions=[0, 3])


def test_plot_head_grid_rejects_layers_of_different_shapes_with_value_error():
    with pytest.raises(ValueError, match="share one shape"):
        plot_head_grid([torch.ones(2, 3, 3), torch.ones(3, 3, 3)], TOKENS)


# =========================================================================== viz.plot_mask


def test_plot_mask_labels_ticks_axes_and_legend_bar():
    ax = plot_mask(causal_mask(3), TOKENS, ["k0", "k1", "k2"], title="causal")
    assert _texts(ax.get_yticklabels()) == TOKENS
    assert _texts(ax.get_xticklabels()) == ["k0", "k1", "k2"]
    assert ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_title() == "causal"
    assert len(ax.figure.axes) >= 2
    assert _texts(ax.figure.axes[-1].get_yticklabels()) == ["False:\nblocked", "True:\nmay attend"]
    np.testing.assert_array_equal(
        ax.get_images()[0].get_array(), causal_mask(3).numpy().astype(float)
    )


def test_plot_mask_default_labels_are_positions():
    ax = plot_mask(causal_mask(2, 4))
    assert _texts(ax.get_yticklabels()) == ["0", "1"]
    assert _texts(ax.get_xticklabels()) == ["0", "1", "2", "3"]


@pytest.mark.parametrize(
    "query_tokens, key_tokens",
    [(["a", "b"], None), (None, ["a", "b"]), (TOKENS, TOKENS + ["x"])],
    ids=["too-few-queries", "too-few-keys", "too-many-keys"],
)
def test_plot_mask_rejects_label_count_mismatch(query_tokens, key_tokens):
    with pytest.raises(
        ValueError, match=r"plot_mask: mask of shape \(3, 3\) needs 3 query and 3 key labels"
    ):
        plot_mask(causal_mask(3), query_tokens, key_tokens)


@pytest.mark.parametrize(
    "mask",
    [
        causal_mask(3).float(),
        torch.ones(1, 3, 3, dtype=torch.bool),
        torch.ones(3, dtype=torch.bool),
        causal_mask(3).numpy(),
    ],
    ids=["float", "3-D", "1-D", "numpy"],
)
def test_plot_mask_rejects_non_2d_bool_tensor(mask):
    with pytest.raises(ValueError, match=r"plot_mask: expected a 2-D bool tensor"):
        plot_mask(mask)


# =========================================================================== plot_score_bias, one scale per head


def _bias_images(fig):
    """The heatmaps of a plot_score_bias figure (colorbar axes hold no image), in head order."""
    return [ax.images[0] for ax in fig.axes if ax.images]


def test_plot_score_bias_per_head_limits_are_each_heads_own_min_and_max_for_alibi():
    H, L = 8, 16
    fig = plot_score_bias(alibi_bias(H, L)[:, [0, 2, 4, 7]], scale="per_head", n_cols=2)
    images = _bias_images(fig)
    assert len(images) == 4
    for im, h in zip(images, [0, 2, 4, 7]):
        slope = 2.0 ** (-8 * (h + 1) / H)  # by hand: 1/2, 1/8, 1/32, 1/256
        lo, hi = im.get_clim()
        # the farthest key, and the diagonal
        assert lo == pytest.approx(-slope * (L - 1), rel=1e-6) and hi == 0.0
        assert im.get_cmap().name.startswith("cividis")  # sequential, colour-blind-safe
        # -inf above the diagonal
        assert np.array_equal(im.get_array().mask, np.triu(np.ones((L, L), dtype=bool), 1))
    colorbars = [ax for ax in fig.axes if not ax.images]
    assert len(colorbars) == 4  # one colorbar per head
    assert all("added to the score" in ax.get_ylabel() for ax in colorbars)
    assert "white: -inf" in colorbars[0].get_ylabel()  # the colour of the forbidden keys is named
    for ax in fig.axes[:4]:
        assert ax.get_xlabel() == "key position j"


@pytest.mark.slow  # trains, generates at length or runs gradcheck: more than 10 s on a loaded 2-core machine
@settings(max_examples=10, deadline=None, derandomize=True)
@given(H=st.integers(1, 5), L=st.integers(1, 6), S=st.integers(1, 6), seed=st.integers(0, 1000))
def test_plot_score_bias_per_head_limits_match_numpy(H, L, S, seed):
    g = torch.Generator().manual_seed(seed)
    bias = (
        torch.randn(H, L, S, generator=g, dtype=torch.float64)
        * torch.rand(H, 1, 1, generator=g)
        * 10
    )
    bias[torch.rand(H, L, S, generator=g) < 0.3] = float("-inf")  # some forbidden keys
    fig = plot_score_bias(bias, scale="per_head")
    images = _bias_images(fig)
    assert len(images) == H
    values = bias.numpy()
    for h, im in enumerate(images):
        finite = values[h][np.isfinite(values[h])]
        if finite.size == 0:
            expected = (-0.5, 0.5)  # nothing finite: a unit range around 0
        elif finite.min() == finite.max():
            # constant head: a unit range around it
            expected = (
                finite.min() - 0.5,
                finite.max() + 0.5,
            )
        else:
            expected = (finite.min(), finite.max())
        np.testing.assert_allclose(im.get_clim(), expected, rtol=0, atol=0)
        # -inf drawn as bad
        assert np.array_equal(np.ma.getmaskarray(im.get_array()), np.isneginf(values[h]))
    plt.close(fig)


def test_plot_score_bias_rejects_unknown_scale_and_vmax_with_per_head():
    with pytest.raises(ValueError, match="expected scale 'shared' or 'per_head', received 'log'"):
        plot_score_bias(torch.zeros(2, 3, 3), scale="log")
    with pytest.raises(ValueError, match="expected vmax=None with scale='per_head'"):
        plot_score_bias(torch.zeros(2, 3, 3), scale="per_head", vmax=1.0)

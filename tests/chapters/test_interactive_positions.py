"""The positional-encoding figures: interactive.positional_offset_figure / sinusoid_shift_matrix,
viz.plot_score_bias and the live explorer.

Oracles: the package's sinusoidal table (``R_k PE[p] == PE[p + k]`` for many p, and the stored
dot products equal ``PE[p] . PE[p + k]`` recomputed), the closed form ``sum_i cos(k w_i)``, a
least-squares fit of the shift map (independent of the construction), and the bias tensors
the heatmaps were drawn from.
"""

import matplotlib

matplotlib.use("Agg")

import math

import numpy as np
import pytest
import torch

from tests.conftest import F64
from transformer_lite import alibi_bias, sinusoidal_positional_encoding
from transformer_lite.chapters import interactive, viz


@pytest.mark.parametrize("d_model, k", [(2, 1), (8, 3), (64, 17), (64, -5), (7, 4)])
def test_shift_matrix_moves_every_position_k_steps(d_model, k):
    pe = sinusoidal_positional_encoding(300, d_model, dtype=F64)
    r = interactive.sinusoid_shift_matrix(k, d_model)
    n = 2 * (d_model // 2)  # odd d_model: the lone last sine is not part of any rotation
    assert r.shape == (n, n)
    ps = torch.arange(max(0, -k), 300 - max(k, 0))
    torch.testing.assert_close(pe[ps][:, :n] @ r.T, pe[ps + k][:, :n], atol=1e-10, rtol=0)
    torch.testing.assert_close(r @ r.T, torch.eye(n, dtype=F64), atol=1e-12, rtol=0)  # a rotation


def test_shift_matrix_equals_a_least_squares_fit():
    d, k, base = 6, 2, 100.0  # base 100: the slowest pair still turns enough to be identifiable
    pe = sinusoidal_positional_encoding(90, d, base=base, dtype=F64)
    fitted = torch.linalg.lstsq(pe[:-k], pe[k:]).solution.T
    torch.testing.assert_close(
        interactive.sinusoid_shift_matrix(k, d, base=base), fitted, atol=1e-9, rtol=0
    )


def test_shift_matrix_errors():
    with pytest.raises(ValueError, match="int offset k"):
        interactive.sinusoid_shift_matrix(1.5, 8)
    with pytest.raises(ValueError, match="d_model >= 2"):
        interactive.sinusoid_shift_matrix(1, 1)


def test_offset_figure_steps_hold_the_dot_product_and_the_rotation():
    d, K, n_pairs = 16, 10, 3
    fig = interactive.positional_offset_figure(d_model=d, max_offset=K, n_pairs_shown=n_pairs)
    curve, heat, marker = fig.data
    assert curve.type == "scatter" and heat.type == "heatmap" and marker.type == "scatter"
    pe = sinusoidal_positional_encoding(100, d, dtype=F64)
    omegas = 10000.0 ** (-torch.arange(0, d, 2, dtype=F64) / d)
    assert list(curve.x) == list(range(-K, K + 1))
    closed_form = torch.stack([torch.cos(k * omegas).sum() for k in range(-K, K + 1)])
    torch.testing.assert_close(torch.tensor(curve.y, dtype=F64), closed_form, atol=1e-4, rtol=0)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == [str(k) for k in range(K + 1)]
    for k, step in enumerate(steps):
        update, traces = step.args
        assert list(traces) == [1, 2]
        assert update["x"][1] == [k] and update["z"][1] is None
        # any p gives it
        assert update["y"][1][0] == pytest.approx(float(pe[40] @ pe[40 + k]), abs=1e-4)
        r = torch.tensor(update["z"][0], dtype=F64)  # (2 n_pairs, 2 n_pairs)
        assert r.shape == (2 * n_pairs, 2 * n_pairs)
        torch.testing.assert_close(pe[5:60, :6] @ r.T, pe[5 + k : 60 + k, :6], atol=1e-3, rtol=0)
        # labels kept
        assert list(update["x"][0]) == list(heat.x) and list(update["y"][0]) == list(heat.y)
    assert math.isclose(marker.y[0], d / 2)  # k = 0 shown first: PE[p] . PE[p] = d/2


def test_offset_figure_errors():
    with pytest.raises(ValueError, match="even d_model"):
        interactive.positional_offset_figure(d_model=7)
    with pytest.raises(ValueError, match="max_offset"):
        interactive.positional_offset_figure(max_offset=0)
    with pytest.raises(ValueError, match="n_pairs_shown"):
        interactive.positional_offset_figure(d_model=8, n_pairs_shown=5)


def test_plot_score_bias_draws_each_head_with_symmetric_limits_and_grey_for_minus_inf():
    bias = alibi_bias(4, 6)  # (1, 4, 6, 6), causal: -inf above the diagonal
    fig = viz.plot_score_bias(bias, title="t")
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 4
    for h, im in enumerate(images):
        data = im.get_array()
        # -inf drawn as "bad" (grey)
        assert np.array_equal(data.mask, np.isneginf(bias[0, h].numpy()))
        np.testing.assert_allclose(data.filled(0), torch.nan_to_num(bias[0, h], neginf=0).numpy())
        lo, hi = im.get_clim()
        # largest finite |bias|: slope 2^(-8/4) = 1/4 times distance 5
        assert lo == -hi == pytest.approx(-1.25)
    assert "-inf" in fig.axes[-1].get_ylabel()  # the colorbar names the grey
    matplotlib.pyplot.close(fig)


def test_plot_score_bias_labels_and_errors():
    fig = viz.plot_score_bias(torch.randn(3, 4, 5), head_labels=["a", "b", "c"], vmax=2.0, n_cols=2)
    assert [ax.get_title() for ax in fig.axes[:3]] == ["a", "b", "c"]
    assert fig.axes[0].images[0].get_clim() == (-2.0, 2.0)
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"expected a floating bias of shape \(H, L, S\)"):
        viz.plot_score_bias(torch.zeros(2, 3, 4, 4))
    with pytest.raises(ValueError, match="expected 3 head labels, received 1"):
        viz.plot_score_bias(torch.zeros(3, 4, 4), head_labels=["x"])


def test_positional_explorer_builds_and_draws():
    from transformer_lite.chapters.explorers import positional_explorer

    widget = positional_explorer(max_position=20)
    names = [c.description for c in widget.children[:3]]
    assert names == ["d_model", "position p", "offset k"]
    widget.children[2].value = 30  # p + k beyond the table is capped, not an IndexError
    matplotlib.pyplot.close("all")

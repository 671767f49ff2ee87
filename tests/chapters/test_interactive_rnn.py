"""Chapter 6's figure helpers: interactive.rnn_lag_profile / rnn_gradient_figure, explorers.rnn_gradient_explorer,
viz.plot_norms_vs_lag.

Oracles: with zero inputs the state stays at 0, tanh' = 1 and the norm is exactly radius**k (W_hh = r Q, Q
orthogonal); for non-zero inputs, torch.nn.RNN with the same weights differentiated end to end by
torch.autograd.functional.jacobian; the figure's stored curves are recomputed from the profile function.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from transformer_lite.chapters import interactive, viz
from transformer_lite.chapters.jacobians import recurrent_weight


@pytest.mark.parametrize("radius", [0.5, 1.0, 1.3])
def test_profile_is_radius_to_the_lag_without_inputs(radius):
    lags, norms, mean_dphi = interactive.rnn_lag_profile(
        radius, input_scale=0.0, hidden_size=8, length=12
    )
    assert lags.tolist() == list(range(13))
    torch.testing.assert_close(norms, radius ** lags.double(), atol=1e-12, rtol=1e-10)
    assert mean_dphi == 1.0


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_profile_matches_autograd_through_torch_rnn(nonlinearity):
    H, T, r, scale, seed = 5, 7, 1.2, 0.8, 3
    lags, norms, mean_dphi = interactive.rnn_lag_profile(r, scale, H, T, nonlinearity, seed)
    ref = torch.nn.RNN(H, H, nonlinearity=nonlinearity, batch_first=True).double()
    with torch.no_grad():
        ref.weight_hh_l0.copy_(recurrent_weight(H, r, seed=seed))
        ref.weight_ih_l0.copy_(torch.eye(H, dtype=torch.float64))
        ref.bias_ih_l0.zero_()
        ref.bias_hh_l0.zero_()
    x = scale * torch.randn(
        1, T, H, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64
    )
    states, _ = ref(x)  # (1, T, H)
    for k in range(T + 1):
        s = T - k  # h_s: h_0 = 0, else states[:, s - 1]
        h_s = torch.zeros(H, dtype=torch.float64) if s == 0 else states[0, s - 1].detach()

        def last_from(h):  # run steps s+1 .. T from state h
            return ref(x[:, s:], h[None, None])[0][0, -1] if s < T else h

        jac = torch.autograd.functional.jacobian(last_from, h_s)
        assert norms[k].item() == pytest.approx(
            torch.linalg.matrix_norm(jac, ord=2).item(), rel=1e-9, abs=1e-300
        )
    d = 1 - states**2 if nonlinearity == "tanh" else (states > 0).double()
    assert mean_dphi == pytest.approx(d.mean().item(), rel=1e-12)


def test_large_inputs_saturate_and_shrink_the_gradient():
    _, small, d_small = interactive.rnn_lag_profile(1.1, 0.01, hidden_size=16, length=40)
    _, large, d_large = interactive.rnn_lag_profile(1.1, 3.0, hidden_size=16, length=40)
    assert d_large < 0.5 < d_small
    assert large[40] < 1e-6 < 1 < small[40]


def test_figure_steps_hold_the_profiles():
    radii, scales = (0.8, 1.0, 1.2), (0.01, 2.0)
    fig = interactive.rnn_gradient_figure(
        radii=radii, input_scales=scales, hidden_size=6, length=10, initial_radius=1.0
    )
    assert len(fig.data) == 3 and fig.layout.yaxis.type == "log"
    assert fig.layout.sliders[0].active == 1
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["0.80", "1.00", "1.20"]
    for r, step in zip(radii, steps):
        update, traces = step.args
        assert list(traces) == [0, 1, 2]
        for i, scale in enumerate(scales):
            expected = interactive.rnn_lag_profile(r, scale, 6, 10)[1]
            # 4 significant digits
            np.testing.assert_allclose(update["y"][i], expected.numpy(), rtol=1e-3)
        np.testing.assert_allclose(update["y"][2], [r**k for k in range(11)], rtol=1e-3)
    # the page opens on radius 1.0
    np.testing.assert_allclose(fig.data[0].y, steps[1].args[0]["y"][0])
    assert "tanh, inputs with std 2" in fig.data[1].name


def test_figure_errors():
    with pytest.raises(ValueError, match="initial_radius"):
        interactive.rnn_gradient_figure(radii=(0.5, 1.5), initial_radius=1.0)
    with pytest.raises(ValueError, match="at least one radius"):
        interactive.rnn_gradient_figure(radii=(), initial_radius=1.0)


def test_explorer_builds_and_draws():
    from transformer_lite.chapters.explorers import rnn_gradient_explorer

    widget = rnn_gradient_explorer(hidden_size=8)
    names = [c.description for c in widget.children[:-1]]
    assert names == ["radius", "nonlinearity", "input std", "steps T"]
    plt.close("all")


def test_plot_norms_vs_lag_draws_every_curve():
    lags = torch.arange(5)
    ax = viz.plot_norms_vs_lag(
        {
            "a": (lags, 0.5 ** lags.double()),
            "ref: r^k": (lags, torch.ones(5)),
            "ref:_hidden": (lags, 2.0 ** lags.double()),
        },
        title="t",
    )
    assert ax.get_yscale() == "log" and ax.get_title() == "t"
    assert [line.get_label() for line in ax.get_lines()] == ["a", "r^k", "_hidden"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), 0.5 ** np.arange(5))
    assert ax.get_lines()[1].get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "r^k"]
    with pytest.raises(ValueError, match="3 lags but 2 norms"):
        viz.plot_norms_vs_lag({"bad": (torch.arange(3), torch.ones(2))})
    plt.close("all")


def test_plot_norms_vs_lag_legend_follows_rcparams_or_is_left_out():
    lags = torch.arange(4)
    with plt.rc_context({"legend.fontsize": 12}):
        ax = viz.plot_norms_vs_lag({"a": (lags, torch.ones(4))})
        assert ax.get_legend().get_texts()[0].get_fontsize() == 12
    ax = viz.plot_norms_vs_lag({"a": (lags, torch.ones(4))}, legend=False)
    assert ax.get_legend() is None and ax.get_lines()[0].get_label() == "a"
    plt.close("all")


def test_plot_jacobian_terms_measured_underneath_and_shares():
    from transformer_lite.chapters.viz.ch6_rnn_gradients import plot_jacobian_terms

    lags = torch.arange(7)
    measured = 0.9 ** lags.double()
    copy = 0.5 ** lags.double()
    copy_cand = 0.95 * measured  # lies almost on the measured curve
    ax_norms, ax_ratio = plot_jacobian_terms(
        (lags, measured), {"copy": (lags, copy), "copy + candidate": (lags, copy_cand)}, title="t"
    )
    assert ax_norms.get_yscale() == "log" and ax_norms.get_title() == "t"
    measured_line, copy_line, approx_line = ax_norms.get_lines()
    # the measured curve is wide and underneath, the near-identical approximation thin and dashed on top
    assert measured_line.get_linewidth() > 3 * approx_line.get_linewidth()
    assert measured_line.get_zorder() < approx_line.get_zorder()
    assert measured_line.get_marker() == "o" and approx_line.get_linestyle() == "--"
    np.testing.assert_allclose(approx_line.get_ydata(), copy_cand.numpy())
    assert [t.get_text() for t in ax_norms.get_legend().get_texts()] == [
        "measured",
        "copy",
        "copy + candidate",
    ]
    # the ratio panel: each approximation / measured, and the line 1
    ratios = [line.get_ydata() for line in ax_ratio.get_lines()[:2]]
    np.testing.assert_allclose(ratios[0], (copy / measured).numpy())
    np.testing.assert_allclose(ratios[1], np.full(7, 0.95))
    assert ax_ratio.get_yscale() == "linear" and ax_ratio.get_ylim()[0] == 0
    with pytest.raises(ValueError, match="not on the measured curve's lags"):
        plot_jacobian_terms((lags, measured), {"shifted": (lags + 1, copy)})
    with pytest.raises(ValueError, match="3 lags but 2 norms"):
        plot_jacobian_terms((torch.arange(3), torch.ones(2)), {})
    plt.close("all")

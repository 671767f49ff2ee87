"""Interactive figures (plotly) of chapter 6, ``notebooks/06_rnn_gradients.ipynb``:
gradient norm against the lag in an RNN.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from torch import Tensor

from ...nn.recurrent import RNN
from ..jacobians import gradient_norm_vs_lag, recurrent_weight, rnn_step_jacobians
from ._page import layout, sig, slider

__all__ = ["rnn_lag_profile", "rnn_gradient_figure"]


def rnn_lag_profile(
    spectral_radius: float,
    input_scale: float = 0.01,
    hidden_size: int = 64,
    length: int = 60,
    nonlinearity: str = "tanh",
    seed: int = 0,
) -> tuple[Tensor, Tensor, float]:
    """``||dh_T/dh_{T-k}||_2`` against the lag ``k`` for an Elman RNN with a chosen spectral radius.

    The set-up of chapter 6: an :class:`~transformer_lite.nn.recurrent.RNN` in float64 with
    ``W_hh = spectral_radius * Q`` (``Q`` a random orthogonal matrix, from
    :func:`~transformer_lite.chapters.jacobians.recurrent_weight`), ``W_ih = I``, zero biases, ``h_0 = 0``, and
    inputs ``x_t = input_scale * z_t`` with ``z_t`` standard normal; the norms come from
    :func:`~transformer_lite.chapters.jacobians.rnn_step_jacobians` and
    :func:`~transformer_lite.chapters.jacobians.gradient_norm_vs_lag` with ``T = length`` (Pascanu et al., 2013, Eq. 5).
    Small inputs keep tanh near its linear regime (norm close to ``radius**k``); large inputs saturate it.

    Args:
        spectral_radius: radius ``r >= 0`` of ``W_hh`` (also its largest singular value).
        input_scale: standard deviation of the inputs.
        hidden_size: H (= input size).
        length: T, the number of steps.
        nonlinearity: ``"tanh"`` or ``"relu"``.
        seed: seeds ``Q`` (``seed``) and the inputs (``seed + 1``).

    Returns:
        ``(lags, norms, mean_derivative)``: ``lags`` ``(T + 1,)`` int64, ``norms`` ``(T + 1,)`` float64 with
        ``norms[k] = ||dh_T/dh_{T-k}||_2``, and the mean of ``phi'(a_t)`` over all steps and units (1 means
        linear; near 0, saturated tanh or mostly inactive relu).

    Raises:
        ValueError: from :class:`~transformer_lite.nn.recurrent.RNN` or
            :func:`~transformer_lite.chapters.jacobians.recurrent_weight` (bad sizes, radius or nonlinearity).
    """
    rnn = RNN(hidden_size, hidden_size, nonlinearity=nonlinearity).double()
    with torch.no_grad():
        rnn.weight_hh.copy_(recurrent_weight(hidden_size, spectral_radius, seed=seed))
        rnn.weight_ih.copy_(torch.eye(hidden_size, dtype=torch.float64))
        rnn.bias_ih.zero_()
        rnn.bias_hh.zero_()
    g = torch.Generator().manual_seed(seed + 1)
    # (1, T, H)
    x = input_scale * torch.randn(1, length, hidden_size, generator=g, dtype=torch.float64)
    jac = rnn_step_jacobians(rnn, x)  # (1, T, H, H)
    lags, norms = gradient_norm_vs_lag(jac)  # (T + 1,), (1, T + 1)
    with torch.no_grad():
        h, _ = rnn(x)  # (1, T, H)
    dphi = 1 - h**2 if nonlinearity == "tanh" else (h > 0).double()
    return lags, norms[0], float(dphi.mean())


def rnn_gradient_figure(
    radii: Sequence[float] = tuple(round(0.5 + 0.05 * i, 2) for i in range(21)),
    input_scales: Sequence[float] = (0.01, 1.0, 3.0),
    hidden_size: int = 32,
    length: int = 60,
    initial_radius: float = 1.0,
    seed: int = 0,
):
    """Slider over the spectral radius: ``||dh_T/dh_{T-k}||`` against the lag for several input scales.

    One line per input scale (:func:`rnn_lag_profile`, tanh), plus the dashed line ``radius**k``
    (the linear network's value), on a logarithmic y axis. Traces: ``0 .. n-1`` the input scales,
    ``n`` the reference. Stored values are rounded to 4 significant digits.

    Args:
        radii: spectral radii on the slider.
        input_scales: input standard deviations, one line each.
        hidden_size, length, seed: as in :func:`rnn_lag_profile`.
        initial_radius: the radius shown when the page opens (must be in ``radii``).

    Returns:
        A ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: if ``radii`` or ``input_scales`` is empty or ``initial_radius`` is not in ``radii``.
    """
    radii, input_scales = [float(r) for r in radii], [float(s) for s in input_scales]
    if not radii or not input_scales:
        raise ValueError(
            f"rnn_gradient_figure: expected at least one radius and one input scale, received "
            f"{len(radii)} and {len(input_scales)}"
        )
    if initial_radius not in radii:
        raise ValueError(
            f"rnn_gradient_figure: expected initial_radius in radii {radii}, received {initial_radius}"
        )
    lags = list(range(length + 1))
    states = []
    for r in radii:
        curves = [
            sig(rnn_lag_profile(r, s, hidden_size, length, "tanh", seed)[1]) for s in input_scales
        ]
        curves.append(sig([r**k for k in lags]))
        states.append(curves)
    start = radii.index(initial_radius)
    colors = ["#3b528b", "#21918c", "#d8576b", "#fde725"]
    fig = go.Figure()
    for i, s in enumerate(input_scales):
        fig.add_trace(
            go.Scatter(
                x=lags,
                y=states[start][i],
                mode="lines",
                name=f"tanh, inputs with std {s:g}",
                line=dict(color=colors[i % len(colors)], width=2.5),
                hovertemplate="lag %{x}<br>norm %{y:.3g}<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=lags,
            y=states[start][-1],
            mode="lines",
            name="radius^lag (linear network)",
            line=dict(color="#555555", dash="dash"),
            hovertemplate="lag %{x}<br>radius^lag %{y:.3g}<extra></extra>",
        )
    )
    traces = list(range(len(input_scales) + 1))
    steps = [
        dict(method="restyle", label=f"{r:.2f}", args=[{"y": states[j]}, traces])
        for j, r in enumerate(radii)
    ]
    fig.update_xaxes(title_text="lag k = T - s (steps back from the last state)")
    fig.update_yaxes(
        title_text="||dh_T / dh_(T-k)|| (spectral norm)", type="log", exponentformat="power"
    )
    # Title, legend and plot stacked from the top, none over another or under plotly's toolbar
    # (the modebar, top right, about 30 px high) at a phone's 358 px column as at a laptop's:
    # the short title starts 40 px down at the left, the legend (up to four rows on a phone) 40 px
    # below the title's top, and the plot below both.
    text = "RNN gradient reach: the radius sets the trend,<br>saturation pulls it down"
    title = dict(
        text=text,
        font=dict(size=13),
        x=0,
        xref="container",
        xanchor="left",
        y=1,
        yref="container",
        yanchor="top",
        pad=dict(t=40, l=12),
    )
    control = slider(steps, "spectral radius of W_hh = ", pad=60, active=start)
    legend = dict(
        orientation="h", xref="container", x=0, yref="container", y=1 - 80 / 570, yanchor="top"
    )
    layout(fig, title, 570, margin=dict(l=80, r=30, t=150, b=60), legend=legend, sliders=[control])
    return fig

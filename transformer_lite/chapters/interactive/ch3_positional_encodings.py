"""Interactive figures (plotly) of chapter 3, ``notebooks/03_positional_encodings.ipynb``:
a position shift as a rotation of the sinusoidal encoding.
"""

from __future__ import annotations

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ...nn.positional import rotation_frequencies, sinusoidal_positional_encoding
from ._page import DECIMALS, layout, rounded, slider

__all__ = ["sinusoid_shift_matrix", "positional_offset_figure"]


def sinusoid_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The block-diagonal rotation ``R_k`` with ``PE[p + k] = R_k PE[p]`` for every position ``p``.

    Source: Vaswani et al. (2017), Sec. 3.5 and the angle-addition formulas: pair ``i`` of the
    encoding is ``(sin(p w_i), cos(p w_i))`` with ``w_i = base^(-2i/d_model)``, and
    ``sin(a + b) = sin a cos b + cos a sin b``, ``cos(a + b) = cos a cos b - sin a sin b`` give the
    2x2 block ``[[cos(k w_i), sin(k w_i)], [-sin(k w_i), cos(k w_i)]]``. For an odd ``d_model`` the
    last feature (a sine without its cosine) is not a rotation of anything; the matrix then covers
    the first ``d_model - 1`` features only.

    Args:
        k: the offset in positions (any int, negative allowed).
        d_model: width of the encoding, ``>= 2``.
        base: the wavelength base.

    Returns:
        float64 ``(2 * (d_model // 2), 2 * (d_model // 2))``.

    Raises:
        ValueError: if ``k`` is not an int or ``d_model < 2``.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"sinusoid_shift_matrix: expected an int offset k, received {k!r}")
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 2:
        raise ValueError(
            f"sinusoid_shift_matrix: expected an int d_model >= 2, received {d_model!r}"
        )
    n_pairs = d_model // 2
    omega = rotation_frequencies(d_model, base)[:n_pairs]  # (n_pairs,) rad/position, float64
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    blocks = torch.stack((torch.stack((c, s), -1), torch.stack((-s, c), -1)), -2)  # (n_pairs, 2, 2)
    return torch.block_diag(*blocks)  # (2 n_pairs, 2 n_pairs)


def positional_offset_figure(
    d_model: int = 64, max_offset: int = 64, n_pairs_shown: int = 6, base: float = 10000.0
):
    """Slider over the offset k: the dot product ``PE[p] . PE[p + k]`` and the rotation ``R_k``.

    Left: the dot product as a function of the offset (the same curve for every ``p``), with a
    marker at the chosen ``k``. Traces: 0 = the curve, 1 = the heatmap of ``R_k``, 2 = the marker. Right: the top-left ``2 n_pairs_shown`` features of ``R_k``
    (:func:`sinusoid_shift_matrix`), the linear map that moves every position ``k`` steps on.

    Args:
        d_model: width of the encoding (even).
        max_offset: the slider runs over ``k = 0 .. max_offset``; the curve over ``-max_offset .. max_offset``.
        n_pairs_shown: how many (sin, cos) pairs of ``R_k`` to draw.
        base: the wavelength base.

    Returns:
        A ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: if ``d_model`` is not even and ``>= 2``, ``max_offset < 1``, or ``n_pairs_shown``
            is not in ``1 .. d_model // 2``.
    """
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(
            f"positional_offset_figure: expected an even d_model >= 2, received {d_model!r}"
        )
    if max_offset < 1:
        raise ValueError(
            f"positional_offset_figure: expected max_offset >= 1, received {max_offset}"
        )
    if not 1 <= n_pairs_shown <= d_model // 2:
        raise ValueError(
            f"positional_offset_figure: expected 1 <= n_pairs_shown <= {d_model // 2}, "
            f"received {n_pairs_shown}"
        )
    pe = sinusoidal_positional_encoding(2 * max_offset + 1, d_model, base=base, dtype=torch.float64)
    offsets = list(range(-max_offset, max_offset + 1))
    dots = pe[max_offset] @ pe.T  # (2 max_offset + 1,): PE[p] . PE[p + k] with p = max_offset
    n = 2 * n_pairs_shown
    feats = [f"f{j}" for j in range(n)]

    def rot(k):
        return rounded(sinusoid_shift_matrix(k, d_model, base)[:n, :n])

    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.55, 0.45],
        horizontal_spacing=0.1,
        subplot_titles=[
            f"PE[p] · PE[p + k], d_model = {d_model} (any p)",
            f"R_k, first {n_pairs_shown} (sin, cos) pairs",
        ],
    )
    fig.add_trace(
        go.Scatter(
            x=offsets,
            y=rounded(dots),
            mode="lines",
            name="dot product",
            line=dict(color="#3b528b"),
            hovertemplate="k = %{x}<br>%{y:.3f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=rot(0),
            x=feats,
            y=feats,
            zmin=-1,
            zmax=1,
            colorscale="RdBu_r",
            xgap=1,
            ygap=1,
            colorbar=dict(title=dict(text="entry"), len=0.8, thickness=14),
            hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=[0],
            y=[round(float(dots[max_offset]), DECIMALS)],
            mode="markers",
            name="chosen k",
            marker=dict(size=12, color="#d8576b"),
            hovertemplate="k = %{x}<br>%{y:.3f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.update_xaxes(title_text="offset k (positions)", row=1, col=1)
    fig.update_yaxes(title_text="dot product", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    # restyle cycles through per-trace lists, so every attribute names its value for both traces
    # (1 = the heatmap of R_k, 2 = the marker); None leaves the scatter without a z.
    steps = [
        dict(
            method="restyle",
            label=str(k),
            args=[
                {
                    "x": [feats, [k]],
                    "y": [feats, [round(float(dots[max_offset + k]), DECIMALS)]],
                    "z": [rot(k), None],
                },
                [1, 2],
            ],
        )
        for k in range(max_offset + 1)
    ]
    title = (
        "Moving k positions on is one fixed rotation per feature pair;<br>"
        "the dot product depends on k only"
    )
    control = slider(steps, "offset k = ", pad=50)
    margin = dict(l=70, r=40, t=90, b=60)
    layout(fig, title, 470, showlegend=False, margin=margin, sliders=[control])
    return fig

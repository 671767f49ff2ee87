"""Interactive figures (plotly) of chapter 2, ``notebooks/02_causal_masks.ipynb``:
causal-mask alignment and mask variants.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ...nn.masks import causal_mask
from ._page import layout, slider

__all__ = ["mask_alignment_figure", "mask_variants_figure"]


# cividis ends
_MASK_COLORSCALE = [
    [0.0, "#00224e"],
    [0.5, "#00224e"],
    [0.5, "#fee838"],
    [1.0, "#fee838"],
]


def _mask_colorbar() -> dict:
    return dict(tickvals=[0.25, 0.75], ticktext=["blocked", "may attend"], len=0.6, thickness=14)


def mask_alignment_figure(L: int = 3, S_values: Sequence[int] = (3, 4, 5, 6, 7, 8)):
    """Causal masks for ``L`` queries and a growing number of keys ``S``: ours (bottom-right) beside
    PyTorch's ``is_causal`` (top-left), with a slider over ``S``.

    Args:
        L: number of queries.
        S_values: numbers of keys offered by the slider (each ``>= 1``).

    Returns:
        A ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: if ``L < 1`` or some ``S < 1``.
    """
    if L < 1 or min(S_values) < 1:
        raise ValueError(
            f"mask_alignment_figure: expected L >= 1 and every S >= 1, received L={L}, S={list(S_values)}"
        )
    S_max = max(S_values)

    def panels(S):
        ours = causal_mask(L, S).double()
        top_left = torch.ones(L, S, dtype=torch.bool).tril().double()
        # keys that do not exist yet: None draws a gap (JSON has no NaN)
        blank = [None] * (S_max - S)
        return [[row + blank for row in ours.tolist()], [row + blank for row in top_left.tolist()]]

    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=["tl.causal_mask(L, S): bottom-right", "torch is_causal: top-left"],
    )
    keys = [f"key {j}" for j in range(S_max)]
    first = panels(S_values[0])
    for c in range(2):
        fig.add_trace(
            go.Heatmap(
                z=first[c],
                x=keys,
                y=[f"query {i}" for i in range(L)],
                zmin=0,
                zmax=1,
                colorscale=_MASK_COLORSCALE,
                showscale=(c == 1),
                colorbar=_mask_colorbar(),
                xgap=1,
                ygap=1,
                hovertemplate="%{y}, %{x}: %{z}<extra></extra>",
            ),
            row=1,
            col=c + 1,
        )
    fig.update_yaxes(autorange="reversed")
    steps = [
        dict(method="restyle", label=str(S), args=[{"z": panels(S)}, [0, 1]]) for S in S_values
    ]
    title = (
        f"{L} new queries, S keys: only bottom-right alignment lets the last query see every key"
    )
    control = slider(steps, "S (keys) = ", pad=40)
    layout(fig, title, 330, margin=dict(l=80, r=110, t=80, b=40), sliders=[control])
    return fig


def mask_variants_figure(tokens: Sequence[str], n_real: int):
    """One sequence under four masks, chosen from a menu: none, causal, padding, causal and padding.

    Args:
        tokens: the ``L`` tokens (the last ``L - n_real`` are padding).
        n_real: number of real (non-padding) tokens.

    Returns:
        A ``plotly.graph_objects.Figure``.

    Raises:
        ValueError: if ``n_real`` is not in ``1 .. len(tokens)``.
    """
    L = len(tokens)
    if not 1 <= n_real <= L:
        raise ValueError(f"mask_variants_figure: expected 1 <= n_real <= {L}, received {n_real}")
    real = torch.arange(L) < n_real
    variants = {
        "no mask": torch.ones(L, L, dtype=torch.bool),
        "causal": causal_mask(L),
        "padding": real[None, :].expand(L, L),
        "causal and padding": causal_mask(L) & real[None, :],
    }
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
    z = {name: m.double().tolist() for name, m in variants.items()}
    fig = go.Figure(
        go.Heatmap(
            z=z["causal and padding"],
            x=labels,
            y=labels,
            zmin=0,
            zmax=1,
            colorscale=_MASK_COLORSCALE,
            colorbar=_mask_colorbar(),
            xgap=1,
            ygap=1,
            hovertemplate="query %{y}<br>key %{x}: %{z}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="query (attending)")
    fig.update_xaxes(title="key (attended to)", tickangle=-60)
    buttons = [dict(method="restyle", label=name, args=[{"z": [zz]}]) for name, zz in z.items()]
    title = "Masks combine with a logical and: padding hides columns, causality hides the future"
    menu = dict(buttons=buttons, active=3, direction="down")
    menu.update(x=0.0, xanchor="left", y=1.13, yanchor="top")  # above the plot, on the left
    layout(fig, title, 540, margin=dict(l=110, r=30, t=110, b=110), updatemenus=[menu])
    return fig

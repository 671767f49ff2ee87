"""Interactive figures (plotly) of chapter 1, ``notebooks/01_attention.ipynb``:
all heads of one layer, with a slider over the layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ._page import layout, rounded, slider

__all__ = ["attention_layers_figure"]


def attention_layers_figure(
    attentions: Sequence[Tensor] | Tensor,
    tokens: Sequence[str],
    title: str,
    initial_layer: int = 0,
    n_cols: int = 4,
):
    """All heads of one layer as small heatmaps, with a slider that moves through the layers.

    Args:
        attentions: ``n_layers`` tensors ``(H, L, L)`` for one example, or one ``(n_layers, H, L, L)`` tensor.
        tokens: ``L`` token labels.
        title: what the reader should notice.
        initial_layer: layer shown when the page opens.
        n_cols: heads per row of the grid.

    Returns:
        A ``plotly.graph_objects.Figure`` (display it with :func:`show`).

    Raises:
        ValueError: if the weights are not ``(n_layers, H, L, L)`` with ``L == len(tokens)``.
    """
    A = attentions if isinstance(attentions, Tensor) else torch.stack(list(attentions))
    if A.dim() != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] != len(tokens):
        raise ValueError(
            f"attention_layers_figure: expected (n_layers, H, L, L) with L = {len(tokens)}, "
            f"received {tuple(A.shape)}"
        )
    n_layers, H, L, _ = A.shape
    if not 0 <= initial_layer < n_layers:
        raise ValueError(
            f"attention_layers_figure: expected 0 <= initial_layer < {n_layers}, received {initial_layer}"
        )
    n_rows = -(-H // n_cols)
    fig = make_subplots(
        rows=n_rows,
        cols=n_cols,
        subplot_titles=[f"head {h}" for h in range(H)],
        horizontal_spacing=0.03,
        vertical_spacing=0.07,
    )
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]  # positions keep repeated tokens apart
    for h in range(H):
        fig.add_trace(
            go.Heatmap(
                z=rounded(A[initial_layer, h]),
                x=labels,
                y=labels,
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                showscale=(h == 0),
                colorbar=dict(title=dict(text="weight"), len=0.8, thickness=14),
                hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
            ),
            row=h // n_cols + 1,
            col=h % n_cols + 1,
        )
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    for r in range(1, n_rows + 1):  # token labels on the outer edges only
        fig.update_yaxes(showticklabels=True, tickfont=dict(size=9), row=r, col=1)
    for c in range(1, n_cols + 1):
        fig.update_xaxes(
            showticklabels=True, tickfont=dict(size=9), tickangle=-60, row=n_rows, col=c
        )
    steps = [
        dict(
            method="restyle",
            label=str(layer),
            args=[{"z": [rounded(A[layer, h]) for h in range(H)]}, list(range(H))],
        )
        for layer in range(n_layers)
    ]
    control = slider(steps, "layer ", pad=60, active=initial_layer)
    margin = dict(l=90, r=30, t=90, b=100)
    layout(fig, title, 260 * n_rows + 160, margin=margin, sliders=[control])
    return fig

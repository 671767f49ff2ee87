"""Interactive figures (plotly) of chapter 5, ``notebooks/05_encoder_decoder.ipynb``:
cross-attention of a trained model.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from torch import Tensor

from ._page import layout, rounded, slider

__all__ = ["cross_attention_examples_figure"]


def cross_attention_examples_figure(
    weights: Sequence[Tensor],
    src_tokens: Sequence[Sequence[str]],
    tgt_tokens: Sequence[Sequence[str]],
    title: str,
):
    """Cross-attention of several examples, one heatmap, with a slider that moves through the examples.

    Args:
        weights: one ``(L_i, S_i)`` tensor per example (target positions as rows, source positions as columns).
        src_tokens: ``S_i`` source labels per example.
        tgt_tokens: ``L_i`` target (decoder input) labels per example.
        title: what the reader should notice.

    Returns:
        A ``plotly.graph_objects.Figure``; each slider step restyles the heatmap's ``z``, ``x`` and ``y``.

    Raises:
        ValueError: if the numbers of examples differ, there are none, or an example's labels do not fit
            its weights.
    """
    if not (len(weights) == len(src_tokens) == len(tgt_tokens)) or not weights:
        raise ValueError(
            f"cross_attention_examples_figure: expected as many weights, src_tokens and tgt_tokens "
            f"(at least one), received {len(weights)}, {len(src_tokens)}, {len(tgt_tokens)}"
        )
    states = []
    for i, (w, s, t) in enumerate(zip(weights, src_tokens, tgt_tokens)):
        if w.dim() != 2 or tuple(w.shape) != (len(t), len(s)):
            raise ValueError(
                f"cross_attention_examples_figure: example {i} has weights {tuple(w.shape)}, but "
                f"{len(t)} target and {len(s)} source labels"
            )
        states.append(
            dict(
                z=rounded(w),
                x=[f"{j}:{a}" for j, a in enumerate(s)],
                y=[f"{j}:{a}" for j, a in enumerate(t)],
            )
        )
    first = states[0]
    fig = go.Figure(
        go.Heatmap(
            z=first["z"],
            x=first["x"],
            y=first["y"],
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            colorbar=dict(title=dict(text="weight"), thickness=14),
            hovertemplate="target %{y}<br>source %{x}<br>weight %{z:.3f}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="decoder input (query)")
    fig.update_xaxes(title="source position (key)")
    steps = [
        dict(
            method="restyle",
            label=str(i),
            args=[{"z": [st["z"]], "x": [st["x"]], "y": [st["y"]]}, [0]],
        )
        for i, st in enumerate(states)
    ]
    control = slider(steps, "held-out example ", pad=60)
    layout(fig, title, 520, margin=dict(l=110, r=30, t=80, b=80), sliders=[control])
    return fig

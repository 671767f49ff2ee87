"""Interactive figures (plotly) of chapter 4, ``notebooks/04_transformer_block.ipynb``:
gradient norm per layer, post-norm against pre-norm.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from ._page import DECIMALS, layout, slider

__all__ = ["gradient_norms_depth_figure"]


def gradient_norms_depth_figure(norms: dict, title: str, initial_depth: int | None = None):
    """Gradient norm per layer for post-norm and pre-norm stacks, with a slider over the depth.

    Args:
        norms: ``{depth: {"post-norm": [n_1, ..., n_depth], "pre-norm": [...]}}``; each list holds
            one positive gradient norm per layer, first (input side) layer first.
        title: what the reader should notice.
        initial_depth: depth shown when the page opens (default: the smallest).

    Returns:
        A ``plotly.graph_objects.Figure`` with one line per variant, a logarithmic y axis, and a
        slider whose steps restyle both lines to the stored norms of each depth.

    Raises:
        ValueError: if ``norms`` is empty, a depth's entry lacks a variant, a list's length is not the
            depth, a norm is not positive, or ``initial_depth`` is not a key.
    """
    variants = ("post-norm", "pre-norm")
    if not norms:
        raise ValueError("gradient_norms_depth_figure: expected at least one depth, received none")
    for depth, entry in norms.items():
        if set(entry) != set(variants):
            raise ValueError(
                f"gradient_norms_depth_figure: expected variants {list(variants)} for depth {depth}, "
                f"received {sorted(entry)}"
            )
        for name in variants:
            values = [float(v) for v in entry[name]]
            if len(values) != depth or min(values) <= 0:
                raise ValueError(
                    f"gradient_norms_depth_figure: expected {depth} positive norms for {name} at depth "
                    f"{depth}, received {len(values)} values with minimum {min(values, default=0.0)}"
                )
    depths = sorted(norms)
    initial_depth = depths[0] if initial_depth is None else initial_depth
    if initial_depth not in norms:
        raise ValueError(
            f"gradient_norms_depth_figure: expected initial_depth in {depths}, received {initial_depth}"
        )

    def state(depth):
        xs = list(range(1, depth + 1))
        return [xs, xs], [
            [round(float(v), DECIMALS) for v in norms[depth][name]] for name in variants
        ]

    colours = {"post-norm": "#00224e", "pre-norm": "#d55e00"}  # Okabe-Ito vermilion: 3.9:1 on white
    xs, ys = state(initial_depth)
    fig = go.Figure()
    for name, x, y in zip(variants, xs, ys):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                name=name,
                line=dict(color=colours[name], width=2),
                marker=dict(size=6, symbol="circle" if name == "post-norm" else "diamond"),
                hovertemplate=f"{name}<br>layer %{{x}}<br>gradient norm %{{y:.3g}}<extra></extra>",
            )
        )
    all_values = [v for d in depths for name in variants for v in norms[d][name]]
    lo, hi = min(all_values), max(all_values)
    fig.update_yaxes(
        type="log",
        title="gradient norm of the layer's parameters",
        range=[math.log10(lo) - 0.1, math.log10(hi) + 0.1],
    )
    fig.update_xaxes(title="layer (1 = input side)", range=[0, max(depths) + 1])
    steps = []
    for depth in depths:
        x, y = state(depth)
        steps.append(dict(method="restyle", label=str(depth), args=[{"x": x, "y": y}, [0, 1]]))
    control = slider(steps, "number of layers N = ", pad=50, active=depths.index(initial_depth))
    legend = dict(x=0.99, xanchor="right", y=0.99)  # top right
    layout(fig, title, 460, margin=dict(l=80, r=30, t=80, b=60), legend=legend, sliders=[control])
    return fig

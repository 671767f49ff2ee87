"""Interactive figures that work in the static book, with no kernel and no network.

The ipywidgets explorers of :mod:`transformer_lite.explorers` need a running
Python kernel. The figures here are plotly figures whose every state (each
layer, each number of keys, each mask variant) is computed when the notebook
runs and stored in the page; sliders and menus only switch between stored
states in the browser. The page loads ``plotly.min.js`` once, from the book's
own ``_static`` folder (see ``book/_ext/plotly_offline.py``), never from a CDN.

Colours are colour-blind safe (viridis for weights, the two ends of cividis for masks).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["attention_layers_figure", "mask_alignment_figure", "mask_variants_figure", "show"]

_MASK_COLORSCALE = [[0.0, "#00224e"], [0.5, "#00224e"], [0.5, "#fee838"], [1.0, "#fee838"]]  # cividis ends
_DECIMALS = 4  # stored weights are rounded: smaller pages, and outputs that compare exactly across runs


def _plotly():
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    return go, make_subplots


def _rounded(t: Tensor) -> list:
    return torch.round(t.detach().double().cpu(), decimals=_DECIMALS).tolist()


def _mask_colorbar() -> dict:
    return dict(tickvals=[0.25, 0.75], ticktext=["blocked", "may attend"], len=0.6, thickness=14)


def attention_layers_figure(attentions: Sequence[Tensor] | Tensor, tokens: Sequence[str], title: str,
                            initial_layer: int = 0, n_cols: int = 4):
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
    go, make_subplots = _plotly()
    A = attentions if isinstance(attentions, Tensor) else torch.stack(list(attentions))
    if A.dim() != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] != len(tokens):
        raise ValueError(f"attention_layers_figure: expected (n_layers, H, L, L) with L = {len(tokens)}, "
                         f"received {tuple(A.shape)}")
    n_layers, H, L, _ = A.shape
    if not 0 <= initial_layer < n_layers:
        raise ValueError(f"attention_layers_figure: expected 0 <= initial_layer < {n_layers}, received {initial_layer}")
    n_rows = -(-H // n_cols)
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=[f"head {h}" for h in range(H)],
                        horizontal_spacing=0.03, vertical_spacing=0.07)
    labels = [f"{i}:{t}" for i, t in enumerate(tokens)]  # positions keep repeated tokens apart
    for h in range(H):
        fig.add_trace(go.Heatmap(
            z=_rounded(A[initial_layer, h]), x=labels, y=labels, zmin=0, zmax=1, colorscale="Viridis",
            showscale=(h == 0), colorbar=dict(title=dict(text="weight"), len=0.8, thickness=14),
            hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"),
            row=h // n_cols + 1, col=h % n_cols + 1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    for r in range(1, n_rows + 1):  # token labels on the outer edges only
        fig.update_yaxes(showticklabels=True, tickfont=dict(size=8), row=r, col=1)
    for c in range(1, n_cols + 1):
        fig.update_xaxes(showticklabels=True, tickfont=dict(size=8), tickangle=-60, row=n_rows, col=c)
    steps = [dict(method="restyle", label=str(layer),
                  args=[{"z": [_rounded(A[layer, h]) for h in range(H)]}, list(range(H))]) for layer in range(n_layers)]
    fig.update_layout(
        title=dict(text=title), template="plotly_white", height=260 * n_rows + 160, autosize=True,
        margin=dict(l=90, r=30, t=90, b=100),
        sliders=[dict(active=initial_layer, steps=steps, currentvalue=dict(prefix="layer "), pad=dict(t=60))],
    )
    return fig


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
    from .masks import causal_mask

    go, make_subplots = _plotly()
    if L < 1 or min(S_values) < 1:
        raise ValueError(f"mask_alignment_figure: expected L >= 1 and every S >= 1, received L={L}, S={list(S_values)}")
    S_max = max(S_values)

    def panels(S):
        ours = causal_mask(L, S).double()
        top_left = torch.ones(L, S, dtype=torch.bool).tril().double()
        pad = torch.full((L, S_max - S), float("nan"), dtype=torch.float64)  # keys that do not exist yet
        return [torch.cat([ours, pad], 1), torch.cat([top_left, pad], 1)]

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=["tl.causal_mask(L, S): bottom-right", "torch is_causal: top-left"])
    keys = [f"key {j}" for j in range(S_max)]
    first = panels(S_values[0])
    for c in range(2):
        fig.add_trace(go.Heatmap(z=first[c].tolist(), x=keys, y=[f"query {i}" for i in range(L)], zmin=0, zmax=1,
                                 colorscale=_MASK_COLORSCALE, showscale=(c == 1), colorbar=_mask_colorbar(),
                                 xgap=1, ygap=1, hovertemplate="%{y}, %{x}: %{z}<extra></extra>"), row=1, col=c + 1)
    fig.update_yaxes(autorange="reversed")
    steps = [dict(method="restyle", label=str(S), args=[{"z": [p.tolist() for p in panels(S)]}, [0, 1]])
             for S in S_values]
    fig.update_layout(
        title=dict(text=f"{L} new queries, S keys: only bottom-right alignment lets the last query see every key"),
        template="plotly_white", height=330, autosize=True, margin=dict(l=80, r=110, t=80, b=40),
        sliders=[dict(active=0, steps=steps, currentvalue=dict(prefix="S (keys) = "), pad=dict(t=40))],
    )
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
    from .masks import causal_mask

    go, _ = _plotly()
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
    fig = go.Figure(go.Heatmap(z=z["causal and padding"], x=labels, y=labels, zmin=0, zmax=1,
                               colorscale=_MASK_COLORSCALE, colorbar=_mask_colorbar(), xgap=1, ygap=1,
                               hovertemplate="query %{y}<br>key %{x}: %{z}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title="query (attending)")
    fig.update_xaxes(title="key (attended to)", tickangle=-60)
    buttons = [dict(method="restyle", label=name, args=[{"z": [zz]}]) for name, zz in z.items()]
    fig.update_layout(
        title=dict(text="Masks combine with a logical and: padding hides columns, causality hides the future"),
        template="plotly_white", height=540, autosize=True, margin=dict(l=110, r=30, t=110, b=110),
        updatemenus=[dict(buttons=buttons, active=3, direction="down", x=0.0, xanchor="left", y=1.13,
                          yanchor="top")],
    )
    return fig


def show(fig, div_id: str, alt: str) -> None:
    """Display ``fig`` in a notebook so that it works both in Jupyter and in the static book.

    The output holds two representations: plotly's own JSON (rendered by JupyterLab's plotly
    extension) and an HTML fragment that calls ``Plotly.newPlot`` on a ``<div>`` with the fixed id
    ``div_id`` (rendered by the book, which loads ``plotly.min.js`` from its ``_static`` folder).
    A fixed id keeps the stored output identical from run to run, as nbval requires. ``alt`` describes
    the figure for readers who cannot see it (the HTML wrapper gets ``role="figure"`` and ``aria-label``).

    Raises:
        ValueError: if ``div_id`` is empty or contains characters other than letters, digits, ``-`` and ``_``,
            or ``alt`` is empty.
    """
    import re

    from IPython.display import display

    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", div_id or ""):
        raise ValueError(f"show: expected an HTML id of letters, digits, '-' and '_', received {div_id!r}")
    if not alt.strip():
        raise ValueError("show: expected a non-empty alt text describing the figure")
    import html as html_lib

    html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})
    html = f'<div role="figure" aria-label="{html_lib.escape(alt, quote=True)}">{html}</div>'
    display({"application/vnd.plotly.v1+json": fig.to_plotly_json(), "text/html": html}, raw=True)

"""Interactive figures that work in the static book, with no kernel and no network.

The ipywidgets explorers of :mod:`transformer_lite.book.explorers` need a running
Python kernel. The figures here are plotly figures whose every state (each
layer, each number of keys, each mask variant) is computed when the notebook
runs and stored in the page; sliders and menus only switch between stored
states in the browser. The page loads ``plotly.min.js`` once, from the book's
own ``_static`` folder (see ``book/_ext/plotly_offline.py``), never from a CDN.

Colours are colour-blind safe (viridis for weights, the two ends of cividis for masks).
"""

from __future__ import annotations

import html as html_lib
import math
import re
from collections.abc import Sequence

import torch
from torch import Tensor

from ...nn.masks import causal_mask
from ...nn.positional import sinusoidal_positional_encoding
from ...nn.recurrent import RNN
from ..jacobians import gradient_norm_vs_lag, recurrent_weight, rnn_step_jacobians

__all__ = [
    "attention_layers_figure", "mask_alignment_figure", "mask_variants_figure", "show",
    "sinusoid_shift_matrix", "positional_offset_figure", "gradient_norms_depth_figure",
    "cross_attention_examples_figure", "rnn_lag_profile", "rnn_gradient_figure",
    "attention_cost_figure", "next_token_temperature_figure",
]

_MASK_COLORSCALE = [[0.0, "#00224e"], [0.5, "#00224e"], [0.5, "#fee838"], [1.0, "#fee838"]]  # cividis ends
_DECIMALS = 4  # stored weights are rounded: smaller pages, and outputs that compare exactly across runs


def _plotly():
    # on first use, not at the top: importing plotly takes about as long as importing torch
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
    go, make_subplots = _plotly()
    if L < 1 or min(S_values) < 1:
        raise ValueError(f"mask_alignment_figure: expected L >= 1 and every S >= 1, received L={L}, S={list(S_values)}")
    S_max = max(S_values)

    def panels(S):
        ours = causal_mask(L, S).double()
        top_left = torch.ones(L, S, dtype=torch.bool).tril().double()
        blank = [None] * (S_max - S)  # keys that do not exist yet: None draws a gap (JSON has no NaN)
        return [[row + blank for row in ours.tolist()], [row + blank for row in top_left.tolist()]]

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=["tl.causal_mask(L, S): bottom-right", "torch is_causal: top-left"])
    keys = [f"key {j}" for j in range(S_max)]
    first = panels(S_values[0])
    for c in range(2):
        fig.add_trace(go.Heatmap(z=first[c], x=keys, y=[f"query {i}" for i in range(L)], zmin=0, zmax=1,
                                 colorscale=_MASK_COLORSCALE, showscale=(c == 1), colorbar=_mask_colorbar(),
                                 xgap=1, ygap=1, hovertemplate="%{y}, %{x}: %{z}<extra></extra>"), row=1, col=c + 1)
    fig.update_yaxes(autorange="reversed")
    steps = [dict(method="restyle", label=str(S), args=[{"z": panels(S)}, [0, 1]])
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
    from IPython.display import display  # on first use: IPython is not a dependency of the package

    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", div_id or ""):
        raise ValueError(f"show: expected an HTML id of letters, digits, '-' and '_', received {div_id!r}")
    if not alt.strip():
        raise ValueError("show: expected a non-empty alt text describing the figure")
    import plotly.io as pio  # on first use, as in _plotly()

    # Serialize with the standard library's json, not orjson: plotly picks orjson whenever it is
    # importable, and the two write floats and non-ASCII characters differently, which would make
    # the stored notebook outputs depend on what else happens to be installed. Set for this call only.
    engine, pio.json.config.default_engine = pio.json.config.default_engine, "json"
    try:
        html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                           config={"displaylogo": False, "responsive": True})
    finally:
        pio.json.config.default_engine = engine
    html = f'<div role="figure" aria-label="{html_lib.escape(alt, quote=True)}">{html}</div>'
    display({"application/vnd.plotly.v1+json": fig.to_plotly_json(), "text/html": html}, raw=True)


# --------------------------------------------------------------------------- positional encodings

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
        raise ValueError(f"sinusoid_shift_matrix: expected an int d_model >= 2, received {d_model!r}")
    n_pairs = d_model // 2
    omega = base ** (-2.0 * torch.arange(n_pairs, dtype=torch.float64) / d_model)  # (n_pairs,) rad/position
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    blocks = torch.stack((torch.stack((c, s), -1), torch.stack((-s, c), -1)), -2)  # (n_pairs, 2, 2)
    return torch.block_diag(*blocks)  # (2 n_pairs, 2 n_pairs)


def positional_offset_figure(d_model: int = 64, max_offset: int = 64, n_pairs_shown: int = 6,
                             base: float = 10000.0):
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
    go, make_subplots = _plotly()
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"positional_offset_figure: expected an even d_model >= 2, received {d_model!r}")
    if max_offset < 1:
        raise ValueError(f"positional_offset_figure: expected max_offset >= 1, received {max_offset}")
    if not 1 <= n_pairs_shown <= d_model // 2:
        raise ValueError(f"positional_offset_figure: expected 1 <= n_pairs_shown <= {d_model // 2}, "
                         f"received {n_pairs_shown}")
    pe = sinusoidal_positional_encoding(2 * max_offset + 1, d_model, base=base, dtype=torch.float64)
    offsets = list(range(-max_offset, max_offset + 1))
    dots = pe[max_offset] @ pe.T  # (2 max_offset + 1,): PE[p] . PE[p + k] with p = max_offset
    n = 2 * n_pairs_shown
    feats = [f"f{j}" for j in range(n)]

    def rot(k):
        return _rounded(sinusoid_shift_matrix(k, d_model, base)[:n, :n])

    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.1,
                        subplot_titles=[f"PE[p] · PE[p + k], d_model = {d_model} (any p)",
                                        f"R_k, first {n_pairs_shown} (sin, cos) pairs"])
    fig.add_trace(go.Scatter(x=offsets, y=_rounded(dots), mode="lines", name="dot product",
                             line=dict(color="#3b528b"), hovertemplate="k = %{x}<br>%{y:.3f}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Heatmap(z=rot(0), x=feats, y=feats, zmin=-1, zmax=1, colorscale="RdBu_r", xgap=1, ygap=1,
                             colorbar=dict(title=dict(text="entry"), len=0.8, thickness=14),
                             hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Scatter(x=[0], y=[round(float(dots[max_offset]), _DECIMALS)], mode="markers",
                             name="chosen k", marker=dict(size=12, color="#d8576b"),
                             hovertemplate="k = %{x}<br>%{y:.3f}<extra></extra>"), row=1, col=1)
    fig.update_xaxes(title_text="offset k (positions)", row=1, col=1)
    fig.update_yaxes(title_text="dot product", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=2)
    # restyle cycles through per-trace lists, so every attribute names its value for both traces
    # (1 = the heatmap of R_k, 2 = the marker); None leaves the scatter without a z.
    steps = [dict(method="restyle", label=str(k),
                  args=[{"x": [feats, [k]], "y": [feats, [round(float(dots[max_offset + k]), _DECIMALS)]],
                         "z": [rot(k), None]}, [1, 2]]) for k in range(max_offset + 1)]
    fig.update_layout(
        title=dict(text="Moving k positions on is one fixed rotation per feature pair;<br>"
                   "the dot product depends on k only"),
        template="plotly_white", height=470, autosize=True, showlegend=False,
        margin=dict(l=70, r=40, t=90, b=60),
        sliders=[dict(active=0, steps=steps, currentvalue=dict(prefix="offset k = "), pad=dict(t=50))],
    )
    return fig


# --------------------------------------------------------------------------- chapter 4: gradient norms per layer

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
    go, _ = _plotly()
    variants = ("post-norm", "pre-norm")
    if not norms:
        raise ValueError("gradient_norms_depth_figure: expected at least one depth, received none")
    for depth, entry in norms.items():
        if set(entry) != set(variants):
            raise ValueError(f"gradient_norms_depth_figure: expected variants {list(variants)} for depth {depth}, "
                             f"received {sorted(entry)}")
        for name in variants:
            values = [float(v) for v in entry[name]]
            if len(values) != depth or min(values) <= 0:
                raise ValueError(f"gradient_norms_depth_figure: expected {depth} positive norms for {name} at depth "
                                 f"{depth}, received {len(values)} values with minimum {min(values, default=0.0)}")
    depths = sorted(norms)
    initial_depth = depths[0] if initial_depth is None else initial_depth
    if initial_depth not in norms:
        raise ValueError(f"gradient_norms_depth_figure: expected initial_depth in {depths}, received {initial_depth}")

    def state(depth):
        xs = list(range(1, depth + 1))
        return [xs, xs], [[round(float(v), _DECIMALS) for v in norms[depth][name]] for name in variants]

    colours = {"post-norm": "#00224e", "pre-norm": "#c9a800"}  # cividis ends, readable on white
    xs, ys = state(initial_depth)
    fig = go.Figure()
    for name, x, y in zip(variants, xs, ys):
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name, line=dict(color=colours[name], width=2),
                                 marker=dict(size=6, symbol="circle" if name == "post-norm" else "diamond"),
                                 hovertemplate=f"{name}<br>layer %{{x}}<br>gradient norm %{{y:.3g}}<extra></extra>"))
    all_values = [v for d in depths for name in variants for v in norms[d][name]]
    lo, hi = min(all_values), max(all_values)
    fig.update_yaxes(type="log", title="gradient norm of the layer's parameters",
                     range=[math.log10(lo) - 0.1, math.log10(hi) + 0.1])
    fig.update_xaxes(title="layer (1 = input side)", range=[0, max(depths) + 1])
    steps = []
    for depth in depths:
        x, y = state(depth)
        steps.append(dict(method="restyle", label=str(depth), args=[{"x": x, "y": y}, [0, 1]]))
    fig.update_layout(
        title=dict(text=title), template="plotly_white", height=460, autosize=True,
        margin=dict(l=80, r=30, t=80, b=60), legend=dict(x=0.99, xanchor="right", y=0.99),
        sliders=[dict(active=depths.index(initial_depth), steps=steps,
                      currentvalue=dict(prefix="number of layers N = "), pad=dict(t=50))],
    )
    return fig


# --------------------------------------------------------------------------- chapter 5: cross-attention

def cross_attention_examples_figure(weights: Sequence[Tensor], src_tokens: Sequence[Sequence[str]],
                                    tgt_tokens: Sequence[Sequence[str]], title: str):
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
    go, _ = _plotly()
    if not (len(weights) == len(src_tokens) == len(tgt_tokens)) or not weights:
        raise ValueError(f"cross_attention_examples_figure: expected as many weights, src_tokens and tgt_tokens "
                         f"(at least one), received {len(weights)}, {len(src_tokens)}, {len(tgt_tokens)}")
    states = []
    for i, (w, s, t) in enumerate(zip(weights, src_tokens, tgt_tokens)):
        if w.dim() != 2 or tuple(w.shape) != (len(t), len(s)):
            raise ValueError(f"cross_attention_examples_figure: example {i} has weights {tuple(w.shape)}, but "
                             f"{len(t)} target and {len(s)} source labels")
        states.append(dict(z=_rounded(w), x=[f"{j}:{a}" for j, a in enumerate(s)],
                           y=[f"{j}:{a}" for j, a in enumerate(t)]))
    first = states[0]
    fig = go.Figure(go.Heatmap(
        z=first["z"], x=first["x"], y=first["y"], zmin=0, zmax=1, colorscale="Viridis",
        colorbar=dict(title=dict(text="weight"), thickness=14),
        hovertemplate="target %{y}<br>source %{x}<br>weight %{z:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title="decoder input (query)")
    fig.update_xaxes(title="source position (key)")
    steps = [dict(method="restyle", label=str(i), args=[{"z": [st["z"]], "x": [st["x"]], "y": [st["y"]]}, [0]])
             for i, st in enumerate(states)]
    fig.update_layout(
        title=dict(text=title), template="plotly_white", height=520, autosize=True,
        margin=dict(l=110, r=30, t=80, b=80),
        sliders=[dict(active=0, steps=steps, currentvalue=dict(prefix="held-out example "), pad=dict(t=60))],
    )
    return fig


# --------------------------------------------------------------------------- chapter 6: gradient norm against lag in an RNN

def _sig(values, digits: int = 4) -> list:
    """Round to ``digits`` significant digits (the values span many orders of magnitude)."""
    return [float(f"{float(v):.{digits}g}") for v in values]


def rnn_lag_profile(spectral_radius: float, input_scale: float = 0.01, hidden_size: int = 64, length: int = 60,
                    nonlinearity: str = "tanh", seed: int = 0) -> tuple[Tensor, Tensor, float]:
    """``||dh_T/dh_{T-k}||_2`` against the lag ``k`` for an Elman RNN with a chosen spectral radius.

    The set-up of chapter 6: an :class:`~transformer_lite.nn.recurrent.RNN` in float64 with
    ``W_hh = spectral_radius * Q`` (``Q`` a random orthogonal matrix, from
    :func:`~transformer_lite.book.jacobians.recurrent_weight`), ``W_ih = I``, zero biases, ``h_0 = 0``, and
    inputs ``x_t = input_scale * z_t`` with ``z_t`` standard normal; the norms come from
    :func:`~transformer_lite.book.jacobians.rnn_step_jacobians` and
    :func:`~transformer_lite.book.jacobians.gradient_norm_vs_lag` with ``T = length`` (Pascanu et al., 2013, Eq. 5).
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
            :func:`~transformer_lite.book.jacobians.recurrent_weight` (bad sizes, radius or nonlinearity).
    """
    rnn = RNN(hidden_size, hidden_size, nonlinearity=nonlinearity).double()
    with torch.no_grad():
        rnn.weight_hh.copy_(recurrent_weight(hidden_size, spectral_radius, seed=seed))
        rnn.weight_ih.copy_(torch.eye(hidden_size, dtype=torch.float64))
        rnn.bias_ih.zero_()
        rnn.bias_hh.zero_()
    g = torch.Generator().manual_seed(seed + 1)
    x = input_scale * torch.randn(1, length, hidden_size, generator=g, dtype=torch.float64)  # (1, T, H)
    jac = rnn_step_jacobians(rnn, x)  # (1, T, H, H)
    lags, norms = gradient_norm_vs_lag(jac)  # (T + 1,), (1, T + 1)
    with torch.no_grad():
        h, _ = rnn(x)  # (1, T, H)
    dphi = 1 - h**2 if nonlinearity == "tanh" else (h > 0).double()
    return lags, norms[0], float(dphi.mean())


def rnn_gradient_figure(radii: Sequence[float] = tuple(round(0.5 + 0.05 * i, 2) for i in range(21)),
                        input_scales: Sequence[float] = (0.01, 1.0, 3.0), hidden_size: int = 32, length: int = 60,
                        initial_radius: float = 1.0, seed: int = 0):
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
    go, _ = _plotly()
    radii, input_scales = [float(r) for r in radii], [float(s) for s in input_scales]
    if not radii or not input_scales:
        raise ValueError(f"rnn_gradient_figure: expected at least one radius and one input scale, received "
                         f"{len(radii)} and {len(input_scales)}")
    if initial_radius not in radii:
        raise ValueError(f"rnn_gradient_figure: expected initial_radius in radii {radii}, received {initial_radius}")
    lags = list(range(length + 1))
    states = []
    for r in radii:
        curves = [_sig(rnn_lag_profile(r, s, hidden_size, length, "tanh", seed)[1]) for s in input_scales]
        curves.append(_sig([r**k for k in lags]))
        states.append(curves)
    start = radii.index(initial_radius)
    colors = ["#3b528b", "#21918c", "#d8576b", "#fde725"]
    fig = go.Figure()
    for i, s in enumerate(input_scales):
        fig.add_trace(go.Scatter(x=lags, y=states[start][i], mode="lines", name=f"tanh, inputs with std {s:g}",
                                 line=dict(color=colors[i % len(colors)], width=2.5),
                                 hovertemplate="lag %{x}<br>norm %{y:.3g}<extra></extra>"))
    fig.add_trace(go.Scatter(x=lags, y=states[start][-1], mode="lines", name="radius^lag (linear network)",
                             line=dict(color="#555555", dash="dash"),
                             hovertemplate="lag %{x}<br>radius^lag %{y:.3g}<extra></extra>"))
    traces = list(range(len(input_scales) + 1))
    steps = [dict(method="restyle", label=f"{r:.2f}", args=[{"y": states[j]}, traces]) for j, r in enumerate(radii)]
    fig.update_xaxes(title_text="lag k = T - s (steps back from the last state)")
    fig.update_yaxes(title_text="||dh_T / dh_(T-k)|| (spectral norm)", type="log", exponentformat="power")
    fig.update_layout(
        # the title at the top of the figure, the legend between it and the plot (never on top of each other)
        title=dict(text=f"RNN gradient reach, H = {hidden_size}: radius sets the trend, saturation pulls it down",
                   font=dict(size=14), y=0.98, yref="container", yanchor="top"),
        template="plotly_white", height=550, autosize=True, margin=dict(l=80, r=30, t=105, b=60),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        sliders=[dict(active=start, steps=steps, currentvalue=dict(prefix="spectral radius of W_hh = "),
                      pad=dict(t=60))],
    )
    return fig


# --------------------------------------------------------------------------- chapter 7: the cost of attention

def attention_cost_figure(results: dict):
    """Slider over the sequence length L: memory and time of direct against tiled attention, as benchmarked.

    Reads the dictionary that ``benchmarks/bench_attention.py`` writes to ``results.json`` (numbers measured
    once, checked in; nothing is timed when the figure is built). Left: bytes of the ``B x H x L x L``
    float32 score matrix and the measured peak allocations of our direct attention, our tiled
    :func:`~transformer_lite.nn.efficient_attention.memory_efficient_attention` and torch's fused kernel (MiB).
    Right: their median times (ms). Both on logarithmic y axes, so the ranges stay visible; the bar labels
    give the values.

    Args:
        results: ``{"info": {"date": ...}, "config": {...}, "rows": [{"L", "score_bytes", "alloc": {...},
            "time": {...}}, ...]}`` with keys ``ours_direct``, ``ours_tiled`` and ``torch_sdpa`` in
            ``alloc`` and ``time``.

    Returns:
        A ``plotly.graph_objects.Figure``; traces 0 (memory bars) and 1 (time bars); one slider step per row.

    Raises:
        ValueError: if ``results`` has no rows or a row misses a key.
    """
    go, make_subplots = _plotly()
    rows = results.get("rows") if isinstance(results, dict) else None
    if not rows:
        raise ValueError("attention_cost_figure: expected results with a non-empty 'rows' list "
                         "(benchmarks/results.json)")
    impls = ["ours_direct", "ours_tiled", "torch_sdpa"]
    names = ["direct (ours)", "tiled (ours)", "torch fused"]
    states = []
    for row in rows:
        try:
            mem = [row["score_bytes"]] + [row["alloc"][k] for k in impls]
            ms = [row["time"][k] * 1e3 for k in impls]
        except KeyError as exc:
            raise ValueError(f"attention_cost_figure: row {row.get('L')!r} misses the key {exc}") from None
        mib = _sig([m / 2**20 for m in mem], 3)
        ms = _sig(ms, 3)
        states.append(dict(L=row["L"], mib=mib, ms=ms))
    mem_x = ["score matrix<br>B·H·L²·4 bytes"] + [f"peak alloc.<br>{n}" for n in names]
    time_x = names
    colors_mem = ["#999999", "#3b528b", "#21918c", "#e6a100"]
    colors_time = ["#3b528b", "#21918c", "#e6a100"]
    first = states[0]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.58, 0.42], horizontal_spacing=0.12,
                        subplot_titles=["memory (MiB)", "median time (ms)"])
    fig.add_trace(go.Bar(x=mem_x, y=first["mib"], text=[f"{v:g}" for v in first["mib"]], textposition="outside",
                         marker_color=colors_mem, name="memory", hovertemplate="%{x}: %{y:.3g} MiB<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=time_x, y=first["ms"], text=[f"{v:g}" for v in first["ms"]], textposition="outside",
                         marker_color=colors_time, name="time", hovertemplate="%{x}: %{y:.3g} ms<extra></extra>"),
                  row=1, col=2)
    all_mib = [v for s in states for v in s["mib"]]
    all_ms = [v for s in states for v in s["ms"]]

    def log_range(values):  # fixed axis range over every state, with headroom for the labels
        return [math.log10(min(values)) - 0.3, math.log10(max(values)) + 0.6]

    fig.update_yaxes(type="log", range=log_range(all_mib), title_text="MiB", row=1, col=1)
    fig.update_yaxes(type="log", range=log_range(all_ms), title_text="ms", row=1, col=2)
    steps = [dict(method="restyle", label=str(s["L"]),
                  args=[{"y": [s["mib"], s["ms"]], "text": [[f"{v:g}" for v in s["mib"]],
                                                             [f"{v:g}" for v in s["ms"]]]}, [0, 1]])
             for s in states]
    cfg = results.get("config", {})
    date = results.get("info", {}).get("date", "?")
    fig.update_layout(
        # two short lines: one long line is clipped at the book's column width
        title=dict(text=f"Scores grow as L², the tiled method's memory barely grows; time grows for both<br>"
                        f"<span style='font-size:11px'>B={cfg.get('batch', '?')}, H={cfg.get('heads', '?')}, "
                        f"d_head={cfg.get('d_head', '?')}, measured {date}</span>", font=dict(size=13)),
        template="plotly_white", height=500, autosize=True, showlegend=False, margin=dict(l=70, r=30, t=90, b=90),
        sliders=[dict(active=0, steps=steps, currentvalue=dict(prefix="sequence length L = "), pad=dict(t=70))],
    )
    return fig


# --------------------------------------------------------------------------- chapter 8: temperature

def _display_char(label: str) -> str:
    """A character as the reader should see it on an axis: newline as ``⏎`` (the book's convention, as in its
    matplotlib figures), tab as ``\\t``, space as ``␣``."""
    return {"\n": "⏎", "\t": "\\t", " ": "␣"}.get(label, label)


def next_token_temperature_figure(logits: Tensor, labels: Sequence[str],
                                  temperatures: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
                                  top_n: int = 20,
                                  title: str = "Temperature reshapes the next-character distribution: 0 keeps only "
                                               "the most likely character, 2 spreads the mass",
                                  initial_temperature: float | None = None):
    """Slider over the temperature: the probabilities of the ``top_n`` most likely next tokens of one context.

    Each state draws ``softmax(logits / T)`` (Hinton, Vinyals & Dean, 2015, Eq. 1) for the ``top_n`` tokens
    with the largest logits, always in the same order (by logit, descending; ties keep the lower id first).
    ``T = 0`` is greedy decoding: all the mass on the arg-max (the lowest id among tied maxima, as
    :func:`~transformer_lite.models.decoder_only.sample_next_token`). An annotation gives, for the full
    distribution over all ``V`` tokens, its entropy ``-sum_i p_i ln p_i`` in nats and the total probability
    of the tokens outside the ``top_n`` shown. Probabilities are computed in float64 and stored rounded to
    4 decimals. One trace (the bars, index 0); each slider step is a plotly ``update`` that sets its ``y``
    and the annotation's text.

    Args:
        logits: ``(V,)`` floating, the next-token logits after one context.
        labels: ``V`` strings, the raw tokens (characters); newline, tab and space are drawn as ``⏎``,
            ``\\t`` and ``␣``.
        temperatures: temperatures on the slider, each ``>= 0``.
        top_n: how many tokens to draw (``min(top_n, V)`` bars).
        title: what the reader should notice.
        initial_temperature: the state shown when the page opens; ``None`` = 1 if offered, else the first.

    Returns:
        A ``plotly.graph_objects.Figure`` (display it with :func:`show`).

    Raises:
        ValueError: if ``logits`` is not a 1-D floating tensor with at least one entry, ``labels`` does not
            hold ``V`` distinct strings, ``temperatures`` is empty or holds a negative or non-finite value,
            ``top_n < 1``, or ``initial_temperature`` is not one of ``temperatures``.
    """
    go, _ = _plotly()
    if not isinstance(logits, Tensor) or logits.dim() != 1 or logits.numel() < 1 or not logits.is_floating_point():
        got = f"{tuple(logits.shape)} {logits.dtype}" if isinstance(logits, Tensor) else type(logits).__name__
        raise ValueError(f"next_token_temperature_figure: expected floating logits of shape (V,), received {got}")
    V = logits.shape[0]
    labels = [str(c) for c in labels]
    if len(labels) != V or len(set(labels)) != V:
        raise ValueError(f"next_token_temperature_figure: expected {V} distinct labels (one per logit), received "
                         f"{len(labels)} with {len(set(labels))} distinct")
    temperatures = [float(t) for t in temperatures]
    if not temperatures or not all(math.isfinite(t) and t >= 0 for t in temperatures):
        raise ValueError(f"next_token_temperature_figure: expected finite temperatures >= 0, received {temperatures}")
    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise ValueError(f"next_token_temperature_figure: expected an int top_n >= 1, received {top_n!r}")
    if initial_temperature is None:
        initial_temperature = 1.0 if 1.0 in temperatures else temperatures[0]
    if initial_temperature not in temperatures:
        raise ValueError(f"next_token_temperature_figure: expected initial_temperature in {temperatures}, "
                         f"received {initial_temperature}")
    n = min(top_n, V)
    z = logits.detach().double().cpu()  # (V,)
    order = torch.argsort(z, descending=True, stable=True)  # (V,): ties keep the lower id first
    shown, rest = order[:n], order[n:]

    def distribution(t: float) -> Tensor:
        if t == 0:
            return torch.zeros(V, dtype=torch.float64).index_fill_(0, z.argmax().reshape(1), 1.0)  # greedy
        return torch.softmax(z / t, dim=0)  # (V,)

    states = []
    for t in temperatures:
        p = distribution(t)
        entropy = float(torch.special.entr(p).sum())  # -sum p ln p, with 0 ln 0 = 0; nats
        outside = float(p[rest].sum())  # summed directly, not 1 - shown (no cancellation)
        label = "0 (greedy)" if t == 0 else f"{t:g}"
        shown_outside = f"{outside:.4f}" if outside == 0 or outside >= 1e-4 else f"{outside:.1e}"
        note = f"entropy {entropy:.3f} nats<br>probability outside the top {n}: {shown_outside}"
        states.append(dict(y=_rounded(p[shown]), label=label, note=note))
    start = temperatures.index(initial_temperature)
    x = [_display_char(labels[i]) for i in shown.tolist()]
    fig = go.Figure(go.Bar(x=x, y=states[start]["y"], marker_color="#3b528b", name="probability",
                           hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title_text="next character", type="category", categoryorder="array", categoryarray=x)
    fig.update_yaxes(title_text="probability", range=[0, 1])
    steps = [dict(method="update", label=s["label"], args=[{"y": [s["y"]]}, {"annotations[0].text": s["note"]}, [0]])
             for s in states]
    fig.update_layout(
        title=dict(text=title), template="plotly_white", height=460, autosize=True,
        margin=dict(l=70, r=30, t=80, b=60), showlegend=False,
        annotations=[dict(text=states[start]["note"], xref="paper", yref="paper", x=0.99, y=0.98, xanchor="right",
                          yanchor="top", align="right", showarrow=False, bgcolor="rgba(255,255,255,0.85)",
                          bordercolor="#999999", borderwidth=1)],
        sliders=[dict(active=start, steps=steps, currentvalue=dict(prefix="temperature T = "), pad=dict(t=60))],
    )
    return fig

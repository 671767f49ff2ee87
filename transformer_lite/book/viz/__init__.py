"""Figures for the chapters: attention heatmaps, head grids and mask pictures.

All figures use colour-blind-safe colormaps (viridis / cividis), label both
axes with tokens, carry a colorbar, and take a title that says what to notice.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.ticker import MaxNLocator, NullLocator
from torch import Tensor

__all__ = [
    "plot_attention", "plot_head_grid", "plot_mask", "MASK_CMAP", "plot_score_bias",
    "plot_activations", "plot_decoder_block", "plot_norms_vs_lag", "fit_loglog_slope",
    "plot_loglog_fit",
]

# Two colours from the ends of cividis: dark blue = blocked, yellow = may attend.
MASK_CMAP = ListedColormap([plt.get_cmap("cividis")(0.0), plt.get_cmap("cividis")(1.0)])


def _as_2d(weights: Tensor | np.ndarray) -> np.ndarray:
    w = weights.detach().cpu().double().numpy() if isinstance(weights, Tensor) else np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"expected a 2-D (L, S) array, received shape {w.shape}")
    return w


def plot_attention(weights: Tensor | np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str] | None = None,
                   title: str = "", ax: plt.Axes | None = None, cmap: str = "viridis", vmax: float | None = 1.0,
                   annotate: bool = False, colorbar: bool = True) -> plt.Axes:
    """Heatmap of one head's attention weights, queries as rows and keys as columns.

    Args:
        weights: ``(L, S)`` weights (rows sum to 1).
        query_tokens: ``L`` labels for the rows.
        key_tokens: ``S`` labels for the columns (defaults to ``query_tokens``).
        title: what the reader should notice.
        ax: axes to draw on (a new figure if None).
        cmap: a perceptually uniform, colour-blind-safe colormap.
        vmax: upper end of the colour scale (1.0 so that heads are comparable; None = data maximum).
        annotate: print each weight in its cell (for small matrices).
        colorbar: draw a colorbar labelled "attention weight".

    Returns:
        The axes.

    Raises:
        ValueError: if the number of labels does not match the shape of ``weights``.
    """
    w = _as_2d(weights)
    key_tokens = list(query_tokens) if key_tokens is None else list(key_tokens)
    if w.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"plot_attention: weights of shape {w.shape} need {w.shape[0]} query labels and "
                         f"{w.shape[1]} key labels, received {len(query_tokens)} and {len(key_tokens)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.42 * w.shape[1], 0.8 + 0.38 * w.shape[0]))
    im = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(w.shape[1]), key_tokens, rotation=60, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(w.shape[0]), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                v = w[i, j]
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if v > 0.6 * (vmax or w.max()) else "white")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="attention weight", fraction=0.046, pad=0.04)
    return ax


def plot_head_grid(attentions: Sequence[Tensor] | Tensor, tokens: Sequence[str], title: str = "",
                   cmap: str = "viridis", cell_size: float = 1.15,
                   tick_positions: Sequence[int] | None = None) -> plt.Figure:
    """All heads of all layers as a grid of small heatmaps (rows = layers, columns = heads).

    Args:
        attentions: ``n_layers`` tensors of shape ``(H, L, L)`` (one example), or one ``(n_layers, H, L, L)`` tensor.
        tokens: ``L`` token labels, shown on the axes of the first column and the last row.
        title: what the reader should notice.
        cmap: colour-blind-safe colormap; one shared scale from 0 to 1.
        cell_size: inches per small heatmap.
        tick_positions: the positions whose token is written on the axes (default: all). When many
            heads must fit the book's column, label a few landmarks (e.g. ``[0, L - 1]`` for
            ``[CLS]`` and ``[SEP]``) in a legible size rather than every token in an illegible one.

    Returns:
        The figure.

    Raises:
        ValueError: if the attention tensors are not ``(n_layers, H, L, L)`` with ``L == len(tokens)``,
            or a tick position is outside ``[0, L)``.
    """
    if not isinstance(attentions, Tensor):
        shapes = {tuple(a.shape) for a in attentions}
        if len(shapes) != 1:
            raise ValueError(f"plot_head_grid: expected every layer's weights to share one shape (H, L, L), "
                             f"received {sorted(shapes)}")
        attentions = torch.stack(list(attentions))
    A = attentions
    if A.dim() != 4 or A.shape[-1] != A.shape[-2] or A.shape[-1] != len(tokens):
        raise ValueError(f"plot_head_grid: expected (n_layers, H, L, L) with L = {len(tokens)}, "
                         f"received {tuple(A.shape)}")
    n_layers, H = A.shape[:2]
    ticks = list(range(len(tokens))) if tick_positions is None else [int(p) for p in tick_positions]
    size, head_size = (5, 9) if tick_positions is None else (7, 8)  # few labels: legible ones
    if any(not 0 <= p < len(tokens) for p in ticks):
        raise ValueError(f"plot_head_grid: expected tick positions in [0, {len(tokens)}), received {ticks}")
    fig, axes = plt.subplots(n_layers, H, figsize=(cell_size * H + 1.6, cell_size * n_layers + 1.2),
                             squeeze=False, sharex=True, sharey=True, layout="constrained")
    for layer in range(n_layers):
        for head in range(H):
            ax = axes[layer, head]
            im = ax.imshow(A[layer, head].detach().cpu().double().numpy(), cmap=cmap, vmin=0, vmax=1)
            ax.tick_params(length=0, pad=1, labelsize=size)
            if layer == 0:
                ax.set_title(f"head {head}", fontsize=head_size)
            if head == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=9)
    # The axes share their ticks, and shared inner axes hide their labels: the tokens appear on the
    # first column (queries) and the last row (keys) only.
    labels = [tokens[p] for p in ticks]
    axes[0, 0].set_yticks(ticks, labels, fontsize=size)
    axes[-1, 0].set_xticks(ticks, labels, fontsize=size)
    for ax in axes[-1]:
        ax.tick_params(axis="x", labelrotation=90)
    fig.supxlabel("key (attended to); in each small square the rows are the queries")
    if title:
        fig.suptitle(title)
    fig.colorbar(im, ax=axes, label="attention weight", fraction=0.02, pad=0.02)
    return fig


def plot_mask(mask: Tensor, query_tokens: Sequence[str] | None = None, key_tokens: Sequence[str] | None = None,
              title: str = "", ax: plt.Axes | None = None) -> plt.Axes:
    """Picture of a boolean mask (``True`` = may attend) with a two-colour legend bar.

    Args:
        mask: bool ``(L, S)``.
        query_tokens, key_tokens: labels (default: positions 0, 1, ...).
        title: what the reader should notice.
        ax: axes to draw on.

    Returns:
        The axes.

    Raises:
        ValueError: if ``mask`` is not a 2-D bool tensor or labels do not match it.
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() != 2:
        raise ValueError(f"plot_mask: expected a 2-D bool tensor, received "
                         f"{getattr(mask, 'dtype', type(mask))} of shape {tuple(getattr(mask, 'shape', ()))}")
    L, S = mask.shape
    query_tokens = [str(i) for i in range(L)] if query_tokens is None else list(query_tokens)
    key_tokens = [str(j) for j in range(S)] if key_tokens is None else list(key_tokens)
    if len(query_tokens) != L or len(key_tokens) != S:
        raise ValueError(f"plot_mask: mask of shape {(L, S)} needs {L} query and {S} key labels, "
                         f"received {len(query_tokens)} and {len(key_tokens)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.6 + 0.42 * S, 0.8 + 0.38 * L))
    im = ax.imshow(mask.cpu().numpy().astype(float), cmap=MASK_CMAP, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(S), key_tokens, rotation=60 if max(map(len, key_tokens)) > 2 else 0, ha="right"
                  if max(map(len, key_tokens)) > 2 else "center", rotation_mode="anchor")
    ax.set_yticks(range(L), query_tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    cbar = ax.figure.colorbar(im, ax=ax, ticks=[0.25, 0.75], fraction=0.046, pad=0.04)
    cbar.ax.set_yticklabels(["False:\nblocked", "True:\nmay attend"])
    return ax


# --------------------------------------------------------------------------- position biases on the scores

def plot_score_bias(bias: Tensor, title: str = "", head_labels: Sequence[str] | None = None,
                    vmax: float | None = None, n_cols: int | None = None,
                    cell_size: float = 2.3, scale: str = "shared") -> plt.Figure:
    """What a relative position bias or ALiBi adds to the attention scores: one heatmap per head.

    Two colour scales:

    * ``scale="shared"`` (default): one scale for all heads, so that their sizes can be compared.
      Signed values use the diverging ``RdBu_r`` colormap with limits symmetric about 0 (white = adds
      nothing, red = raises the score, blue = lowers it) and one colorbar; entries equal to ``-inf``
      (keys a causal bias forbids) are drawn in grey.
    * ``scale="per_head"``: each head gets its own colour range, from its own smallest to its own
      largest finite value, and its own colorbar, so that the pattern of a head with small values
      (a shallow ALiBi slope) is as visible as that of a head with large ones; the sizes are then read
      from the colorbars, not from the colours. The colormap is the sequential, colour-blind-safe
      ``cividis`` (the limits are no longer centred on 0, so a diverging map's white would mean
      nothing), and ``-inf`` entries are drawn in white. A head whose finite values are all equal is
      drawn in the middle of a range of width 1 around that value.

    The colour chosen for ``-inf`` is named in the colorbar label of the shared scale, and in the
    label of the first colorbar of the per-head scale.

    Args:
        bias: ``(H, L, S)`` or ``(1, H, L, S)`` float tensor (e.g. the output of
            :class:`~transformer_lite.nn.relative_position.T5RelativePositionBias` or
            :func:`~transformer_lite.nn.relative_position.alibi_bias`).
        title: what the reader should notice (with ``scale="per_head"``, say that the scales differ).
        head_labels: ``H`` panel titles (default ``head 0``, ``head 1``, ...).
        vmax: half-width of the shared colour scale (default: the largest finite ``|bias|``); only
            with ``scale="shared"``.
        n_cols: panels per row (default: all heads in one row, at most 4).
        cell_size: inches per panel.
        scale: ``"shared"`` or ``"per_head"`` (see above).

    Returns:
        The figure.

    Raises:
        ValueError: if ``bias`` is not ``(H, L, S)`` / ``(1, H, L, S)`` floating, ``head_labels`` has
            the wrong length, ``scale`` is neither ``"shared"`` nor ``"per_head"``, or ``vmax`` is
            given with ``scale="per_head"``.
    """
    if not isinstance(bias, Tensor) or not bias.is_floating_point() or bias.dim() not in (3, 4) \
            or (bias.dim() == 4 and bias.shape[0] != 1):
        raise ValueError("plot_score_bias: expected a floating bias of shape (H, L, S) or (1, H, L, S), received "
                         f"{tuple(getattr(bias, 'shape', ()))} of dtype {getattr(bias, 'dtype', type(bias).__name__)}")
    if scale not in ("shared", "per_head"):
        raise ValueError(f"plot_score_bias: expected scale 'shared' or 'per_head', received {scale!r}")
    if scale == "per_head" and vmax is not None:
        raise ValueError("plot_score_bias: expected vmax=None with scale='per_head' (each head sets its own "
                         f"limits), received vmax={vmax}")
    b = bias[0] if bias.dim() == 4 else bias  # (H, L, S)
    H, L, S = b.shape
    labels = [f"head {h}" for h in range(H)] if head_labels is None else list(head_labels)
    if len(labels) != H:
        raise ValueError(f"plot_score_bias: expected {H} head labels, received {len(labels)}")
    values = b.detach().cpu().double().numpy()
    blocked = np.isneginf(values)  # (H, L, S): keys the bias forbids
    per_head = scale == "per_head"
    if per_head:
        cmap, bad, bad_name = plt.get_cmap("cividis"), "white", "white"
        limits = []
        for h in range(H):
            finite = values[h][~blocked[h]]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
            limits.append((lo - 0.5, hi + 0.5) if lo == hi else (lo, hi))
    else:
        cmap, bad, bad_name = plt.get_cmap("RdBu_r"), "#9a9a9a", "grey"
        finite = values[~blocked]
        if vmax is None:
            vmax = float(np.abs(finite).max()) if finite.size else 1.0
            vmax = vmax if vmax > 0 else 1.0
        limits = [(-vmax, vmax)] * H
    cmap = cmap.with_extremes(bad=bad)  # bad = -inf: the key is forbidden
    inf_note = f"{bad_name}: -inf, forbidden" if blocked.any() else ""
    n_cols = min(H, 4) if n_cols is None else n_cols
    n_rows = -(-H // n_cols)
    width = (cell_size + (0.9 if per_head else 0.0)) * n_cols + (0.6 if per_head else 1.4)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width, cell_size * n_rows + 0.9),
                             squeeze=False, layout="constrained")
    for h in range(n_rows * n_cols):
        ax = axes[h // n_cols, h % n_cols]
        if h >= H:
            ax.axis("off")
            continue
        lo, hi = limits[h]
        im = ax.imshow(np.ma.masked_where(blocked[h], values[h]), cmap=cmap, vmin=lo, vmax=hi,
                       aspect="auto", interpolation="nearest")
        ax.set_title(labels[h], fontsize=10)
        ax.set_xlabel("key position j", fontsize=9)
        if h % n_cols == 0:
            ax.set_ylabel("query position i", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # positions are whole numbers
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=8)
        if per_head:
            cbar = fig.colorbar(im, ax=ax, fraction=0.08, pad=0.03)
            cbar.ax.tick_params(labelsize=8)
            cbar.set_label("added to the score" + (f"\n({inf_note})" if inf_note and h == 0 else ""), fontsize=9)
    if not per_head:
        label = "added to the score" + (f"  ({inf_note})" if inf_note else "")
        fig.colorbar(im, ax=axes, label=label, fraction=0.025, pad=0.02)
    if title:
        fig.suptitle(title)
    return fig


# --------------------------------------------------------------------------- chapters 4-5: activations, block diagram

def plot_activations(x: Tensor | np.ndarray, title: str = "", ax: plt.Axes | None = None,
                     limit: float | None = None, cmap: str = "RdBu_r", colorbar_label: str = "value") -> plt.Axes:
    """Heatmap of one example's activations, positions as rows and features as columns.

    Signed values get a diverging colormap with symmetric limits, so white is exactly 0.

    Args:
        x: ``(L, D)`` activations of one example.
        title: what the reader should notice.
        ax: axes to draw on (a new figure if None).
        limit: colour range ``[-limit, limit]`` (default: the largest absolute value).
        cmap: a diverging, colour-blind-safe colormap.
        colorbar_label: label of the colorbar.

    Returns:
        The axes.

    Raises:
        ValueError: if ``x`` is not 2-D.
    """
    a = _as_2d(x)
    limit = float(np.abs(a).max()) if limit is None else float(limit)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.5 + 0.3 * a.shape[1], 0.8 + 0.3 * a.shape[0]))
    im = ax.imshow(a, cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xlabel("feature")
    ax.set_ylabel("position")
    ax.set_yticks(range(a.shape[0]))
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, label=colorbar_label, fraction=0.046, pad=0.04)
    return ax


def plot_decoder_block(norm_first: bool = False, ax: plt.Axes | None = None) -> plt.Axes:
    """Diagram of :class:`~transformer_lite.nn.blocks.DecoderBlock`: self-attention, cross-attention, feed-forward.

    Drawn bottom to top (data flows upwards), with the encoder's ``memory``
    entering the cross-attention from the side, and each sublayer wrapped in a
    residual connection (dashed: the identity path) and a layer norm: after
    the addition for post-norm (Vaswani et al., 2017), before the sublayer for
    pre-norm (Xiong et al., 2020).

    Args:
        norm_first: draw the pre-norm variant.
        ax: axes to draw on.

    Returns:
        The axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 7.4))
    cmap = plt.get_cmap("cividis")
    fill = {"self": cmap(0.2), "cross": cmap(0.95), "ff": cmap(0.6), "norm": "#e4e4e4", "add": "white"}
    text_colour = {"self": "white"}
    sublayers = [("self", "masked self-attention\nQ, K, V: target"),
                 ("cross", "cross-attention\nQ: target; K, V: memory"),
                 ("ff", "position-wise\nfeed-forward")]
    items = [("io", "target states x  (B, L, D)")]  # (kind, label), bottom to top
    groups = []  # (index where the residual branches off, index where it is added back)
    for i, (kind, label) in enumerate(sublayers, start=1):
        branch = len(items) - 1
        if norm_first:
            items += [("norm", f"LayerNorm {i}"), (kind, label), ("add", "+")]
        else:
            items += [(kind, label), ("norm", f"add, then LayerNorm {i}")]
        groups.append((branch, len(items) - 1))
    items.append(("io", "block output  (B, L, D)"))
    step, x0, half_w, half_h = 1.0, 2.6, 1.25, 0.3
    ys = [i * step for i in range(len(items))]

    def extent(k):  # half height of item k
        return 0.18 if items[k][0] in ("io", "add") else half_h

    for k, ((kind, label), y) in enumerate(zip(items, ys)):
        if kind == "io":
            ax.text(x0, y, label, ha="center", va="center", fontsize=10)
        elif kind == "add":
            ax.add_patch(plt.Circle((x0, y), 0.18, facecolor="white", edgecolor="black"))
            ax.text(x0, y, "+", ha="center", va="center", fontsize=13)
        else:
            w = half_w * (0.75 if kind == "norm" and norm_first else 1.0)
            ax.add_patch(FancyBboxPatch((x0 - w, y - half_h), 2 * w, 2 * half_h, boxstyle="round,pad=0.03",
                                        facecolor=fill[kind], edgecolor="black"))
            ax.text(x0, y, label, ha="center", va="center", fontsize=9, color=text_colour.get(kind, "black"))
        if k:
            ax.add_patch(FancyArrowPatch((x0, ys[k - 1] + extent(k - 1)), (x0, y - extent(k)), arrowstyle="-|>",
                                         mutation_scale=11, color="black"))
        if kind == "cross":
            ax.text(x0 + half_w + 1.5, y, "memory\n(encoder output)\n(B, S, D)", ha="center", va="center",
                    fontsize=9)
            ax.add_patch(FancyArrowPatch((x0 + half_w + 0.7, y), (x0 + half_w, y), arrowstyle="-|>",
                                         mutation_scale=11, color="black"))
    left = x0 - half_w - 0.35
    for branch, add in groups:
        yb = ys[branch] + extent(branch) + 0.15
        ya = ys[add]
        ax.plot([x0, left, left], [yb, yb, ya], color="grey", linestyle="--", linewidth=1.2)
        end = x0 - (0.18 if norm_first else half_w * 1.0)
        ax.add_patch(FancyArrowPatch((left, ya), (end, ya), arrowstyle="-|>", mutation_scale=11, color="grey",
                                     linestyle="--"))
    ax.set_xlim(left - 0.3, x0 + half_w + 2.3)
    ax.set_ylim(-0.5, ys[-1] + 0.5)
    ax.axis("off")
    ax.set_title(("pre-norm" if norm_first else "post-norm") + " decoder block\n(dashed: residual path)",
                 fontsize=10)
    return ax


# --------------------------------------------------------------------------- chapters 6-7: gradient reach, cost

_LINE_COLORS = ["#3b528b", "#21918c", "#d8576b", "#e6a100", "#5ec962", "#440154"]  # distinguishable, colour-blind safe
_MARKERS = ["o", "s", "D", "^", "v", "P"]


def _label_line_axes(ax: plt.Axes, xlabel: str, ylabel: str, title: str) -> plt.Axes:
    """Axis labels, a major-tick grid, the title (if any) and the legend of a line plot."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def plot_norms_vs_lag(curves: dict, title: str = "", ax: plt.Axes | None = None,
                      ylabel: str = "gradient norm", xlabel: str = "lag (steps between the two positions)",
                      markevery: int = 6) -> plt.Axes:
    """Gradient norms against lag on a logarithmic y axis, one line per labelled curve.

    Args:
        curves: ``{label: (lags, norms)}``, each a 1-D tensor/array of equal length; a label starting with
            ``"ref:"`` is drawn dashed grey (a reference such as ``radius**lag``), without the prefix.
        title: what the reader should notice.
        ax: axes to draw on (a new figure if None).
        ylabel, xlabel: axis labels.
        markevery: a marker every this many points (lines stay tellable apart in grey scale).

    Returns:
        The axes.

    Raises:
        ValueError: if a curve's lags and norms differ in length.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    i = 0
    for label, (lags, norms) in curves.items():
        lags, norms = np.asarray(lags, dtype=float).ravel(), np.asarray(norms, dtype=float).ravel()
        if lags.shape != norms.shape:
            raise ValueError(f"plot_norms_vs_lag: curve {label!r} has {lags.size} lags but {norms.size} norms")
        if label.startswith("ref:"):
            ax.semilogy(lags, norms, "--", color="0.45", lw=1.2, label=label[4:].strip())
            continue
        ax.semilogy(lags, norms, color=_LINE_COLORS[i % 6], marker=_MARKERS[i % 6], markevery=markevery,
                    ms=5, lw=1.8, label=label)
        i += 1
    return _label_line_axes(ax, xlabel, ylabel, title)


def fit_loglog_slope(x, y, min_x: float | None = None) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (the exponent p in ``y ~ c x^p``).

    Args:
        x, y: positive values of equal length (at least two points with ``x >= min_x``).
        min_x: ignore points with smaller ``x`` (fixed overheads dominate short inputs).

    Returns:
        The slope as a float.

    Raises:
        ValueError: on non-positive values, unequal lengths or fewer than two points.
    """
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"fit_loglog_slope: expected x and y of equal length, received {x.size} and {y.size}")
    keep = np.ones_like(x, dtype=bool) if min_x is None else x >= min_x
    if keep.sum() < 2 or (x[keep] <= 0).any() or (y[keep] <= 0).any():
        raise ValueError("fit_loglog_slope: expected at least two points, all positive")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def plot_loglog_fit(x, series: dict, title: str = "", ax: plt.Axes | None = None, xlabel: str = "L",
                    ylabel: str = "", min_x: float | None = None) -> plt.Axes:
    """Several measured series against ``x`` on log-log axes, each with its fitted slope in the legend.

    The fitted line ``c x^p`` (from :func:`fit_loglog_slope` over ``x >= min_x``) is drawn dotted
    over the points it was fitted to.

    Args:
        x: the common positive x values.
        series: ``{label: y values}``.
        title, xlabel, ylabel: labels.
        ax: axes to draw on (a new figure if None).
        min_x: fit only points with ``x >= min_x``.

    Returns:
        The axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    x = np.asarray(x, dtype=float)
    for i, (label, y) in enumerate(series.items()):
        y = np.asarray(y, dtype=float)
        p = fit_loglog_slope(x, y, min_x)
        keep = np.ones_like(x, dtype=bool) if min_x is None else x >= min_x
        c = np.exp(np.mean(np.log(y[keep]) - p * np.log(x[keep])))
        color = _LINE_COLORS[i % 6]
        ax.loglog(x, y, marker=_MARKERS[i % 6], color=color, lw=1.5, label=f"{label}: slope {p:.2f}")
        ax.loglog(x[keep], c * x[keep] ** p, ":", color=color, lw=1.2)
    ax.set_xticks(x, [f"{v:g}" for v in x])  # label the measured lengths only
    ax.xaxis.set_minor_locator(NullLocator())
    return _label_line_axes(ax, xlabel, ylabel, title)

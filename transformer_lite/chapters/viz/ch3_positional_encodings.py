"""Static figures (matplotlib) of chapter 3, ``notebooks/03_positional_encodings.ipynb``:
position biases added to the scores, and accuracy against evaluation length (train short, test long).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from ._style import COLUMN_WIDTH, LINE_COLORS, MARKERS, PHONE_COLUMN_PX

__all__ = ["plot_score_bias", "plot_accuracy_vs_length"]

# CSS px: the smallest text these figures aim at on the phone's column (the book asks for 9; the
# margin absorbs the constrained layout's rounding of the figure's tight width)
_PHONE_TEXT_PX = 9.4


def _legible_width() -> float:
    """Inches: the widest figure whose ``font.size`` text is still ``_PHONE_TEXT_PX`` on a phone.

    A figure ``w`` inches wide is stored ``w + 2 pad`` inches wide and shrunk to the phone's column
    (``PHONE_COLUMN_PX`` CSS px), so ``pt`` text shows at ``pt / 72 * PHONE_COLUMN_PX / (w + 2 pad)``
    px whatever the dpi; at most :data:`COLUMN_WIDTH`, the laptop's column.
    """
    pt, pad = plt.rcParams["font.size"], plt.rcParams["savefig.pad_inches"]
    return min(COLUMN_WIDTH, pt * PHONE_COLUMN_PX / (72 * _PHONE_TEXT_PX) - 2 * pad)


def plot_score_bias(
    bias: Tensor,
    title: str = "",
    head_labels: Sequence[str] | None = None,
    vmax: float | None = None,
    n_cols: int | None = None,
    cell_size: float = 2.3,
    scale: str = "shared",
) -> plt.Figure:
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
        n_cols: panels per row (default: all heads in one row, at most 4; with ``scale="per_head"``,
            whose every panel has its own colorbar, 2 keep the panels large on a phone).
        cell_size: inches per panel, reduced when needed so that the figure is narrow enough for
            its text (the ``font.size`` of ``plt.rcParams``, which every label uses) to stay legible
            when a phone shrinks the figure to its column, and at most :data:`COLUMN_WIDTH` wide.
        scale: ``"shared"`` or ``"per_head"`` (see above).

    Returns:
        The figure.

    Raises:
        ValueError: if ``bias`` is not ``(H, L, S)`` / ``(1, H, L, S)`` floating, ``head_labels`` has
            the wrong length, ``scale`` is neither ``"shared"`` nor ``"per_head"``, or ``vmax`` is
            given with ``scale="per_head"``.
    """
    if (
        not isinstance(bias, Tensor)
        or not bias.is_floating_point()
        or bias.dim() not in (3, 4)
        or (bias.dim() == 4 and bias.shape[0] != 1)
    ):
        raise ValueError(
            "plot_score_bias: expected a floating bias of shape (H, L, S) or (1, H, L, S), received "
            f"{tuple(getattr(bias, 'shape', ()))} of dtype {getattr(bias, 'dtype', type(bias).__name__)}"
        )
    if scale not in ("shared", "per_head"):
        raise ValueError(
            f"plot_score_bias: expected scale 'shared' or 'per_head', received {scale!r}"
        )
    if scale == "per_head" and vmax is not None:
        raise ValueError(
            "plot_score_bias: expected vmax=None with scale='per_head' (each head sets its own "
            f"limits), received vmax={vmax}"
        )
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
    # inches, in units of the text size: a line of text, the y label and ticks of the first column,
    # and the colorbar (its ticks and a label of two lines) beside each panel or beside them all
    line = plt.rcParams["font.size"] / 72 * 1.3
    y_label = 3.0 * line
    extra, pad = (4.5 * line, y_label) if per_head else (0.0, y_label + 4.0 * line)
    max_width = _legible_width()
    # no smaller than a few lines of text: many columns make a wider figure rather than no panel
    cell_size = max(min(cell_size, (max_width - pad) / n_cols - extra), 3 * line)
    width = (cell_size + extra) * n_cols + pad
    title_lines = title.count("\n") + 1 if title else 0
    # each row: the panel, its title above, its x label and ticks below
    height = n_rows * (cell_size + 3.4 * line) + title_lines * line + 0.1
    fig, axes = plt.subplots(
        n_rows,
        n_cols,
        figsize=(round(width, 2), round(height, 2)),  # hundredths: a readable figure repr
        squeeze=False,
        layout="constrained",
    )
    for h in range(n_rows * n_cols):
        ax = axes[h // n_cols, h % n_cols]
        if h >= H:
            ax.axis("off")
            continue
        lo, hi = limits[h]
        im = ax.imshow(
            np.ma.masked_where(blocked[h], values[h]),
            cmap=cmap,
            vmin=lo,
            vmax=hi,
            aspect="auto",
            interpolation="nearest",
        )
        ax.set_title(labels[h])
        ax.set_xlabel("key position j")
        if h % n_cols == 0:
            ax.set_ylabel("query position i")
        # positions are whole numbers; few ticks, so that they stay apart at the text's size
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        if per_head:
            cbar = fig.colorbar(im, ax=ax, fraction=0.08, pad=0.03)
            cbar.ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
            cbar.set_label(
                "added to the score" + (f"\n({inf_note})" if inf_note and h == 0 else "")
            )
    if not per_head:
        label = "added to the score" + (f"\n({inf_note})" if inf_note else "")
        fig.colorbar(im, ax=axes, label=label, fraction=0.025, pad=0.02)
    if title:
        fig.suptitle(title)
    return fig


def _length_label(n: int, train_length: int) -> str:
    """A tick label: ``"32 = 2L"`` for a multiple of the training length, else ``"n"``."""
    if n % train_length:
        return f"{n}"
    multiple = n // train_length
    return f"{n} = L" if multiple == 1 else f"{n} = {multiple}L"


def plot_accuracy_vs_length(
    accuracy: Mapping[str, Sequence[Mapping[int, float]]],
    train_length: int,
    chance: float,
    ceiling: Mapping[int, float],
    title: str = "",
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Accuracy against evaluation length: a dot per seed, a line through the seeds' mean.

    Args:
        accuracy: ``{scheme: [{length: accuracy} per seed]}``; every seed has the same lengths.
        train_length: the longest training length L, named in the tick labels (L, 2L, ...).
        chance: the accuracy of a uniform guess, drawn as a dotted line.
        ceiling: ``{length: accuracy}`` of the best order-blind guess, drawn dashed.
        title: says what to notice.
        ax: axes to draw on (if ``None``, a new figure as wide as its text allows on a phone, at
            most :data:`COLUMN_WIDTH`); the legend goes under them, in two columns.

    Raises:
        ValueError: if ``accuracy`` is empty or the seeds of a scheme differ in their lengths.
    """
    if not accuracy:
        raise ValueError("plot_accuracy_vs_length: expected at least one scheme, received none")
    if ax is None:
        _, ax = plt.subplots(figsize=(round(_legible_width(), 2), 6.4), layout="constrained")
    n_schemes = len(accuracy)
    for k, (scheme, runs) in enumerate(accuracy.items()):
        lengths = list(runs[0])
        if any(list(r) != lengths for r in runs):
            raise ValueError(
                f"plot_accuracy_vs_length: expected the same lengths for every seed of {scheme!r}"
            )
        x = np.arange(len(lengths), dtype=float)
        values = np.array([[r[n] for n in lengths] for r in runs])  # (seeds, lengths)
        shift = (k - (n_schemes - 1) / 2) * 0.06  # side by side, so the dots do not hide
        colour, marker = LINE_COLORS[k % len(LINE_COLORS)], MARKERS[k % len(MARKERS)]
        for row in values:
            ax.scatter(x + shift, row, color=colour, marker=marker, s=22, alpha=0.55)
        ax.plot(
            x + shift,
            values.mean(axis=0),
            color=colour,
            marker=marker,
            lw=1.8,
            ms=7,
            markerfacecolor="white",
            label=f"{scheme} (mean of {len(runs)})",
        )
    ax.plot(
        x,
        [ceiling[n] for n in lengths],
        "k--",
        lw=1.2,
        label="best order-blind guess\n(bag of tokens)",
    )
    ax.axhline(chance, color="0.45", ls=":", lw=1.2, label=f"chance ({chance:.2f})")
    ax.set_xticks(x, [_length_label(n, train_length) for n in lengths])
    ax.set_ylim(0, 1.04)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("accuracy on held-out sequences")
    ax.grid(True, axis="y", alpha=0.3)
    if title:
        ax.set_title(title)
    # under the axes, where it hides no dot; the text's size, as every label
    ax.legend(ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15))
    return ax

"""Static figures (matplotlib) of chapter 2, ``notebooks/02_causal_masks.ipynb``:
a bool mask as a picture, and the masks of a left-padded batch at each stage of generation.

Sizes are in units of the font size (``rcParams["font.size"]``): a mask cell is ``CELL_EM`` font
sizes wide, so a figure drawn at a larger font grows with it and keeps its labels apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import text_to_path
from torch import Tensor

from ._style import MASK_CMAP

__all__ = ["plot_mask", "plot_batch_masks"]

# A mask cell, in font sizes: room for an upright tick label of two characters, one per cell.
CELL_EM = 1.6
# The two ends of the colour bar, as every mask figure labels them.
MASK_KEY = ["False:\nblocked", "True:\nmay attend"]


def _em() -> float:
    """The font size, in inches."""
    return plt.rcParams["font.size"] / 72


def _text_width(texts: Sequence[str]) -> float:
    """Width in inches of the widest line of ``texts`` at the tick labels' font size."""
    prop = FontProperties(size=plt.rcParams["ytick.labelsize"])
    lines = [line for t in texts for line in str(t).split("\n")]
    widths = [text_to_path.get_text_width_height_descent(s, prop, ismath=False)[0] for s in lines]
    return max(widths, default=0.0) / 72


def _key_labels(ax: plt.Axes, labels: Sequence[str], turned: bool) -> None:
    """Key labels under ``ax``, one per column: upright, or turned to 60 degrees."""
    ax.set_xticks(
        range(len(labels)),
        labels,
        rotation=60 if turned else 0,
        ha="right" if turned else "center",
        rotation_mode="anchor",
    )


def _key_labels_height(labels: Sequence[str], turned: bool) -> float:
    """Height in inches that ``_key_labels`` takes under the axes."""
    return _text_width(labels) * math.sin(math.radians(60)) if turned else 1.2 * _em()


def _mask_key(cbar) -> None:
    """Label the two colours of a mask's colour bar: ``False`` (blocked), ``True`` (may attend)."""
    cbar.set_ticks([0.25, 0.75], labels=MASK_KEY)


def plot_mask(
    mask: Tensor,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    title: str = "",
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Picture of a boolean mask (``True`` = may attend) with a two-colour legend bar.

    Without ``ax``, the figure is sized from the font: each cell ``CELL_EM`` font sizes square
    (taller when a few rows would be shorter than the query-axis label), the margins measured from
    the labels. With ``ax``, the mask fills the given axes.

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
        raise ValueError(
            f"plot_mask: expected a 2-D bool tensor, received "
            f"{getattr(mask, 'dtype', type(mask))} of shape {tuple(getattr(mask, 'shape', ()))}"
        )
    L, S = mask.shape
    query_tokens = [str(i) for i in range(L)] if query_tokens is None else list(query_tokens)
    key_tokens = [str(j) for j in range(S)] if key_tokens is None else list(key_tokens)
    if len(query_tokens) != L or len(key_tokens) != S:
        raise ValueError(
            f"plot_mask: mask of shape {(L, S)} needs {L} query and {S} key labels, "
            f"received {len(query_tokens)} and {len(key_tokens)}"
        )
    xlabel, ylabel = "key (attended to)", "query (attending)"
    turned = max(map(len, key_tokens)) > 2  # a word turns, a number or a character stays upright
    bar_box = None  # in given axes, the colour bar takes its share of them
    if ax is None:
        # A figure of its own, in inches: square cells, margins measured from the labels, and
        # room for the colour bar's two two-line labels even beside a mask of one or two rows.
        em = _em()
        width = CELL_EM * em * S
        height = max(CELL_EM * em * L, _text_width([ylabel]) + em)  # the axis label fits beside
        bar = max(height, 6 * em)
        left = _text_width(query_tokens) + 3 * em
        bottom = (bar - height) / 2 + _key_labels_height(key_tokens, turned) + 3 * em
        top = (bar - height) / 2 + (1.5 * em * (title.count("\n") + 1) if title else 0) + em
        right = 1.6 * em + _text_width(MASK_KEY) + em
        fig = plt.figure(figsize=(left + width + right, bottom + height + top))
        W, H = fig.get_size_inches()
        ax = fig.add_axes((left / W, bottom / H, width / W, height / H))
        bar_box = (
            (left + width + 0.6 * em) / W,
            (bottom + (height - bar) / 2) / H,
            em / W,
            bar / H,
        )
    im = ax.imshow(mask.cpu().numpy().astype(float), cmap=MASK_CMAP, vmin=0, vmax=1, aspect="auto")
    _key_labels(ax, key_tokens, turned)
    ax.set_yticks(range(L), query_tokens)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if bar_box is None:
        _mask_key(ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04))
    else:
        _mask_key(ax.figure.colorbar(im, cax=ax.figure.add_axes(bar_box)))
    return ax


def plot_batch_masks(
    masks: Sequence[Tensor],
    query_labels: Sequence[Sequence[Sequence[str]]],
    key_labels: Sequence[Sequence[Sequence[str]]],
    stage_names: Sequence[str],
    row_titles: Sequence[str],
    title: str = "",
    cell_size: float | None = None,
) -> plt.Figure:
    """The bool masks of every row of a batch at several stages (prefill, decode steps), one panel each.

    Figure row ``b`` shows the batch's row ``b``, figure column ``s`` stage ``s`` (e.g. the prompt
    at prefill, then one decode step with the cache); one two-colour bar under the panels serves
    them all. Each panel is as tall as its number of queries and stands on the bottom of its row,
    so a one-query decode step is a strip level with the prompt's last query.

    Args:
        masks: one bool ``(B, L_s, S_s)`` tensor per stage (``True`` = may attend), the same B.
        query_labels: ``query_labels[s][b]``: ``L_s`` labels of the queries of row ``b``.
        key_labels: ``key_labels[s][b]``: ``S_s`` labels of the keys of row ``b``.
        stage_names: one name per stage, above its column.
        row_titles: one title per row of the batch, in front of its query-axis label.
        title: what the reader should notice (the figure's title).
        cell_size: inches per mask cell (default: ``CELL_EM`` font sizes, so that the labels,
            one per cell, keep apart at any font size).

    Returns:
        The figure.

    Raises:
        ValueError: if a mask is not a 3-D bool tensor, the stages disagree on B, or a label list
            does not match its mask.
    """
    n_stages = len(masks)
    if n_stages == 0 or len(stage_names) != n_stages:
        raise ValueError(
            f"plot_batch_masks: expected one stage name per mask, received {len(stage_names)} "
            f"names for {n_stages} masks"
        )
    for s, m in enumerate(masks):
        if not isinstance(m, Tensor) or m.dtype != torch.bool or m.dim() != 3:
            raise ValueError(
                f"plot_batch_masks: expected masks[{s}] a 3-D bool tensor (B, L, S), received "
                f"{getattr(m, 'dtype', type(m))} of shape {tuple(getattr(m, 'shape', ()))}"
            )
    B = masks[0].shape[0]
    if any(m.shape[0] != B for m in masks) or len(row_titles) != B:
        raise ValueError(
            f"plot_batch_masks: expected every mask and row_titles to have B = {B} rows, received "
            f"{[m.shape[0] for m in masks]} and {len(row_titles)} titles"
        )
    for s, m in enumerate(masks):
        L, S = m.shape[1:]
        for b in range(B):
            nq, nk = len(query_labels[s][b]), len(key_labels[s][b])
            if (nq, nk) != (L, S):
                raise ValueError(
                    f"plot_batch_masks: masks[{s}] row {b} of shape {(L, S)} needs {L} query and "
                    f"{S} key labels, received {nq} and {nk}"
                )
    # The layout, in inches: every panel's cells square, every margin measured from its labels.
    em = _em()
    cell = CELL_EM * em if cell_size is None else cell_size
    ylabels = [f"{row_titles[b]}\nquery" for b in range(B)]
    slot = max(max(m.shape[1] for m in masks) * cell, _text_width(ylabels) + em)  # a figure row
    keys = [[k for row in key_labels[s] for k in row] for s in range(n_stages)]
    turned = [max(map(len, k)) > 3 for k in keys]  # a character or "pad" stays upright
    # under each panel: its key labels, the axis label and a gap
    below = max(_key_labels_height(k, t) for k, t in zip(keys, turned)) + 3 * em
    lefts, x = [], 0.0  # each panel's left edge, after its query labels (and the axis label)
    for s, m in enumerate(masks):
        x += _text_width([q for row in query_labels[s] for q in row]) + (1.5 if s else 3.5) * em
        lefts.append(x)
        x += m.shape[2] * cell
    width = x + em
    bar_area = 5 * em  # the colour bar under the panels, and its labels
    head = 2 * em + (1.6 * em * (title.count("\n") + 1) if title else 0)
    height = bar_area + B * (below + slot) + head
    fig = plt.figure(figsize=(width, height))
    for b in range(B):
        y = bar_area + (B - 1 - b) * (below + slot) + below  # the bottom of figure row b
        for s, m in enumerate(masks):
            L, S = m.shape[1:]
            ax = fig.add_axes((lefts[s] / width, y / height, S * cell / width, L * cell / height))
            im = ax.imshow(
                m[b].cpu().numpy().astype(float), cmap=MASK_CMAP, vmin=0, vmax=1, aspect="auto"
            )
            _key_labels(ax, key_labels[s][b], turned[s])
            ax.set_yticks(range(L), query_labels[s][b])
            ax.set_xlabel("key (column)")
            if s == 0:
                ax.set_ylabel(ylabels[b])
            if b == 0:  # the stage's name above its column, level with the other columns'
                ax.set_title(stage_names[s], y=slot / (L * cell))
    bar_width = max(12 * em, 2.6 * _text_width(MASK_KEY))
    cax = fig.add_axes(
        ((width - bar_width) / 2 / width, 3.2 * em / height, bar_width / width, 0.9 * em / height)
    )
    _mask_key(fig.colorbar(im, cax=cax, orientation="horizontal"))
    if title:
        fig.suptitle(title, y=1 - 0.4 * em / height, va="top")
    return fig

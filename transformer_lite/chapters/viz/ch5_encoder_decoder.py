"""Static figures (matplotlib) of chapter 5, ``notebooks/05_encoder_decoder.ipynb``:
the decoder block's diagram.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch

from ._style import draw_add, draw_box

__all__ = ["DECODER_BLOCK_EM", "plot_decoder_block"]

# The diagram is drawn in units of its text size (em: ``fontsize`` points), so its labels fit their
# boxes whatever the size, provided one data unit is drawn about one em: the width and height of one
# panel in em, title included (at 12 pt, 2.9 x 6.6 in; two side by side fit a phone's column with
# their text at 9 px).
DECODER_BLOCK_EM = (17.5, 40.0)

_GAP = 1.0  # the arrow between two items
_HALF_HEIGHT = {"io": 1.2, "add": 0.8}  # otherwise: 0.3 + 0.6 per line of the label
_HALF_WIDTH = 4.5  # of a sublayer's box; a pre-norm LayerNorm's is narrower
_NORM_HALF_WIDTH = 4.0


def _half_height(kind: str, label: str) -> float:
    return _HALF_HEIGHT.get(kind, 0.3 + 0.6 * (label.count("\n") + 1))


def _items(norm_first: bool) -> tuple[list[tuple[str, str]], list[tuple[int, int]]]:
    """(kind, label) bottom to top, and the residual connections as (branch item, add item)."""
    sublayers = [
        ("self", "masked\nself-attention\nQ, K, V: target"),
        ("cross", "cross-attention\nQ: target\nK, V: memory"),
        ("ff", "position-wise\nfeed-forward"),
    ]
    items = [("io", "target states x\n(B, L, D)")]
    groups = []  # (index where the residual branches off, index where it is added back)
    for i, (kind, label) in enumerate(sublayers, start=1):
        branch = len(items) - 1
        if norm_first:
            items += [("norm", f"LayerNorm {i}"), (kind, label), ("add", "+")]
        else:
            items += [(kind, label), ("norm", f"add, then\nLayerNorm {i}")]
        groups.append((branch, len(items) - 1))
    items.append(("io", "block output\n(B, L, D)"))
    return items, groups


def _centres(items: list[tuple[str, str]]) -> list[float]:
    """The y of each item's centre, the first item's bottom at 0."""
    ys, top = [], 0.0
    for kind, label in items:
        h = _half_height(kind, label)
        ys.append(top + h)
        top += 2 * h + _GAP
    return ys


def plot_decoder_block(
    norm_first: bool = False, ax: plt.Axes | None = None, fontsize: float | None = None
) -> plt.Axes:
    """Diagram of :class:`~transformer_lite.nn.blocks.DecoderBlock`: self-attention, cross-attention, feed-forward.

    Drawn bottom to top (data flows upwards), with the encoder's ``memory``
    entering the cross-attention from the side, and each sublayer wrapped in a
    residual connection (dashed: the identity path) and a layer norm: after
    the addition for post-norm (Vaswani et al., 2017), before the sublayer for
    pre-norm (Xiong et al., 2020).

    The axes keep equal scales and the same limits for both variants (those of
    the taller pre-norm diagram), so two of them side by side share one scale.
    The geometry is in units of the text size: the labels fit their boxes when
    the axes give each panel about :data:`DECODER_BLOCK_EM` ems (at 12 pt, two
    panels side by side in a 6 x 6.9 in figure).

    Args:
        norm_first: draw the pre-norm variant.
        ax: axes to draw on (a new figure of :data:`DECODER_BLOCK_EM` ems if None).
        fontsize: of the labels (the title 1 pt larger, the plus sign 3 pt);
            default ``rcParams["font.size"]``.

    Returns:
        The axes.
    """
    fontsize = plt.rcParams["font.size"] if fontsize is None else fontsize
    if ax is None:
        em = fontsize / 72  # inches
        _, ax = plt.subplots(
            figsize=(DECODER_BLOCK_EM[0] * em, DECODER_BLOCK_EM[1] * em), layout="constrained"
        )
    cmap = plt.get_cmap("cividis")
    fill = {
        "self": cmap(0.2),
        "cross": cmap(0.95),
        "ff": cmap(0.6),
        "norm": "#e4e4e4",
    }
    text_colour = {"self": "white"}
    arrow = dict(arrowstyle="-|>", mutation_scale=1.1 * fontsize, shrinkA=0, shrinkB=0)
    items, groups = _items(norm_first)
    ys = _centres(items)

    def extent(k):  # half height of item k
        return _half_height(*items[k])

    for k, ((kind, label), y) in enumerate(zip(items, ys)):
        if kind == "io":
            ax.text(0, y, label, ha="center", va="center", fontsize=fontsize)
        elif kind == "add":
            draw_add(ax, y, extent(k), fontsize)
        else:
            w = _NORM_HALF_WIDTH if kind == "norm" and norm_first else _HALF_WIDTH
            draw_box(
                ax,
                y,
                w,
                extent(k),
                "round,pad=0,rounding_size=0.4",
                facecolor=fill[kind],
                edgecolor="black",
            )
            ax.text(
                0,
                y,
                label,
                ha="center",
                va="center",
                fontsize=fontsize,
                color=text_colour.get(kind, "black"),
            )
        if k:
            start, end = (0, ys[k - 1] + extent(k - 1)), (0, y - extent(k))
            ax.add_patch(FancyArrowPatch(start, end, color="black", **arrow))
        if kind == "cross":
            ax.text(
                _HALF_WIDTH + 2.3,
                y,
                "memory\n(encoder\noutput)\n(B, S, D)",
                ha="left",
                va="center",
                fontsize=fontsize,
            )
            start, end = (_HALF_WIDTH + 2.0, y), (_HALF_WIDTH + 0.1, y)
            ax.add_patch(FancyArrowPatch(start, end, color="black", **arrow))
    left = -_HALF_WIDTH - 1.0
    for branch, add in groups:
        yb = ys[branch] + extent(branch) + 0.35 * _GAP  # where the path splits off
        ya = ys[add]
        ax.plot([0, left, left], [yb, yb, ya], color="grey", linestyle="--", linewidth=1.2)
        end = -(extent(add) if norm_first else _HALF_WIDTH + 0.1)
        ax.add_patch(FancyArrowPatch((left, ya), (end, ya), color="grey", linestyle="--", **arrow))
    # the same limits for both variants: the taller pre-norm diagram's
    top = _centres(_items(True)[0])[-1] + _HALF_HEIGHT["io"]
    ax.set_xlim(left - 0.3, _HALF_WIDTH + 7.2)
    ax.set_ylim(-0.3, top + 0.3)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(
        ("pre-norm" if norm_first else "post-norm") + " decoder block\n(dashed: residual path)",
        fontsize=fontsize + 1,
    )
    return ax

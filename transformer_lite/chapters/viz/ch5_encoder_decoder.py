"""Static figures (matplotlib) of chapter 5, ``notebooks/05_encoder_decoder.ipynb``:
the decoder block's diagram.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = ["plot_decoder_block"]


def plot_decoder_block(
    norm_first: bool = False, ax: plt.Axes | None = None, fontsize: float = 9.0
) -> plt.Axes:
    """Diagram of :class:`~transformer_lite.nn.blocks.DecoderBlock`: self-attention, cross-attention, feed-forward.

    Drawn bottom to top (data flows upwards), with the encoder's ``memory``
    entering the cross-attention from the side, and each sublayer wrapped in a
    residual connection (dashed: the identity path) and a layer norm: after
    the addition for post-norm (Vaswani et al., 2017), before the sublayer for
    pre-norm (Xiong et al., 2020).

    The axes keep equal scales and the same limits for both variants (those of
    the taller pre-norm diagram), so two of them side by side share one scale:
    one data unit is about an inch when two fill a 6.9 in wide figure.

    Args:
        norm_first: draw the pre-norm variant.
        ax: axes to draw on (a new 3.45 x 6.9 in figure if None).
        fontsize: of the labels (the title 1 pt larger, the plus sign 3 pt).

    Returns:
        The axes.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(3.45, 6.9), constrained_layout=True)
    cmap = plt.get_cmap("cividis")
    fill = {
        "self": cmap(0.2),
        "cross": cmap(0.95),
        "ff": cmap(0.6),
        "norm": "#e4e4e4",
        "add": "white",
    }
    text_colour = {"self": "white"}
    sublayers = [
        ("self", "masked self-attention\nQ, K, V: target"),
        ("cross", "cross-attention\nQ: target; K, V: memory"),
        ("ff", "position-wise\nfeed-forward"),
    ]
    items = [("io", "target states x\n(B, L, D)")]  # (kind, label), bottom to top
    groups = []  # (index where the residual branches off, index where it is added back)
    for i, (kind, label) in enumerate(sublayers, start=1):
        branch = len(items) - 1
        if norm_first:
            items += [("norm", f"LayerNorm {i}"), (kind, label), ("add", "+")]
        else:
            items += [(kind, label), ("norm", f"add, then\nLayerNorm {i}")]
        groups.append((branch, len(items) - 1))
    items.append(("io", "block output\n(B, L, D)"))
    n_items = 1 + 3 * len(sublayers) + 1  # the pre-norm diagram's, for both
    step, x0, half_w, half_h, radius = 0.58, 0.0, 0.85, 0.2, 0.13
    ys = [i * step for i in range(len(items))]

    def extent(k):  # half height of item k
        return {"io": 0.2, "add": radius}.get(items[k][0], half_h)

    for k, ((kind, label), y) in enumerate(zip(items, ys)):
        if kind == "io":
            ax.text(x0, y, label, ha="center", va="center", fontsize=fontsize)
        elif kind == "add":
            ax.add_patch(plt.Circle((x0, y), radius, facecolor="white", edgecolor="black"))
            ax.text(x0, y, "+", ha="center", va="center", fontsize=fontsize + 3)
        else:
            w = half_w * (0.75 if kind == "norm" and norm_first else 1.0)
            ax.add_patch(
                FancyBboxPatch(
                    (x0 - w, y - half_h),
                    2 * w,
                    2 * half_h,
                    boxstyle="round,pad=0.03",
                    facecolor=fill[kind],
                    edgecolor="black",
                )
            )
            ax.text(
                x0,
                y,
                label,
                ha="center",
                va="center",
                fontsize=fontsize,
                color=text_colour.get(kind, "black"),
            )
        if k:
            ax.add_patch(
                FancyArrowPatch(
                    (x0, ys[k - 1] + extent(k - 1)),
                    (x0, y - extent(k)),
                    arrowstyle="-|>",
                    mutation_scale=10,
                    color="black",
                    shrinkA=0,
                    shrinkB=0,
                )
            )
        if kind == "cross":
            ax.text(
                x0 + half_w + 0.42,
                y,
                "memory\n(encoder\noutput)\n(B, S, D)",
                ha="left",
                va="center",
                fontsize=fontsize,
            )
            ax.add_patch(
                FancyArrowPatch(
                    (x0 + half_w + 0.38, y),
                    (x0 + half_w + 0.03, y),
                    arrowstyle="-|>",
                    mutation_scale=10,
                    color="black",
                    shrinkA=0,
                    shrinkB=0,
                )
            )
    left = x0 - half_w - 0.2
    for branch, add in groups:
        yb = ys[branch] + extent(branch) + 0.07
        ya = ys[add]
        ax.plot([x0, left, left], [yb, yb, ya], color="grey", linestyle="--", linewidth=1.2)
        end = x0 - (radius if norm_first else half_w + 0.03)
        ax.add_patch(
            FancyArrowPatch(
                (left, ya),
                (end, ya),
                arrowstyle="-|>",
                mutation_scale=10,
                color="grey",
                linestyle="--",
                shrinkA=0,
                shrinkB=0,
            )
        )
    ax.set_xlim(left - 0.12, x0 + half_w + 1.1)
    ax.set_ylim(-0.35, (n_items - 1) * step + 0.35)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(
        ("pre-norm" if norm_first else "post-norm") + " decoder block\n(dashed: residual path)",
        fontsize=fontsize + 1,
    )
    return ax

"""Static figures (matplotlib) of chapter 5, ``notebooks/05_encoder_decoder.ipynb``:
the decoder block's diagram.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = ["plot_decoder_block"]


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
                fontsize=9,
                color=text_colour.get(kind, "black"),
            )
        if k:
            ax.add_patch(
                FancyArrowPatch(
                    (x0, ys[k - 1] + extent(k - 1)),
                    (x0, y - extent(k)),
                    arrowstyle="-|>",
                    mutation_scale=11,
                    color="black",
                )
            )
        if kind == "cross":
            ax.text(
                x0 + half_w + 1.5,
                y,
                "memory\n(encoder output)\n(B, S, D)",
                ha="center",
                va="center",
                fontsize=9,
            )
            ax.add_patch(
                FancyArrowPatch(
                    (x0 + half_w + 0.7, y),
                    (x0 + half_w, y),
                    arrowstyle="-|>",
                    mutation_scale=11,
                    color="black",
                )
            )
    left = x0 - half_w - 0.35
    for branch, add in groups:
        yb = ys[branch] + extent(branch) + 0.15
        ya = ys[add]
        ax.plot([x0, left, left], [yb, yb, ya], color="grey", linestyle="--", linewidth=1.2)
        end = x0 - (0.18 if norm_first else half_w * 1.0)
        ax.add_patch(
            FancyArrowPatch(
                (left, ya),
                (end, ya),
                arrowstyle="-|>",
                mutation_scale=11,
                color="grey",
                linestyle="--",
            )
        )
    ax.set_xlim(left - 0.3, x0 + half_w + 2.3)
    ax.set_ylim(-0.5, ys[-1] + 0.5)
    ax.axis("off")
    ax.set_title(
        ("pre-norm" if norm_first else "post-norm") + " decoder block\n(dashed: residual path)",
        fontsize=10,
    )
    return ax

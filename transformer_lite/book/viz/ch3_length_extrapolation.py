"""Chapter 3's length-extrapolation figure: accuracy against evaluation length, one line per scheme."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ._style import _LINE_COLORS, _MARKERS

__all__ = ["plot_accuracy_vs_length"]


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
        ax: axes to draw on (a new figure if ``None``).

    Raises:
        ValueError: if ``accuracy`` is empty or the seeds of a scheme differ in their lengths.
    """
    if not accuracy:
        raise ValueError("plot_accuracy_vs_length: expected at least one scheme, received none")
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 4.6))
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
        colour, marker = _LINE_COLORS[k % len(_LINE_COLORS)], _MARKERS[k % len(_MARKERS)]
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
        label="best order-blind guess (bag of tokens)",
    )
    ax.axhline(chance, color="0.45", ls=":", lw=1.2, label=f"chance ({chance:.2f})")
    ax.set_xticks(x, [_length_label(n, train_length) for n in lengths])
    ax.set_ylim(0, 1.04)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("accuracy on held-out sequences")
    ax.grid(True, axis="y", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return ax

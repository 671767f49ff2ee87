"""Interactive figures (plotly) of chapter 8, ``notebooks/08_language_model.ipynb``:
temperature reshaping the next-token distribution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from torch import Tensor

from ...checks import shape_dtype
from ._page import layout, rounded, slider

__all__ = ["next_token_temperature_figure"]

# The note on entropy and the mass outside the bars: in the top right corner, on a white box.
_NOTE_PLACE = dict(xref="paper", yref="paper", x=0.99, y=0.98, xanchor="right", yanchor="top")
_NOTE_BOX = dict(align="right", showarrow=False, bgcolor="rgba(255,255,255,0.85)")
_NOTE_BOX.update(bordercolor="#999999", borderwidth=1)


def _display_char(label: str) -> str:
    """A character as the reader should see it on an axis: newline as ``⏎`` (the book's convention, as in its
    matplotlib figures), tab as ``\\t``, space as ``␣``."""
    return {"\n": "⏎", "\t": "\\t", " ": "␣"}.get(label, label)


def next_token_temperature_figure(
    logits: Tensor,
    labels: Sequence[str],
    temperatures: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
    top_n: int = 20,
    title: str = "Temperature reshapes the next-character distribution: 0 keeps only "
    "the most likely character, 2 spreads the mass",
    initial_temperature: float | None = None,
):
    """Slider over the temperature: the probabilities of the ``top_n`` most likely next tokens of one context.

    Each state draws ``softmax(logits / T)`` (Hinton, Vinyals & Dean, 2015, Eq. 1) for the ``top_n`` tokens
    with the largest logits, always in the same order (by logit, descending; ties keep the lower id first).
    ``T = 0`` is greedy decoding: all the mass on the arg-max (the lowest id among tied maxima, as
    :func:`~transformer_lite.models.generation.sample_next_token`). An annotation gives, for the full
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
    if (
        not isinstance(logits, Tensor)
        or logits.dim() != 1
        or logits.numel() < 1
        or not logits.is_floating_point()
    ):
        raise ValueError(
            "next_token_temperature_figure: expected floating logits of shape (V,), received "
            + shape_dtype(logits)
        )
    V = logits.shape[0]
    labels = [str(c) for c in labels]
    if len(labels) != V or len(set(labels)) != V:
        raise ValueError(
            f"next_token_temperature_figure: expected {V} distinct labels (one per logit), received "
            f"{len(labels)} with {len(set(labels))} distinct"
        )
    temperatures = [float(t) for t in temperatures]
    if not temperatures or not all(math.isfinite(t) and t >= 0 for t in temperatures):
        raise ValueError(
            f"next_token_temperature_figure: expected finite temperatures >= 0, received {temperatures}"
        )
    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise ValueError(
            f"next_token_temperature_figure: expected an int top_n >= 1, received {top_n!r}"
        )
    if initial_temperature is None:
        initial_temperature = 1.0 if 1.0 in temperatures else temperatures[0]
    if initial_temperature not in temperatures:
        raise ValueError(
            f"next_token_temperature_figure: expected initial_temperature in {temperatures}, "
            f"received {initial_temperature}"
        )
    n = min(top_n, V)
    z = logits.detach().double().cpu()  # (V,)
    order = torch.argsort(z, descending=True, stable=True)  # (V,): ties keep the lower id first
    shown, rest = order[:n], order[n:]

    def distribution(t: float) -> Tensor:
        if t == 0:
            # greedy
            return torch.zeros(V, dtype=torch.float64).index_fill_(0, z.argmax().reshape(1), 1.0)
        return torch.softmax(z / t, dim=0)  # (V,)

    states = []
    for t in temperatures:
        p = distribution(t)
        entropy = float(torch.special.entr(p).sum())  # -sum p ln p, with 0 ln 0 = 0; nats
        outside = float(p[rest].sum())  # summed directly, not 1 - shown (no cancellation)
        label = "0 (greedy)" if t == 0 else f"{t:g}"
        shown_outside = f"{outside:.4f}" if outside == 0 or outside >= 1e-4 else f"{outside:.1e}"
        note = f"entropy {entropy:.3f} nats<br>probability outside the top {n}: {shown_outside}"
        states.append(dict(y=rounded(p[shown]), label=label, note=note))
    start = temperatures.index(initial_temperature)
    x = [_display_char(labels[i]) for i in shown.tolist()]
    fig = go.Figure(
        go.Bar(
            x=x,
            y=states[start]["y"],
            marker_color="#3b528b",
            name="probability",
            hovertemplate="%{x}: %{y:.4f}<extra></extra>",
        )
    )
    # every bar labelled (plotly skips every other category label when they are crowded, on a phone)
    fig.update_xaxes(
        title_text="next character",
        type="category",
        categoryorder="array",
        categoryarray=x,
        tickmode="array",
        tickvals=x,
        ticktext=x,
    )
    # Each temperature's axis ends just above its tallest bar (at T = 1 that bar is about a seventh
    # of a fixed [0, 1] axis); the tick labels say the scale changed.
    for s in states:
        s["range"] = [0, min(1.0, math.ceil(11 * max(s["y"])) / 10)]
    fig.update_yaxes(title_text="probability", range=states[start]["range"])
    steps = [
        dict(
            method="update",
            label=s["label"],
            args=[
                {"y": [s["y"]]},
                {"annotations[0].text": s["note"], "yaxis.range": s["range"]},
                [0],
            ],
        )
        for s in states
    ]
    note = dict(text=states[start]["note"], **_NOTE_PLACE, **_NOTE_BOX)
    control = slider(steps, "temperature T = ", pad=60, active=start)
    margin = dict(l=70, r=30, t=80, b=60)
    layout(fig, title, 460, margin=margin, showlegend=False, annotations=[note], sliders=[control])
    return fig

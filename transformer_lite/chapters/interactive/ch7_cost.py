"""Interactive figures (plotly) of chapter 7, ``notebooks/07_cost.ipynb``:
memory and time of direct against tiled attention.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ._page import layout, sig, slider

__all__ = ["attention_cost_figure"]


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
    rows = results.get("rows") if isinstance(results, dict) else None
    if not rows:
        raise ValueError(
            "attention_cost_figure: expected results with a non-empty 'rows' list "
            "(benchmarks/results.json)"
        )
    impls = ["ours_direct", "ours_tiled", "torch_sdpa"]
    names = ["direct (ours)", "tiled (ours)", "torch fused"]
    states = []
    for row in rows:
        try:
            mem = [row["score_bytes"]] + [row["alloc"][k] for k in impls]
            ms = [row["time"][k] * 1e3 for k in impls]
        except KeyError as exc:
            raise ValueError(
                f"attention_cost_figure: row {row.get('L')!r} misses the key {exc}"
            ) from None
        mib = sig([m / 2**20 for m in mem], 3)
        ms = sig(ms, 3)
        states.append(dict(L=row["L"], mib=mib, ms=ms))
    mem_x = ["score matrix<br>B·H·L²·4 bytes"] + [f"peak alloc.<br>{n}" for n in names]
    time_x = names
    colors_mem = ["#999999", "#3b528b", "#21918c", "#e6a100"]
    colors_time = ["#3b528b", "#21918c", "#e6a100"]
    first = states[0]
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.58, 0.42],
        horizontal_spacing=0.12,
        subplot_titles=["memory (MiB)", "median time (ms)"],
    )
    panels = [
        (mem_x, "mib", colors_mem, "memory", "MiB"),
        (time_x, "ms", colors_time, "time", "ms"),
    ]
    for col, (x, key, colors, name, unit) in enumerate(panels, start=1):
        fig.add_trace(
            go.Bar(
                x=x,
                y=first[key],
                text=[f"{v:g}" for v in first[key]],
                textposition="outside",
                marker_color=colors,
                name=name,
                hovertemplate=f"%{{x}}: %{{y:.3g}} {unit}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    all_mib = [v for s in states for v in s["mib"]]
    all_ms = [v for s in states for v in s["ms"]]

    def log_range(values):  # fixed axis range over every state, with headroom for the labels
        return [math.log10(min(values)) - 0.3, math.log10(max(values)) + 0.6]

    fig.update_yaxes(type="log", range=log_range(all_mib), title_text="MiB", row=1, col=1)
    fig.update_yaxes(type="log", range=log_range(all_ms), title_text="ms", row=1, col=2)
    steps = [
        dict(
            method="restyle",
            label=str(s["L"]),
            args=[
                {
                    "y": [s["mib"], s["ms"]],
                    "text": [[f"{v:g}" for v in s["mib"]], [f"{v:g}" for v in s["ms"]]],
                },
                [0, 1],
            ],
        )
        for s in states
    ]
    cfg = results.get("config", {})
    date = results.get("info", {}).get("date", "?")
    # two short lines: one long line is clipped at the book's column width
    text = (
        f"Scores grow as L², the tiled method's memory barely grows; time grows for both<br>"
        f"<span style='font-size:11px'>B={cfg.get('batch', '?')}, H={cfg.get('heads', '?')}, "
        f"d_head={cfg.get('d_head', '?')}, measured {date}</span>"
    )
    control = slider(steps, "sequence length L = ", pad=70)
    margin = dict(l=70, r=30, t=90, b=90)
    title = dict(text=text, font=dict(size=13))
    layout(fig, title, 500, showlegend=False, margin=margin, sliders=[control])
    return fig

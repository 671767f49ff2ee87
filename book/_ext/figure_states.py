"""Every state of an interactive plotly figure, as text (issue 24, screen readers).

A slider or a menu of a plotly figure swaps the figure's data for another state; a reader who cannot
see the figure had its one-sentence label and nothing about the other states. ``plotly_offline``
calls :func:`states_html` at build time with the figure's own JSON (data, layout) and puts the result
in a closed ``<details>`` under the figure: for each state (a slider step or a menu item), the step's
own arguments are applied to a copy of the figure, as plotly's ``restyle`` / ``relayout`` /
``update`` would, and each trace is put into words:

* a heatmap of 0/1 values (a mask): for each row, the columns holding 1, as runs ("query 2: key 0 to
  key 4, 5 of 8"), named by the colour bar's tick text where it has one ("may attend");
* any other heatmap with few rows in all (at most 40 over the figure's panels): for each row, its
  largest entry (largest in magnitude when the values have both signs) and where it is;
  with more rows (a grid of attention heads): one sentence per panel, counting where each row's
  largest entry lies (the first column, the row's own position, the one before it, elsewhere);
* a line or scatter: its first and last point and its smallest and largest value, with the axis
  titles; a single point: its coordinates;
* bars: every bar's label and value;
* annotation texts that the state changes.

What is the same in every state is said once, before the states. Nothing is typed by hand: the text
changes when the figure does.
"""

from __future__ import annotations

import copy
import html
import re

MAX_LISTED_ROWS = 40  # heatmap rows over the figure's panels listed one by one; above, summarised


def _num(v) -> str:
    if v is None:
        return "no value"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _label(v)
    if float(v).is_integer() and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


def _label(v) -> str:
    text = re.sub(r"<br\s*/?>", " ", str(v))
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _title(obj) -> str:
    t = obj.get("title") if isinstance(obj, dict) else None
    if isinstance(t, dict):
        t = t.get("text")
    return _label(t) if t else ""


def _axis(layout: dict, trace: dict, letter: str) -> dict:
    ref = trace.get(f"{letter}axis", letter)  # "x", "x2", ...
    return layout.get(f"{letter}axis{ref[1:]}", {}) or {}


def _set_path(obj: dict, path: str, value) -> None:
    """Set ``a.b[2].c`` in nested dicts/lists, as plotly's relayout reads its keys."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part.startswith("["):
            idx = int(part[1:-1])
            while len(obj) <= idx:
                obj.append({})
            if last:
                obj[idx] = value
            else:
                obj = obj[idx]
        else:
            if last:
                obj[part] = value
            else:
                nxt = parts[i + 1]
                obj = obj.setdefault(part, [] if nxt.startswith("[") else {})


def _restyle(data: list, update: dict, traces) -> None:
    indices = list(range(len(data))) if traces is None else traces
    if isinstance(indices, int):
        indices = [indices]
    for attr, value in (update or {}).items():
        for k, ti in enumerate(indices):
            v = value[k % len(value)] if isinstance(value, list) and value else value
            _set_path(data[ti], attr, v)


def _relayout(layout: dict, update: dict) -> None:
    for path, value in (update or {}).items():
        _set_path(layout, path, value)


def apply_step(data: list, layout: dict, method: str, args: list) -> tuple[list, dict]:
    """The figure after one slider step or menu item (plotly's restyle, relayout or update)."""
    data, layout = copy.deepcopy(data), copy.deepcopy(layout)
    args = list(args or [])
    if method == "restyle":
        _restyle(data, args[0] if args else {}, args[1] if len(args) > 1 else None)
    elif method == "relayout":
        _relayout(layout, args[0] if args else {})
    elif method == "update":
        _restyle(data, args[0] if args else {}, args[2] if len(args) > 2 else None)
        _relayout(layout, args[1] if len(args) > 1 else {})
    return data, layout


def _panel_title(layout: dict, trace: dict) -> str:
    """The annotation written above the trace's panel (a subplot title), if any."""
    xa, ya = _axis(layout, trace, "x"), _axis(layout, trace, "y")
    x0, x1 = xa.get("domain", [0, 1])
    top = ya.get("domain", [0, 1])[1]
    best = None
    for a in layout.get("annotations", []) or []:
        if a.get("xref") != "paper" or a.get("yref") != "paper" or not a.get("text"):
            continue
        x, y = a.get("x", 0.5), a.get("y", 1)
        if x0 - 1e-6 <= x <= x1 + 1e-6 and top - 0.02 <= y <= top + 0.12:
            if best is None or abs(y - top) < abs(best.get("y", 1) - top):
                best = a
    return _label(best["text"]) if best else ""


def _labels(values, n: int) -> list[str]:
    if isinstance(values, list) and len(values) == n:
        return [_label(v) for v in values]
    return [str(i) for i in range(n)]


def _runs(cols: list[int], names: list[str]) -> str:
    runs, start = [], None
    for i, c in enumerate(cols):
        if start is None:
            start = c
        if i == len(cols) - 1 or cols[i + 1] != c + 1:
            runs.append(names[start] if start == c else f"{names[start]} to {names[c]}")
            start = None
    return ", ".join(runs)


def _is_binary(z) -> bool:
    vals = {v for row in z for v in row if v is not None}
    return bool(vals) and vals <= {0, 1}


def _heatmap(trace: dict, layout: dict, summarise: bool) -> list[str]:
    z = trace.get("z") or []
    if not z or not isinstance(z[0], list):
        return []
    rows, cols = len(z), max(len(r) for r in z)
    ys, xs = _labels(trace.get("y"), rows), _labels(trace.get("x"), cols)
    row_name = _title(_axis(layout, trace, "y")) or "row"
    bar = trace.get("colorbar", {}) or {}
    ticks = list(zip(bar.get("tickvals", []) or [], bar.get("ticktext", []) or []))
    if ticks and _is_binary(z):  # a mask, its colour bar naming the two values
        one = _label(max(ticks)[1])
        out = []
        for i, row in enumerate(z):
            on = [j for j, v in enumerate(row) if v == 1]
            valid = sum(v is not None for v in row)
            where = _runs(on, xs) if on else "none"
            out.append(f"{ys[i]}: {one} {where} ({len(on)} of {valid})")
        return out
    signed = any(v is not None and v < 0 for row in z for v in row)
    best = []
    for row in z:
        vals = [(abs(v) if signed else v, j, v) for j, v in enumerate(row) if v is not None]
        best.append(max(vals) if vals else None)
    if not summarise:
        what = "largest in magnitude" if signed else "largest"
        return [
            f"{ys[i]}: {what} at {xs[b[1]]} ({_num(b[2])})" if b else f"{ys[i]}: no values"
            for i, b in enumerate(best)
        ]
    same = xs[:rows] == ys[:rows]
    counts = {"first": 0, "self": 0, "previous": 0, "elsewhere": 0}
    for i, b in enumerate(best):
        if b is None:
            continue
        j = b[1]
        if j == 0:
            counts["first"] += 1
        elif same and j == i:
            counts["self"] += 1
        elif same and j == i - 1:
            counts["previous"] += 1
        else:
            counts["elsewhere"] += 1
    words = {
        "first": f"in the first column ({xs[0]})",
        "self": "on the diagonal (the row's own position)",
        "previous": "just before the diagonal (the position before the row's)",
        "elsewhere": "elsewhere",
    }
    parts = [f"{words[k]} for {n}" for k, n in counts.items() if n]
    mean = sum(b[2] for b in best if b) / max(1, sum(1 for b in best if b))
    return [
        f"the largest entry of each of the {rows} {row_name}s lies "
        + ", ".join(parts)
        + f"; mean largest entry {_num(mean)}"
    ]


def _scatter(trace: dict, layout: dict) -> list[str]:
    ys = trace.get("y") or []
    xs = trace.get("x") if isinstance(trace.get("x"), list) else list(range(len(ys)))
    pts = [(x, y) for x, y in zip(xs, ys) if isinstance(y, (int, float)) and y is not None]
    if not pts:
        return []
    xt = _title(_axis(layout, trace, "x")) or "x"
    yt = _title(_axis(layout, trace, "y")) or "y"
    if len(pts) == 1:
        return [f"{xt} {_num(pts[0][0])}, {yt} {_num(pts[0][1])}"]
    lo, hi = min(pts, key=lambda p: p[1]), max(pts, key=lambda p: p[1])
    return [
        f"{len(pts)} points over {xt} {_num(pts[0][0])} to {_num(pts[-1][0])}; {yt} "
        f"{_num(pts[0][1])} at the first, {_num(pts[-1][1])} at the last, "
        f"smallest {_num(lo[1])} (at {_num(lo[0])}), largest {_num(hi[1])} (at {_num(hi[0])})"
    ]


def _bar(trace: dict, layout: dict) -> list[str]:
    ys = trace.get("y") or []
    xs = _labels(trace.get("x"), len(ys))
    bars = ", ".join(f"{x} {_num(y)}" for x, y in zip(xs, ys))
    return [bars] if bars else []


def _trace_lines(trace: dict, layout: dict, summarise: bool) -> tuple[str, list[str]]:
    if trace.get("visible") is False or trace.get("visible") == "legendonly":
        return "", []
    kind = trace.get("type", "scatter")
    name = _label(trace.get("name") or "") or _panel_title(layout, trace)
    unit = _title(_axis(layout, trace, "y"))
    if kind == "bar" and unit and unit != name:
        name = f"{name} ({unit})" if name else unit
    if kind == "heatmap":
        return name, _heatmap(trace, layout, summarise)
    if kind == "bar":
        return name, _bar(trace, layout)
    if kind == "scatter":
        return name, _scatter(trace, layout)
    return name, []


def _describe(data: list, layout: dict, summarise: bool) -> list[tuple[str, list[str]]]:
    items = [_trace_lines(t, layout, summarise) for t in data]
    notes = [_label(a.get("text")) for a in (layout.get("annotations") or []) if a.get("text")]
    return items + [("note", [n]) for n in notes]


def _render(item: tuple[str, list[str]]) -> str:
    name, lines = item
    if not lines:
        return ""
    head = f"<strong>{html.escape(name)}</strong>: " if name and name != "note" else ""
    if len(lines) == 1:
        return f"<li>{head}{html.escape(lines[0])}</li>"
    inner = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<li>{head}<ul>{inner}</ul></li>"


def _controls(layout: dict) -> list[tuple[str, list[tuple[str, str, list]], int]]:
    """(name, [(label, method, args)], active index) for each slider and menu."""
    found = []
    for s in layout.get("sliders", []) or []:
        prefix = _label(((s.get("currentvalue") or {}).get("prefix")) or s.get("name") or "step")
        prefix = re.sub(r"\s*[=:]$", "", prefix)
        steps = [
            (_label(st.get("label", i)), st.get("method"), st.get("args"))
            for i, st in enumerate(s.get("steps", []))
        ]
        found.append((prefix, steps, s.get("active", 0) or 0))
    for m in layout.get("updatemenus", []) or []:
        steps = [
            (_label(b.get("label", i)), b.get("method"), b.get("args"))
            for i, b in enumerate(m.get("buttons", []))
            if b.get("visible", True) is not False
        ]
        found.append((_label(m.get("name") or "menu") + ":", steps, m.get("active", 0) or 0))
    return [f for f in found if f[1]]


def states_html(data: list, layout: dict) -> str:
    """A closed <details> with every state of the figure in words; "" if it has no slider or menu."""
    controls = _controls(layout)
    if not controls:
        return ""
    n_rows = sum(len(t.get("z") or []) for t in data if t.get("type") == "heatmap")
    summarise = n_rows > MAX_LISTED_ROWS
    parts, total = [], 0
    for name, steps, active in controls:
        described = []
        for label, method, args in steps:
            d, lay = apply_step(data, layout, method or "skip", args)
            described.append((label, _describe(d, lay, summarise)))
        total += len(steps)
        # what every state shares is said once
        common = [it for it in described[0][1] if all(it in other for _, other in described)]
        shared = [it for it in common if it[0] != "note"]  # subplot titles are not worth repeating
        intro = ""
        if common and len(described) > 1:
            items = "".join(_render(it) for it in shared)
            if items:
                intro = f"<p>The same in every state:</p><ul>{items}</ul>"
        entries = []
        for i, (label, items) in enumerate(described):
            body = "".join(_render(it) for it in items if it not in common)
            mark = " (shown first)" if i == active else ""
            entries.append(
                f"<dt>{html.escape(name)} {html.escape(label)}{mark}</dt>"
                f"<dd><ul>{body or '<li>no change</li>'}</ul></dd>"
            )
        parts.append(intro + f"<dl>{''.join(entries)}</dl>")
    title = _label(
        layout.get("title", {}).get("text")
        if isinstance(layout.get("title"), dict)
        else layout.get("title") or ""
    )
    summary = f"The figure in words: its {total} states"
    return (
        '<details class="tl-figure-states">'
        f"<summary>{html.escape(summary)}</summary>"
        + (f"<p>{html.escape(title)}</p>" if title else "")
        + "".join(parts)
        + "</details>"
    )

"""Sphinx extension: the ``chapter-times`` directive, how long each chapter took to run.

The teachers' page needs the time a chapter takes to execute, and that number must come from a
run, not from memory. Jupyter stores one for free: when a notebook is executed (``make execute``,
nbconvert, JupyterLab), every code cell's ``metadata.execution`` gets the times at which its input
was sent to the kernel (``iopub.execute_input``) and its reply came back (``shell.execute_reply``).
The directive reads those stamps from the chapter notebooks at build time and writes a table:
chapter, wall time from the first cell's start to the last cell's reply, the
longest cell, and the date of the run. So the table is always the last stored run's, and it says
so; cells without stamps (never executed) are left out and counted.

Usage in a MyST page::

    ```{chapter-times}
    ```

The ``chapter-time`` role writes one chapter's wall time into a sentence, so that a chapter can
state how long it takes to run from the same stamps: ``{chapter-time}`08_language_model``` gives
e.g. "12 min" (the file name without ``.ipynb``; "not timed" when no cell has stamps).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _stamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def notebook_times(notebook: dict) -> dict:
    """Times of the stored run of one notebook (a parsed .ipynb).

    Returns ``cells`` (code cells with both stamps), ``untimed`` (code cells without),
    ``wall_s`` (first input to last reply, seconds), ``longest_s`` (the longest cell) and
    ``date`` (ISO date of the first input); ``wall_s`` is None when no cell is timed.
    """
    spans, untimed = [], 0
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        stamps = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in stamps and "shell.execute_reply" in stamps:
            spans.append(
                (
                    _stamp(stamps["iopub.execute_input"]),
                    _stamp(stamps["shell.execute_reply"]),
                )
            )
        else:
            untimed += 1
    if not spans:
        return dict(cells=0, untimed=untimed, wall_s=None, longest_s=None, date=None)
    start = min(begin for begin, _ in spans)
    wall = (max(end for _, end in spans) - start).total_seconds()
    longest = max((end - begin).total_seconds() for begin, end in spans)
    return dict(
        cells=len(spans),
        untimed=untimed,
        wall_s=wall,
        longest_s=longest,
        date=start.date().isoformat(),
    )


def format_duration(seconds: float | None) -> str:
    """'45 s', '3 min 40 s', '30 min'; '-' for None."""
    if seconds is None:
        return "-"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if minutes < 10 and rest else f"{minutes} min"


def _title(notebook: dict, fallback: str) -> str:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


class ChapterTimes(SphinxDirective):
    has_content = False

    def run(self):
        header = ["chapter", "wall time", "longest cell", "run on"]
        rows = []
        for i, path in enumerate(sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), 1):
            self.env.note_dependency(str(path))
            notebook = json.loads(path.read_text(encoding="utf-8"))
            t = notebook_times(notebook)
            rows.append(
                [
                    f"{i}. {_title(notebook, path.stem)}"
                    + (f" ({t['untimed']} cells not timed)" if t["untimed"] else ""),
                    format_duration(t["wall_s"]),
                    format_duration(t["longest_s"]),
                    t["date"] or "-",
                ]
            )
        table = nodes.table(classes=["chapter-times"])
        group = nodes.tgroup(cols=len(header))
        table += group
        for _ in header:
            group += nodes.colspec(colwidth=1)
        head, body = nodes.thead(), nodes.tbody()
        group += head
        group += body
        for cells, parent in [([header], head), (rows, body)]:
            for values in cells:
                row = nodes.row()
                for value in values:
                    entry = nodes.entry()
                    entry += nodes.paragraph(text=value)
                    row += entry
                parent += row
        return [table]


def chapter_time_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{chapter-time}`NN_name```: the wall time of that chapter's stored run, as in the table."""
    path = NOTEBOOKS / f"{text.strip()}.ipynb"
    if not path.exists():
        message = inliner.reporter.error(f"chapter-time: no notebook {path.name}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    inliner.document.settings.env.note_dependency(str(path))
    t = notebook_times(json.loads(path.read_text(encoding="utf-8")))
    duration = format_duration(t["wall_s"]) if t["wall_s"] is not None else "not timed"
    return [nodes.inline(rawtext, duration, classes=["chapter-time"])], []


def setup(app):
    app.add_directive("chapter-times", ChapterTimes)
    app.add_role("chapter-time", chapter_time_role)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

"""The teachers' page and what comes with it: the chapter run-time table (book/_ext/chapter_times.py),
the licence footer, the changes page, CITATION.cff.

Oracle for the table: a notebook built here with known timestamps, whose wall time and longest
cell are worked out by hand; then the built page, whose table must list every chapter with the times
the function computes from the chapter files themselves.
"""

import json
import re
import runpy
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXT = runpy.run_path(str(ROOT / "book" / "_ext" / "chapter_times.py"))
notebook_times, format_duration = EXT["notebook_times"], EXT["format_duration"]


def _cell(start=None, end=None, kind="code"):
    meta = {}
    if start is not None:
        meta["execution"] = {
            "iopub.execute_input": f"2026-12-01T10:{start}Z",
            "shell.execute_reply": f"2026-12-01T10:{end}Z",
        }
    return {"cell_type": kind, "metadata": meta, "source": ""}


def test_times_from_the_stamps_worked_by_hand():
    # cells run 10:00:05-10:00:35 (30 s), 10:00:40-10:02:10 (90 s), one untimed, a markdown cell
    nb = {
        "cells": [
            _cell("00:05.000", "00:35.000"),
            _cell(kind="markdown"),
            _cell(),
            _cell("00:40.000", "02:10.500"),
        ]
    }
    t = notebook_times(nb)
    assert t == dict(cells=2, untimed=1, wall_s=125.5, longest_s=90.5, date="2026-12-01")


def test_a_notebook_never_run_has_no_time():
    t = notebook_times({"cells": [_cell(), _cell(kind="markdown")]})
    assert t["wall_s"] is None and t["cells"] == 0 and t["untimed"] == 1


@pytest.mark.parametrize(
    "seconds, text",
    [(None, "-"), (44.4, "44 s"), (59.6, "1 min"), (220, "3 min 40 s"), (1822, "30 min")],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_citation_file_and_licences():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and set(cff["license"]) == {"MIT", "CC-BY-4.0"}
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert cff["version"] == version, "CITATION.cff and pyproject.toml disagree on the version"
    assert "CC BY 4.0" in (ROOT / "LICENSE-TEXT.md").read_text()
    assert f"Version {version}" in (ROOT / "book" / "_config.yml").read_text()


def test_teachers_page_in_the_built_book(site):
    html = (site / "teachers.html").read_text(encoding="utf-8")
    table = html[html.index('class="chapter-times') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)[1:]  # without the header
    chapters = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(rows) == len(chapters) == 9
    for row, path in zip(rows, chapters):
        t = notebook_times(json.loads(path.read_text()))
        cells = [
            re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        assert cells[1] == format_duration(t["wall_s"]) and cells[2] == format_duration(
            t["longest_s"]
        ), (
            path.name,
            cells,
        )
    # every exercise reference resolved to a link; the licence in the footer of every page
    assert "ex-attention-sdpa" not in re.sub(r'href="[^"]*"', "", html)
    for page in ("intro.html", "teachers.html", "notebooks/01_attention.html", "changes.html"):
        assert "creativecommons.org/licenses/by/4.0" in (site / page).read_text(encoding="utf-8"), (
            page
        )

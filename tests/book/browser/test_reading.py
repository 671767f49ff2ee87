"""What the built book shows of the cells meant for a running kernel (issue 24, reading;
book/_ext/reading.py): every exercise checker's stored "all checks passed" says, in the book, that it
ran on the solution hidden above it (the notebooks keep the checker's own words, which nbval
compares), and no chapter shows a kernel-only explorer cell."""

from __future__ import annotations

import html
import re

from tests.book.browser.conftest import site_pages


def test_checker_outputs_say_they_checked_the_hidden_solution(site):
    bare, named = [], 0
    for name in [n for n in site_pages(site) if n.startswith("notebooks/")]:
        page = (site / name).read_text(encoding="utf-8")
        for block in re.findall(r'<div class="output stream[^"]*".*?<pre>(.*?)</pre>', page, re.S):
            for line in html.unescape(re.sub(r"<[^>]+>", "", block)).splitlines():
                if "all checks passed" not in line:
                    continue
                if "on the solution hidden above" in line:
                    named += 1
                else:
                    bare.append(f"{name}: {line.strip()}")
    assert bare == [], bare
    assert named >= 20, named  # every chapter's checkers (33 in the book)


def test_no_chapter_shows_a_kernel_only_explorer_cell(site):
    shown = []
    for name in [n for n in site_pages(site) if n.startswith("notebooks/")]:
        page = (site / name).read_text(encoding="utf-8")
        for cell in re.findall(r'<div class="cell_input.*?</pre>', page, re.S):
            code = html.unescape(re.sub(r"<[^>]+>", "", cell))
            if re.search(r"\w+_explorer\(", code):  # e.g. attention_explorer(encoder, tokenizer)
                shown.append(f"{name}: {code.strip()[:80]}")
    assert shown == [], shown

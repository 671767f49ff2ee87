"""Two more of the book's readers (issue 24): a teacher printing a chapter as a handout, and a reader
using the search box. Oracle: what Chromium prints and what its search page shows.

Print: every chapter is printed to an A4 PDF with Playwright's ``page.pdf`` (PDFs and their page
counts go to ``artifacts/print/`` for a person to look at). The PDF's text is read with pypdf when
it is installed; otherwise the same checks run on the text Chromium lays out with print media
emulated (``innerText`` leaves out what print.css hides). No solution's text, no "Click to hide",
no plotly toolbar, slider or menu, and the title carries the chapter number.

Search: each query is typed into the search page's box. The section that answers it must be the
first or second result, and every snippet must be prose: no backslash command or ``\\(`` of raw
LaTeX, no file name (".ipynb", ".md") in place of the text, and the query word in the top
snippets.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.book.browser.conftest import SHOTS, Visit, site_pages

PRINT_DIR = SHOTS.parent / "print"

# query -> the address (page, or page#section) of the section that answers it
SEARCHES = {
    "KV cache": "notebooks/08_language_model.html#the-key-value-cache",
    "rotary": "notebooks/03_positional_encodings.html#rope-rotate-the-queries-and-keys",
    "causal mask": "notebooks/02_causal_masks.html",
    "layer norm": "notebooks/04_transformer_block.html#layer-normalization-each-position-on-its-own",
    "vanishing gradient": "notebooks/06_rnn_gradients.html",
}

RAW_LATEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$")
# Figures are drawn as the reader nears them; a reader's Ctrl+P draws them all before printing
# (book/_ext/plotly_lazy.js), as this does before page.pdf.
DRAW_ALL = "() => window.tlPlotly ? tlPlotly.drawAll().then(() => true) : true"
FILE_NAME = re.compile(r"^[….\s]*\.(ipynb|md)\b")  # a file label in place of the text


def _norm(text: str) -> str:
    return " ".join(text.split())


def _pdf_pages_and_text(data: bytes) -> tuple[int, str | None]:
    """Page count, and the text if pypdf is installed (else None)."""
    try:
        import pypdf
    except ImportError:
        return len(re.findall(rb"/Type\s*/Page\b", data)), None
    import io

    reader = pypdf.PdfReader(io.BytesIO(data))
    return len(reader.pages), "\n".join(p.extract_text() or "" for p in reader.pages)


def _squeeze(text: str) -> str:
    """Text without any whitespace: a PDF's text breaks lines where the page did."""
    return re.sub(r"\s+", "", text)


def _solution_passages(page) -> list[str]:
    """Lines of at least 30 characters that occur in a solution and nowhere else on the page
    (compared without whitespace)."""
    return page.evaluate(
        """() => {
          const norm = (t) => t.replace(/\\s+/g, ' ').trim();
          const squeeze = (t) => t.replace(/\\s+/g, '');
          const sols = [...document.querySelectorAll('div.solution, div.cell.tag_solution')];
          const article = document.querySelector('article').cloneNode(true);
          article.querySelectorAll('div.solution, div.cell.tag_solution').forEach(e => e.remove());
          const rest = squeeze(article.textContent);
          const out = new Set();
          for (const s of sols)
            for (const el of s.querySelectorAll('p, li, pre, .admonition-title'))
              for (const line of el.textContent.split('\\n')) {
                const t = norm(line);
                if (t.length >= 30 && !rest.includes(squeeze(t))) out.add(t);
              }
          return [...out];
        }"""
    )


def _chapters(site) -> list[str]:
    return [n for n in site_pages(site) if n.startswith("notebooks/")]


def test_every_chapter_prints_as_a_handout_without_solutions(site, server, browser):
    chapters = _chapters(site)
    assert len(chapters) >= 8
    PRINT_DIR.mkdir(parents=True, exist_ok=True)
    problems, pages, oracle = {}, {}, "print-media layout (pypdf not installed)"
    for name in chapters:
        with Visit.served(server, browser, name) as visit:
            page = visit.page
            page.evaluate(DRAW_ALL)
            passages = _solution_passages(page)
            number = re.match(r"notebooks/0?(\d+)_", name).group(1)
            assert passages, f"{name}: no solution text found to check (did the classes change?)"
            data = page.pdf(format="A4")
            stem = name.replace("/", "__").removesuffix(".html")
            (PRINT_DIR / f"{stem}.pdf").write_bytes(data)
            n_pages, pdf_text = _pdf_pages_and_text(data)
            pages[name] = n_pages
            if pdf_text is not None:
                oracle = "the PDF's text (pypdf)"
            page.emulate_media(media="print")
            laid_out = page.evaluate("() => document.body.innerText")
            text = _norm(pdf_text if pdf_text is not None else laid_out)
            squeezed = _squeeze(text)
            found = []
            leaked = [p for p in passages if _squeeze(p) in squeezed]
            if leaked:
                found.append(f"{len(leaked)} solution passages printed, e.g. {leaked[0][:80]!r}")
            if "Click to hide" in text or "Click to show" in text:
                found.append("a 'Click to hide/show' label is printed")
            title = _norm(page.inner_text("#jb-print-docs-body h1"))
            if not title.startswith(f"{number}. "):
                found.append(f"printed title {title!r} has no chapter number {number}")
            controls = page.evaluate(
                """() => [...document.querySelectorAll(
                     '.plotly-graph-div .modebar, .plotly-graph-div .slider-container,'
                     + ' .plotly-graph-div .updatemenu-container, button.toggle-button, .copybtn')]
                   .filter(e => { const r = e.getBoundingClientRect(); return r.width * r.height > 0; })
                   .map(e => e.getAttribute('class'))"""
            )
            if controls:
                found.append(f"dead controls printed: {sorted(set(controls))}")
            scrolling = page.evaluate(
                """() => [...document.querySelectorAll('article pre')]
                   .filter(p => getComputedStyle(p).overflowX !== 'visible').length"""
            )
            if scrolling:
                found.append(
                    f"{scrolling} code blocks print as scroll boxes (cut at the page edge)"
                )
            if found:
                problems[name] = found
    (PRINT_DIR / "pages.json").write_text(json.dumps(pages, indent=1) + "\n")
    print(f"A4 pages per chapter: {pages}; text checked: {oracle}")
    assert problems == {}, "\n".join(f"{n}: {p}" for n, p in problems.items())


def _search(page, server: str, query: str) -> list[dict]:
    """Type ``query`` into the search page's box; return the results with their snippets."""
    page.goto(f"{server}/search.html", wait_until="load")
    box = page.locator(".bd-search-container form.bd-search input[name=q]")
    box.fill(query)
    box.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('#search-results p.search-summary')"
        " && document.querySelector('#search-results p.search-summary').innerText.length > 0",
        timeout=20000,
    )
    # each snippet is fetched from its page after the list is drawn
    page.wait_for_function(
        "() => [...document.querySelectorAll('ul.search li')]"
        ".every(li => li.querySelector('p.context'))",
        timeout=20000,
    )
    return page.evaluate(
        """() => [...document.querySelectorAll('ul.search li')].map(li => ({
             href: li.querySelector('a').getAttribute('href'),
             title: li.querySelector('a').innerText,
             snippet: li.querySelector('p.context').innerText}))"""
    )


@pytest.mark.parametrize("query", list(SEARCHES))
def test_search_lists_the_answering_section_first_or_second_with_prose_snippets(
    query, server, browser
):
    with Visit.served(server, browser, "search.html") as visit:
        results = _search(visit.page, server, query)
        SHOTS.mkdir(parents=True, exist_ok=True)
        visit.page.screenshot(
            path=str(SHOTS / f"search-{query.replace(' ', '-').lower()}.png"), full_page=True
        )
        assert visit.errors == []
    expected = SEARCHES[query]
    top = [r["href"] for r in results[:2]]
    assert any(h == expected or h.split("#")[0] == expected for h in top), (
        f"{query!r}: {expected} is not among the first two results {top}"
    )
    words = [w for w in query.lower().split()]
    bad = [
        r
        for r in results
        if RAW_LATEX.search(r["snippet"])
        or FILE_NAME.search(r["snippet"])
        or len(_norm(r["snippet"]).strip("… .")) < 40
    ]
    assert bad == [], f"{query!r}: snippets that are not prose: {bad}"
    for r in results[:2]:
        assert any(w in r["snippet"].lower() for w in words), (
            f"{query!r}: the snippet of {r['href']} does not show the query: {r['snippet']!r}"
        )

"""Accessibility of the built book: axe-core on every page in light and dark mode.

Oracle: axe-core (Deque's rule engine, the one browsers' accessibility panels use), pinned
in ``package-lock.json`` and installed by ``npm ci`` into ``node_modules/``; the test injects
``node_modules/axe-core/axe.min.js`` into each page (no network) and runs the WCAG 2.0 A and AA
and WCAG 2.1 AA rules (tags ``wcag2a``, ``wcag2aa``, ``wcag21aa``). Every page is checked twice:
with the reader's system in light mode and in dark mode (pydata-sphinx-theme's ``auto`` mode
follows ``prefers-color-scheme`` and sets ``data-theme`` on ``<html>``), and with every solution
dropdown opened, so that colour contrast is measured on what a reader can reach. Any violation
fails the test and is listed with the elements it was found on.

A first test makes sure the oracle can fail: on a page with a link of contrast 1.5:1 and an
image without alt text added, axe must report ``color-contrast`` and ``image-alt``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.conftest import ROOT, Visit, site_pages

if os.environ.get("CI"):  # under CI a missing browser stack fails the run instead of skipping it
    import playwright.sync_api as playwright_api  # noqa: F401
else:
    playwright_api = pytest.importorskip("playwright.sync_api")

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21aa"]
MODES = ("light", "dark")


@pytest.fixture(scope="module")
def axe_js() -> Path:
    if not AXE.is_file():
        message = (
            f"{AXE.relative_to(ROOT)} is missing: run `npm ci` (package-lock.json pins axe-core)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return AXE


def _axe_violations(page, axe_js: Path) -> list[str]:
    """Run axe on the page as it is now; one line per violated rule: id, impact, node count, first targets."""
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(axe_js))
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})",
        WCAG_TAGS,
    )
    return [
        f"{v['id']} ({v['impact']}, {len(v['nodes'])} nodes): "
        + "; ".join(
            " ".join(n["target"]) + " " + n["failureSummary"].splitlines()[-1].strip()
            for n in v["nodes"][:3]
        )
        for v in result["violations"]
    ]


def _set_mode(page, mode: str) -> None:
    """The reader's system colour scheme; the theme (default_mode: auto) follows it."""
    page.emulate_media(color_scheme=mode)
    page.wait_for_function("m => document.documentElement.dataset.theme === m", arg=mode)
    page.wait_for_timeout(200)  # let CSS transitions of colours finish before contrast is measured


def _open_solutions(page) -> None:
    """Open every dropdown (sphinx-togglebutton solutions, <details>), so their content is checked too."""
    page.evaluate(
        """() => {
            document.querySelectorAll('button.toggle-button-hidden').forEach(b => b.click());
            document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; });
        }"""
    )
    page.wait_for_timeout(300)


def test_axe_reports_a_planted_violation(server, browser, axe_js):
    """The oracle can fail: a low-contrast link and an image without alt text are reported."""
    with Visit.served(server, browser, "intro.html") as visit:
        visit.page.evaluate(
            """() => {
                const p = document.createElement('p');
                p.innerHTML = '<a href="#x" style="color:#aaaaaa;background:#ffffff">faint link</a>'
                    + '<img src="_static/favicon.png" width="20" height="20">';
                document.querySelector('main').append(p);
            }"""
        )
        found = " ".join(_axe_violations(visit.page, axe_js))
    assert "color-contrast" in found and "image-alt" in found, found


def test_every_page_has_no_axe_violations_in_light_and_dark_mode(site, server, browser, axe_js):
    # index.html only redirects to intro.html (meta refresh), which is checked itself
    names = [n for n in site_pages(site) if n != "index.html"]
    assert {"intro.html", "bibliography.html", "notebooks/02_causal_masks.html"} <= set(names)
    problems = {}
    for name in names:
        with Visit.served(server, browser, name) as visit:
            _open_solutions(visit.page)
            for mode in MODES:
                _set_mode(visit.page, mode)
                if found := _axe_violations(visit.page, axe_js):
                    problems[f"{name} ({mode})"] = found
    assert problems == {}, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in problems.items())

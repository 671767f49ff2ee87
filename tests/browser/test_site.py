"""The built book, opened in a real browser (headless Chromium driven by Playwright).

Oracle: what a reader's browser does with the site. The session fixture builds the
book with the README's own command (`jupyter-book build book -W -n --keep-going`;
with the execution cache a rebuild takes seconds), serves it on 127.0.0.1, and
every page is checked for: no request to another host (all are intercepted and
recorded), no JavaScript console error, math rendered by MathJax (no raw ``\\(``
left), every image loaded. The interactive plotly figures must change when their
slider or menu is used, and a chapter must also work from ``file://``. Screenshots
of every page go to ``artifacts/screenshots/`` for a person to look at.

Chromium comes from Debian (``apt-get install chromium``; ``make test`` installs
it). Without it these tests fail under CI (``CI`` set) and are skipped elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "book" / "_build" / "html"
SHOTS = ROOT / "artifacts" / "screenshots"

if os.environ.get("CI"):  # under CI a missing browser stack fails the run instead of skipping it
    import playwright.sync_api as playwright_api
else:
    playwright_api = pytest.importorskip("playwright.sync_api")


# The fixtures site, server and browser are in conftest.py (shared with test_live.py).


class Visit:
    """One page load with every request and console message recorded."""

    def __init__(self, browser, url: str, allowed_scheme_host: tuple[str, str]):
        self.foreign, self.errors = [], []
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.page = self.context.new_page()

        def route(r):
            u = urlparse(r.request.url)
            if u.scheme == "data" or (u.scheme, u.netloc) == allowed_scheme_host:
                r.continue_()
            else:
                self.foreign.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url, wait_until="load")
        self.page.wait_for_load_state("networkidle")
        # MathJax (loaded only on pages with math) typesets after load; wait until it says it is done.
        if self.page.evaluate("() => !!document.querySelector('script[src*=mathjax]')"):
            self.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
            self.page.evaluate("() => MathJax.startup.promise")

    def close(self):
        self.context.close()


def _pages(site: Path) -> list[str]:
    """Every page of the built site (so a new chapter is checked without editing this file)."""
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(site).parts))


def _check_page(name: str, server: str, browser) -> list[str]:
    """Open one page; return the problems found (empty if none)."""
    u = urlparse(server)
    visit = Visit(browser, f"{server}/{name}", (u.scheme, u.netloc))
    problems = []
    try:
        page = visit.page
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / (name.replace("/", "__").removesuffix(".html") + ".png")), full_page=True)
        if visit.foreign:
            problems.append(f"requested other hosts: {visit.foreign}")
        if visit.errors:
            problems.append(f"logged console errors: {visit.errors}")
        text = page.inner_text("main")
        if "\\(" in text or "\\[" in text:
            problems.append("shows raw LaTeX")
        if page.locator("main .math").count() and not page.locator("main mjx-container").count():
            problems.append("math was not typeset")
        broken = page.evaluate("() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
                               ".map(i => i.src)")
        if broken:
            problems.append(f"images that did not load: {broken}")
        no_alt = page.evaluate("() => [...document.querySelectorAll('main img')].filter(i => !i.alt.trim()"
                               " || i.alt.endsWith('.png')).map(i => i.src)")
        if no_alt:
            problems.append(f"images without alt text: {no_alt}")
        for div in page.locator("main .plotly-graph-div").all():  # every plotly figure drawn and described
            if not div.locator(".main-svg").count():
                problems.append("a plotly figure was not drawn")
            if not div.evaluate("d => d.closest('[role=figure]')?.getAttribute('aria-label') || ''").strip():
                problems.append("a plotly figure has no aria-label")
    finally:
        visit.close()
    return problems


def test_every_page_is_self_contained_and_renders(site, server, browser):
    names = _pages(site)
    assert {"intro.html", "notation.html", "notebooks/01_attention.html"} <= set(names)
    problems = {name: p for name in names if (p := _check_page(name, server, browser))}
    assert problems == {}, "\n".join(f"{name}: {p}" for name, p in problems.items())


def _z(page, div_id: str, key: str = "z"):
    """The plotted values (``z`` of heatmaps, ``y`` of bars) of every trace of a plotly figure, as JSON."""
    return page.evaluate(f"() => JSON.stringify(document.getElementById('{div_id}').data.map(t => t.{key}))")


def _click_slider(page, fig, at_end: bool) -> None:
    """Click the first slider of a plotly figure at its last (``at_end``) or first step, then let it redraw."""
    rail = fig.locator(".slider-rail-touch-rect").bounding_box()
    x = rail["x"] + rail["width"] - 2 if at_end else rail["x"] + 2
    page.mouse.click(x, rail["y"] + rail["height"] / 2)
    page.wait_for_timeout(300)


def test_attention_slider_changes_the_figure(server, browser, site):
    u = urlparse(server)
    visit = Visit(browser, f"{server}/notebooks/01_attention.html", (u.scheme, u.netloc))
    try:
        page = visit.page
        fig = page.locator("#attention-layers")
        fig.scroll_into_view_if_needed()
        before = _z(page, "attention-layers")
        _click_slider(page, fig, at_end=True)  # the last layer
        after = _z(page, "attention-layers")
        assert after != before, "moving the layer slider did not change the heatmaps"
        assert "layer 5" in fig.locator(".slider-label").first.text_content()  # the slider's current value
        fig.screenshot(path=str(SHOTS / "attention-layers-after-slider.png"))
        assert visit.errors == []
    finally:
        visit.close()


def test_mask_slider_and_menu_change_the_figures(server, browser, site):
    u = urlparse(server)
    visit = Visit(browser, f"{server}/notebooks/02_causal_masks.html", (u.scheme, u.netloc))
    try:
        page = visit.page
        fig = page.locator("#mask-alignment")
        fig.scroll_into_view_if_needed()
        before = _z(page, "mask-alignment")
        _click_slider(page, fig, at_end=True)
        assert _z(page, "mask-alignment") != before, "moving the S slider did not change the masks"

        menu = page.locator("#mask-variants")
        menu.scroll_into_view_if_needed()
        before = _z(page, "mask-variants")
        menu.locator(".updatemenu-header-group").click()
        menu.locator(".updatemenu-item-text", has_text="no mask").click()
        page.wait_for_timeout(300)
        assert _z(page, "mask-variants") != before, "choosing another mask did not change the figure"
        assert visit.errors == []
    finally:
        visit.close()


def test_temperature_slider_changes_the_figure(server, browser, site):
    u = urlparse(server)
    visit = Visit(browser, f"{server}/notebooks/08_language_model.html", (u.scheme, u.netloc))
    try:
        page = visit.page
        fig = page.locator("#char-temperature")
        fig.scroll_into_view_if_needed()
        before = _z(page, "char-temperature", key="y")
        _click_slider(page, fig, at_end=False)  # the first step: T = 0, greedy
        after = _z(page, "char-temperature", key="y")
        assert after != before, "moving the temperature slider did not change the bars"
        greedy = json.loads(after)[0]
        assert greedy[0] == 1 and sum(greedy) == 1, f"at T = 0 all probability belongs on one bar: {greedy}"
        fig.screenshot(path=str(SHOTS / "temperature-after-slider.png"))
        assert visit.errors == []
    finally:
        visit.close()


def test_chapter_works_from_a_file_url(browser, site):
    path = site / "notebooks" / "01_attention.html"
    visit = Visit(browser, path.as_uri(), ("file", ""))
    try:
        assert visit.foreign == [], f"requests that left the folder: {visit.foreign}"
        assert visit.errors == []
        assert visit.page.locator("main mjx-container").count() > 0
        assert visit.page.locator("#attention-layers .main-svg").count() > 0
    finally:
        visit.close()


def test_search_finds_a_chapter(server, browser, site):
    u = urlparse(server)
    visit = Visit(browser, f"{server}/search.html?q=causal+mask", (u.scheme, u.netloc))
    try:
        visit.page.wait_for_selector("#search-results li", timeout=15000)
        results = visit.page.inner_text("#search-results")
        assert "Causal masks" in results
    finally:
        visit.close()

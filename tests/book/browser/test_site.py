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

import pytest

from tests.book.browser.conftest import SHOTS, Visit, site_pages, wait_until

if os.environ.get("CI"):  # under CI a missing browser stack fails the run instead of skipping it
    import playwright.sync_api as playwright_api
else:
    playwright_api = pytest.importorskip("playwright.sync_api")


# The fixtures site, server and browser, Visit and site_pages are in conftest.py (shared with test_live.py).

# Figures are drawn as the reader nears them (book/_ext/plotly_lazy.js); this draws them all now.
DRAW_ALL = "() => window.tlPlotly ? tlPlotly.drawAll().then(() => true) : true"
# Pictures load as the reader nears them (loading="lazy", book/_ext/page_weight.py); this loads them all.
LOAD_IMAGES = """() => Promise.all([...document.images].map(i => {
    i.loading = 'eager';
    return i.complete ? null : new Promise(r => { i.onload = i.onerror = r; });
})).then(() => true)"""


def _check_page(name: str, server: str, browser) -> list[str]:
    """Open one page; return the problems found (empty if none)."""
    problems = []
    with Visit.served(server, browser, name) as visit:
        page = visit.page
        page.evaluate(DRAW_ALL)
        page.evaluate(LOAD_IMAGES)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(
            path=str(SHOTS / (name.replace("/", "__").removesuffix(".html") + ".png")),
            full_page=True,
        )
        if visit.foreign:
            problems.append(f"requested other hosts: {visit.foreign}")
        if visit.errors:
            problems.append(f"logged console errors: {visit.errors}")
        text = page.inner_text("main")
        if "\\(" in text or "\\[" in text:
            problems.append("shows raw LaTeX")
        if page.locator("main .math").count() and not page.locator("main mjx-container").count():
            problems.append("math was not typeset")
        broken = page.evaluate(
            "() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
            ".map(i => i.src)"
        )
        if broken:
            problems.append(f"images that did not load: {broken}")
        no_alt = page.evaluate(
            "() => [...document.querySelectorAll('main img')].filter(i => !i.alt.trim()"
            " || i.alt.endsWith('.png')).map(i => i.src)"
        )
        if no_alt:
            problems.append(f"images without alt text: {no_alt}")
        # every plotly figure drawn and described
        for div in page.locator("main .plotly-graph-div").all():
            if not div.locator(".main-svg").count():
                problems.append("a plotly figure was not drawn")
            if not div.evaluate(
                "d => d.closest('[role=figure]')?.getAttribute('aria-label') || ''"
            ).strip():
                problems.append("a plotly figure has no aria-label")
    return problems


def test_every_page_is_self_contained_and_renders(site, server, browser):
    names = site_pages(site)  # so a new chapter is checked without editing this file
    assert {"intro.html", "notation.html", "notebooks/01_attention.html"} <= set(names)
    problems = {name: p for name in names if (p := _check_page(name, server, browser))}
    assert problems == {}, "\n".join(f"{name}: {p}" for name, p in problems.items())


def _z(page, div_id: str, key: str = "z"):
    """The plotted values (``z`` of heatmaps, ``y`` of bars) of every trace of a plotly figure, as JSON."""
    return page.evaluate(
        f"() => JSON.stringify(document.getElementById('{div_id}').data.map(t => t.{key}))"
    )


def _redrawn(page, div_id: str, before: str, key: str = "z") -> None:
    """Let plotly redraw: wait until the plotted values differ from ``before``, at most 300 ms."""
    wait_until(
        page,
        f"b => JSON.stringify(document.getElementById('{div_id}').data.map(t => t.{key})) !== b",
        before,
        300,
    )


def _move_slider(page, div_id: str, at_end: bool, key: str = "z"):
    """Click the first slider of the plotly figure ``div_id`` at its last (``at_end``) or first step.

    Returns the figure's locator and its plotted values (see ``_z``) before and after the click.
    """
    fig = page.locator(f"#{div_id}")
    fig.scroll_into_view_if_needed()
    page.evaluate(DRAW_ALL)
    before = _z(page, div_id, key)
    rail = fig.locator(".slider-rail-touch-rect").bounding_box()
    x = rail["x"] + rail["width"] - 2 if at_end else rail["x"] + 2
    page.mouse.click(x, rail["y"] + rail["height"] / 2)
    _redrawn(page, div_id, before, key)
    return fig, before, _z(page, div_id, key)


def test_attention_slider_changes_the_figure(server, browser):
    with Visit.served(server, browser, "notebooks/01_attention.html") as visit:
        # the last layer
        fig, before, after = _move_slider(visit.page, "attention-layers", at_end=True)
        assert after != before, "moving the layer slider did not change the heatmaps"
        label = fig.locator(".slider-label").first.text_content()  # the slider's current value
        assert "layer 5" in label
        fig.screenshot(path=str(SHOTS / "attention-layers-after-slider.png"))
        assert visit.errors == []


def test_mask_slider_and_menu_change_the_figures(server, browser):
    with Visit.served(server, browser, "notebooks/02_causal_masks.html") as visit:
        page = visit.page
        _, before, after = _move_slider(page, "mask-alignment", at_end=True)
        assert after != before, "moving the S slider did not change the masks"

        menu = page.locator("#mask-variants")
        menu.scroll_into_view_if_needed()
        page.evaluate(DRAW_ALL)
        before = _z(page, "mask-variants")
        menu.locator(".updatemenu-header-group").click()
        menu.locator(".updatemenu-item-text", has_text="no mask").click()
        _redrawn(page, "mask-variants", before)
        assert _z(page, "mask-variants") != before, (
            "choosing another mask did not change the figure"
        )
        assert visit.errors == []


def test_temperature_slider_changes_the_figure(server, browser):
    with Visit.served(server, browser, "notebooks/08_language_model.html") as visit:
        # the first step: T = 0, greedy
        fig, before, after = _move_slider(visit.page, "char-temperature", at_end=False, key="y")
        assert after != before, "moving the temperature slider did not change the bars"
        greedy = json.loads(after)[0]
        assert greedy[0] == 1 and sum(greedy) == 1, (
            f"at T = 0 all probability belongs on one bar: {greedy}"
        )
        fig.screenshot(path=str(SHOTS / "temperature-after-slider.png"))
        assert visit.errors == []


def test_chapter_works_from_a_file_url(browser, site):
    with Visit(browser, (site / "notebooks" / "01_attention.html").as_uri(), ("file", "")) as visit:
        assert visit.foreign == [], f"requests that left the folder: {visit.foreign}"
        assert visit.errors == []
        assert visit.page.locator("main mjx-container").count() > 0
        visit.page.evaluate(DRAW_ALL)
        assert visit.page.locator("#attention-layers .main-svg").count() > 0


def test_search_finds_a_chapter(server, browser):
    with Visit.served(server, browser, "search.html?q=causal+mask") as visit:
        visit.page.wait_for_selector("#search-results li", timeout=15000)
        results = visit.page.inner_text("#search-results")
        assert "Causal masks" in results


# every formula shown (solutions opened) that ends past the screen's right edge and cannot be scrolled
# into view: not in a box that scrolls sideways (its own, outputs.css and a11y.js; or a wide table's)
_CUT_FORMULAS = """() => {
  const edge = document.documentElement.clientWidth + 1;
  const inScroller = m => {  // itself or a box around it (a wide table) scrolls sideways
    for (let e = m; e && e !== document.body; e = e.parentElement) {
      if (/auto|scroll/.test(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1)
        return true;
    }
    return false;
  };
  return [...document.querySelectorAll('article mjx-container')]  // the page's text, not the drawers
    .map(m => [m, m.getBoundingClientRect()])
    .filter(([m, r]) => r.width > 0 && r.right > edge && !inScroller(m))
    .map(([m, r]) => `${(m.querySelector('mjx-assistive-mml') || m).textContent.slice(0, 40)} (${Math.round(r.right)} px)`);
}"""


def _formulas_cut_at_the_edge(page, name: str) -> list[str]:
    """Open every solution, let a11y.js measure the formulas, return those cut at the screen's edge."""
    page.evaluate("() => document.querySelectorAll('button.toggle-button').forEach(b => b.click())")
    # a11y.js marks the wide formulas 100 ms after a click
    wait_until(page, f"() => ({_CUT_FORMULAS})().length === 0", timeout_ms=3000)
    return [f"{name}: {f}" for f in page.evaluate(_CUT_FORMULAS)]


def test_a_phone_scrolls_the_page_and_nothing_is_wider_than_the_screen(site, server, browser):
    """A 390 px touch screen: no page is wider than the screen (inline code and display equations
    wrap or scroll inside their own box), no formula is cut at the screen's edge (a formula wider
    than the column scrolls in its own box, solutions opened included), and every plotly figure is drawn with dragmode off, so a
    swipe scrolls the page instead of zooming the figure (book/_ext/plotly_touch.js). A mouse keeps
    plotly's zoom."""
    wide, zooming, cut = [], [], []
    for touch in (True, False):
        context = browser.new_context(
            viewport={"width": 390, "height": 844}, is_mobile=touch, has_touch=touch
        )
        page = context.new_page()
        # index.html only redirects to intro.html (a meta refresh would navigate mid-measurement)
        for name in [n for n in site_pages(site) if n != "index.html"]:
            page.goto(f"{server}/{name}", wait_until="load")
            if page.evaluate("() => !!document.querySelector('script[src*=mathjax]')"):
                page.wait_for_function(
                    "() => window.MathJax && MathJax.startup && MathJax.startup.promise"
                )
                page.evaluate("() => MathJax.startup.promise")
            page.evaluate(DRAW_ALL)
            width = page.evaluate("() => document.documentElement.scrollWidth")
            if touch and width > 390:
                wide.append(f"{name}: {width} px")
            if touch:
                cut += _formulas_cut_at_the_edge(page, name)
            modes = page.evaluate(
                "() => [...document.querySelectorAll('.js-plotly-plot')]"
                ".map(g => g._fullLayout.dragmode)"
            )
            expected = False if touch else "zoom"
            zooming += [f"{name} (touch={touch}): {m}" for m in modes if m != expected]
        context.close()
    assert wide == [], f"pages wider than a 390 px phone: {wide}"
    assert cut == [], f"formulas running past the screen's edge, not scrollable: {cut}"
    assert zooming == [], f"plotly figures with the wrong dragmode: {zooming}"

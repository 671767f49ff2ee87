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

Loading a chapter (MathJax, every figure drawn) is the dearest step, so each page is opened once
(the module fixture ``readers``) and the three readers of this file take turns on it: the keyboard
walk on the page as it loads, then axe with every solution open, in light and in dark mode, and the
figures' colours as the mode switches and back. Each test asserts its own findings.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.book.browser.conftest import ROOT, SHOTS, Visit, site_pages, wait_until

if os.environ.get("CI"):  # under CI a missing browser stack fails the run instead of skipping it
    import playwright.sync_api as playwright_api  # noqa: F401
else:
    playwright_api = pytest.importorskip("playwright.sync_api")

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21aa"]
MODES = ("light", "dark")
# Figures are drawn as the reader nears them (book/_ext/plotly_lazy.js); this draws them all now, so
# that they and their keyboard controls are checked too.
DRAW_ALL = "() => window.tlPlotly ? tlPlotly.drawAll().then(() => true) : true"


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


def _finish_transitions(page) -> None:
    """Jump every running CSS transition and animation (but endless ones) to its end: the theme's
    colours take 150 ms, an opened solution fades in for 300 ms (a transition in an admonition, an
    animation in a <details>), so that contrast is measured on what a reader sees once they have run."""
    page.evaluate(
        """() => document.getAnimations()
            .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
            .forEach(a => a.finish())"""
    )


def _set_mode(page, mode: str) -> None:
    """The reader's system colour scheme; the theme (default_mode: auto) follows it."""
    page.emulate_media(color_scheme=mode)
    page.wait_for_function("m => document.documentElement.dataset.theme === m", arg=mode)
    _finish_transitions(page)


def _open_solutions(page) -> None:
    """Open every dropdown (sphinx-togglebutton solutions, <details>), so their content is checked too."""
    page.evaluate(
        """() => {
            document.querySelectorAll('button.toggle-button-hidden').forEach(b => b.click());
            document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; });
        }"""
    )
    _finish_transitions(page)


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


# Colours of each plotly figure as drawn, normalised by a canvas to "#rrggbb", with the contrast of
# the text and of every single-coloured line against the figure's background (WCAG 2 formula).
FIGURE_COLOURS = """() => {
    const ctx = document.createElement('canvas').getContext('2d');
    const rgb = c => { ctx.fillStyle = '#000'; ctx.fillStyle = c; const h = ctx.fillStyle;
        return h.startsWith('#') ? [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16))
                                 : h.match(/[\\d.]+/g).slice(0, 3).map(Number); };
    const lum = c => { const l = rgb(c).map(v => { v /= 255;
        return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]; };
    const contrast = (a, b) => { const x = lum(a), y = lum(b);
        return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
    const page = getComputedStyle(document.body).backgroundColor;
    return [...document.querySelectorAll('main .plotly-graph-div')].map(gd => {
        const L = gd._fullLayout;
        const lines = gd._fullData.filter(t => t.line && typeof t.line.color === 'string' && t.visible !== false)
            .map(t => contrast(t.line.color, L.paper_bgcolor));
        return {id: gd.id, paper: rgb(L.paper_bgcolor).join(','), plot: rgb(L.plot_bgcolor).join(','),
                page: rgb(page).join(','), text: contrast(L.font.color, L.paper_bgcolor),
                lines: Math.min(99, ...lines)};
    });
}"""


# One Tab press: the focused element's tag and class, whether it is a formula, and (for the
# buttons whose focus ring book/_static/a11y.css draws) the ring and the element's opacity.
FOCUSED = """() => {
    const e = document.activeElement;
    if (!e || e === document.body) return null;
    if (!e.dataset.tlTabStop) e.dataset.tlTabStop = String(document.querySelectorAll('[data-tl-tab-stop]').length);
    const s = getComputedStyle(e);
    let opacity = 1;
    for (let n = e; n && n.nodeType === 1; n = n.parentElement) opacity *= +getComputedStyle(n).opacity;
    // a display formula wider than the column scrolls in its own box, which Chromium lets the
    // keyboard reach so that it can be scrolled: that stop is wanted
    const scrolls = e.scrollWidth > e.clientWidth && /auto|scroll/.test(s.overflowX);
    return {stop: e.dataset.tlTabStop, formula: !!e.closest('mjx-container') && !scrolls,
            kind: e.classList.contains('copybtn') ? 'copy' : e.classList.contains('modebar-btn') ? 'toolbar' : '',
            outline: s.outlineStyle === 'none' ? 0 : parseFloat(s.outlineWidth), opacity};
}"""


# Within the fixed waits these replace (in ms), the figures are restyled for the mode
# (book/_ext/plotly_theme.js calls Plotly.relayout when the theme's attribute changes)
FIGURES_DARK = f"""() => ({FIGURE_COLOURS})().every(f => f.paper === f.page && f.plot === f.page)"""
FIGURES_AS = f"""light => JSON.stringify(({FIGURE_COLOURS})()) === JSON.stringify(light)"""
RESTYLE_MS, FADE_MS = 500, 400


def _keyboard_walk(page, name: str, problems: list[str]) -> int:
    """Tab through the page from its top (see the walk's test); returns the number of stops."""
    stops, checked = [], set()
    for _ in range(600):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None or (stops and focused["stop"] == stops[0]):
            break  # left the page, or back at the first stop
        stops.append(focused["stop"])
        if focused["formula"]:
            problems.append(f"{name}: a formula is a Tab stop (stop {len(stops)})")
            break
        if focused["kind"] and focused["kind"] not in checked:
            checked.add(focused["kind"])
            # the buttons fade in (0.3 s transitions): shown within FADE_MS
            wait_until(
                page,
                f"() => {{ const f = ({FOCUSED})(); return !!f && f.opacity >= 1 && f.outline >= 2; }}",
                timeout_ms=FADE_MS,
            )
            shown = page.evaluate(FOCUSED)
            if shown["opacity"] < 1 or shown["outline"] < 2:
                problems.append(f"{name}: focused {focused['kind']} button {shown}")
    if "copy" not in checked:
        problems.append(f"{name}: the walk reached no copy button")
    return len(stops)


def _figure_colours(page, name: str, mode: str, problems: list[str]) -> int:
    """The figures' colours in ``mode`` (see the dark-mode test); returns the number of figures checked."""
    figures = page.evaluate(FIGURE_COLOURS)
    for fig in figures:
        where = f"{name} #{fig['id']} ({mode})"
        if mode == "dark" and not fig["paper"] == fig["plot"] == fig["page"]:
            problems.append(f"{where}: background {fig['paper']}, page {fig['page']}")
        # lines in light mode are the stored figure's own (not restyled here)
        if fig["text"] < 4.5 or (mode == "dark" and fig["lines"] < 3):
            problems.append(f"{where}: text {fig['text']:.2f}:1, lines {fig['lines']:.2f}:1")
    return len(figures)


@pytest.fixture(scope="module")
def readers(site, server, browser) -> dict:
    """Every page opened once, and each reader's findings on it (the tests below assert them):
    ``axe`` page (mode) -> violations; ``figures`` problems and ``figures_seen``; ``walk`` problems
    and ``stops`` per chapter. On each page, in this order: every figure drawn; a chapter's figure
    colours as stored and its keyboard walk (solutions closed, as a reader finds the page); then
    every solution opened and axe run in light mode, the mode switched to dark, the figures checked
    there and axe run again, and for a chapter with figures, light mode again: the figures checked
    and compared with the stored ones."""
    found = {"axe": {}, "figures": [], "figures_seen": 0, "walk": [], "stops": {}, "pages": []}
    # index.html only redirects to intro.html (meta refresh), which is checked itself
    for name in [n for n in site_pages(site) if n != "index.html"]:
        found["pages"].append(name)
        chapter = name.startswith("notebooks/")
        with Visit.served(server, browser, name) as visit:
            page = visit.page
            page.evaluate(DRAW_ALL)
            figures = chapter and page.locator("main .plotly-graph-div").count() > 0
            light = page.evaluate(FIGURE_COLOURS) if figures else None
            if chapter:
                found["stops"][name] = _keyboard_walk(page, name, found["walk"])
                page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")
                _finish_transitions(page)
            _open_solutions(page)
            for mode in MODES:
                _set_mode(page, mode)
                if figures and mode == "dark":
                    wait_until(page, FIGURES_DARK, timeout_ms=RESTYLE_MS)
                if AXE.is_file() and (violations := _axe_violations(page, AXE)):
                    found["axe"][f"{name} ({mode})"] = violations
                if figures and mode == "dark":
                    found["figures_seen"] += _figure_colours(page, name, mode, found["figures"])
            if not figures:
                continue
            _set_mode(page, "light")
            wait_until(page, FIGURES_AS, arg=light, timeout_ms=RESTYLE_MS)
            found["figures_seen"] += _figure_colours(page, name, "light", found["figures"])
            if page.evaluate(FIGURE_COLOURS) != light:
                found["figures"].append(
                    f"{name}: back in light mode the figures differ from the stored ones"
                )
            if visit.errors:
                found["figures"].append(f"{name}: console errors {visit.errors}")
            if name.startswith("notebooks/04_"):
                figure = page.locator("main .plotly-graph-div").first
                SHOTS.mkdir(parents=True, exist_ok=True)
                for mode in MODES:
                    _set_mode(page, mode)
                    if mode == "dark":
                        wait_until(page, FIGURES_DARK, timeout_ms=RESTYLE_MS)
                    else:
                        wait_until(page, FIGURES_AS, arg=light, timeout_ms=RESTYLE_MS)
                    figure.screenshot(path=str(SHOTS / f"a11y_plotly_{mode}.png"))
    return found


def test_every_page_has_no_axe_violations_in_light_and_dark_mode(site, axe_js, readers):
    """Every page but index.html (it only redirects), with every solution open, in both modes."""
    names = [n for n in site_pages(site) if n != "index.html"]
    assert {"intro.html", "bibliography.html", "notebooks/02_causal_masks.html"} <= set(names)
    assert readers["pages"] == names
    problems = readers["axe"]
    assert problems == {}, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in problems.items())


def test_plotly_figures_follow_dark_mode_and_back(site, readers):
    """In dark mode every figure's paper and plot area take the page's background, text stands out by
    at least 4.5:1 and every line by 3:1 (book/_ext/plotly_theme.js); back in light mode the stored
    figure is restored exactly (white, text #2a3f5f, the lines' own colours). Screenshots of chapter 4's figure in both modes go to artifacts/screenshots/."""
    chapters = [n for n in site_pages(site) if n.startswith("notebooks/")]
    assert set(chapters) <= set(readers["pages"])
    seen, problems = readers["figures_seen"], readers["figures"]
    assert seen >= 20, f"only {seen} figure checks: were the chapters' plotly figures found?"
    assert problems == [], "\n".join(problems)


def test_keyboard_walk_skips_formulas_and_shows_focus(site, readers):
    """Tab through every chapter once: no MathJax formula is a stop (book/_config.yml sets MathJax's
    inTabOrder off; they were 32 to 216 stops per chapter, e.g. chapter 1 223 stops -> 107; a wide
    display formula that scrolls in its own box stays reachable, to be scrolled), and the
    first copy button and first plotly toolbar button reached are visible (opacity 1) with a ring of
    at least 2 px (they had none, or 1 px black)."""
    chapters = [n for n in site_pages(site) if n.startswith("notebooks/")]
    problems, walked = readers["walk"], readers["stops"]
    assert list(walked) == chapters
    assert problems == [], "\n".join(problems) + f"\nTab stops: {walked}"
    print("Tab stops per chapter:", walked)

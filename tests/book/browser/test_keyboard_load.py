"""The interactive figures from the keyboard, and what a chapter loads first (issue 24).

Keyboard. Plotly's sliders and menus are SVG and take no focus; book/_ext/plotly_keys.js adds under
each figure a labelled range input per slider and a button per menu item. In every chapter the first
slider is operated from the keyboard only: the test moves the focus onto the range input with Tab
(from the element just before it, so the input is a real Tab stop), presses End (and in chapter 2
Enter on a menu button), and checks, as the oracle, what plotly itself holds: the figure's plotted
values changed, to those of the slider's last step (the step's own restyle/update arguments), and
plotly's SVG slider moved to that step. The focused input shows a ring of at least 2 px.

Load. No chapter loads plotly.js as a synchronous script in <head> (it kept the text from painting
until 4.8 MB had arrived); the figures are drawn when the reader nears them, from the partial plotly
bundle (book/_ext/plotly_lazy.js). The timings are measured by benchmarks/site_load.py, not here.
"""

from __future__ import annotations

import json
import re

from tests.book.browser.conftest import SHOTS, Visit, site_pages, wait_until

# draw every figure of the page now (they are drawn as the reader nears them)
DRAW_ALL = "() => window.tlPlotly ? tlPlotly.drawAll().then(() => true) : true"
# the figure's plotted values (as _values reads them) differ from ``before``
CHANGED = """([id, before]) => JSON.stringify(document.getElementById(id).data
    .map(t => [t.x, t.y, t.z, t.text])) !== before"""
STEP_MS = 400  # plotly has redrawn within this, after a key press


def _chapters(site) -> list[str]:
    """The chapters with an interactive (plotly) figure: all but chapter 9, which has none."""
    return [
        n
        for n in site_pages(site)
        if n.startswith("notebooks/") and "plotly" in (site / n).read_text(encoding="utf-8")
    ]


def _values(page, div_id: str) -> str:
    return page.evaluate(
        "id => JSON.stringify(document.getElementById(id).data.map(t => [t.x, t.y, t.z, t.text]))",
        div_id,
    )


def _tab_to(page, selector_js: str) -> None:
    """Focus the element just before the target in the Tab order, then press Tab once."""
    page.evaluate(
        """sel => {
            const target = eval(sel);
            const all = [...document.querySelectorAll('a[href], button, input, select, textarea, [tabindex]')]
              .filter(e => e.tabIndex >= 0 && !e.disabled && e.getClientRects().length);
            const i = all.indexOf(target);
            if (i < 1) throw new Error('target is not in the Tab order: ' + i);
            all[i - 1].focus();
        }""",
        selector_js,
    )
    page.keyboard.press("Tab")


def test_one_slider_per_chapter_works_from_the_keyboard(site, server, browser):
    problems = {}
    chapters = _chapters(site)
    assert len(chapters) >= 8, chapters  # chapters 1-8 each have one
    for name in chapters:
        with Visit.served(server, browser, name) as visit:
            page = visit.page
            page.evaluate(DRAW_ALL)
            page.wait_for_selector(".tl-plotly-keys input[type=range]", timeout=20_000)
            div_id = page.evaluate(
                "() => document.querySelector('.tl-plotly-keys input[type=range]')"
                ".closest('[role=figure]').querySelector('.plotly-graph-div').id"
            )
            steps = page.evaluate(
                "id => document.getElementById(id).layout.sliders[0].steps.length", div_id
            )
            target = (
                f"document.getElementById('{div_id}').closest('[role=figure]')"
                ".querySelector('.tl-plotly-keys input[type=range]')"
            )
            before = _values(page, div_id)
            _tab_to(page, target)
            focused = page.evaluate(
                f"""() => {{ const t = {target}; const s = getComputedStyle(t);
                    return {{is: document.activeElement === t, label: t.labels[0]?.textContent || '',
                             outline: s.outlineStyle === 'none' ? 0 : parseFloat(s.outlineWidth)}}; }}"""
            )
            page.keyboard.press("End")
            wait_until(
                page,
                f"""([id, before]) => ({CHANGED})([id, before])
                    && document.getElementById(id).layout.sliders[0].active === {steps - 1}""",
                [div_id, before],
                STEP_MS,
            )
            after = _values(page, div_id)
            state = page.evaluate(
                """id => { const gd = document.getElementById(id);
                   return {active: gd.layout.sliders[0].active,
                           label: gd.querySelector('.slider-label')?.textContent || ''}; }""",
                div_id,
            )
            last_label = page.evaluate(
                "id => String(document.getElementById(id).layout.sliders[0].steps.at(-1).label)",
                div_id,
            )
            found = []
            if not focused["is"]:
                found.append("Tab did not reach the slider's range input")
            if not focused["label"].strip():
                found.append("the range input has no label")
            if focused["outline"] < 2:
                found.append(f"focused range input has a {focused['outline']} px ring")
            if after == before:
                found.append("End on the range input did not change the figure")
            if state["active"] != steps - 1 or last_label not in state["label"]:
                found.append(f"plotly's slider did not move to the last step: {state}")
            if name.endswith("02_causal_masks.html"):  # the menu: Enter on a button
                menu_fig = "mask-variants"
                before_menu = _values(page, menu_fig)
                button = (
                    page.locator("#" + menu_fig)
                    .locator("xpath=ancestor::*[@role='figure'][1]")
                    .locator(".tl-plotly-menu button", has_text="no mask")
                )
                button.focus()
                page.keyboard.press("Enter")
                wait_until(page, CHANGED, [menu_fig, before_menu], STEP_MS)
                if _values(page, menu_fig) == before_menu:
                    found.append("Enter on the menu's 'no mask' button did not change the figure")
                if button.get_attribute("aria-pressed") != "true":
                    found.append("the pressed menu button is not marked aria-pressed")
            if name.endswith("01_attention.html"):
                page.locator(f"#{div_id}").locator(
                    "xpath=ancestor::*[@role='figure'][1]"
                ).screenshot(path=str(SHOTS / "keyboard-slider-ch1.png"))
            if visit.errors:
                found.append(f"console errors: {visit.errors}")
            if found:
                problems[name] = found
    assert problems == {}, "\n".join(f"{n}: {p}" for n, p in problems.items())


def test_the_mouse_on_plotlys_slider_moves_the_keyboard_control(server, browser):
    with Visit.served(server, browser, "notebooks/01_attention.html") as visit:
        page = visit.page
        fig = page.locator("#attention-layers")
        fig.scroll_into_view_if_needed()
        page.wait_for_selector("#attention-layers .slider-rail-touch-rect")
        rail = fig.locator(".slider-rail-touch-rect").bounding_box()
        page.mouse.click(rail["x"] + rail["width"] - 2, rail["y"] + rail["height"] / 2)
        native = fig.locator("xpath=ancestor::*[@role='figure'][1]").locator("input[type=range]")
        wait_until(page, "e => e.value === '5'", native.element_handle(), 300)
        assert native.input_value() == "5"
        assert native.get_attribute("aria-valuetext") == "layer 5"


def test_no_chapter_loads_plotly_synchronously_in_its_head(site):
    problems = []
    for name in [n for n in site_pages(site) if n.startswith("notebooks/")]:
        html = (site / name).read_text(encoding="utf-8")
        head = html.split("</head>", 1)[0]
        for tag in re.findall(r"<script\b[^>]*>", head):
            if "plotly" in tag and not re.search(r"\b(defer|async)\b", tag):
                problems.append(f"{name}: {tag}")
        if "Plotly.newPlot(" in html:
            problems.append(f"{name}: a figure is still drawn by an inline script")
        if "fontawesome.js" in html:
            problems.append(f"{name}: loads fontawesome.js")
    assert problems == [], problems


def test_figures_are_drawn_as_the_reader_scrolls_and_from_a_file_url(site, server, browser):
    """At the top of chapter 8 plotly is not loaded yet; scrolling to the temperature chart draws it."""
    with Visit.served(server, browser, "notebooks/08_language_model.html") as visit:
        page = visit.page
        assert page.evaluate("() => !window.Plotly"), (
            "plotly.js was loaded before any figure was near"
        )
        page.locator("#char-temperature").scroll_into_view_if_needed()
        page.wait_for_selector("#char-temperature .main-svg", timeout=20_000)
        assert (
            json.loads(
                page.evaluate(
                    "() => JSON.stringify(document.getElementById('char-temperature').data.length)"
                )
            )
            >= 1
        )
        assert visit.errors == []
    with Visit(
        browser, (site / "notebooks" / "02_causal_masks.html").as_uri(), ("file", "")
    ) as visit:
        visit.page.evaluate(DRAW_ALL)
        assert visit.page.locator(".plotly-graph-div .main-svg").count() >= 2
        assert visit.errors == []

"""Interactive figures for a screen reader and on a phone (issue 24).

States in words. Under every plotly figure with a slider or a menu, book/_ext/figure_states.py writes
at build time a closed <details> with each state in words. The oracle is the figure's own JSON (the
file in _static/figures that plotly draws from): one entry per slider step / menu item, in order,
and for two figures the words of one state hold the numbers of that step's own arguments
(chapter 8's temperature chart: each bar's probability at T = 0.25; chapter 2's mask alignment:
the keys each query may attend at S = 4, bottom-right and top-left).

Phone. At 390 px (touch, scale 3) every figure's title is written above it as text
(book/_ext/plotly_phone.js), none runs past the figure's edge, no two annotations (subplot titles)
overlap, none leaves the figure, and the toolbar covers none of them. At 1280 px the figures keep
the chapter's own layout (the title in the SVG).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.book.browser.conftest import SHOTS, site_pages

DRAW_ALL = "() => window.tlPlotly ? tlPlotly.drawAll().then(() => true) : true"


def _figure_json(site: Path, html: str, fig_id: str) -> tuple[dict, dict]:
    m = re.search(
        rf'id="{re.escape(fig_id)}" class="plotly-graph-div" data-tl-figure="([^"]+)"', html
    )
    assert m, fig_id
    name = m.group(1).rsplit("/", 1)[-1]
    text = (site / "_static" / "figures" / name).read_text(encoding="utf-8")
    # tlPlotly.define(id, data, layout, config): its arguments, a JSON array without the brackets
    args = json.loads("[" + text[len("tlPlotly.define(") : text.rindex(")")] + "]")
    return args[1], args[2]  # data, layout


def _states_block(html: str, fig_id: str) -> str | None:
    """The <details class="tl-figure-states"> inside the figure's role=figure box, if any."""
    start = html.find(f'id="{fig_id}"')
    box = html.rfind('<div role="figure"', 0, start)
    nxt = html.find('<div role="figure"', start)
    end = nxt if nxt != -1 else len(html)
    seg = html[box:end]
    m = re.search(r'<details class="tl-figure-states">.*?</details>', seg, re.S)
    return m.group(0) if m else None


def _text(fragment: str) -> str:
    import html as h

    return h.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def test_every_interactive_figure_has_its_states_in_words(site):
    problems, checked = [], 0
    for name in [n for n in site_pages(site) if n.startswith("notebooks/")]:
        html = (site / name).read_text(encoding="utf-8")
        for fig_id in re.findall(r'id="([^"]+)" class="plotly-graph-div"', html):
            data, layout = _figure_json(site, html, fig_id)
            controls = [len(s["steps"]) for s in layout.get("sliders", [])] + [
                len(m["buttons"]) for m in layout.get("updatemenus", [])
            ]
            if not controls:
                continue
            checked += 1
            block = _states_block(html, fig_id)
            if block is None:
                problems.append(f"{name} {fig_id}: no states in words")
                continue
            entries = re.findall(r"<dt>(.*?)</dt>", block)
            if len(entries) != sum(controls):
                problems.append(
                    f"{name} {fig_id}: {len(entries)} states in words, {sum(controls)} in the figure"
                )
            labels = [str(s["label"]) for sl in layout.get("sliders", []) for s in sl["steps"]]
            labels += [str(b["label"]) for m in layout.get("updatemenus", []) for b in m["buttons"]]
            for entry, label in zip(entries, labels):
                if _text(label).strip() not in _text(entry):
                    problems.append(f"{name} {fig_id}: state '{_text(entry)}' is not '{label}'")
            if fig_id == "char-temperature":
                step = next(s for s in layout["sliders"][0]["steps"] if s["label"] == "0.25")
                probs, chars = step["args"][0]["y"][0], data[0]["x"]
                text = _text(block.split("temperature T 0.25", 1)[1].split("<dt>", 1)[0])
                for ch, p in zip(chars[:5], probs[:5]):
                    if f"{ch} {p:.3g}" not in text:
                        problems.append(
                            f"char-temperature T=0.25: '{ch} {p:.3g}' not in '{text[:200]}'"
                        )
            if fig_id == "mask-alignment":
                step = next(s for s in layout["sliders"][0]["steps"] if str(s["label"]) == "4")
                z_bottom_right, z_top_left = step["args"][0]["z"]
                text = _text(block.split("S (keys) 4", 1)[1].split("<dt>", 1)[0])
                for z, panel in ((z_bottom_right, "bottom-right"), (z_top_left, "top-left")):
                    part = text.split(panel, 1)[1]
                    for q, row in enumerate(z):
                        last = max(j for j, v in enumerate(row) if v == 1)
                        want = f"query {q}: may attend key 0" + (f" to key {last}" if last else "")
                        if want + " (" not in part:
                            problems.append(
                                f"mask-alignment S=4 {panel}: '{want}' not in '{part[:200]}'"
                            )
    assert checked >= 10, checked  # the book's 10 interactive figures
    assert problems == [], "\n".join(problems)


OVERLAPS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => {
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const box = r => ({l: r.left, r: r.right, t: r.top, b: r.bottom});
  const hit = (a, b) => a.l < b.r - 1 && b.l < a.r - 1 && a.t < b.b - 1 && b.t < a.b - 1;
  const title = gd.querySelector('.gtitle');
  const tb = title && title.textContent.trim() ? box(title.getBoundingClientRect()) : null;
  const anns = [...gd.querySelectorAll('.annotation-text')].filter(a => a.textContent.trim())
    .map(a => ({text: a.textContent, ...box(a.getBoundingClientRect())}));
  const mb = gd.querySelector('.modebar');
  const m = mb ? box(mb.getBoundingClientRect()) : null;
  const found = [];
  if (tb && (tb.r > svg.right + 1 || tb.l < svg.left - 1)) found.push('title runs past the edge');
  for (let i = 0; i < anns.length; i++) {
    if (anns[i].r > svg.right + 1 || anns[i].l < svg.left - 1) found.push(`'${anns[i].text}' leaves the figure`);
    for (let j = i + 1; j < anns.length; j++)
      if (hit(anns[i], anns[j])) found.push(`'${anns[i].text}' overlaps '${anns[j].text}'`);
    if (m && hit(m, anns[i])) found.push(`toolbar over '${anns[i].text}'`);
  }
  if (m && tb && hit(m, tb)) found.push('toolbar over the title');
  const fig = gd.closest('[role=figure]');
  const htmlTitle = fig ? fig.querySelector('.tl-plotly-title') : null;
  const had = gd.layout.title && (gd.layout.title.text || typeof gd.layout.title === 'string');
  return {id: gd.id, found, htmlTitle: htmlTitle ? htmlTitle.textContent : null, svgTitle: !!tb,
          width: Math.round(svg.width)};
})"""


# OVERLAPS once the figures' layout has settled: the web fonts loaded, then measured every other
# animation frame until two measurements agree (at most 500 ms, the fixed wait this replaces; the
# phone layout, book/_ext/plotly_phone.js, is done when drawAll's promise resolves).
SETTLED_OVERLAPS = f"""async () => {{
  const measure = {OVERLAPS};
  await document.fonts.ready;
  const frame = () => new Promise(r => requestAnimationFrame(() => r()));
  const start = performance.now();
  let last = JSON.stringify(measure());
  while (performance.now() - start < 500) {{
    await frame(); await frame();
    const now = JSON.stringify(measure());
    if (now === last) break;
    last = now;
  }}
  return JSON.parse(last);
}}"""


def test_plotly_figures_fit_a_phone_and_keep_their_layout_on_a_laptop(site, server, browser):
    chapters = [
        n
        for n in site_pages(site)
        if n.startswith("notebooks/")
        and "plotly-graph-div" in (site / n).read_text(encoding="utf-8")
    ]
    assert len(chapters) >= 8, chapters
    problems = []
    for phone in (True, False):
        size = {"width": 390, "height": 844} if phone else {"width": 1280, "height": 1000}
        context = browser.new_context(
            viewport=size, device_scale_factor=3 if phone else 1, is_mobile=phone, has_touch=phone
        )
        page = context.new_page()
        for name in chapters:
            page.goto(f"{server}/{name}", wait_until="load")
            page.evaluate(DRAW_ALL)
            for fig in page.evaluate(SETTLED_OVERLAPS):
                where = f"{name} #{fig['id']} ({'phone' if phone else 'laptop'})"
                if phone:
                    problems += [f"{where}: {f}" for f in fig["found"]]
                    if fig["svgTitle"] or not (fig["htmlTitle"] or "").strip():
                        problems.append(f"{where}: the title is not written above the figure")
                elif fig["htmlTitle"] is not None or not fig["svgTitle"]:
                    problems.append(f"{where}: a laptop's figure lost its own title")
            if phone and name.endswith(("01_attention.html", "03_positional_encodings.html")):
                page.add_style_tag(
                    content=".bd-header, .bd-header-article, .skip-link { display: none !important; }"
                )
                first = (
                    page.locator("[role=figure]").filter(has=page.locator(".js-plotly-plot")).first
                )
                first.screenshot(path=str(SHOTS / f"phone-figure-{Path(name).stem}.png"))
        context.close()
    assert problems == [], "\n".join(problems)

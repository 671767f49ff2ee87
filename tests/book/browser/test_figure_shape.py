"""Every stored figure (a PNG in a cell's output) keeps its aspect ratio on the page, on a laptop and on
a phone: the retina PNGs carry a fixed width and height as an inline style, and a column narrower than
the figure must scale both (book/_static/outputs.css).

Oracle: the image file's own pixel size (``naturalWidth`` / ``naturalHeight``) against the box Chromium
lays out for it; a difference of more than 2 % of the ratio means the figure is stretched or squeezed.
The box is measured twice: as the page first lays it out, before the lazily loaded pictures below
the screen have arrived (the box must already be there, at the figure's shape: book/_ext/reading.py
gives each picture width and height attributes, else the text jumps as they load), and after all
have loaded.
"""

from tests.book.browser.conftest import site_pages

CHAPTERS = "notebooks/"
RATIO_TOL = 0.02


def test_figures_keep_their_aspect_ratio_on_a_laptop_and_a_phone(site, server, browser):
    bad, seen = [], 0
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 900})
        for name in [n for n in site_pages(site) if n.startswith(CHAPTERS)]:
            page.goto(f"{server}/{name}", wait_until="load")
            reserved = page.evaluate(
                "() => [...document.querySelectorAll('div.cell_output img')].map(i => {"
                " const r = i.getBoundingClientRect(); return [r.width, r.height, i.complete]; })"
            )
            # pictures load lazily: load them all, then measure each laid-out box
            page.evaluate(
                "() => Promise.all([...document.querySelectorAll('div.cell_output img')].map(i => {"
                " i.loading = 'eager'; return i.decode().catch(() => null); }))"
            )
            boxes = page.evaluate(
                "() => [...document.querySelectorAll('div.cell_output img')].map(i => {"
                " const r = i.getBoundingClientRect();"
                " return [r.width, r.height, i.naturalWidth, i.naturalHeight]; })"
            )
            for k, ((w, h, nw, nh), (w0, h0, _)) in enumerate(zip(boxes, reserved)):
                assert nw > 0 and nh > 0, f"{name}: figure {k} did not load"
                seen += 1
                if h0 == 0 or abs((w0 / h0) / (nw / nh) - 1) > RATIO_TOL:
                    bad.append(
                        f"{name} at {width} px: figure {k} reserved {w0:.0f}x{h0:.0f} before loading"
                    )
                if abs((w / h) / (nw / nh) - 1) > RATIO_TOL:
                    bad.append(
                        f"{name} at {width} px: figure {k} drawn {w:.0f}x{h:.0f}, file {nw}x{nh}"
                    )
        page.close()
    assert seen > 100, f"only {seen} figures measured"
    assert bad == [], "figures stretched or squeezed:\n" + "\n".join(bad)

"""Sphinx extension: what a chapter loads when it opens (issue 24: at most 3 MB at first load).

After the build, every HTML page of the site is rewritten:

* pydata-sphinx-theme's ``fontawesome.js`` (1.5 MB, deferred) is no longer loaded. It turns each icon
  ``<i class="fa-solid fa-bars">`` into an inline SVG; the theme's stylesheet already carries Font
  Awesome's CSS and web font (``fa-solid-900.woff2``, 156 kB), which draw the same icons.
* The ``application/vnd.jupyter.widget-state+json`` blocks that myst-nb copies from the notebooks are
  removed (up to 207 kB in chapter 3): they are read only by the ipywidgets JavaScript, which the book
  does not load (``nb_ipywidgets_js: {}`` in _config.yml; the widget cells are tagged remove-output).
* The chapters' pictures (``_images/``) get ``loading="lazy"``: the browser fetches a picture as the
  reader nears it (and before printing), not all of them when the page opens.
"""

from __future__ import annotations

import re
from pathlib import Path

FONTAWESOME = re.compile(
    r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>'
)
WIDGET_STATE = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-state\+json">.*?</script>', re.S
)
IMAGE = re.compile(r'<img (?![^>]*\bloading=)([^>]*\bsrc="[^"]*_images/)')


def rewrite(html: str) -> str:
    html = FONTAWESOME.sub("", html)
    html = WIDGET_STATE.sub("", html)
    return IMAGE.sub(r'<img loading="lazy" \1', html)


def _on_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for page in outdir.rglob("*.html"):
        if page.relative_to(outdir).parts[0].startswith("_"):
            continue
        html = page.read_text(encoding="utf-8")
        new = rewrite(html)
        if new != html:
            page.write_text(new, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _on_finished, priority=950)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

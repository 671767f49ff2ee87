"""Sphinx extension: serve plotly.js from the built site, once, for pages that hold plotly figures.

The interactive figures of the chapters are stored in the notebooks as HTML fragments that
call ``Plotly.newPlot`` (see ``transformer_lite.book.interactive.show``). This extension copies
``plotly.min.js`` from the installed ``plotly`` Python package into ``_static/`` and adds a
``<script>`` tag for it to every page whose body contains a plotly figure. No CDN is involved,
and the browser caches the one file across pages. ``plotly_touch.js`` (beside this file) is
loaded after it: on a touch screen the figures are drawn with ``dragmode`` off, so that a swipe
scrolls the page instead of zooming the figure. ``plotly_theme.js`` (also beside this file) is
loaded next: it restyles every figure for the page's dark mode (and back) when the reader switches.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PLOTLY_JS = "plotly.min.js"
TOUCH_JS = "plotly_touch.js"  # beside this file: on a touch screen a swipe scrolls the page
THEME_JS = "plotly_theme.js"  # beside this file: figures follow the light / dark mode


def _plotly_js_source() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / PLOTLY_JS


def _add_script_where_needed(app, pagename, templatename, context, doctree):
    if "plotly-graph-div" in context.get("body", ""):
        app.add_js_file(PLOTLY_JS, priority=200)  # before the page's inline figure scripts run
        # then, still before them, the touch-screen setting (plotly_touch.js, beside this file)
        app.add_js_file(TOUCH_JS, priority=201)
        app.add_js_file(THEME_JS, priority=202)  # and the light / dark restyling


def _copy_plotly_js(app, exception):
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / PLOTLY_JS
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_plotly_js_source(), target)
        for name in (TOUCH_JS, THEME_JS):
            shutil.copyfile(Path(__file__).with_name(name), target.with_name(name))


def setup(app):
    if not _plotly_js_source().is_file():
        raise RuntimeError(f"plotly_offline: {PLOTLY_JS} not found in the plotly package")
    app.connect("html-page-context", _add_script_where_needed)
    app.connect("build-finished", _copy_plotly_js)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

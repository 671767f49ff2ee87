"""Sphinx extension: serve plotly.js from the built site, once, for pages that hold plotly figures.

The interactive figures of the chapters are stored in the notebooks as HTML fragments that
call ``Plotly.newPlot`` (see ``transformer_lite.book.interactive.show``). This extension copies
``plotly.min.js`` from the installed ``plotly`` Python package into ``_static/`` and adds a
``<script>`` tag for it to every page whose body contains a plotly figure. No CDN is involved,
and the browser caches the one file across pages. ``plotly_touch.js`` (beside this file) is
loaded after it: on a touch screen the figures are drawn with ``dragmode`` off, so that a swipe
scrolls the page instead of zooming the figure.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PLOTLY_JS = "plotly.min.js"
TOUCH_JS = "plotly_touch.js"  # beside this file: on a touch screen a swipe scrolls the page


def _plotly_js_source() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / PLOTLY_JS


def _add_script_where_needed(app, pagename, templatename, context, doctree):
    if "plotly-graph-div" in context.get("body", ""):
        app.add_js_file(PLOTLY_JS, priority=200)  # before the page's inline figure scripts run
        # then, still before them, the touch-screen setting (plotly_touch.js, beside this file)
        app.add_js_file(TOUCH_JS, priority=201)


def _copy_plotly_js(app, exception):
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / PLOTLY_JS
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_plotly_js_source(), target)
        shutil.copyfile(Path(__file__).with_name(TOUCH_JS), target.with_name(TOUCH_JS))


def setup(app):
    if not _plotly_js_source().is_file():
        raise RuntimeError(f"plotly_offline: {PLOTLY_JS} not found in the plotly package")
    app.connect("html-page-context", _add_script_where_needed)
    app.connect("build-finished", _copy_plotly_js)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

"""Sphinx extension: serve plotly.js from the built site, and draw each figure when the reader nears it.

The interactive figures of the chapters are stored in the notebooks as HTML fragments that call
``Plotly.newPlot`` inline (see ``transformer_lite.chapters.interactive.show``). Loading plotly.min.js
(4.8 MB) as a synchronous script in ``<head>`` kept every chapter blank until it had arrived
(issue 24: first paint 8.9-10.6 s at 10 Mbit/s). Now:

* The page loads only ``plotly_lazy.js`` (deferred, a few kB). After the build, each figure's inline
  script is taken out of the page: its three JSON arguments (data, layout, config) go to
  ``_static/figures/<page>--<id>.js`` (a call of ``tlPlotly.define``), and the figure's ``<div>`` gets
  ``data-tl-figure`` with that file's address. A page whose figure script does not have the expected
  form fails the build (a warning; the book builds with -W), since nothing would draw it.
* ``plotly_lazy.js`` loads plotly.js and the figure's file when the figure comes within a screen of
  the viewport, then draws it. plotly.js is the partial "cartesian" bundle (1.5 MB, the same plotly.js
  version as the plotly Python package; the book's figures are heatmaps, scatter and bar charts),
  installed by ``npm ci`` from ``package-lock.json``; without node_modules the build warns and serves
  the full bundle from the plotly Python package.
* After plotly, in this order (each wraps ``Plotly.newPlot``): ``plotly_touch.js`` (on a touch screen
  figures are drawn with ``dragmode`` off, so a swipe scrolls the page), ``plotly_phone.js`` (in a
  box narrower than 560 px the title is written above the figure as text and annotations are fitted
  to their panels), ``plotly_theme.js`` (figures follow the light / dark mode) and ``plotly_keys.js``
  (native, focusable controls for every slider and menu). All beside this file.
* Under each figure with a slider or a menu, its every state in words, in a closed ``<details>``
  written at build time from the figure's own JSON (``figure_states.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from sphinx.util import logging

try:  # imported as a local extension's neighbour (book/_ext is on sys.path)
    from figure_states import states_html
except ImportError:  # imported as a module of the book/_ext folder (tests)
    from .figure_states import states_html

LOG = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PARTIAL = ROOT / "node_modules" / "plotly.js-cartesian-dist-min" / "plotly-cartesian.min.js"
PLOTLY_JS = "plotly-cartesian.min.js"
FULL_JS = "plotly.min.js"
LOADER_JS = "plotly_lazy.js"
WRAPPERS = ("plotly_touch.js", "plotly_phone.js", "plotly_theme.js", "plotly_keys.js")  # in order
FIGURES = "figures"  # under _static
MARKERS = ("plotly-graph-div", 'class="tl-live"')  # pages that need the loader
TRACE_TYPES = {"heatmap", "scatter", "bar"}  # what the cartesian bundle must draw (it has more)

FIGURE_SCRIPT = re.compile(
    r"<script>\s*window\.PLOTLYENV=window\.PLOTLYENV \|\| \{\};\s*"
    r'if \(document\.getElementById\("(?P<id>[^"]+)"\)\) \{\s*'
    r'Plotly\.newPlot\(\s*"(?P=id)",\s*(?P<args>.*?)\)\s*\};\s*</script>',
    re.S,
)


def _plotly_file() -> tuple[str, Path]:
    if PARTIAL.is_file():
        return PLOTLY_JS, PARTIAL
    import plotly

    return FULL_JS, Path(plotly.__file__).parent / "package_data" / FULL_JS


def _add_script_where_needed(app, pagename, templatename, context, doctree):
    body = context.get("body", "")
    if any(m in body for m in MARKERS):
        name, _ = _plotly_file()
        app.add_js_file(
            LOADER_JS,
            priority=200,
            loading_method="defer",
            **{"data-files": " ".join((name,) + WRAPPERS)},
        )


def _split_args(text: str) -> list:
    """The JSON arguments of a ``Plotly.newPlot(id, ...)`` call, in order."""
    decoder, args, i = json.JSONDecoder(), [], 0
    while i < len(text):
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            break
        value, i = decoder.raw_decode(text, i)
        args.append(value)
    return args


def _move_figures(outdir: Path) -> None:
    figures = outdir / "_static" / FIGURES
    figures.mkdir(parents=True, exist_ok=True)
    for page in outdir.rglob("*.html"):
        rel = page.relative_to(outdir)
        if rel.parts[0].startswith("_"):
            continue
        html = page.read_text(encoding="utf-8")
        if "Plotly.newPlot" not in html:
            continue
        stem = hashlib.sha1(str(rel).encode()).hexdigest()[:8] + "-" + rel.stem
        static_url = "/".join([".."] * (len(rel.parts) - 1) + ["_static", FIGURES])

        def move(m: re.Match) -> str:
            fig_id = m.group("id")
            data, layout, config = (_split_args(m.group("args")) + [{}, {}, {}])[:3]
            types = {t.get("type", "scatter") for t in data}
            if types - TRACE_TYPES:
                LOG.warning(
                    f"plotly_offline: {rel} figure {fig_id} has trace types {sorted(types - TRACE_TYPES)}; "
                    "check that the cartesian bundle draws them, then add them to TRACE_TYPES"
                )
            name = f"{stem}--{fig_id}.js"
            call = ", ".join(
                json.dumps(a, separators=(",", ":")) for a in (fig_id, data, layout, config)
            )
            (figures / name).write_text(f"tlPlotly.define({call});\n", encoding="utf-8")
            states[name] = states_html(data, layout)
            return f"<!-- figure drawn by plotly_lazy.js from {FIGURES}/{name} -->"

        states: dict[str, str] = {}
        new, count = FIGURE_SCRIPT.subn(move, html)
        # each state of a figure with a slider or menu, in words, under the figure (figure_states.py)
        for name, text in states.items():
            if text:
                new = re.sub(
                    rf"(<!-- figure drawn by plotly_lazy\.js from {FIGURES}/{re.escape(name)} -->\s*</div>)",
                    lambda m, text=text: m.group(1) + text,
                    new,
                    count=1,
                )
        for fig_id in re.findall(r'id="([^"]+)" class="plotly-graph-div"', new):
            name = f"{stem}--{fig_id}.js"
            if not (figures / name).is_file():
                continue
            new = new.replace(
                f'id="{fig_id}" class="plotly-graph-div"',
                f'id="{fig_id}" class="plotly-graph-div" data-tl-figure="{static_url}/{name}"',
                1,
            )
        if "Plotly.newPlot" in new.replace("tlPlotly", ""):
            LOG.warning(
                f"plotly_offline: {rel} still calls Plotly.newPlot inline after moving {count} figures: "
                "the figure HTML changed form (update FIGURE_SCRIPT in book/_ext/plotly_offline.py)"
            )
        page.write_text(new, encoding="utf-8")


def _copy_plotly_js(app, exception):
    if exception is None and app.builder.format == "html":
        name, source = _plotly_file()
        if source != PARTIAL:
            LOG.warning(
                f"plotly_offline: {PARTIAL.relative_to(ROOT)} is missing (run `npm ci`); "
                "serving the full plotly.min.js instead"
            )
        static = Path(app.outdir) / "_static"
        static.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, static / name)
        for extra in (LOADER_JS,) + WRAPPERS:
            shutil.copyfile(HERE / extra, static / extra)
        _move_figures(Path(app.outdir))


def setup(app):
    if not _plotly_file()[1].is_file():
        raise RuntimeError("plotly_offline: no plotly.js found (npm ci, or the plotly package)")
    app.connect("html-page-context", _add_script_where_needed)
    app.connect("build-finished", _copy_plotly_js)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

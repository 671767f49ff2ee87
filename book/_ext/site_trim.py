"""Sphinx extension: keep the built site small (issue 14: at most 30 MB without the live-model files).

Runs after the other ``build-finished`` handlers (``sphinx-mathjax-offline`` copies the whole MathJax
distribution, about 24 MB) and removes what no page loads:

* MathJax: everything but ``tex-chtml.js`` (the one component the pages load; ``mathjax_path``), the TeX
  extensions it may autoload (``input/tex/extensions/``) and its CommonHTML fonts (``output/chtml/``).
  Left out: the other combined components, SVG output, the speech rule engine and the accessibility
  explorer (offered in MathJax's context menu; the MathML that screen readers read is part of
  ``tex-chtml.js`` and stays).
* Source maps (``*.map``) of the theme's scripts and styles: read by browser developer tools only.
* ``_static/locales``: the theme's translation catalogues, used when the site is built, never by a page.
* In the downloadable notebooks (``_sources/**/*.ipynb``): the HTML copy of each plotly figure, where the
  same output also carries the figure as plotly JSON (what Jupyter displays; the HTML copy is for this
  site, which has it in the page already).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

MATHJAX_KEEP = ("tex-chtml.js", "input/tex/extensions", "output/chtml")
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _trim_mathjax(mathjax: Path) -> None:
    if not (mathjax / "tex-chtml.js").is_file():
        return
    keep = [mathjax / k for k in MATHJAX_KEEP]
    for path in sorted(mathjax.rglob("*"), key=lambda p: -len(p.parts)):
        if any(path == k or k in path.parents for k in keep) or any(
            path in k.parents for k in keep
        ):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _slim_notebook(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = False
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY_MIME in data and "text/html" in data:
                del data["text/html"]
                changed = True
    if changed:
        path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def trim(outdir: Path) -> None:
    """Remove from the built site ``outdir`` what no page loads (see the module docstring)."""
    static = outdir / "_static"
    _trim_mathjax(static / "mathjax")
    for m in static.rglob("*.map"):
        m.unlink()
    shutil.rmtree(static / "locales", ignore_errors=True)
    for nb in (outdir / "_sources").rglob("*.ipynb"):
        _slim_notebook(nb)


def _on_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        trim(Path(app.outdir))


def setup(app):
    # after sphinx-mathjax-offline's copy (500)
    app.connect("build-finished", _on_finished, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

"""What every interactive figure shares: rounding of stored numbers, and
``show``, which stores a figure in the notebook so that it works in Jupyter and in the static book.
"""

from __future__ import annotations

import html as html_lib
import re

import plotly.io as pio
import torch
from IPython.display import display
from torch import Tensor

__all__ = ["show"]

DECIMALS = (
    4  # stored weights are rounded: smaller pages, and outputs that compare exactly across runs
)


def rounded(t: Tensor) -> list:
    return torch.round(t.detach().double().cpu(), decimals=DECIMALS).tolist()


def sig(values, digits: int = 4) -> list:
    """Round to ``digits`` significant digits (the values span many orders of magnitude)."""
    return [float(f"{float(v):.{digits}g}") for v in values]


def slider(steps: list, prefix: str, pad: int, active: int = 0) -> dict:
    """A slider over stored states: ``steps`` restyle the traces, ``prefix`` names the current value,
    ``pad`` (pixels) keeps it below the axis labels, ``active`` is the step shown when the page opens."""
    return dict(active=active, steps=steps, currentvalue=dict(prefix=prefix), pad=dict(t=pad))


def layout(fig, title: str | dict, height: int, **rest) -> None:
    """What every figure's layout shares, then ``rest`` (margin, legend, sliders, ...) in order.

    The title (a string, or plotly's title dict when it needs a font or a position), the white
    template, a fixed height in pixels and a width that follows the page. The order of the
    arguments is the order of the keys in the stored JSON, so it is kept as the figures had it.
    """
    title = dict(text=title) if isinstance(title, str) else title
    fig.update_layout(title=title, template="plotly_white", height=height, autosize=True, **rest)


def show(fig, div_id: str, alt: str) -> None:
    """Display ``fig`` in a notebook so that it works both in Jupyter and in the static book.

    The output holds two representations: plotly's own JSON (rendered by JupyterLab's plotly
    extension) and an HTML fragment that calls ``Plotly.newPlot`` on a ``<div>`` with the fixed id
    ``div_id`` (rendered by the book, which loads ``plotly.min.js`` from its ``_static`` folder).
    A fixed id keeps the stored output identical from run to run, as nbval requires. ``alt`` describes
    the figure for readers who cannot see it (the HTML wrapper gets ``role="figure"`` and ``aria-label``).

    Raises:
        ValueError: if ``div_id`` is empty or contains characters other than letters, digits, ``-`` and ``_``,
            or ``alt`` is empty.
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", div_id or ""):
        raise ValueError(
            f"show: expected an HTML id of letters, digits, '-' and '_', received {div_id!r}"
        )
    if not alt.strip():
        raise ValueError("show: expected a non-empty alt text describing the figure")
    # Serialize with the standard library's json, not orjson: plotly picks orjson whenever it is
    # importable, and the two write floats and non-ASCII characters differently, which would make
    # the stored notebook outputs depend on what else happens to be installed. Set for this call only.
    engine, pio.json.config.default_engine = pio.json.config.default_engine, "json"
    try:
        html = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
        )
    finally:
        pio.json.config.default_engine = engine
    html = f'<div role="figure" aria-label="{html_lib.escape(alt, quote=True)}">{html}</div>'
    display({"application/vnd.plotly.v1+json": fig.to_plotly_json(), "text/html": html}, raw=True)

"""What the figures of several chapters share: mask colours, line colours and markers, axis labels."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
from IPython import get_ipython
from IPython.core.pylabtools import retina_figure
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.mathtext import MathTextParser
from matplotlib.patches import FancyBboxPatch
from torch import Tensor

__all__ = ["COLUMN_WIDTH", "MASK_CMAP", "PHONE_COLUMN_PX", "smallest_text_px", "use_book_figures"]

# Inches: the book's column (688 px) shows a figure this wide at 100 %; a wider one is shrunk, and
# its text with it.
COLUMN_WIDTH = 6.9
# CSS px: the text column on a 390 px phone (measured in Chromium). Every figure is shrunk to it, so
# its smallest text must be large for its width: at 6.2 in, 12 pt text is 9.6 px on the phone.
PHONE_COLUMN_PX = 358
# The PNG text chunk in which use_book_figures() records smallest_text_px (tests read it).
TEXT_SIZE_KEY = "tl-smallest-text-px"
SMALLEST_TEXT_KEY = "tl-smallest-text"  # and which string it is (the first 60 characters)

# Two colours from the ends of cividis: dark blue = blocked, yellow = may attend.
MASK_CMAP = ListedColormap([plt.get_cmap("cividis")(0.0), plt.get_cmap("cividis")(1.0)])


_MATHTEXT = MathTextParser("path")


class _TextRecorder(RendererAgg):
    """An Agg renderer that notes the size (pt) of every non-blank string it is asked to draw."""

    def __init__(self, fig: Figure):
        super().__init__(fig.bbox.width, fig.bbox.height, fig.dpi)
        self.sizes: list[tuple[float, str]] = []

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if not s.strip():
            return
        size = prop.get_size_in_points()
        if ismath:
            # mathtext draws superscripts, subscripts and fractions smaller (the exponent of a log
            # axis's "10^-5" at 70 %): the smallest glyph counts
            glyphs = _MATHTEXT.parse(s, dpi=72, prop=prop).glyphs
            size = min((glyph[1] for glyph in glyphs), default=size)
        self.sizes.append((size, s))

    def draw_tex(self, gc, x, y, s, prop, angle, *, mtext=None):
        self.draw_text(gc, x, y, s, prop, angle)


def smallest_text_px(fig: Figure, column_px: float = PHONE_COLUMN_PX) -> tuple[float, str]:
    """The smallest text of ``fig`` in CSS px once shown in a column ``column_px`` wide, and that text.

    The figure is drawn as the notebook stores it: cut to its tight bounding box plus
    ``savefig.pad_inches`` on each side, ``fig.dpi`` pixels per inch on the page (a retina PNG has
    twice the pixels and is shown at half). A figure wider than the column is shrunk to it, text
    included: ``pt * dpi / 72 * min(1, column_px / width_px)``.
    """
    recorder = _TextRecorder(fig)
    fig.draw(recorder)
    if not recorder.sizes:
        return float("inf"), ""
    pad = plt.rcParams["savefig.pad_inches"]
    width_px = (fig.get_tightbbox(recorder).width + 2 * pad) * fig.dpi
    pt, text = min(recorder.sizes)
    return float(pt * fig.dpi / 72 * min(1.0, column_px / width_px)), text


def _retina_png_noting_text_size(fig: Figure, **kwargs):
    px, text = smallest_text_px(fig)
    metadata = {TEXT_SIZE_KEY: f"{px:.2f}", SMALLEST_TEXT_KEY: text[:60]}
    return retina_figure(fig, base64=True, metadata=metadata, **kwargs)


def use_book_figures(font_size: float = 12) -> None:
    """The chapters' figure settings: ``font_size`` pt text at 100 dpi, stored as retina PNGs.

    In IPython, each PNG also records in a text chunk (``TEXT_SIZE_KEY``) the size of its smallest
    text on a phone (:func:`smallest_text_px`), which the book's tests require to be at least 9 px.
    """
    shell = get_ipython()
    if shell is not None:
        # load the inline backend now: it sets its own PNG format when it loads, ours must come after
        plt.switch_backend(matplotlib.get_backend())
    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "font.size": font_size,
            "axes.titlesize": font_size,
            "figure.titlesize": font_size + 1,
        }
    )
    if shell is None:
        return
    # PNGs at twice the pixels of their size on the page: sharp on a phone
    shell.display_formatter.formatters["image/png"].for_type(
        Figure, lambda fig: _retina_png_noting_text_size(fig, bbox_inches="tight")
    )


def as_2d(weights: Tensor | np.ndarray) -> np.ndarray:
    w = (
        weights.detach().cpu().double().numpy()
        if isinstance(weights, Tensor)
        else np.asarray(weights, dtype=float)
    )
    if w.ndim != 2:
        raise ValueError(f"expected a 2-D (L, S) array, received shape {w.shape}")
    return w


# distinguishable, colour-blind safe
LINE_COLORS = [
    "#3b528b",
    "#21918c",
    "#d8576b",
    "#e6a100",
    "#5ec962",
    "#440154",
]
MARKERS = ["o", "s", "D", "^", "v", "P"]


def label_line_axes(ax: plt.Axes, xlabel: str, ylabel: str, title: str) -> plt.Axes:
    """Axis labels, a major-tick grid, the title (if any) and the legend of a line plot."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend()  # at rcParams["legend.fontsize"], the figure's text size
    return ax


def figure_size(width: float, height: float) -> tuple[float, float]:
    """``width`` x ``height`` inches at 12 pt text, scaled with ``font.size``: a new figure keeps its look,
    and about the same smallest text on a phone (:func:`smallest_text_px`), at any text size.
    """
    scale = plt.rcParams["font.size"] / 12
    return width * scale, height * scale


class _LogLocator(matplotlib.ticker.Locator):
    """A log axis's ticks for the positive part of its view, from ``_ticks(vmin, vmax)``."""

    def __call__(self):
        return self.tick_values(*self.axis.get_view_interval())

    def tick_values(self, vmin: float, vmax: float) -> np.ndarray:
        vmin, vmax = sorted((vmin, vmax))
        if vmax <= 0:
            return np.array([])
        return self._ticks(vmin if vmin > 0 else vmax / 10, vmax)


class _ExponentLocator(_LogLocator):
    """Ticks of a log axis at round exponents (0, -5, -10, or -0.4, -0.2, 0): a few, evenly spaced."""

    def __init__(self, nbins: int = 8):
        self._exponents = matplotlib.ticker.MaxNLocator(nbins=nbins, steps=[1, 2, 5, 10])

    def _ticks(self, vmin: float, vmax: float) -> np.ndarray:
        return 10.0 ** self._exponents.tick_values(np.log10(vmin), np.log10(vmax))


class _PlainLogLocator(_LogLocator):
    """Ticks of a log axis for plain-number labels: the decades (matplotlib's own choice) when at
    least three fall in view; otherwise 1-2-5 or 1-2-4-6-8 times a power of ten, the first of those
    that puts three ticks in view (an axis from 0.4 to 1.6 holds one decade tick, "1")."""

    _SUBS = ((1.0, 2.0, 5.0), (1.0, 2.0, 4.0, 6.0, 8.0), (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0))

    def _ticks(self, vmin: float, vmax: float) -> np.ndarray:
        def in_view(ticks: np.ndarray) -> np.ndarray:
            return ticks[(ticks >= vmin * (1 - 1e-9)) & (ticks <= vmax * (1 + 1e-9))]

        decades = matplotlib.ticker.LogLocator(base=10)
        decades.set_axis(self.axis)  # its number of ticks follows the axis's length, as by default
        decades = decades.tick_values(vmin, vmax)
        if len(in_view(decades)) >= 3:
            return decades
        powers = 10.0 ** np.arange(np.floor(np.log10(vmin)) - 1, np.ceil(np.log10(vmax)) + 1)
        for subs in self._SUBS:
            ticks = in_view(np.sort(np.outer(powers, subs).ravel()))
            if len(ticks) >= 3:
                return ticks
        return ticks


def label_log_decades(axis: matplotlib.axis.Axis, exponent: bool = False) -> None:
    """Label a log ``axis`` at the full text size.

    Matplotlib writes a decade as ``10^-6``, its exponent at 70 % of the tick size: on a phone under
    9 px. Instead, with ``exponent=False``, the decades as plain numbers (``0.1``, ``1``, ``10``,
    ``100``: for a range of a few decades; on an axis that holds fewer than three decades, 1-2-5
    or finer steps, ``0.4``, ``0.6``, ``1``), minor ticks unlabelled; with ``exponent=True``, a few
    ticks at round exponents, labelled with the exponent alone (``-6`` for ``10^-6``, ``-0.2`` for
    ``10^-0.2``), no minor ticks (the axis label must then say so, e.g. "log10 of the norm"). Call it
    after the axis is made logarithmic.
    """

    def label(value: float, _position) -> str:
        if value <= 0:
            return ""
        # "-0.2", "-6", "0" (not "-0"); "0.1", "1", "100"
        text = f"{round(np.log10(value), 6) + 0.0:g}" if exponent else f"{value:g}"
        # the minus sign of matplotlib's own tick labels
        return text.replace("-", "\N{MINUS SIGN}") if plt.rcParams["axes.unicode_minus"] else text

    if exponent:
        axis.set_major_locator(_ExponentLocator())
        axis.set_minor_locator(matplotlib.ticker.NullLocator())
    else:
        axis.set_major_locator(_PlainLogLocator())
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(label))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def draw_add(ax: plt.Axes, y: float, radius: float, fontsize: float) -> None:
    """The addition of a residual connection in a block diagram: a circled plus centred at (0, y)."""
    ax.add_patch(plt.Circle((0, y), radius, facecolor="white", edgecolor="black"))
    ax.text(0, y, "+", ha="center", va="center", fontsize=fontsize + 3)


def draw_box(
    ax: plt.Axes, y: float, half_width: float, half_height: float, boxstyle: str, **style
) -> None:
    """A sublayer's box in a block diagram, centred at (0, y); ``style``: facecolor, edgecolor..."""
    corner = (-half_width, y - half_height)
    ax.add_patch(
        FancyBboxPatch(corner, 2 * half_width, 2 * half_height, boxstyle=boxstyle, **style)
    )

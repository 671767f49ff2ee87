"""nbval with tolerances: stored notebook outputs that hold on any processor.

nbval (the runner) re-executes every chapter and compares each cell's new outputs with
the stored ones. Its own comparison is byte for byte, which tests the machine rather than
the code: another processor (another SIMD width in ATen's kernels, another BLAS, ARM
instead of x86) changes the last bits of float results, and a printed ``0.1306`` becomes
``0.1307``. This plugin replaces nbval's ``IPyNbCell.compare_outputs`` with one that
compares

* **text** (stdout, ``text/plain``, ``text/html``, plotly JSON, glued values) token by
  token: every run of non-numeric text must be equal (whitespace runs count as one
  space, because torch pads tensor columns to the widest number); every integer must be
  equal (token ids, counts, shapes, indices); every other number (``0.1306``, ``1.``,
  ``2.4e-07``, ``nan``) must agree within ``atol + rtol * max(|a|, |b|) + one unit in
  the last printed digit``. The last term is there because rounding to d decimals can
  move a value by one unit in the d-th decimal for an arbitrarily small change of it.
* **figures** (``image/png``; nbval itself skips images) pixel by pixel: the two PNGs must
  have the same size, and the fraction of pixels whose colour differs by more than
  ``PIXEL_LEVEL`` (on a 0-1 scale, any channel) must stay below ``image_fraction``. A
  last-bit change moves a line by a fraction of a pixel, which anti-aliasing turns into a
  few changed edge pixels; a changed curve, colour, label or title changes far more.

The defaults, and why they are what they are (measured on 2026-12-01: every chapter executed
with ``ATEN_CPU_CAPABILITY=default``, PyTorch's scalar kernels, and compared with outputs stored
with AVX-512 on the same machine; the same comparison an x86 laptop with AVX2, or an ARM one,
makes against these files):

* ``rtol = 1e-4``: float32 carries 24 bits (relative spacing 6e-8). MiniLM's hidden states moved
  by at most 2.5e-6 (5e-7 of their largest magnitude) between the capabilities; the chapters
  print rounded values, and every untrained printed number agreed within one unit of its last
  printed digit. 1e-4 covers values printed at full precision with a wide margin and still
  fails a changed result in the fourth significant digit.
* ``atol = 1e-7``: values that should be exactly zero come out as float32 rounding noise
  (``3e-08``) on another processor. Anything larger is not noise for the quantities the
  book prints (weights, losses, norms of order 1e-3 to 1e2).
* ``image_fraction = 0.001`` with ``PIXEL_LEVEL = 0.1``: at most 0.1 % of the pixels may change
  visibly. Measured: no figure of an untrained computation changed a single pixel by more than
  0.1 of the colour range (sub-pixel moves of a line only shift anti-aliasing by a few levels);
  a training-loss curve whose values moved by 0.002 changed 0.13 % of its pixels, other
  trained figures 1 % to 6.6 %, and a changed title or curve changes several percent.

A cell may state a wider tolerance for itself in its metadata, with the reason, which
readers never see (the book hides cell metadata)::

    "metadata": {"tolerance": {"rtol": 1e-3, "reason": "30 layers of float32 ..."}}

Keys: ``rtol``, ``atol``, ``image_fraction``; ``reason`` is required. Results of training
(losses after hundreds of steps, sampled text) diverge chaotically between processors and
are not compared value by value at all: such a cell carries the ``nbval-ignore-output`` tag,
and the chapter asserts the claim its text makes about them (a loss inside a band, an
accuracy above a bound) in a cell that nbval runs.

``tests/book/test_nbval_tolerance.py`` shows that each kind of comparison fails on a real change.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest

RTOL = 1e-4
ATOL = 1e-7
IMAGE_FRACTION = 0.001
PIXEL_LEVEL = 0.1

# A number: optional sign, digits with an optional fraction (or a bare fraction), optional
# exponent; or nan / inf. Not preceded by a letter, digit or underscore, so that names such as
# "x1", "W_0" or "float32" stay text.
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_])[-+]?(?:(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf)(?![A-Za-z0-9_])"
)
_SPACE = re.compile(r"\s+")
_IMAGE_KEYS = ("image/png",)


@dataclass(frozen=True)
class Tolerance:
    """How far a recomputed output may be from the stored one (see the module docstring)."""

    rtol: float = RTOL
    atol: float = ATOL
    image_fraction: float = IMAGE_FRACTION

    @classmethod
    def from_metadata(cls, metadata: dict, where: str = "") -> Tolerance:
        spec = dict(metadata.get("tolerance", {}))
        if not spec:
            return cls()
        if not str(spec.pop("reason", "")).strip():
            raise ValueError(f"{where}: a cell's 'tolerance' metadata must give its 'reason'")
        unknown = set(spec) - {"rtol", "atol", "image_fraction"}
        if unknown:
            raise ValueError(
                f"{where}: unknown tolerance keys {sorted(unknown)}; "
                "expected rtol, atol, image_fraction, reason"
            )
        return cls(**{k: float(v) for k, v in spec.items()})


def _is_integer(token: str) -> bool:
    return re.fullmatch(r"[-+]?\d+", token) is not None


def _last_digit_unit(token: str) -> float:
    """One unit in the last printed digit: 0.1306 -> 1e-4, 2.4e-07 -> 1e-8, 1. -> 1."""
    t = token.lower().lstrip("+-")
    if t in ("nan", "inf"):
        return 0.0
    mantissa, _, exponent = t.partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def split_numbers(text: str) -> tuple[list[str], list[str]]:
    """Split text into its non-numeric skeleton (whitespace collapsed) and its number tokens."""
    parts, numbers, last = [], [], 0
    for m in _NUMBER.finditer(text):
        parts.append(text[last : m.start()])
        numbers.append(m.group())
        last = m.end()
    parts.append(text[last:])
    return [_SPACE.sub(" ", p) for p in parts], numbers


def numbers_agree(a: str, b: str, tol: Tolerance) -> bool:
    """Integers exactly; other numbers within atol + rtol * max(|a|, |b|) + one last-digit unit."""
    if _is_integer(a) and _is_integer(b):
        return int(a) == int(b)
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    # An integer token beside a float (plotly writes 0 where another run has 1e-17) gives no unit.
    unit = max((_last_digit_unit(t) for t in (a, b) if not _is_integer(t)), default=0.0)
    return abs(x - y) <= tol.atol + tol.rtol * max(abs(x), abs(y)) + unit * (1 + 1e-9)


def compare_text(ref: str, test: str, tol: Tolerance) -> str | None:
    """None if the texts agree; otherwise a message naming the first disagreement."""
    if ref == test:
        return None
    ref_parts, ref_numbers = split_numbers(ref)
    test_parts, test_numbers = split_numbers(test)
    if ref_parts != test_parts:
        for i, (r, t) in enumerate(zip(ref_parts, test_parts)):
            if r != t:
                return f"text differs after {i} numbers: stored {r[:120]!r}, now {t[:120]!r}"
        return f"stored output has {len(ref_numbers)} numbers, the new one {len(test_numbers)}"
    for i, (r, t) in enumerate(zip(ref_numbers, test_numbers)):
        if not numbers_agree(r, t, tol):
            context = ref_parts[i][-60:]
            return (
                f"number {i} ({'integer, compared exactly' if _is_integer(r) and _is_integer(t) else 'float'}) "
                f"after {context!r}: stored {r}, now {t} (rtol={tol.rtol:g}, atol={tol.atol:g}, "
                "plus one unit in the last printed digit)"
            )
    return None


def _png_pixels(data: str) -> np.ndarray:
    from matplotlib import image as mpimg  # matplotlib is a dependency of the package

    array = mpimg.imread(io.BytesIO(base64.b64decode(data)), format="png")
    return array[..., :3] if array.ndim == 3 else array


def compare_png(ref: str, test: str, tol: Tolerance) -> str | None:
    """None if the figures agree within the tolerance; otherwise what differs."""
    if ref == test:
        return None
    a, b = _png_pixels(ref), _png_pixels(test)
    if a.shape != b.shape:
        return f"figure size differs: stored {a.shape[1]}x{a.shape[0]}, now {b.shape[1]}x{b.shape[0]} pixels"
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    changed = diff.max(axis=-1) > PIXEL_LEVEL if diff.ndim == 3 else diff > PIXEL_LEVEL
    fraction = float(changed.mean())
    if fraction > tol.image_fraction:
        return (
            f"figure differs in {fraction:.2%} of its pixels (more than {tol.image_fraction:.2%} "
            f"changed by more than {PIXEL_LEVEL} of the colour range)"
        )
    return None


def compare_value(key: str, ref, test, tol: Tolerance) -> str | None:
    if key in _IMAGE_KEYS:
        return compare_png(ref, test, tol)
    if not isinstance(ref, str) or not isinstance(test, str):
        ref = ref if isinstance(ref, str) else json.dumps(ref, sort_keys=True)
        test = test if isinstance(test, str) else json.dumps(test, sort_keys=True)
    return compare_text(ref, test, tol)


def _flatten(cell, outputs, skip) -> dict[str, list]:
    """nbval's flattening: output keys and data MIME types -> list of (sanitized) values."""
    flat: dict[str, list] = {}
    for output in outputs:
        for key, value in output.items():
            if key in skip:
                continue
            if key == "data":
                for mime, content in value.items():
                    if mime not in skip:
                        flat.setdefault(mime, []).append(
                            content if mime in _IMAGE_KEYS else cell.sanitize(content)
                        )
            else:
                flat.setdefault(key, []).append(cell.sanitize(value))
    return flat


def compare_outputs(self, test, ref, skip_compare=None):
    """Replacement for ``nbval.plugin.IPyNbCell.compare_outputs`` (same contract: bool)."""
    from nbval.plugin import transform_streams_for_comparison

    skip = tuple(k for k in (skip_compare or self.parent.skip_compare) if k not in _IMAGE_KEYS)
    where = f"{self.parent.fspath.basename} cell {self.cell_num}"
    tol = Tolerance.from_metadata(self.cell.metadata, where)
    self.comparison_traceback = []
    ref_flat = _flatten(self, transform_streams_for_comparison(ref), skip)
    test_flat = _flatten(self, transform_streams_for_comparison(test), skip)
    if set(ref_flat) != set(test_flat):
        self.comparison_traceback.append(
            f"output kinds differ: stored {sorted(ref_flat)}, now {sorted(test_flat)}"
        )
        return False
    for key, ref_values in ref_flat.items():
        test_values = test_flat[key]
        if len(ref_values) != len(test_values):
            self.comparison_traceback.append(
                f"{key}: stored {len(ref_values)} outputs, now {len(test_values)}"
            )
            return False
        for ref_value, test_value in zip(ref_values, test_values):
            problem = compare_value(key, ref_value, test_value, tol)
            if problem:
                self.comparison_traceback.append(f"{where}, {key}: {problem}")
                return False
    return True


def pytest_configure(config):
    try:
        from nbval import plugin as nbval_plugin
    except ImportError:  # nbval not installed: nothing to patch
        return
    nbval_plugin.IPyNbCell.compare_outputs = compare_outputs


@pytest.hookimpl(trylast=True)
def pytest_report_header(config):
    import torch

    return [
        f"nbval outputs compared with tests/nbval_tolerance.py: rtol={RTOL:g}, atol={ATOL:g}, "
        f"figures {IMAGE_FRACTION:.1%} of pixels, integers and text exact",
        f"ATen CPU capability: {torch.backends.cpu.get_cpu_capability()} "
        f"(ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', 'unset')})",
    ]

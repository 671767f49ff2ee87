"""No computed number is typed into a chapter's prose: it comes from the code through glue.

A number that a cell computes reaches the markdown through myst-nb's glue
(``glue("val_loss", float(loss), display=False)`` in code, ``{glue:text}`val_loss:.3f```
in markdown), so a re-run can never leave the text behind its outputs. This test reads every
markdown cell of every chapter (exercise statements and solutions included), removes the glue
roles, inline code (inputs written as code, e.g. ``[0.5, -1.0, 2.0]``) and the phrases on the
allow-list below, and fails on any decimal number (``0.42``), percentage (``24 %``) or number
in scientific notation (``1.2\\times10^{-7}``, ``3e-08``) that is left.

The allow-list holds definitions and constants only: values the code sets (a spectral radius,
a temperature, an input's standard deviation) and textbook constants. Each entry says why.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # reads, executes or builds the whole book

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# Phrases that may contain a typed number, per chapter ("*" = every chapter). Keep it short.
ALLOWED: dict[str, list[str]] = {
    "*": [],
    "03": ["standard deviation 0.02"],  # the initialization of learned tables, set in the package
    "04": [
        r"$3 \times 10^{-3}$",  # a peak learning rate: a hyperparameter of the training cell
        "falls below 1.2",  # the plateau threshold the code sets (PLATEAU_EXIT)
    ],
    "05": [r"rises linearly to $2 \times 10^{-3}$"],  # the peak learning rate, a hyperparameter
    "06": [
        # spectral radii and input scales the chapter chooses, and powers of them written as math
        "radius 0.9",
        "radius 1.0",
        "radius 1.1",
        "radius 1.5",
        "for 1.0 and",
        "for 1.1.",
        "$0.9^{60}",
        "$1.1^{60}",
        "$1.1^{20}",
        "$0.5^{10}",
        "$w = 0.5$",
        "standard deviation 0.01",
        r"\rVert = 1.1$",
        r"W_{hh} = 1.1\, Q",
        r"z_t \approx 0.5",  # sigma(0) = 1/2: the GRU's gates at initialization
        "Sec. 2.1",  # a section number of the cited paper
    ],
    # exact arithmetic on the exercise's own sizes (8 x 12 x 2048^2 x 4 bytes), printed by its solution cell
    "07": ["exactly 1.5 GiB"],
    "08": ["temperature of 0.8", "temperature 0.7"],  # sampling temperatures the cells set
}

_GLUE = re.compile(r"\{glue(?::\w+)?\}`[^`]*`")
_INLINE_CODE = re.compile(r"(?<!`)`[^`\n]+`(?!`)")
_TYPED = re.compile(
    r"(?<![\w.{])(?:"
    r"\d+(?:\.\d+)?\s*\\?%"  # 24 %, 86.9%, 5\%
    r"|\d+(?:\.\d+)?\s*\\times\s*10\^\{?-?\d+\}?"  # 1.2\times10^{-7}
    r"|\d+(?:\.\d+)?[eE]-?\d+"  # 3e-08
    r"|\d+\.\d+"  # 0.42
    r")"
)


def typed_numbers(markdown: str, allowed: list[str]) -> list[str]:
    """The typed numbers left in ``markdown`` after glue roles, inline code and allowed phrases."""
    text = _GLUE.sub(" ", markdown)
    text = _INLINE_CODE.sub(" ", text)
    for phrase in sorted(allowed, key=len, reverse=True):
        text = text.replace(phrase, " ")
    return [m.group() for m in _TYPED.finditer(text)]


def test_the_detector_finds_what_it_should():
    assert typed_numbers("alignment 86.9% and 24 %; loss 1.800", []) == ["86.9%", "24 %", "1.800"]
    assert typed_numbers(r"gaps of $1.2\times10^{-7}$ and 3e-08", []) == [
        r"1.2\times10^{-7}",
        "3e-08",
    ]
    assert typed_numbers("loss {glue:text}`val_loss:.3f` with `scores = [0.5, -1.0]`", []) == []
    assert typed_numbers("radius 0.9 and 0.891", ["radius 0.9"]) == ["0.891"]
    assert typed_numbers("in float32, layer 12, vaswani2017attention, section 3.2.1", []) == ["3.2"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_typed_computed_number_in_prose(path):
    allowed = ALLOWED["*"] + ALLOWED.get(path.stem[:2], [])
    found = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] == "markdown":
            found += [f"cell {i}: {n}" for n in typed_numbers("".join(cell["source"]), allowed)]
    assert not found, (
        f"{path.name}: numbers typed into the prose (glue them from the cell that computes "
        f"them, or, for a definition, add the phrase to ALLOWED with a reason): {found}"
    )

"""The notebook comparator (tests/nbval_tolerance.py) passes last-bit changes and fails real ones.

Oracle: hand-made pairs of outputs whose verdict is known, and real nbval runs on a small
notebook whose stored outputs are edited: once within the stated tolerances (every cell must
pass) and once beyond them, one kind of comparison per cell (each such cell must fail, and
only those). A comparator that let everything through would fail the second half.
"""

from __future__ import annotations

import base64
import copy
import io
import os
from pathlib import Path

import matplotlib
import nbformat
import pytest
from nbclient import NotebookClient

from tests.nbval_tolerance import (
    Tolerance,
    compare_png,
    compare_text,
    compare_value,
    numbers_agree,
    split_numbers,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt

pytestmark = pytest.mark.slow  # reads, executes or builds the whole book

ROOT = Path(__file__).resolve().parents[2]
TOL = Tolerance()


# --- numbers and text -------------------------------------------------------------------


def test_split_numbers_keeps_names_as_text():
    parts, numbers = split_numbers("W_0 has shape (2, 3) in float32: tensor([1.0000e-01, -2.5])")
    assert numbers == ["2", "3", "1.0000e-01", "-2.5"]
    assert "W_0" in parts[0] and "float32" in parts[2]


@pytest.mark.parametrize(
    "stored, now",
    [
        ("0.1306", "0.1307"),  # a last-bit change that crossed a rounding boundary
        ("1.", "1.0000"),  # torch prints 1. or 1.0000 depending on the other entries
        ("0.86912345", "0.86913123"),  # within rtol=1e-4
        ("3e-08", "-4e-08"),  # rounding noise around zero, within atol
        ("nan", "nan"),
    ],
)
def test_numbers_within_tolerance_agree(stored, now):
    assert numbers_agree(stored, now, TOL)


@pytest.mark.parametrize(
    "stored, now",
    [
        ("0.1306", "0.1309"),  # three units in the last printed digit
        ("0.869", "0.851"),  # a changed result (a retrained model's alignment)
        ("1.800", "1.798"),  # a changed loss printed at 3 decimals
        ("2.4e-07", "5.0e-07"),  # beyond atol
        ("42", "43"),  # integers are exact
        ("0.5", "nan"),
        ("inf", "1e308"),
    ],
)
def test_numbers_beyond_tolerance_disagree(stored, now):
    assert not numbers_agree(stored, now, TOL)


def test_integers_are_exact_even_when_large():
    assert not numbers_agree("4456669", "4456670", TOL)
    assert not numbers_agree("4456669", "4456669.5", Tolerance(rtol=0, atol=0))
    assert numbers_agree("0", "1e-17", TOL)


def test_text_compares_words_exactly_and_whitespace_loosely():
    assert (
        compare_text(
            "tensor([[1., 0.],\n        [0., 1.]])",
            "tensor([[1.0000, 0.0000],\n [0.0000, 1.0000]])",
            TOL,
        )
        is None
    )
    assert "text differs" in compare_text("causal: True", "causal: False", TOL)
    assert "numbers" in compare_text("ids [1, 2, 3]", "ids [1, 2, 3, 4]", TOL)
    message = compare_text("validation 1.800 nats", "validation 1.798 nats", TOL)
    assert "stored 1.800, now 1.798" in message


def test_plotly_json_compares_every_value():
    fig = {"data": [{"z": [[0.13061234, 0.5], [1.0, 0.0]], "x": ["tea", "is"]}]}
    close = copy.deepcopy(fig)
    close["data"][0]["z"][0][0] = 0.13061299
    far = copy.deepcopy(fig)
    far["data"][0]["z"][0][0] = 0.1311
    renamed = copy.deepcopy(fig)
    renamed["data"][0]["x"][1] = "was"
    key = "application/vnd.plotly.v1+json"
    assert compare_value(key, fig, close, TOL) is None
    assert compare_value(key, fig, far, TOL) is not None
    assert compare_value(key, fig, renamed, TOL) is not None


def test_a_tolerance_needs_its_reason():
    assert Tolerance.from_metadata({}) == Tolerance()
    assert (
        Tolerance.from_metadata({"tolerance": {"rtol": 1e-3, "reason": "30 float32 layers"}}).rtol
        == 1e-3
    )
    with pytest.raises(ValueError, match="reason"):
        Tolerance.from_metadata({"tolerance": {"rtol": 1e-3}})
    with pytest.raises(ValueError, match="unknown"):
        Tolerance.from_metadata({"tolerance": {"rtoll": 1e-3, "reason": "typo"}})


# --- figures ---------------------------------------------------------------------------


def _png(ys, title="gradient norm against lag", size=(4, 3)) -> str:
    fig, ax = plt.subplots(figsize=size, dpi=100)
    ax.plot(ys)
    ax.set_title(title)
    ax.set_xlabel("lag")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


YS = [0.9**k for k in range(60)]


def test_a_last_bit_change_leaves_the_figure_equal():
    assert compare_png(_png(YS), _png([y * (1 + 1e-7) for y in YS]), TOL) is None


@pytest.mark.parametrize(
    "changed",
    [
        _png([0.95**k for k in range(60)]),  # another curve
        _png(YS, title="gradient norm against time"),  # another title
        _png(YS, size=(5, 3)),  # another size
    ],
    ids=["curve", "title", "size"],
)
def test_a_changed_figure_fails(changed):
    assert compare_png(_png(YS), changed, TOL) is not None


# --- real nbval runs -------------------------------------------------------------------

CELLS = {
    "float": "print(f'{2 / 3:.4f}')",
    "integer": "print(len('attention'))",
    "text": "print('row sums equal 1:', True)",
    "figure": (
        "import io, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "from IPython.display import Image, display\nfig, ax = plt.subplots(figsize=(4, 3), dpi=100)\n"
        "ax.plot([0.9 ** k for k in range(60)])\nax.set_title('reach')\nax.set_xlabel('lag')\n"
        "buffer = io.BytesIO()\nfig.savefig(buffer, format='png')\ndisplay(Image(buffer.getvalue()))"
    ),
    "claim": "loss = 1.80\nassert 1.70 < loss < 1.90, f'loss {loss} outside the band the text states'",
}


def _executed_notebook(tmp_path: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS.values()]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return nb


def _other_png() -> str:
    return _png([0.5**k for k in range(60)], title="reach")  # same size and title, another curve


def _set_stream(cell, text):
    cell.outputs[0]["text"] = text


def _run_nbval(pytester, nb) -> dict[str, str]:
    path = pytester.path / "chapter.ipynb"
    nbformat.write(nb, path)
    env_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    pytester._monkeypatch.setenv("PYTHONPATH", env_path)
    result = pytester.runpytest_subprocess(
        "--nbval", "-p", "tests.nbval_tolerance", "-p", "no:cacheprovider", "-rA", str(path)
    )
    outcomes = {}
    for line in result.outlines:
        for verdict in ("PASSED", "FAILED"):
            if line.startswith(verdict) and "::Cell" in line:
                outcomes[list(CELLS)[int(line.split("::Cell ")[1].split()[0])]] = verdict
    return outcomes


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    return _executed_notebook(tmp_path_factory.mktemp("nb"))


def test_nbval_passes_changes_within_tolerance(pytester, executed):
    nb = copy.deepcopy(executed)
    cells = dict(zip(CELLS, nb.cells))
    _set_stream(cells["float"], "0.6666\n")  # stored 0.6667: one unit in the last digit
    _set_stream(cells["text"], "row sums equal 1:   True\n")  # spacing only
    assert _run_nbval(pytester, nb) == dict.fromkeys(CELLS, "PASSED")


def test_nbval_fails_each_kind_of_real_change(pytester, executed):
    nb = copy.deepcopy(executed)
    cells = dict(zip(CELLS, nb.cells))
    _set_stream(cells["float"], "0.6690\n")
    _set_stream(cells["integer"], "8\n")
    _set_stream(cells["text"], "row sums equal 1: False\n")
    png = next(o for o in cells["figure"].outputs if "image/png" in o.get("data", {}))
    png["data"]["image/png"] = _other_png()
    cells["claim"].source = cells["claim"].source.replace("1.80", "2.50")  # the model got worse
    assert _run_nbval(pytester, nb) == dict.fromkeys(CELLS, "FAILED")


def test_the_requested_cpu_capability_is_in_force():
    """`make test` runs everything with ATEN_CPU_CAPABILITY=default; check that torch obeys it."""
    import torch

    requested = os.environ.get("ATEN_CPU_CAPABILITY")
    if requested is None:
        pytest.skip("ATEN_CPU_CAPABILITY is not set (make test sets it)")
    assert torch.backends.cpu.get_cpu_capability() == requested.upper()

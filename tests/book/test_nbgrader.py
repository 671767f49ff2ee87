"""The nbgrader course written by scripts/export_nbgrader.py.

Oracles: nbgrader itself. Every exported notebook passes nbgrader's metadata validator, and
its cells are the chapter's exercises: each marked solution of the chapter is a solution cell
with nbgrader's markers, each checker call an autograded, read-only test cell. Each exported
notebook, run on its own in a fresh kernel, passes every test cell with the solutions.
Then nbgrader's own ``generate_assignment`` and ``autograde`` on one exported chapter, with a right,
an empty and a wrong submission: full points, none, and all but the wrong exercise's points.
"""

import ast
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbclient import NotebookClient
from nbgrader.api import Gradebook
from nbgrader.nbgraderformat import MetadataValidator

ROOT = Path(__file__).resolve().parents[2]
CHEAP = "02_causal_masks"  # its exercise section runs in seconds
CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("[0-9]*_*.ipynb"))


def _exporter():
    """scripts/export_nbgrader.py run as a module: its functions as attributes."""
    return SimpleNamespace(**runpy.run_path(str(ROOT / "scripts" / "export_nbgrader.py")))


def _export(output: Path, *chapters: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "scripts/export_nbgrader.py",
            "--output",
            str(output),
            "--chapters",
            *chapters,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def _exercise_cells(path: Path):
    nb = nbformat.read(path, as_version=4)
    start = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Exercises"))
    return nb.cells[start:]


def _checker_calls(cells) -> list[str]:
    """The names of the checkers the chapter's exercise section calls, in order."""
    calls = []
    for cell in cells:
        if cell.cell_type != "code" or "solution" in cell.metadata.get("tags", []):
            continue
        for node in ast.parse(cell.source).body:
            call = getattr(node, "value", None)
            if isinstance(call, ast.Call) and getattr(call.func, "id", "").startswith("check_"):
                calls.append(call.func.id)
    return calls


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("course")
    _export(out, *(p.stem for p in CHAPTERS))
    return out


def test_config_is_written(course):
    config = (course / "nbgrader_config.py").read_text()
    assert 'c.CourseDirectory.course_id = "transformer-lite"' in config
    assert "c.Execute.timeout" in config


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_solution_and_checker_of_the_chapter_is_an_nbgrader_cell(course, chapter):
    exported = course / "source" / chapter.stem / chapter.name
    nb = nbformat.read(exported, as_version=4)
    MetadataValidator().validate_nb(nb)  # nbgrader's own check: schema, ids unique, points
    meta = [c.metadata.get("nbgrader", {}) for c in nb.cells]

    cells = _exercise_cells(chapter)
    marked = [
        c.source
        for c in cells
        if "solution" in c.metadata.get("tags", []) and "# BEGIN SOLUTION" in c.source
    ]
    solutions = [c for c, m in zip(nb.cells, meta) if m.get("solution")]
    assert [c.source.replace("### ", "# ") for c in solutions] == marked
    for cell in solutions:
        lines = [line.strip() for line in cell.source.splitlines()]
        assert "### BEGIN SOLUTION" in lines and "### END SOLUTION" in lines

    tests = [(c, m) for c, m in zip(nb.cells, meta) if m.get("grade")]
    calls = _checker_calls(cells)
    assert len(tests) == len(calls) > 0
    for (cell, m), name in zip(tests, calls):
        assert m["locked"] and m["points"] in (1, 2, 3) and m["grade_id"].endswith(name)
        assert f"{name}(" in cell.source and 'assert "all checks passed"' in cell.source

    # nothing of the book's hidden material: no worked answers, no hidden checks, no glue
    assert not any("glue(" in c.source for c in nb.cells if c.cell_type == "code")
    assert not any("{solution-start}" in c.source or "{glue" in c.source for c in nb.cells)
    # the set-up cell is read-only and the first code cell
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert setup.metadata["nbgrader"]["locked"] and "import torch" in setup.source


def test_graded_cell_asserts_on_what_the_checker_prints():
    """A stub makes the checker print instead of raise: the test cell must fail on that print."""
    exporter = _exporter()
    (cell,) = exporter.graded_cells(
        "from transformer_lite.chapters.exercises import check_causal_mask\n\n"
        "check_causal_mask(my_causal_mask)",
        "ex",
        1,
    )

    def stub(L):
        raise NotImplementedError

    def right(L):
        import torch

        return torch.ones(L, L, dtype=torch.bool).tril()

    with pytest.raises(AssertionError, match="not implemented yet"):
        exec(cell.source, {"my_causal_mask": stub})
    exec(cell.source, {"my_causal_mask": right})  # nothing raised


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_the_solutions_pass_every_test_cell_on_their_own(course, chapter):
    """The exported section runs without the rest of the chapter: the set-up cell's imports suffice,
    and with the solutions every test cell passes (nbgrader would give full points)."""
    nb = nbformat.read(course / "source" / chapter.stem / chapter.name, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", allow_errors=True, shutdown_kernel="immediate"
    ).execute()
    errors = [
        (c.source.splitlines()[-1], o.get("evalue", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "error"
    ]
    assert errors == []
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert all("all checks passed" in "".join(o.get("text", "") for o in c.outputs) for c in graded)


def _nbgrader(course: Path, *args: str) -> None:
    """``nbgrader <args>`` in the course folder (its nbgrader_config.py), in a process of its own."""
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(course / ".jupyter"))
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


@pytest.mark.slow
def test_nbgrader_generates_and_autogrades_the_exported_course(tmp_path):
    course = tmp_path / "course"
    _export(course, CHEAP)
    notebook = f"{CHEAP}.ipynb"
    _nbgrader(course, "generate_assignment", CHEAP, "--force")
    released = nbformat.read(course / "release" / CHEAP / notebook, as_version=4)
    assert not any("SOLUTION" in c.source for c in released.cells)
    assert sum("raise NotImplementedError()" in c.source for c in released.cells) == 4

    source = (course / "source" / CHEAP / notebook).read_text()
    wrong = source.replace(".tril()  # keep j <= i", ".triu()  # keep j <= i")
    assert wrong != source
    submissions = {
        "right": source,
        "empty": (course / "release" / CHEAP / notebook).read_text(),
        "wrong": wrong,
    }
    for student, text in submissions.items():
        folder = course / "submitted" / student / CHEAP
        folder.mkdir(parents=True)
        (folder / notebook).write_text(text)
    # every submitted student at once (each notebook still in a kernel of its own), as a teacher runs it
    _nbgrader(course, "autograde", CHEAP, "--create")

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(CHEAP, s).score for s in submissions}
        max_score = gb.find_assignment(CHEAP).max_score
        causal_mask = gb.find_grade(
            "ex-masks-causal-check_causal_mask", notebook[:-6], CHEAP, "wrong"
        )
        lost = causal_mask.max_score
        assert causal_mask.score == 0
    assert max_score == 8  # exercises 2.1, 2.2, 2.3, 2.6: one, two, two and three stars
    assert scores == {"right": max_score, "empty": 0, "wrong": max_score - lost}
    shutil.rmtree(course)

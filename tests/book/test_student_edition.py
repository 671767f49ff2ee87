"""The student edition: generated from the chapter notebooks by scripts/make_student_edition.py.

Oracle: the generated notebooks themselves. They must contain no solution; every cell
outside the exercises must be a cell of the chapter, unchanged (nbval executes and checks
those when it runs the chapter, so running them again here would test nothing new and would
retrain chapter 8's models); and the exercise section, executed with nbclient in a fresh
kernel, must run without an error, every checker reporting "not implemented yet" for its stub
instead of crashing.
"""

import json
import re
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # reads, executes or builds the whole book

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _generator():
    """scripts/make_student_edition.py run as a module: its functions as attributes."""
    return SimpleNamespace(**runpy.run_path(str(ROOT / "scripts" / "make_student_edition.py")))


def test_stub_source_replaces_only_the_marked_region():
    gen = _generator()
    source = "def f(x):\n    '''doc'''\n    # BEGIN SOLUTION\n    y = x + 1\n    return y\n    # END SOLUTION\n"
    assert gen.stub_source(source) == f"def f(x):\n    '''doc'''\n    {gen.STUB}"
    assert gen.stub_source("x = 1") is None
    with pytest.raises(ValueError, match="END SOLUTION"):
        gen.stub_source("# BEGIN SOLUTION\nx = 1")


def test_markdown_is_made_readable_without_myst():
    """Hand-written case: an exercise fence, a glued value, a citation and a reference."""
    gen = _generator()
    source = (
        "Solutions are hidden; try first.\n\n"
        "```{exercise} Build a mask\n:label: ex-a\n\n**Difficulty ★.** Write it; $x$ = {glue:text}`w:.2f`.\n\n"
        "Then check.\n```\nAs {cite}`vaswani2017attention,ba2016layer` and {ref}`ex-b` show.\n"
        "```{note}\nA side remark.\n```"
    )
    out = gen.readable_markdown(
        source,
        {"w": "0.4458"},
        gen.parse_file(str(gen.BIB)),
        {"ex-b": "Exercise 1.2"},
        ["Exercise 2.1"],
    )
    assert out == (
        gen.NOT_HERE + "\n\n"
        "> **Exercise 2.1: Build a mask**\n>\n> **Difficulty ★.** Write it; $x$ = 0.45.\n>\n"
        "> Then check.\n"
        "As (Vaswani et al., 2017; Ba et al., 2016) and Exercise 1.2 show.\n"
        "> **Note**\n>\n> A side remark."
    )
    assert gen.format_glue("12", "d") == "12" and gen.format_glue("'abc'", None) == "abc"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_student_markdown_has_no_myst_left(path):
    """JupyterLab shows MyST roles and directives as raw text: none may remain."""
    gen = _generator()
    chapter = nbformat.read(path, as_version=4)
    student = gen.student_notebook(chapter, gen.chapter_number(path))
    text = "\n".join(c.source for c in student.cells if c.cell_type == "markdown")
    markers = ("{exercise}", "{glue", "{cite", "{ref}", "{numref}", "{chapter-time}")
    for marker in markers + ("Solutions are hidden",):
        assert marker not in text, f"{marker!r} left in the student edition of {path.name}"
    directive = re.search(r"^(`{3,}|:{3,})\{[\w-]+\}.*$", text, re.M)
    assert directive is None, (
        f"MyST directive {directive and directive.group(0)!r} left in {path.name}"
    )
    target = re.search(r"^\([\w-]+\)=", text, re.M)
    assert target is None, f"section target {target and target.group(0)!r} left in {path.name}"
    n_exercises = sum(
        c.source.count("{exercise}") for c in chapter.cells if c.cell_type == "markdown"
    )
    n = gen.chapter_number(path)
    boxes = re.findall(rf"^> \*\*Exercise {n}\.(\d+)", text, re.M)
    assert [int(k) for k in boxes] == list(range(1, n_exercises + 1))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_has_no_solution_and_runs(path, tmp_path):
    gen = _generator()
    chapter = nbformat.read(path, as_version=4)
    student = gen.student_notebook(chapter)
    text = json.dumps(student)
    for marker in ("BEGIN SOLUTION", "solution-start", "solution-end"):
        assert marker not in text, f"{marker!r} left in the student edition of {path.name}"

    n_exercises = sum(1 for c in chapter.cells if "{exercise}" in c.source)
    n_stubs = sum(1 for c in student.cells if gen.STUB in c.source)
    n_checks = sum(
        1
        for c in student.cells
        if c.cell_type == "code"
        and "check_" in c.source
        and "import" not in c.source.splitlines()[-1]
    )
    assert n_exercises >= 3, f"{path.name}: expected at least 3 exercises, found {n_exercises}"
    assert n_stubs >= 1 and n_checks >= 1

    # Outside the exercises, the student edition is the chapter itself (checked by nbval).
    # where the exercise section starts, as the grader finds it
    start = runpy.run_path(str(ROOT / "scripts" / "grade.py"))["exercise_start"](student)
    chapter_code = {c.source for c in chapter.cells if c.cell_type == "code"}
    for cell in student.cells[:start]:
        assert cell.cell_type != "code" or cell.source in chapter_code, (
            f"{path.name}: a student-edition cell before the exercises differs from the chapter"
        )
    # The exercise section on its own, where the chapters run (relative paths resolve).
    exercises = nbformat.from_dict(dict(student))
    exercises.cells = student.cells[start:]
    student = exercises
    NotebookClient(
        student,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
        shutdown_kernel="immediate",  # its outputs are all in; no need to wait for a clean exit
    ).execute()
    outputs = [o for c in student.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0].ename}: {errors[0].evalue}"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert printed.count("not implemented yet") == n_checks
    assert "all checks passed" not in printed


def test_command_line_writes_every_chapter(tmp_path, monkeypatch):
    gen = _generator()
    monkeypatch.setattr(
        sys,
        "argv",
        ["make_student_edition.py", "--source", str(ROOT / "notebooks"), "--output", str(tmp_path)],
    )
    gen.main()
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == [p.name for p in CHAPTERS]

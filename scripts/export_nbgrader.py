"""Export the chapters' exercises as an nbgrader course: one assignment per chapter.

Usage (from the repository root):

    python scripts/export_nbgrader.py --output course/ [--source notebooks] [--chapters 02_causal_masks ...]

then, in the course folder, nbgrader's own commands:

    cd course
    nbgrader generate_assignment 02_causal_masks   # the students' version, into release/
    # hand out release/02_causal_masks/; put each returned notebook into
    # submitted/<student>/02_causal_masks/ (or use nbgrader collect)
    nbgrader autograde 02_causal_masks             # runs each submission, grades into gradebook.db
    nbgrader generate_feedback 02_causal_masks     # an HTML page per student, with the checkers' messages
    nbgrader export                                # grades.csv: one row per student and assignment

The kernel that nbgrader starts must have this package installed (``make install``).

What is written:

* ``course/nbgrader_config.py``: the course id and the execution time limit;
* ``course/source/<chapter>/<chapter>.ipynb``, e.g. ``source/02_causal_masks/02_causal_masks.ipynb``:
  the chapter's exercise section only (running a whole chapter would retrain its models), after
  a read-only set-up cell with the chapter's imports.

The rules follow the book's (``scripts/make_student_edition.py``):

* a code cell tagged ``solution`` with ``# BEGIN SOLUTION``/``# END SOLUTION`` becomes an nbgrader
  solution cell (``solution: true``, a ``grade_id`` named after the exercise's label), its markers
  written as nbgrader's ``### BEGIN SOLUTION``/``### END SOLUTION``, which ``generate_assignment``
  replaces by ``raise NotImplementedError()``; the code outside the markers (the ``def`` line,
  a constructor the stub fixes) stays for the student;
* a cell tagged ``solution`` without markers (a worked answer, a hidden check of the text) and
  the markdown of the written answers are left out: the book keeps them;
* each call of a checker (``check_...``) becomes an autograded test cell (``grade: true``, read-only),
  worth the exercise's difficulty in points (★ = 1, ★★ = 2, ★★★ = 3). A checker raises
  ``AssertionError`` when the answer is wrong but only *prints* "not implemented yet" for a stub,
  so the test cell captures what it prints and asserts "all checks passed": a stub scores 0;
* the markdown is made readable in plain Jupyter as in the student edition (exercise boxes,
  glued values, citations, references to other exercises).

nbgrader's cell metadata is schema version 3; ``tests/book/test_nbgrader.py`` runs nbgrader's
``generate_assignment`` and ``autograde`` on an exported chapter with a correct and an empty
submission.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import nbformat
from pybtex.database import parse_file

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "make_student_edition", HERE / "make_student_edition.py"
)
edition = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(edition)

EXERCISES = re.compile(r"^## Exercises\s*$", re.M)
EXERCISE = re.compile(r"^`{3,}\{exercise\}.*\n((?::\w+:.*\n)*)", re.M)
LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
DIFFICULTY = re.compile(r"Difficulty\s*(★+)")
CHECK = "check_"
TIMEOUT = 600  # seconds per cell when nbgrader runs a submission

CONFIG = f'''"""nbgrader configuration of the course exported from the book (scripts/export_nbgrader.py)."""

c = get_config()  # noqa: F821 (nbgrader defines it)
c.CourseDirectory.course_id = "transformer-lite"
# A cell that runs longer than this is stopped and the notebook graded as it stands.
c.Execute.timeout = {TIMEOUT}
c.Execute.interrupt_on_timeout = True
'''

INTRO = """# Chapter {chapter}: exercises

The exercises of chapter {chapter} that a checker grades, from the book's exercise section (the
predictions, derivations and open questions answered in prose are in the book). Write your code in
the cells that raise `NotImplementedError`, then run the notebook from the top: each read-only
test cell below an exercise calls the book's checker, which names the likely mistake when your
answer is wrong, and is worth the exercise's number of stars in points."""

GRADED = """import contextlib
import io

{imports}# Autograded: the points are given only if the checker prints "all checks passed"
# (for a function that still raises NotImplementedError it prints "not implemented yet").
report = io.StringIO()
try:
    with contextlib.redirect_stdout(report):
        {call}
finally:
    print(report.getvalue(), end="")
assert "all checks passed" in report.getvalue(), "not passed: " + report.getvalue()"""


def exercise_segments(source: str) -> list[str]:
    """A markdown cell cut before each ``{exercise}`` fence: the text before the first fence
    (possibly empty), then one piece per exercise, each starting with its fence."""
    starts = [m.start() for m in EXERCISE.finditer(source)]
    bounds = [0] + starts + [len(source)]
    return [source[a:b].strip("\n") for a, b in zip(bounds[:-1], bounds[1:])]


def nbgrader_meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    """nbgrader's cell metadata (schema version 3)."""
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = points
    return meta


def nbgrader_markers(source: str) -> str:
    """``# BEGIN SOLUTION``/``# END SOLUTION`` lines written as nbgrader's ``### ...`` markers."""
    source = re.sub(
        r"^([ \t]*)# BEGIN SOLUTION[ \t]*$", r"\1### BEGIN SOLUTION", source, flags=re.M
    )
    return re.sub(r"^([ \t]*)# END SOLUTION[ \t]*$", r"\1### END SOLUTION", source, flags=re.M)


def chapter_imports(cells: list) -> str:
    """The top-level import statements of the code cells before the exercises, in order, once each."""
    seen: list[str] = []
    for cell in cells:
        if cell.cell_type != "code" or "solution" in cell.metadata.get("tags", []):
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                text = ast.get_source_segment(source, node)
                if text not in seen:
                    seen.append(text)
    return "\n".join(seen)


def split_checks(source: str) -> list[tuple[str, str]]:
    """``[(name, call)]`` for each top-level checker call of a cell, and the cell's other statements
    (its imports) as ``("", text)`` first; ``[]`` if the cell calls no checker."""
    tree = ast.parse(source)
    calls, other = [], []
    for node in tree.body:
        text = ast.get_source_segment(source, node)
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id.startswith(CHECK)
        ):
            calls.append((node.value.func.id, " ".join(text.split())))
        else:
            other.append(text)
    if not calls:
        return []
    return [("", "\n".join(other))] + calls


def graded_cells(source: str, label: str, points: int) -> list[nbformat.NotebookNode]:
    """One autograded, read-only test cell per checker call of ``source``."""
    parts = split_checks(source)
    imports, cells = parts[0][1], []
    for name, call in parts[1:]:
        cell = nbformat.v4.new_code_cell(
            GRADED.format(imports=imports + "\n\n" if imports else "", call=call)
        )
        cell.metadata["nbgrader"] = nbgrader_meta(
            f"{label}-{name}", grade=True, locked=True, points=points
        )
        cells.append(cell)
        imports = ""  # the first test cell of a checker cell carries its imports
    return cells


def course_notebook(
    nb: nbformat.NotebookNode, chapter: int, labels: dict[str, str]
) -> nbformat.NotebookNode:
    """The chapter's exercise section as an nbgrader source notebook."""
    start = next(
        (
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown" and EXERCISES.search(c.source)
        ),
        None,
    )
    if start is None:
        raise ValueError(f"chapter {chapter} has no '## Exercises' section")
    glue, bib = edition.glued_values(nb), parse_file(str(edition.BIB))
    own = edition.exercise_labels(nb, chapter)
    labels = {**own, **labels}
    # exercise_boxes numbers the boxes in order: count those before the section
    before = sum(
        len(EXERCISE.findall(c.source)) for c in nb.cells[:start] if c.cell_type == "markdown"
    )
    numbers = [f"Exercise {chapter}.{k}" for k in range(before + 1, 100)]

    setup = nbformat.v4.new_code_cell(
        "# Set-up (read-only): the chapter's imports, which the exercises below use.\n"
        + chapter_imports(nb.cells[:start])
    )
    setup.metadata["nbgrader"] = nbgrader_meta(f"ch{chapter}-setup", locked=True)
    intro = nbformat.v4.new_markdown_cell(INTRO.format(chapter=chapter))
    # groups[0]: the section's opening text; then one group of cells per exercise
    groups: list[list] = [[]]
    graded: list[bool] = [True]
    label, points, n_solutions, used = f"ch{chapter}", 1, 0, set()
    for cell in nb.cells[start:]:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown":
            if "solution" in tags:
                continue  # a written answer or the fences of a hidden solution
            for segment in exercise_segments(cell.source):
                match = EXERCISE.match(segment)
                if match:
                    found = LABEL.search(match.group(1))
                    label = found.group(1) if found else f"ch{chapter}-ex{before + len(used) + 1}"
                    used.add(label)
                    stars = DIFFICULTY.search(segment[match.end() :])
                    points, n_solutions = (len(stars.group(1)) if stars else 1), 0
                    groups.append([])
                    graded.append(False)
                text = edition.readable_markdown(segment, glue, bib, labels, numbers)
                if text.strip():
                    groups[-1].append(nbformat.v4.new_markdown_cell(text))
        elif "solution" in tags:
            if edition.stub_source(cell.source) is None:
                continue  # a worked answer or a hidden check: it needs the whole chapter
            n_solutions += 1
            suffix = "" if n_solutions == 1 else f"-{n_solutions}"
            code = nbformat.v4.new_code_cell(nbgrader_markers(cell.source))
            code.metadata["nbgrader"] = nbgrader_meta(f"{label}-solution{suffix}", solution=True)
            groups[-1].append(code)
        elif "remove-cell" in tags:
            continue  # a hidden check of the chapter's text
        elif split_checks(cell.source):
            groups[-1].extend(graded_cells(cell.source, label, points))
            graded[-1] = True
        else:
            groups[-1].append(nbformat.v4.new_code_cell(cell.source))
    # exercises without a checker (predictions, derivations, open questions answered in prose)
    # need the whole chapter or a reader: the book keeps them
    cells = [intro, setup] + [c for group, keep in zip(groups, graded) if keep for c in group]
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = {k: v for k, v in nb.metadata.items() if k in ("kernelspec", "language_info")}
    return out


def main() -> None:
    parser = edition.notebooks_parser(__doc__, "course", "course folder to write")
    parser.add_argument(
        "--chapters", nargs="*", help="chapter stems to export (e.g. 02_causal_masks); default all"
    )
    args = parser.parse_args()
    # chapters are named NN_topic.ipynb (a scratch copy such as .ch8_verify.ipynb is not one)
    paths = sorted(p for p in args.source.glob("*.ipynb") if re.match(r"\d+_", p.name))
    chapters = {path: nbformat.read(path, as_version=4) for path in paths}
    labels = {}
    for path, nb in chapters.items():
        labels.update(edition.exercise_labels(nb, edition.chapter_number(path)))
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "nbgrader_config.py").write_text(CONFIG)
    for path, nb in chapters.items():
        if args.chapters and path.stem not in args.chapters:
            continue
        folder = args.output / "source" / path.stem
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(
            course_notebook(nb, edition.chapter_number(path), labels), folder / path.name
        )
        print(f"wrote {folder / path.name}")


if __name__ == "__main__":
    main()

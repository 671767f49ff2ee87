"""Grade the students' filled-in student-edition notebooks: a grade book, and feedback per student.

Usage (from the repository root; `make grade SUBMISSIONS=dir/ [OUT=grades/]` runs it):

    python scripts/grade.py SUBMISSIONS [--output grades] [--time-limit 300]
                            [--output-limit 1000000]

Layout of SUBMISSIONS: one folder per student, holding that student's notebooks under the
chapters' own file names (those `make student` writes)::

    SUBMISSIONS/alice/02_causal_masks.ipynb
    SUBMISSIONS/alice/05_encoder_decoder.ipynb
    SUBMISSIONS/bob/02_causal_masks.ipynb

What is written to the output folder:

* ``grades.csv``: one row per student, one column per exercise checker of every chapter that
  anyone submitted (``02_causal_masks/check_causal_mask``, ...). Each entry is one of
  ``passed``; ``failed: <the checker's message>``; ``not attempted`` (the stub still raises
  NotImplementedError, or the notebook is missing); ``error: <exception type>`` (the student's
  code raised something the checker could not turn into a verdict: a SyntaxError, SystemExit,
  a PermissionError from a blocked file operation, ``kernel died``, ``output over N bytes``);
  ``timed out``. Written once, at the end, all rows at a time: never a partial grade book.
* ``feedback/<student>.md``: the same verdicts with the checkers' full messages and, for an
  error, the exception's text.

How a notebook is run. Only its exercise section is executed (from the markdown cell that
opens with ``## Exercises`` to the end; the chapter above it would retrain models), in a kernel
process of its own whose working directory is a fresh temporary copy, never the submission
folder or the book. The checker cells come from the book's student edition, not from the
submission, so an edited or deleted checker cell still grades the student's functions, and each
imports its checker afresh from the package (``FRESH_CHECKER``), so a ``check_...`` of the student's
own, or a patched exercises module, does not replace it. A notebook saved under another name that
contains its chapter's (``02_causal_masks (1).ipynb``) is graded as that chapter (``submitted_chapters``). The
notebook has ``--time-limit`` seconds in all (a loop is stopped and reported ``timed out``);
each cell keeps at most ``--output-limit`` bytes of output (the rest is dropped and reported);
an error in one cell does not stop the next.

A guard (a Python audit hook, installed in the kernel before the student's first cell) refuses
to create, change or delete files outside the working copy, to start processes and to send
signals, so a careless ``os.remove`` or ``shutil.rmtree`` cannot reach the teacher's files. It is
a safety net against mistakes, not a sandbox against a deliberate attacker (``ctypes`` can get
round it): run submissions you do not trust in a container or as an unprivileged user.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parents[1]
EXERCISES_HEADING = "## Exercises"
CHECK_CALL = re.compile(r"^\s*(check_\w+)\(", re.M)
PASSED, NOT_ATTEMPTED, TIMED_OUT = "passed", "not attempted", "timed out"
# seconds to start a kernel and import the package, before the student's time starts
PREAMBLE_LIMIT = 180


def exercise_start(nb: nbformat.NotebookNode) -> int:
    """Index of the markdown cell that opens with ``## Exercises`` (the student edition's exercise
    section runs from there to the end). Raises ValueError when there is none."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith(EXERCISES_HEADING):
            return i
    raise ValueError(f"no markdown cell starting with {EXERCISES_HEADING!r}")


def exercise_section(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook's exercise section (see ``exercise_start``): a new notebook, same metadata."""
    section = nbformat.from_dict(dict(nb))
    section.cells = nb.cells[exercise_start(nb) :]
    return section


def checker_name(cell: nbformat.NotebookNode) -> str | None:
    """``check_causal_mask`` for a code cell that calls that checker, else None."""
    if cell.cell_type != "code":
        return None
    names = CHECK_CALL.findall(cell.source)
    return names[-1] if names else None


def chapter_imports(nb: nbformat.NotebookNode) -> str:
    """The import statements of the code cells before the exercise section, one per line: what a
    student's kernel holds when the chapter ran from the top (``tl``, ``math``, ``F``...), which the
    exercise section alone would not define. IPython magics and unparsable cells are skipped."""
    lines = []
    for cell in nb.cells[: exercise_start(nb)]:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                line = ast.unparse(node)
                if line not in lines:
                    lines.append(line)
    return "\n".join(lines)


def reference_sections(source: Path, stems) -> dict[str, nbformat.NotebookNode]:
    """The exercise section of each named chapter of the book, by chapter stem. Its checker cells
    are the student edition's (make_student_edition.py changes only solution cells and markdown);
    its metadata keeps the chapter's imports (``chapter_imports``) for the grader's first cell."""
    sections = {}
    for stem in stems:
        chapter = nbformat.read(source / f"{stem}.ipynb", as_version=4)
        sections[stem] = exercise_section(chapter)
        sections[stem].metadata["grader_imports"] = chapter_imports(chapter)
    return sections


def checkers(section: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    """The checker cells of an exercise section, by checker name, in order."""
    return {name: c for c in section.cells if (name := checker_name(c))}


def graded_notebook(
    submitted: nbformat.NotebookNode, reference: nbformat.NotebookNode
) -> nbformat.NotebookNode:
    """The submission's exercise section with each checker cell replaced by the reference's (a
    checker cell the student deleted is appended at the end): every checker runs as in the book."""
    section = exercise_section(submitted)
    ref = checkers(reference)
    cells, seen = [], set()
    for cell in section.cells:
        name = checker_name(cell)
        if name in ref and name not in seen:
            seen.add(name)
            cells.append(_reference_cell(ref[name], name))
        elif name in ref:  # a second call of the same checker: drop it (one verdict per exercise)
            continue
        else:
            cells.append(cell)
    cells += [_reference_cell(c, n) for n, c in ref.items() if n not in seen]
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    section.cells = cells
    return section


# Put first in every checker cell the grader runs: the checker is imported afresh from the package
# (its modules dropped from sys.modules first), so a student's cell that defines its own
# ``check_...`` or patches the exercises module cannot stand in for the book's checker.
FRESH_CHECKER = """\
import importlib as _importlib, pkgutil as _pkgutil, sys as _sys
for _name in [m for m in _sys.modules if m.startswith("transformer_lite.chapters.exercises")]:
    del _sys.modules[_name]
_exercises = _importlib.import_module("transformer_lite.chapters.exercises")
{name} = next(
    getattr(_module, "{name}")
    for _module in [_exercises] + [
        _importlib.import_module(f"transformer_lite.chapters.exercises.{{_m.name}}")
        for _m in _pkgutil.iter_modules(_exercises.__path__)
    ]
    if hasattr(_module, "{name}")
)
"""


def _reference_cell(cell, name: str) -> nbformat.NotebookNode:
    """A copy of the book's checker cell, with an id no student cell has, that first imports the
    checker afresh (``FRESH_CHECKER``): its own import lines, if any, then rebind the same name."""
    cell = nbformat.from_dict(dict(cell))
    cell.id = f"grader-{name}".replace("_", "-")
    cell.source = FRESH_CHECKER.format(name=name) + "\n" + cell.source
    return cell


# ---------------------------------------------------------------------- the guard in the kernel


def _guard(root: str) -> None:
    """Audit hook: refuse writes, deletions, renames outside ``root``; new processes; signals."""
    import os
    import sys

    root = os.path.realpath(root)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    path_events = {"os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod", "os.chown",
                   "os.utime", "os.symlink", "os.link", "os.rename", "shutil.rmtree",
                   "os.removexattr", "os.setxattr"}  # fmt: skip
    spawn_events = {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                    "subprocess.Popen", "pty.spawn", "os.startfile"}  # fmt: skip
    busy = []

    def inside(path) -> bool:
        if isinstance(path, int):  # a file descriptor already open
            return True
        path = os.fsdecode(path)
        if path in ("/dev/null", "/dev/stdout", "/dev/stderr"):
            return True
        full = os.path.realpath(path)
        return full == root or full.startswith(root + os.sep)

    def hook(event, args):
        if busy:
            return
        busy.append(1)
        try:
            if event == "open":
                path, mode, flags = args
                writes = (
                    any(ch in mode for ch in "wax+")
                    if isinstance(mode, str)
                    else flags & write_flags
                )
                if writes and path is not None and not inside(path):
                    raise PermissionError(f"grader: writing {path!r} outside the working copy")
            elif event in path_events:
                for path in (
                    args[:2] if event in ("os.rename", "os.link", "os.symlink") else args[:1]
                ):
                    if path is not None and not inside(path):
                        raise PermissionError(
                            f"grader: {event} on {path!r} outside the working copy"
                        )
            elif event in spawn_events:
                raise PermissionError(f"grader: {event} is not allowed in a graded notebook")
            elif (
                event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] != os.getpid()
            ):
                raise PermissionError(f"grader: {event} is not allowed in a graded notebook")
        finally:
            busy.pop()

    sys.addaudithook(hook)


def preamble(workdir: Path, imports: str = "") -> nbformat.NotebookNode:
    """The grader's first cell: the chapter's own imports (``chapter_imports``) and the package (its
    libraries load first), then the guard."""
    import inspect

    source = (
        (imports + "\n" if imports else "")
        + "import torch\nimport transformer_lite.chapters.exercises\n\n"
        + inspect.getsource(_guard)
        + f"\n\n_guard({str(workdir)!r})\ndel _guard\n"
    )
    return nbformat.v4.new_code_cell(source)


# --------------------------------------------------------------------------- running one notebook


class CappedClient(NotebookClient):
    """nbclient's client, keeping at most ``output_limit`` bytes of output per cell."""

    output_limit = 1_000_000

    def __init__(self, nb, **kw):
        super().__init__(nb, **kw)
        self.sizes: dict[int, int] = {}
        self.overflowed: set[int] = set()

    def output(self, outs, msg, display_id, cell_index):
        size = len(json.dumps(msg.get("content", {})))
        total = self.sizes.get(cell_index, 0) + size
        self.sizes[cell_index] = total
        if total > self.output_limit and msg["msg_type"] in (
            "stream",
            "display_data",
            "execute_result",
            "update_display_data",
        ):
            self.overflowed.add(cell_index)
            return None
        return super().output(outs, msg, display_id, cell_index)


@dataclass
class Run:
    """What happened to a graded notebook's cells: outputs, and the cell where the run stopped."""

    nb: nbformat.NotebookNode
    overflowed: set[int] = field(default_factory=set)
    stopped_at: int | None = None  # index of the cell where the run stopped
    stop_reason: str = ""  # TIMED_OUT or "error: kernel died"


def run_notebook(nb, workdir: Path, time_limit: float, output_limit: int) -> Run:
    """Execute ``nb`` cell by cell in a new kernel started in ``workdir``: its first cell (the
    grader's preamble) within PREAMBLE_LIMIT seconds, then the student's cells within
    ``time_limit`` seconds in all."""
    deadline = [time.monotonic() + PREAMBLE_LIMIT]
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "MPLCONFIGDIR": str(tmp),
           "IPYTHONDIR": str(tmp / "ipython"),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}  # fmt: skip
    client = CappedClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=False,
        shutdown_kernel="immediate",
        timeout_func=lambda cell: max(1, int(deadline[0] - time.monotonic() + 0.999)),
        startup_timeout=PREAMBLE_LIMIT,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.output_limit = output_limit
    run = Run(nb)
    with client.setup_kernel(env=env, cwd=str(workdir)):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if time.monotonic() >= deadline[0]:
                run.stopped_at, run.stop_reason = index, TIMED_OUT
                break
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                run.stopped_at, run.stop_reason = index, TIMED_OUT
                break
            except DeadKernelError:
                run.stopped_at, run.stop_reason = index, "error: kernel died"
                break
            if index == 0:  # the preamble ran: the student's time starts
                deadline[0] = time.monotonic() + time_limit
    run.overflowed = client.overflowed
    return run


# --------------------------------------------------------------------------- verdicts


@dataclass
class Verdict:
    status: str  # the grade book's entry
    detail: str = ""  # for the feedback file: the checker's message or the exception's text


def verdicts(run: Run, names: list[str], output_limit: int) -> dict[str, Verdict]:
    """One verdict per checker: the cells up to and including a checker's cell are its exercise."""
    out: dict[str, Verdict] = {}
    group_errors: list[tuple[str, str]] = []
    overflow = False
    stopped = False
    for index, cell in enumerate(run.nb.cells):
        if cell.cell_type != "code" or index == 0:  # cell 0 is the grader's preamble
            continue
        if run.stopped_at is not None and index >= run.stopped_at:
            stopped = True
        errors = [o for o in cell.outputs if o.output_type == "error"]
        overflow |= index in run.overflowed
        name = checker_name(cell)
        if name not in names or name in out:
            group_errors += [(e.ename, e.evalue) for e in errors]
            continue
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        if stopped:
            verdict = Verdict(
                run.stop_reason,
                f"the notebook stopped in this exercise or before: {run.stop_reason}",
            )
        elif overflow:
            verdict = Verdict(
                f"error: output over {output_limit} bytes",
                "a cell printed more than the limit; print less",
            )
        elif errors and errors[-1].ename == "AssertionError":  # the checker's verdict
            verdict = Verdict(f"failed: {errors[-1].evalue}", errors[-1].evalue)
        elif not errors and re.search(rf"^{name}: all checks passed$", printed, re.M):
            # (a student's function that prints this line itself cannot hide an error after it)
            verdict = Verdict(PASSED)
        elif not errors and re.search(rf"^{name}: not implemented yet", printed, re.M):
            verdict = Verdict(NOT_ATTEMPTED, "your function still raises NotImplementedError")
        elif group_errors or errors:
            ename, evalue = (group_errors or [(e.ename, e.evalue) for e in errors])[0]
            verdict = Verdict(f"error: {ename}", f"{ename}: {evalue}")
        else:
            verdict = Verdict("error: no verdict", "the checker printed no verdict")
        out[name] = verdict
        group_errors, overflow = [], False
    for name in names:
        out.setdefault(name, Verdict(run.stop_reason or "error: no verdict"))
    return out


def grade_notebook(
    path: Path, reference, time_limit: float, output_limit: int
) -> dict[str, Verdict]:
    """Verdicts for one submitted notebook, run in a temporary working copy; never raises."""
    names = list(checkers(reference))
    try:
        submitted = nbformat.read(path, as_version=4)
        nb = graded_notebook(submitted, reference)
    except Exception as exc:  # unreadable JSON, not a notebook, no exercise section
        v = Verdict(
            f"error: unreadable notebook ({type(exc).__name__})", f"{type(exc).__name__}: {exc}"
        )
        return dict.fromkeys(names, v)
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        workdir = Path(tmp).resolve() / "work"
        workdir.mkdir()
        nbformat.write(nb, workdir / path.name)  # the working copy
        nb.cells.insert(0, preamble(workdir, reference.metadata.get("grader_imports", "")))
        try:
            run = run_notebook(nb, workdir, time_limit, output_limit)
        except Exception as exc:  # the kernel would not start, or the client broke
            v = Verdict(f"error: {type(exc).__name__}", f"{type(exc).__name__}: {exc}")
            return dict.fromkeys(names, v)
        guard_errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
        if guard_errors:
            e = guard_errors[0]
            return dict.fromkeys(names, Verdict(f"error: grader preamble {e.ename}", e.evalue))
        return verdicts(run, names, output_limit)


# --------------------------------------------------------------------------- the grade book


def grade(
    submissions: Path, output: Path, source: Path, time_limit: float, output_limit: int
) -> None:
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    book = {p.stem for p in source.glob("*.ipynb")}
    submitted, renamed = {}, {}
    for s in students:
        submitted[s.name], renamed[s.name] = submitted_chapters(sorted(s.glob("*.ipynb")), book)
        for path, stem in renamed[s.name].items():
            print(f"note: {s.name}/{path.name} graded as {stem}.ipynb", flush=True)
    chapters = sorted({stem for books in submitted.values() for stem in books} & book)
    references = reference_sections(source, chapters)
    columns = [(ch, name) for ch in chapters for name in checkers(references[ch])]
    rows, feedback = {}, {}
    for student, books in submitted.items():
        row, lines = {}, [f"# Feedback for {student}", ""]
        unknown = sorted(set(books) - book)
        if unknown:
            print(f"warning: {student}: not graded: " + ", ".join(unknown), flush=True)
            lines += ["Not graded (not a chapter of the book): " + ", ".join(unknown), ""]
        for path, stem in renamed[student].items():
            lines += [f"`{path.name}` was graded as `{stem}.ipynb` (keep the chapter's name).", ""]
        for ch in chapters:
            names = list(checkers(references[ch]))
            if ch in books:
                print(f"grading {student}/{books[ch].name}", flush=True)
                got = grade_notebook(books[ch], references[ch], time_limit, output_limit)
            else:
                got = dict.fromkeys(names, Verdict(NOT_ATTEMPTED, "no notebook submitted"))
            lines += [f"## {ch}", ""]
            for name in names:
                v = got[name]
                row[f"{ch}/{name}"] = v.status
                lines.append(
                    f"- `{name}`: {v.status.split(':')[0]}" + (f". {v.detail}" if v.detail else "")
                )
            lines.append("")
        rows[student], feedback[student] = row, "\n".join(lines)
    write_grade_book(output, [f"{c}/{n}" for c, n in columns], rows, feedback)


def submitted_chapters(paths: list[Path], book: set[str]) -> tuple[dict, dict]:
    """A student's notebooks by chapter stem, and the renamed ones: a file whose name contains one
    chapter's stem (``02_causal_masks (1).ipynb``, ``Copy of 02_causal_masks.ipynb``) is graded as
    that chapter unless the chapter's own file is there too. Names matching no chapter, or more
    than one, or a second renamed copy, are kept under their file name (reported, not graded)."""
    exact = {p.stem: p for p in paths if p.stem in book}
    chapters, renamed = dict(exact), {}
    for p in paths:
        if p.stem in book:
            continue
        matches = [stem for stem in book if stem in p.stem]
        if len(matches) == 1 and matches[0] not in chapters:
            chapters[matches[0]] = p
            renamed[p] = matches[0]
        else:
            chapters[p.name] = p  # not a chapter: reported in the feedback
    return chapters, renamed


def write_grade_book(output: Path, columns: list[str], rows: dict, feedback: dict) -> None:
    """grades.csv and feedback/<student>.md, each written whole to a temporary file then renamed."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "feedback").mkdir(exist_ok=True)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", *columns])
    for student, row in rows.items():
        writer.writerow([student, *(row[c] for c in columns)])
    for student, text in feedback.items():
        _write_whole(output / "feedback" / f"{student}.md", text)
    _write_whole(output / "grades.csv", buf.getvalue())
    print(f"wrote {output / 'grades.csv'} ({len(rows)} students, {len(columns)} exercises)")


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="folder of <student>/<chapter>.ipynb")
    parser.add_argument("--output", type=Path, default=Path("grades"), help="folder to write")
    parser.add_argument(
        "--source", type=Path, default=ROOT / "notebooks", help="the book's chapters"
    )
    parser.add_argument("--time-limit", type=float, default=300, help="seconds per notebook")
    parser.add_argument(
        "--output-limit", type=int, default=1_000_000, help="bytes of output per cell"
    )
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    grade(args.submissions, args.output, args.source, args.time_limit, args.output_limit)


if __name__ == "__main__":
    main()

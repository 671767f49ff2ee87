"""The grading command, scripts/grade.py (`make grade SUBMISSIONS=dir/`).

Oracle: a folder of synthetic submissions, each made from the real student edition of two chapters
whose exercise sections run in seconds (5, teacher forcing's shift, then the decoder block and the
encoder-decoder model as modules; 6, an RNN step's Jacobian, then the RNN and GRU cells as modules),
gives exactly the grade book written out below: the chapters' own solutions pass; five listed wrong
implementations per function checker fail with the checker's message for that mistake, and so do a
wrong decoder block (with the model built on it) and a wrong GRU cell; a stub is not attempted, and
so is a missing notebook or a printed fake verdict; a syntax error, a
SystemExit, an os.remove outside the working copy, a kernel that dies and megabytes of output are
errors of their kind; an infinite loop times out. Nothing outside the working copies changes: the
file the submission tries to delete and the submission folder itself are intact afterwards.
"""

import copy
import csv
import functools
import hashlib
import io
import runpy
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CH5, CH6 = "05_encoder_decoder", "06_rnn_gradients"
SHIFT, JACOBIAN = f"{CH5}/check_shift_right", f"{CH6}/check_rnn_step_jacobian"
# the module exercises that follow each function exercise in its chapter
BLOCK, MODEL = f"{CH5}/check_decoder_block_module", f"{CH5}/check_encoder_decoder_module"
RNN_CELL, GRU_CELL = f"{CH6}/check_rnn_cell_module", f"{CH6}/check_gru_cell_module"
COLUMNS = [SHIFT, BLOCK, MODEL, JACOBIAN, RNN_CELL, GRU_CELL]
MODULES5, MODULES6 = "class MyDecoderBlock(", "class MyRNNCell("  # find each module cell
NA = "not attempted"

# The student's cell for each exercise: (a header that defines the function, the body)
SHIFT_DEF = "def my_shift_right(tgt, bos_id):\n"
JACOBIAN_DEF = "def my_rnn_step_jacobian(weight_hh, h):\n"
SHIFT_CASE = "wrong decoder input for tgt of shape (3, 6), bos_id=1"
JACOBIAN_CASE = "wrong Jacobian for weight_hh of shape (5, 5), h of shape (3, 5)"
SHIFT_MISTAKE = f"{SHIFT_CASE}. Likely mistake: "
JACOBIAN_MISTAKE = f"{JACOBIAN_CASE}. Likely mistake: "
# fmt: off
WRONG_SHIFT = [  # (body, the checker's message)
    ("    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], 1)\n",
     SHIFT_MISTAKE + "shifted left: the decoder input starts with BOS and is the target moved one "
     "step to the RIGHT"),
    ("    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, 1:]], 1)\n",
     SHIFT_MISTAKE + "BOS overwrites the first target token instead of being prepended"),
    ("    return tgt.clone()\n",
     SHIFT_MISTAKE + "no shift: the decoder would see the token it must predict"),
    ("    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], 1)\n",
     SHIFT_MISTAKE + "the last target column was kept, so the input is one longer than the "
     "target; drop it (tgt[:, :-1])"),
    ("    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], 1).float()\n",
     "decoder input for tgt of shape (3, 6), bos_id=1: expected integer token ids, received dtype "
     "torch.float32"),
]
WRONG_JACOBIAN = [
    ("    return weight_hh.expand(h.shape[0], -1, -1)\n",
     JACOBIAN_MISTAKE + "missing the tanh derivative: J = diag(1 - h_t**2) W_hh, not W_hh alone"),
    ("    return (1 - h)[:, :, None] * weight_hh\n",
     JACOBIAN_MISTAKE + "1 - h instead of 1 - h**2: tanh'(a) = 1 - tanh(a)**2"),
    ("    return (1 - h**2)[:, :, None] * weight_hh.T\n",
     JACOBIAN_MISTAKE + "transposed W_hh: row i of J is d h_t[i] / d h_{t-1}, which is row i of "
     "W_hh, scaled by 1 - h_t[i]**2"),
    ("    return (1 - torch.tanh(h) ** 2)[:, :, None] * weight_hh\n",
     JACOBIAN_MISTAKE + "applied tanh' to h_t as if it were the pre-activation: h_t is already "
     "tanh(a_t), so tanh'(a_t) = 1 - h_t**2"),
    ("    return weight_hh * (1 - h**2)[:, None, :]\n",
     JACOBIAN_MISTAKE + "scaled the columns instead of the rows: J = diag(1 - h_t**2) W_hh "
     "multiplies row i by 1 - h_t[i]**2"),
]
# a wrong module of each chapter: (what the solution's line becomes, the checkers' messages)
WRONG_BLOCK = (
    ("self.cross_attn(h, memory, memory, attn_mask=memory_mask)",
     "self.cross_attn(h, h, h)"),
    "wrong output for MyDecoderBlock(8, 2, 17, dropout=0.2, norm_first=False) on x of shape "
    "(2, 5, 8), memory of shape (2, 7, 8), no masks. Likely mistake: cross-attention keys and "
    "values from the decoder: cross_attn(h, memory, memory), the queries from the decoder, the keys "
    "and values from the encoder's memory",
    "MyEncoderDecoder(config) with d_model=6, n_heads=2, norm_first=False, on src_ids of shape "
    "(1, 5) and tgt_ids of shape (1, 1), no padding: decoder block 0 of your model does not compute "
    "what the package's DecoderBlock computes with the same weights; make MyDecoderBlock pass "
    "check_decoder_block_module first",
)
WRONG_GRU = (
    ("return (1 - z) * n + z * h", "return z * n + (1 - z) * h"),
    "wrong new state for MyGRUCell(4, 5) on x of shape (3, 4), h of shape (3, 5). Likely mistake: "
    "h_new = z * n + (1 - z) * h: torch's update is (1 - z) * n + z * h, so that z near 1 copies "
    "the old state",
)
# fmt: on


def _gen():
    return runpy.run_path(str(ROOT / "scripts" / "make_student_edition.py"))


def _grader():
    return runpy.run_path(str(ROOT / "scripts" / "grade.py"))


@functools.cache
def _chapter(stem: str) -> nbformat.NotebookNode:
    """The book's chapter, read once (the tests copy what they change)."""
    return nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)


@functools.cache
def _student_edition(stem: str) -> nbformat.NotebookNode:
    gen = _gen()
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    return gen["student_notebook"](_chapter(stem), gen["chapter_number"](path))


def student_edition(stem: str) -> nbformat.NotebookNode:
    """The student edition of the chapter (made once; each call returns a copy of its own)."""
    return copy.deepcopy(_student_edition(stem))


def solution_source(stem: str, header: str) -> str:
    """The chapter's own solution of the exercise whose cell contains ``header``, markers removed."""
    chapter = _chapter(stem)
    (source,) = [
        c.source
        for c in chapter.cells
        if "solution" in c.metadata.get("tags", [])
        and "# BEGIN SOLUTION" in c.source
        and header in c.source
    ]
    return "\n".join(line for line in source.splitlines() if "SOLUTION" not in line)


def exercise_cell(nb: nbformat.NotebookNode, header: str) -> nbformat.NotebookNode:
    (cell,) = [
        c for c in nb.cells if "exercise" in c.metadata.get("tags", []) and header in c.source
    ]
    return cell


def filled(
    stem: str, source: str | None, edit=None, modules: str | None = None
) -> nbformat.NotebookNode:
    """The student edition of ``stem``, its function exercise's cell source replaced by ``source``
    and its module exercise's by ``modules`` (None: stub kept)."""
    nb = student_edition(stem)
    header, module_header = (SHIFT_DEF, MODULES5) if stem == CH5 else (JACOBIAN_DEF, MODULES6)
    cell = exercise_cell(nb, header)
    if source is not None:
        cell.source = source
    if modules is not None:
        exercise_cell(nb, module_header).source = modules
    if edit:
        edit(nb, cell)
    return nb


def wrong_modules(solution: str, change: tuple[str, str]) -> str:
    """The chapter's module solution with one line changed (a listed mistake)."""
    old, new = change
    assert solution.count(old) == 1, old
    return solution.replace(old, new)


def write(folder: Path, student: str, stem: str, nb) -> None:
    (folder / student).mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / student / f"{stem}.ipynb")


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_exercise_section_starts_at_the_heading():
    grade = _grader()
    nb = student_edition(CH5)
    section = grade["exercise_section"](nb)
    assert section.cells[0].source.startswith("## Exercises")
    assert list(grade["checkers"](section)) == [
        "check_shift_right",
        "check_decoder_block_module",
        "check_encoder_decoder_module",
    ]
    nb.cells = [c for c in nb.cells if not c.source.startswith("## Exercises")]
    with pytest.raises(ValueError, match="## Exercises"):
        grade["exercise_section"](nb)


def test_verdicts_read_each_exercise_from_its_own_cells():
    """Hand-made outputs, no kernel: the cells up to a checker's cell are its exercise; the
    checker's own verdict wins over a student's scratch error, and a stop marks every later one."""
    grade = _grader()
    v4 = nbformat.v4

    def code(source, *outputs):
        cell = v4.new_code_cell(source)
        cell.outputs = list(outputs)
        return cell

    def error(ename):
        return v4.new_output("error", ename=ename, evalue=f"{ename} text", traceback=[])

    def said(text):
        return v4.new_output("stream", name="stdout", text=text + "\n")

    names = ["check_a", "check_b", "check_c", "check_d"]
    nb = v4.new_notebook(cells=[
        code("preamble"),
        code("scratch", error("ValueError")),
        code("check_a(f)", said("check_a: all checks passed")),
        code("def g(): ...", error("ValueError")),
        code("check_b(g)", error("AssertionError")),
        code("def h(", error("SyntaxError")),
        code("check_c(h)", error("NameError")),
        code("while True: pass"),
        code("check_d(k)"),
    ])  # fmt: skip
    got = grade["verdicts"](grade["Run"](nb, set(), 7, "timed out"), names, 10)
    assert {k: v.status for k, v in got.items()} == {
        "check_a": "passed",
        "check_b": "failed: AssertionError text",
        "check_c": "error: SyntaxError",
        "check_d": "timed out",
    }
    got = grade["verdicts"](grade["Run"](nb, {1}), names, 10)
    assert got["check_a"].status == "error: output over 10 bytes"
    assert got["check_d"].status == "error: no verdict"


@pytest.mark.slow  # 29 notebooks, each in its own kernel: about 75 s on one core
def test_grade_book_of_synthetic_submissions(tmp_path):
    subs, out = tmp_path / "submissions", tmp_path / "grades"
    teacher = tmp_path / "teacher_file.txt"  # outside every working copy
    teacher.write_text("the teacher's notes\n")
    shift, jacobian = solution_source(CH5, SHIFT_DEF), solution_source(CH6, JACOBIAN_DEF)
    modules5, modules6 = solution_source(CH5, MODULES5), solution_source(CH6, MODULES6)
    expected = {}  # student -> the entries of COLUMNS: chapter 5's three, then chapter 6's

    write(subs, "correct", CH5, filled(CH5, shift, modules=modules5))
    write(subs, "correct", CH6, filled(CH6, jacobian, modules=modules6))
    expected["correct"] = ("passed",) * 6
    for k, ((s_body, s_msg), (j_body, j_msg)) in enumerate(zip(WRONG_SHIFT, WRONG_JACOBIAN), 1):
        write(subs, f"wrong{k}", CH5, filled(CH5, SHIFT_DEF + s_body))
        write(subs, f"wrong{k}", CH6, filled(CH6, JACOBIAN_DEF + j_body))
        expected[f"wrong{k}"] = (f"failed: {s_msg}", NA, NA, f"failed: {j_msg}", NA, NA)
    # a wrong decoder block (the model built on it fails too), a wrong GRU cell (the RNN cell passes)
    change, block_msg, model_msg = WRONG_BLOCK
    write(subs, "wrong1", CH5, filled(CH5, SHIFT_DEF + WRONG_SHIFT[0][0],
                                      modules=wrong_modules(modules5, change)))  # fmt: skip
    expected["wrong1"] = (f"failed: {WRONG_SHIFT[0][1]}", f"failed: {block_msg}",
                          f"failed: {model_msg}", *expected["wrong1"][3:])  # fmt: skip
    change, gru_msg = WRONG_GRU
    write(subs, "wrong2", CH6, filled(CH6, JACOBIAN_DEF + WRONG_JACOBIAN[1][0],
                                      modules=wrong_modules(modules6, change)))  # fmt: skip
    expected["wrong2"] = (*expected["wrong2"][:3], f"failed: {WRONG_JACOBIAN[1][1]}", "passed",
                          f"failed: {gru_msg}")  # fmt: skip
    write(subs, "empty", CH5, filled(CH5, None))  # the stubs as handed out
    write(subs, "empty", CH6, filled(CH6, None))
    expected["empty"] = (NA,) * 6
    write(subs, "syntax", CH5, filled(CH5, SHIFT_DEF + "    return torch.cat([tgt\n"))
    expected["syntax"] = ("error: SyntaxError", NA, NA, NA, NA, NA)  # no chapter-6 notebook
    loop = SHIFT_DEF + "    while True:\n        pass\n"
    write(subs, "loop", CH5, filled(CH5, loop))
    write(subs, "loop", CH6, filled(CH6, jacobian))  # its own kernel: graded as usual
    expected["loop"] = ("timed out",) * 3 + ("passed", NA, NA)  # the run stops at the loop
    write(subs, "exits", CH5, filled(CH5, "raise SystemExit(1)\n\n" + shift))
    write(subs, "exits", CH6, filled(CH6, JACOBIAN_DEF + "    raise SystemExit('bye')\n"))
    expected["exits"] = ("error: SystemExit", NA, NA, "error: SystemExit", NA, NA)
    remove = f"import os\n\nos.remove({str(teacher)!r})\n\n{shift}"
    write(subs, "deletes", CH5, filled(CH5, remove))
    rmtree = f"import shutil\n\nshutil.rmtree({str(subs)!r})\n\n{jacobian}"
    write(subs, "deletes", CH6, filled(CH6, rmtree))
    expected["deletes"] = ("error: PermissionError", NA, NA, "error: PermissionError", NA, NA)
    write(subs, "crashes", CH6, filled(CH6, "import os\n\nos._exit(3)\n\n" + jacobian))
    expected["crashes"] = (NA, NA, NA) + ("error: kernel died",) * 3
    chatty = "print('x' * 3_000_000)\n\n" + shift
    write(subs, "chatty", CH5, filled(CH5, chatty))
    expected["chatty"] = ("error: output over 1000000 bytes", NA, NA, NA, NA, NA)

    def forge(nb, cell):  # the checker cell replaced by a printed verdict
        (check,) = [c for c in nb.cells if "check_shift_right(" in c.source]
        check.source = "print('check_shift_right: all checks passed')"

    def drop_check(nb, cell):  # the checker cell deleted: the grader puts the book's back
        nb.cells = [c for c in nb.cells if "check_rnn_step_jacobian(" not in c.source]

    # a checker of the student's own, and the package's patched: the grader imports the book's afresh
    fake = (
        "import transformer_lite.chapters.exercises as ex\n\n"
        "def check_shift_right(f):\n    print('check_shift_right: all checks passed')\n\n"
        "ex.check_shift_right = check_shift_right\n"
        "ex.ch5_encoder_decoder.check_shift_right = check_shift_right\n\n"
    )
    write(subs, "fakes_checker", CH5, filled(CH5, fake + SHIFT_DEF + WRONG_SHIFT[0][0]))
    # a function that prints the verdict line itself before the checker fails it
    says = SHIFT_DEF + "    print('check_shift_right: all checks passed')\n" + WRONG_SHIFT[0][0]
    write(subs, "fakes_checker", CH6, filled(CH6, None))
    expected["fakes_checker"] = (f"failed: {WRONG_SHIFT[0][1]}", NA, NA, NA, NA, NA)
    write(subs, "prints_verdict", CH5, filled(CH5, says))
    expected["prints_verdict"] = (f"failed: {WRONG_SHIFT[0][1]}", NA, NA, NA, NA, NA)
    # a renamed download is graded as its chapter, and the feedback says so
    (subs / "renamed").mkdir()
    nbformat.write(filled(CH6, jacobian), subs / "renamed" / f"{CH6} (1).ipynb")
    expected["renamed"] = (NA, NA, NA, "passed", NA, NA)
    write(subs, "edits_checks", CH5, filled(CH5, None, forge))
    write(subs, "edits_checks", CH6, filled(CH6, jacobian, drop_check))
    expected["edits_checks"] = (NA, NA, NA, "passed", NA, NA)
    (subs / "edits_checks" / "notes.txt").write_text("not a notebook")
    before = digest(subs)

    # the time limit is what the loop costs; every other notebook's cells take under a second, but
    # a busy machine (the other test worker) may slow them several times
    _grader()["main"]([str(subs), "--output", str(out), "--time-limit", "20"])

    assert teacher.read_text() == "the teacher's notes\n"
    assert digest(subs) == before
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", *COLUMNS])
    for student in sorted(expected):
        writer.writerow([student, *expected[student]])
    got = (out / "grades.csv").read_text()
    assert list(csv.reader(io.StringIO(got))) == list(csv.reader(io.StringIO(buf.getvalue())))
    assert got == buf.getvalue()

    assert sorted(p.name for p in (out / "feedback").iterdir()) == [
        f"{s}.md" for s in sorted(expected)
    ]
    feedback = (out / "feedback" / "wrong1.md").read_text()
    assert WRONG_SHIFT[0][1] in feedback and WRONG_JACOBIAN[0][1] in feedback
    assert block_msg in feedback and model_msg in feedback
    assert gru_msg in (out / "feedback" / "wrong2.md").read_text()
    assert "outside the working copy" in (out / "feedback" / "deletes.md").read_text()
    assert "no notebook submitted" in (out / "feedback" / "syntax.md").read_text()
    assert f"graded as `{CH6}.ipynb`" in (out / "feedback" / "renamed.md").read_text()


def test_renamed_notebooks_are_matched_to_their_chapter():
    """No kernel: which file is graded as which chapter."""
    chapters = _grader()["submitted_chapters"]
    book = {CH5, CH6}
    paths = [Path(n) for n in (f"{CH5} (1).ipynb", f"Copy of {CH6}.ipynb", "notes.ipynb")]
    got, renamed = chapters(paths, book)
    assert got == {CH5: paths[0], CH6: paths[1], "notes.ipynb": paths[2]}
    assert renamed == {paths[0]: CH5, paths[1]: CH6}
    # the chapter's own file wins over a renamed copy, which is reported, not graded
    paths = [Path(f"{CH5}.ipynb"), Path(f"{CH5} (1).ipynb")]
    got, renamed = chapters(paths, book)
    assert got == {CH5: paths[0], f"{CH5} (1).ipynb": paths[1]} and renamed == {}


def test_chapter_imports_are_what_the_exercises_use_above_the_section():
    """The grader runs the exercise section alone; the chapter's imports above it (``tl``, ``math``)
    go into its first cell, or a solution that uses ``tl.scaled_dot_product_attention`` fails with
    a NameError (as every chapter 2 solution did before)."""
    grade = _grader()
    chapter = nbformat.read(ROOT / "notebooks" / "02_causal_masks.ipynb", as_version=4)
    imports = grade["chapter_imports"](chapter).splitlines()
    assert "import transformer_lite as tl" in imports and "import math" in imports
    # nothing from the exercise section itself
    section = grade["exercise_section"](chapter)
    assert not any("BEGIN SOLUTION" in line for line in imports)
    assert grade["reference_sections"](ROOT / "notebooks", ["02_causal_masks"])[
        "02_causal_masks"
    ].metadata["grader_imports"] == "\n".join(imports)
    assert len(section.cells) < len(chapter.cells)


@pytest.mark.slow  # every chapter's exercise section in its own kernel: about a minute on one core
def test_the_book_s_own_solutions_pass_every_checker(tmp_path):
    """Oracle: the book's notebooks, whose solution cells are the reference solutions, submitted as
    one student: every checker of every chapter says passed."""
    chapters = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    (tmp_path / "subs" / "book").mkdir(parents=True)
    for path in chapters:
        (tmp_path / "subs" / "book" / path.name).write_bytes(path.read_bytes())
    _grader()["main"](
        [str(tmp_path / "subs"), "--output", str(tmp_path / "out"), "--time-limit", "600"]
    )
    rows = list(csv.reader((tmp_path / "out" / "grades.csv").open()))
    header, (row,) = rows[0], rows[1:]
    verdicts = dict(zip(header[1:], row[1:]))
    assert len(verdicts) >= 3 * len(chapters)
    assert all(v == "passed" for v in verdicts.values()), {
        k: v for k, v in verdicts.items() if v != "passed"
    }

"""Generate the student edition of the chapters: the same notebooks with the solutions taken out.

Usage (from the repository root; `make student` runs it):

    python scripts/make_student_edition.py [--source notebooks] [--output student_edition]

Rules, applied to every notebook of the source folder:

* a code cell tagged ``solution`` keeps its lines outside ``# BEGIN SOLUTION`` /
  ``# END SOLUTION`` (e.g. the ``def`` line and docstring of the function to
  write); the lines between the markers become
  ``raise NotImplementedError(...)`` at the same indentation. A code cell tagged
  ``solution`` without markers is dropped;
* a markdown cell tagged ``solution`` (a written answer, or the
  ``{solution-start}``/``{solution-end}`` fences that hide it in the book) is dropped;
* all outputs and execution counts are cleared: students run the notebooks themselves;
* the markdown is made readable in plain JupyterLab, which does not know MyST's roles and
  directives: an ``{exercise}`` directive becomes a quoted box headed "Exercise N.k: title"
  (numbered as the book numbers it), an admonition such as ``{note}`` a box headed by its title or
  kind, ``{glue:text}`` roles become the values the chapter
  stored, ``{cite}`` roles become "(Author et al., year)" from ``book/references.bib``,
  ``{ref}`` to an exercise becomes "Exercise N.k", and the legend's "Solutions are hidden"
  sentence, false here, is replaced.

The checkers in :mod:`transformer_lite.chapters.exercises` print "not implemented yet"
for a stub, so a student notebook runs from top to bottom before any exercise is done.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import nbformat
from pybtex.database import parse_file

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
STUB = 'raise NotImplementedError("exercise: replace this line with your code")'
BIB = Path(__file__).resolve().parents[1] / "book" / "references.bib"
# ``{chapter-time}`NN_name```: the book's role for a chapter's stored run time (book/_ext/chapter_times.py)
CHAPTER_TIME = re.compile(r"\{chapter-time\}`([^`]+)`")
GLUE = re.compile(r"\{glue(?::text)?\}`([^`:]+)(?::([^`]*))?`")
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")
REF = re.compile(r"\{(?:ref|numref)\}`([^`]+)`")
HIDDEN = re.compile(r"Solutions are hidden[^.]*\.")
# a MyST section target, "(label)=" on the line above a heading
TARGET = re.compile(r"^\(([\w-]+)\)=[ \t]*\n(#+[ \t]*(.*))?", re.M)
NOT_HERE = "This edition has no solutions: write yours in the cells that raise NotImplementedError."


def stub_source(source: str) -> str | None:
    """Replace each BEGIN/END SOLUTION region of ``source`` by a stub; None if there is no region."""
    out, inside, found = [], False, False
    for line in source.splitlines():
        if not inside and (m := BEGIN.match(line)):
            inside, found = True, True
            out.append(f"{m.group(1)}{STUB}")
        elif inside and END.match(line):
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a '# BEGIN SOLUTION' marker has no matching '# END SOLUTION'")
    return "\n".join(out) if found else None


def glued_values(nb: nbformat.NotebookNode) -> dict[str, str]:
    """The values a notebook glued (myst-nb ``glue``), by name, as the stored ``text/plain``."""
    values = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            scrap = out.get("metadata", {}).get("scrapbook")
            if scrap:
                data = out.get("data", {})
                text = data.get(scrap["mime_prefix"] + "text/plain", data.get("text/plain"))
                if text is not None:
                    values[scrap["name"]] = text
    return values


def format_glue(text: str, spec: str | None) -> str:
    """Format a glued ``text/plain`` value as myst-nb's ``{glue:text}`key:spec``` does."""
    if not spec:
        return text.strip("'\"")
    for convert in (int, float):
        try:
            return format(convert(text), spec)
        except ValueError:
            continue
    return format(text, spec)


def cite_label(keys: str, bib) -> str:
    """``(Vaswani et al., 2017; Ba et al., 2016)`` for the comma-separated bibtex keys."""
    labels = []
    for key in (k.strip() for k in keys.split(",")):
        entry = bib.entries[key]
        names = [
            " ".join(p.prelast_names + p.last_names).replace("{", "").replace("}", "")
            for p in entry.persons.get("author", [])
        ]
        who = (
            names[0]
            if len(names) == 1
            else " and ".join(names)
            if len(names) == 2
            else f"{names[0]} et al."
        )
        labels.append(f"{who}, {entry.fields.get('year', 'n.d.')}")
    return "(" + "; ".join(labels) + ")"


def exercise_labels(nb: nbformat.NotebookNode, chapter: int) -> dict[str, str]:
    """``{label: "Exercise chapter.k"}`` for the notebook's exercises, in order, as the book numbers them."""
    labels, k = {}, 0
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for match in re.finditer(r"^`{3,}\{exercise\}.*\n((?::\w+:.*\n)*)", cell.source, re.M):
            k += 1
            label = re.search(r"^:label:\s*(\S+)", match.group(1), re.M)
            if label:
                labels[label.group(1)] = f"Exercise {chapter}.{k}"
    return labels


def section_labels(nb: nbformat.NotebookNode) -> dict[str, str]:
    """``{label: '"Section title"'}`` for the notebook's section targets: a ``{ref}`` to a section
    reads as its title in quotes."""
    return {
        m.group(1): f'"{m.group(3).strip()}"'
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for m in TARGET.finditer(cell.source)
        if m.group(3)
    }


# MyST admonitions the chapters use besides exercises; each becomes a quoted box headed by its title
# (or its kind: "Note").
ADMONITIONS = ("note", "tip", "hint", "important", "warning", "caution", "seealso", "admonition")


def exercise_boxes(source: str, numbers: list[str]) -> str:
    """Turn each ``{exercise}`` fence of a markdown cell, and each admonition (``{note}`` ...), into a
    quoted box (a blockquote), which JupyterLab draws with a bar at its left. ``numbers`` supplies
    "Exercise N.k" in order."""
    kinds = "|".join(("exercise",) + ADMONITIONS)
    lines, out, i = source.splitlines(), [], 0
    while i < len(lines):
        opener = re.match(rf"^(`{{3,}})\{{({kinds})\}}\s*(.*)$", lines[i])
        if not opener:
            out.append(lines[i])
            i += 1
            continue
        fence, kind, title = opener.group(1), opener.group(2), opener.group(3).strip()
        body, i = [], i + 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        while body and re.match(r"^:\w+:", body[0]):  # directive options (:label:, :class:)
            body.pop(0)
        while body and not body[0].strip():
            body.pop(0)
        if kind == "exercise":
            head = numbers.pop(0) + (f": {title}" if title else "")
        else:
            head = title or kind.capitalize()
        out.append(f"> **{head}**")
        out.append(">")
        out.extend(f"> {line}" if line.strip() else ">" for line in body)
    return "\n".join(out)


def readable_markdown(
    source: str, glue: dict[str, str], bib, labels: dict[str, str], numbers: list[str]
) -> str:
    """The markdown of a cell with MyST's exercise fences, glue, cite and ref made plain."""
    source = exercise_boxes(source, numbers)
    source = GLUE.sub(lambda m: format_glue(glue[m.group(1)], m.group(2)), source)
    source = CITE.sub(lambda m: cite_label(m.group(1), bib), source)
    source = REF.sub(lambda m: labels.get(m.group(1), m.group(1)), source)
    # a section target's line goes, its heading stays
    source = TARGET.sub(lambda m: m.group(2) or "", source)
    return HIDDEN.sub(NOT_HERE, source)


def student_notebook(
    nb: nbformat.NotebookNode, chapter: int = 0, labels: dict[str, str] | None = None
) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` with solutions stubbed or dropped, outputs cleared and the markdown
    readable without MyST. ``chapter`` numbers the exercises; ``labels`` maps exercise labels of
    every chapter to "Exercise N.k" (for ``{ref}`` across chapters)."""
    glue, bib = glued_values(nb), parse_file(str(BIB))
    run_time = stored_run_time(nb)
    own = exercise_labels(nb, chapter)
    labels = {**section_labels(nb), **own, **(labels or {})}
    numbers = list(own.values()) + [f"Exercise {chapter}.{k}" for k in range(len(own) + 1, 100)]
    cells = []
    for cell in nb.cells:
        cell = nbformat.from_dict(dict(cell))
        is_solution = "solution" in cell.get("metadata", {}).get("tags", [])
        if is_solution:
            if cell.cell_type != "code":
                continue
            stubbed = stub_source(cell.source)
            if stubbed is None:
                continue
            cell.source = stubbed
            cell.metadata["tags"] = [t for t in cell.metadata["tags"] if t != "solution"] + [
                "exercise"
            ]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "markdown":
            cell.source = CHAPTER_TIME.sub(run_time, cell.source)
            cell.source = readable_markdown(cell.source, glue, bib, labels, numbers)
        cells.append(cell)
    out = nbformat.from_dict(dict(nb))
    out.cells = cells
    out.metadata.pop("widgets", None)
    return out


def stored_run_time(nb: nbformat.NotebookNode) -> str:
    """The wall time of the notebook's stored run, as the book's ``chapter-time`` role writes it."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "book" / "_ext" / "chapter_times.py"
    spec = importlib.util.spec_from_file_location("chapter_times", path)
    times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(times)
    wall = times.notebook_times(nb)["wall_s"]
    return times.format_duration(wall) if wall is not None else "not timed"


def chapter_number(path: Path) -> int:
    """``notebooks/02_causal_masks.ipynb`` -> 2 (the book numbers chapters by their file order)."""
    return int(path.name.split("_", 1)[0])


def notebooks_parser(doc: str, output: str, output_help: str) -> argparse.ArgumentParser:
    """The options of the scripts that write an edition of the chapters: ``--source`` (the chapter
    notebooks) and ``--output``; ``doc`` is the script's docstring."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(
        "--source", type=Path, default=Path("notebooks"), help="folder of chapter notebooks"
    )
    parser.add_argument("--output", type=Path, default=Path(output), help=output_help)
    return parser


def main() -> None:
    args = notebooks_parser(__doc__, "student_edition", "folder to write").parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    paths = sorted(args.source.glob("*.ipynb"))
    chapters = {path: nbformat.read(path, as_version=4) for path in paths}
    labels = {}
    for path, nb in chapters.items():
        labels.update(exercise_labels(nb, chapter_number(path)))
    for path, nb in chapters.items():
        nbformat.write(student_notebook(nb, chapter_number(path), labels), args.output / path.name)
        print(f"wrote {args.output / path.name}")


if __name__ == "__main__":
    main()

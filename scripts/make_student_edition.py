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
* all outputs and execution counts are cleared: students run the notebooks themselves.

The checkers in :mod:`transformer_lite.book.exercises` print "not implemented yet"
for a stub, so a student notebook runs from top to bottom before any exercise is done.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import nbformat

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
STUB = 'raise NotImplementedError("exercise: replace this line with your code")'


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


def student_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` with solutions stubbed or dropped and outputs cleared."""
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
            cell.metadata["tags"] = [t for t in cell.metadata["tags"] if t != "solution"] + ["exercise"]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    out = nbformat.from_dict(dict(nb))
    out.cells = cells
    out.metadata.pop("widgets", None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path("notebooks"), help="folder of chapter notebooks")
    parser.add_argument("--output", type=Path, default=Path("student_edition"), help="folder to write")
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    for path in sorted(args.source.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.write(student_notebook(nb), args.output / path.name)
        print(f"wrote {args.output / path.name}")


if __name__ == "__main__":
    main()

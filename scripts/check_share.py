"""How much of a package's code is input checking: the measure issue 21 sets a target for.

Counts, per file and in all, the *code lines* (lines holding a statement or part of one, docstrings,
comments and blank lines left out) and, among them, the *check lines*: the lines of every ``if``
statement whose body ends in a ``raise`` and has nothing else but the message it builds (the test,
the message and the raise, however many lines they span), plus the lines of calls to functions named
``check_*`` or ``_check*``. Docstring lines and ``Raises:`` paragraphs are counted apart.

Usage (from the repository root)::

    python scripts/check_share.py [transformer_lite/nn]
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path


def _code_lines(source: str, docstrings: set[int]) -> set[int]:
    """Line numbers holding a token other than a comment, a newline or an indent."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip and tok.type != tokenize.ENDMARKER:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines - docstrings


def _span(node: ast.AST) -> set[int]:
    return set(range(node.lineno, node.end_lineno + 1))


def _is_check_if(node: ast.If) -> bool:
    """``if <test>: [msg = ...]* raise ...`` with no ``else``."""
    body = node.body
    return (
        not node.orelse
        and isinstance(body[-1], ast.Raise)
        and all(isinstance(s, (ast.Assign, ast.AnnAssign, ast.Expr)) for s in body[:-1])
    )


def _is_check_call(node: ast.Expr) -> bool:
    call = node.value
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name.startswith(("check_", "_check"))


def measure(path: Path) -> dict[str, int]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    docstrings: set[int] = set()
    raises_lines = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = node.body[0] if node.body else None
            if (
                isinstance(doc, ast.Expr)
                and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)
            ):
                docstrings |= _span(doc)
                text = doc.value.value.splitlines()
                for i, line in enumerate(text):
                    if line.strip() == "Raises:":
                        indent = len(line) - len(line.lstrip())
                        for rest in text[i + 1 :]:
                            if rest.strip() and len(rest) - len(rest.lstrip()) <= indent:
                                break
                            raises_lines += bool(rest.strip())
    code = _code_lines(source, docstrings)
    ifs: set[int] = set()
    calls: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_check_if(node):
            ifs |= _span(node)
        elif isinstance(node, ast.Expr) and _is_check_call(node):
            calls |= _span(node)
    return {
        "code": len(code),
        "if_raise": len(ifs & code),
        "check_calls": len((calls - ifs) & code),
        "docstring": len(docstrings),
        "raises_doc": raises_lines,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default="transformer_lite/nn", help="a package folder")
    root = Path(parser.parse_args(argv).root)
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    total = dict.fromkeys(("code", "if_raise", "check_calls", "docstring", "raises_doc"), 0)
    print(f"{'file':44} {'code':>5} {'if-raise':>9} {'+calls':>7} {'docstr':>7} {'Raises:':>8}")
    for path in files:
        m = measure(path)
        for k in total:
            total[k] += m[k]
        share = 100 * m["if_raise"] / max(m["code"], 1)
        print(
            f"{str(path):44} {m['code']:5d} {share:8.1f}% "
            f"{100 * (m['if_raise'] + m['check_calls']) / max(m['code'], 1):6.1f}% "
            f"{m['docstring']:7d} {m['raises_doc']:8d}"
        )
    c = max(total["code"], 1)
    print(
        f"{'all':44} {total['code']:5d} {100 * total['if_raise'] / c:8.1f}% "
        f"{100 * (total['if_raise'] + total['check_calls']) / c:6.1f}% "
        f"{total['docstring']:7d} {total['raises_doc']:8d}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])

"""scripts/check_share.py, the measure of issue 21's check share, on a hand-counted file."""

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SOURCE = '''"""A module docstring.

Raises:
    nothing here, this is prose
"""


def f(x, n):
    """Add n.

    Raises:
        ValueError: n negative.
    """
    # a comment: not code
    if n < 0:
        raise ValueError(
            f"n: expected >= 0, received {n}"
        )
    check_shape(x)
    if n == 0:
        return x
    return x + n
'''


def test_counts_of_a_hand_counted_file(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    got = runpy.run_path(str(ROOT / "scripts" / "check_share.py"))["measure"](path)
    # code lines: def, if, raise (3 lines), check_shape, if n == 0, return x, return x + n = 9;
    # the if-raise block is 4 lines (the `if n == 0: return` is not a check), the call 1
    assert got == {"code": 9, "if_raise": 4, "check_calls": 1, "docstring": 10, "raises_doc": 2}

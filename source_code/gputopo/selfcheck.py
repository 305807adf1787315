"""Self-check for the notebooks' exercises, and a plain-text table for their outputs.

    answer_1 = None            # the learner replaces None with an expression
    check(answer_1, 20.97, rel=0.001)

`check` accepts an unanswered exercise (None) with a reminder, so a notebook still runs top
to bottom in CI; a wrong answer fails the cell with a hint instead of the expected value.
Standard library only.
"""

import math
from numbers import Number
from typing import Iterable, Optional, Sequence


def _same(answer, expected, rel, abs_tol) -> bool:
    if isinstance(expected, bool) or isinstance(answer, bool):
        return answer is expected
    if isinstance(expected, Number):
        return isinstance(answer, Number) and math.isclose(answer, expected, rel_tol=rel, abs_tol=abs_tol)
    if isinstance(expected, str):
        return isinstance(answer, str) and answer.strip().upper() == expected.strip().upper()
    if isinstance(expected, (list, tuple)):
        return (isinstance(answer, (list, tuple)) and len(answer) == len(expected)
                and all(_same(a, e, rel, abs_tol) for a, e in zip(answer, expected)))
    return answer == expected


def check(answer, expected, *, rel: float = 0.01, abs_tol: float = 0.0, hint: str = "") -> None:
    """Print whether `answer` matches `expected`; None means "not answered yet".

    Numbers match within `rel` (relative) or `abs_tol`; strings ignore case and surrounding
    spaces; lists and tuples match item by item. A mismatch raises AssertionError with
    `hint`, so a learner running the notebook sees it at once. Returns nothing, so the cell
    shows only the printed verdict.
    """
    if answer is None or answer is Ellipsis:
        print("Not answered yet: replace None with your answer and run both cells again "
              "(the solution is in the collapsed block above).")
        return
    if not _same(answer, expected, rel, abs_tol):
        raise AssertionError(f"{answer!r} is not right yet. {hint}".strip())
    print(f"Correct: {answer!r}")


def text_table(rows: Iterable[Sequence], header: Optional[Sequence[str]] = None) -> str:
    """Rows as aligned plain text (stable output that nbval can compare)."""
    rows = [[str(cell) for cell in row] for row in rows]
    if header is not None:
        rows.insert(0, [str(cell) for cell in header])
    if not rows:
        return ""
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(max(map(len, rows)))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if header is not None:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

"""Self-check for the notebooks' exercises, and a plain-text table for their outputs.

    answer_1 = None            # the learner replaces None with an expression
    check(answer_1, 20.97, rel=0.001)

`check` never stops a notebook: an unanswered exercise (None) gets a reminder, a wrong answer the
hint and how far off it is, so "Run All" and nbval run every cell. `predict` records a prediction
before a measurement, `compare` sets the measurement against it. Standard library only.
"""

import math
from numbers import Number
from typing import Iterable, Optional, Sequence


def _same(answer, expected, rel, abs_tol) -> bool:
    if isinstance(expected, bool) or isinstance(answer, bool):
        return answer is expected
    if isinstance(expected, Number):
        return isinstance(answer, Number) and math.isclose(
            answer, expected, rel_tol=rel, abs_tol=abs_tol
        )
    if isinstance(expected, str):
        return isinstance(answer, str) and answer.strip().upper() == expected.strip().upper()
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(answer, (list, tuple))
            and len(answer) == len(expected)
            and all(_same(a, e, rel, abs_tol) for a, e in zip(answer, expected))
        )
    return answer == expected


def _how_far(answer, expected) -> str:
    """A short diagnosis of a numeric miss: factor off, powers of ten, sign."""
    if not (isinstance(answer, Number) and isinstance(expected, Number)) or isinstance(
        answer, bool
    ):
        return ""
    if expected == 0 or answer == 0:
        return ""
    ratio = answer / expected
    if ratio < 0:
        return " The sign is wrong."
    decades = math.log10(ratio)
    if abs(decades - round(decades)) < 0.02 and round(decades) != 0:
        return (
            f" It is off by exactly 10^{round(decades)}: check the unit conversions "
            "(us = 1e-6 s, GB = 1e9 bytes, MiB = 2**20 bytes)."
        )
    for name, factor in (
        ("2**30 / 10**9", 2**30 / 1e9),
        ("2**20 / 10**6", 2**20 / 1e6),
        ("2", 2.0),
    ):
        for shown, r in ((f"{name}", factor), (f"1 / ({name})", 1 / factor)):
            if math.isclose(ratio, r, rel_tol=0.005):
                return (
                    f" It is off by a factor of {shown}: check binary against decimal units, "
                    "or a factor of two."
                )
    return f" It is {ratio:.3g} times the expected value."


def check(
    answer,
    expected,
    *,
    rel: float = 0.01,
    abs_tol: float = 0.0,
    hint: str = "",
    solution: str = "above",
) -> Optional[bool]:
    """Print whether `answer` matches `expected`: True, False, or None for "not answered yet".

    Numbers match within `rel` (relative) or `abs_tol`; strings ignore case and surrounding
    spaces; lists and tuples match item by item. `solution`: where the collapsed solution is.
    """
    if answer is None or answer is Ellipsis:
        print(
            "Not answered yet: replace None with your answer and run both cells again "
            f"(the solution is in the collapsed block {solution})."
        )
        return None
    if not _same(answer, expected, rel, abs_tol):
        print(
            f"Not right yet: {answer!r}.{_how_far(answer, expected)} {hint}".rstrip()
            + " Change the answer and run both cells again; the notebook goes on either way."
        )
        return False
    print(f"Correct: {answer!r}")
    return True


def predict(name: str, value, unit: str = "") -> Optional[float]:
    """Record (and print) a prediction before a measurement."""
    if value is None or value is Ellipsis:
        print(
            f"No prediction for {name} yet: write one down (replace None) "
            "before you run the measurement."
        )
        _PREDICTIONS.pop(name, None)
        return None
    _PREDICTIONS[name] = value
    print(f"Prediction recorded for {name}: {value!r}{(' ' + unit) if unit else ''}")
    return value


def compare(name: str, measured, unit: str = "", how: str = "measured") -> Optional[float]:
    """Set a measurement against the prediction recorded by `predict`; returns measured / predicted.

    Within 25 % counts as a good prediction; otherwise it prints how far off: which term of the
    model was missing? Strings (a transport name) are compared ignoring case. `how` says where the
    value comes from: "measured", or "recorded on <system>" for a value read from a recording.
    """
    predicted = _PREDICTIONS.get(name)
    if predicted is None:
        shown = f"{measured:.4g}" if isinstance(measured, float) else repr(measured)
        said = f"{how[0].upper()}{how[1:]} {name}" if " " not in how else f"{name}, {how}"
        print(f"{said}: {shown}{(' ' + unit) if unit else ''} (no prediction was recorded).")
        return None
    if isinstance(predicted, str) or isinstance(measured, str):
        same = str(predicted).strip().upper() == str(measured).strip().upper()
        print(
            f"{name}: predicted {predicted!r}, {how} {measured!r}: "
            + ("as predicted." if same else "different: what did the prediction leave out?")
        )
        return None
    if not predicted:
        print(f"{name}: {how} {measured!r}; a prediction of 0 cannot be compared.")
        return None
    ratio = measured / predicted
    verdict = (
        "close to the prediction."
        if abs(ratio - 1) <= 0.25
        else f"{ratio:.2g} x the prediction: what did the model leave out?"
    )
    print(
        f"{name}: predicted {predicted:.4g}, {how} "
        f"{measured:.4g}{(' ' + unit) if unit else ''}: {verdict}"
    )
    return ratio


_PREDICTIONS: dict = {}


def text_table(rows: Iterable[Sequence], header: Optional[Sequence[str]] = None) -> str:
    """Rows as aligned plain text (stable output that nbval can compare)."""
    rows = [[str(cell) for cell in row] for row in rows]
    if header is not None:
        rows.insert(0, [str(cell) for cell in header])
    if not rows:
        return ""
    widths = [
        max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(max(map(len, rows)))
    ]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    if header is not None:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

"""JSON files that tools write, read as they arrive: cut off, or with numbers JSON has no word for.

Not a parser kind: the shared reading of the `nccl-tests-json` and `nvbandwidth-json` kinds.
`load(text)` returns (value, cut_line): the whole document with cut_line None, or, for a file
that stops early (a run killed while writing, a paste cut short), the document as far as it
was written, every container closed after its last whole member, and the line where the text
stops. A file that is not JSON raises ParseError naming the line. Standard library only.
"""

import json
import re

from . import ParseError

# printf's words for the numbers JSON cannot spell (nccl-tests writes doubles with "%lf").
_NON_FINITE = re.compile(r"-?(?:inf(?:inity)?|nan)", re.IGNORECASE)


def _line_of(text, position):
    return text.count("\n", 0, position) + 1


def _finite_words(text):
    """The text with bare inf/nan (outside strings) turned into null, and where the text stops
    inside a string or not: (text, boundaries, stack at each boundary). A boundary is a place
    where everything before it is whole members of open containers."""
    out, boundaries, stack = [], [], []
    in_string = escaped = False
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            i += 1
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
            out.append(char)
            boundaries.append((len(out), list(stack)))
            i += 1
            continue
        elif char in "}]":
            if stack:
                stack.pop()
        elif char == ",":
            boundaries.append((len(out), list(stack)))  # before the comma: the member is whole
        elif char in "-iInN":
            word = _NON_FINITE.match(text, i)
            if word and (word.end() == end or not text[word.end()].isalnum()):
                out.append("null")
                i = word.end()
                continue
        out.append(char)
        i += 1
    return "".join(out), boundaries


def load(text):
    """(document, cut_line): see the module docstring."""
    start = text.find("{")
    start = start if start >= 0 else len(text.lstrip())
    body = text[start:].rstrip()
    if not body:
        raise ParseError(
            "empty input" if not text.strip() else "not a JSON file: no '{' found",
            None if not text.strip() else max(1, len(text.splitlines())),
        )
    fixed, boundaries = _finite_words(body)
    try:
        value, stop = json.JSONDecoder().raw_decode(fixed)
        return value, None
    except json.JSONDecodeError as error:
        cut = error.pos >= len(fixed.rstrip()) or error.msg.startswith("Unterminated string")
        if not cut:
            line = _line_of(text, start) - 1 + _line_of(fixed, error.pos)
            raise ParseError(f"not well-formed JSON: {error.msg}", line) from None
    for position, stack in reversed(boundaries[-50:]):  # the last whole place, almost always
        candidate = fixed[:position] + "".join(reversed(stack))
        try:
            return json.loads(candidate), max(1, len(text.rstrip().splitlines()))
        except json.JSONDecodeError:
            continue
    raise ParseError(
        "the JSON stops before its first whole value",
        max(1, len(text.rstrip().splitlines())),
        truncated=True,
    )

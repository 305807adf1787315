"""Parser for the results table of nccl-tests (all_reduce_perf, ...) and the course's benchmark.

Returns {rows, metadata, devices, truncated, truncated_line}. Each row is
{size, count, type, redop, [root,] out_of_place: {time_us, algbw, busbw, wrong},
in_place: {...} or None when the table has one timed group}; bandwidths in GB/s as
printed. `wrong` is the error column as printed: an int (the #wrong count), a float (the
older "error" column, e.g. 1e-07) or None for N/A.

`metadata` holds what the comment lines say, where present (`_COMMENT_FIELDS`); "# Collective
test starting: all_reduce_perf" or "# Collective: all_reduce" give collective "all_reduce".

A launcher's prefix on a line (gputopo.parsers.launcher lists them) is taken off first. NCCL
INFO lines inside the table are skipped; tables of old versions (an `error` column, no `root`)
read the same.

A data row with fewer cells than the header means a run cut short. By default that raises
ParseError naming the line. With strict=False a cut-off *last* row is left out and the
result says so (truncated=True, truncated_line=N), so the whole rows can still be shown.
"""
import re

from . import NUMBER, ParseError, nothing_found, only_blank_after
from .launcher import strip as strip_prefix

_LEADING_COLUMNS = ("size", "count", "type", "redop")
_TIMED_COLUMNS = ("time", "algbw", "busbw")
_WRONG_COLUMNS = ("#wrong", "wrong", "error", "#error", "errors")
_INT = re.compile(r"-?\d+")
_RANK_LINE = re.compile(r"#\s*Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
                        r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
_COMMENT_FIELDS = {
    "n_threads": (re.compile(r"\bnThread\s+(\d+)"), int),
    "n_gpus": (re.compile(r"\bnGpus\s+(\d+)"), int),
    "min_bytes": (re.compile(r"\bminBytes\s+(\d+)"), int),
    "max_bytes": (re.compile(r"\bmaxBytes\s+(\d+)"), int),
    "warmup_iters": (re.compile(r"\bwarmup iters:\s*(\d+)"), int),
    # "iters:" that is not the tail of "warmup iters:" or "agg iters:".
    "iters": (re.compile(r"(?<!warmup )(?<!agg )\biters:\s*(\d+)"), int),
    "validation": (re.compile(r"\bvalidation:\s*(\d+)"), int),
    "collective": (re.compile(r"#\s*Collective(?: test starting)?\s*:\s*(\S+)", re.IGNORECASE),
                   lambda name: name[: -len("_perf")] if name.endswith("_perf") else name),
    "nccl_version": (re.compile(r"NCCL version (\S+)"), str),
    "avg_busbw_gbs": (re.compile(r"#\s*Avg bus bandwidth\s*:\s*(" + NUMBER.pattern + r")\s*$"), float),
    "out_of_bounds": (re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)"), int),
    "out_of_bounds_ok": (re.compile(r"#\s*Out of bounds values\s*:\s*\d+\s+(\S+)"), lambda word: word == "OK"),
}


def parse(text, strict=True):
    """Parse an nccl-tests table; see the module docstring for `strict`."""
    metadata, devices, rows = {}, [], []
    table = None  # [column layout, header line number, rows read under this header]
    truncated_line = None
    lines = [strip_prefix(line) for line in text.splitlines()]

    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if words[:2] == ["size", "count"]:
                _check_has_rows(table)
                try:
                    table = [_read_header(words, lineno), lineno, 0]
                except ParseError as error:
                    if not only_blank_after(lines, lineno - 1):
                        raise
                    raise ParseError(error.what + ": the text stops inside the header", lineno, truncated=True,
                                     last_complete=_last_complete(rows)) from None
            else:
                _read_comment(stripped, metadata, devices)
            continue
        # Only lines starting with a digit are data; NCCL INFO lines may be interleaved.
        if table is None or not stripped[:1].isdigit():
            continue
        leading, groups = table[0]
        width = len(leading) + 4 * groups
        cells = stripped.split()
        if len(cells) < width:
            if strict or _data_follows(lines, lineno):
                raise ParseError(f"row has {len(cells)} cells but the header has {width} (cut short?): {stripped!r}",
                                 lineno, truncated=not _data_follows(lines, lineno), last_complete=_last_complete(rows))
            truncated_line = lineno
            continue
        if len(cells) > width:
            raise ParseError(f"row has {len(cells)} cells but the header has {width}", lineno)
        rows.append(_read_row(leading, groups, cells, lineno))
        table[2] += 1

    if table is None:
        raise nothing_found(text, "no nccl-tests table header found (a '# size count type ...' line)")
    _check_has_rows(table, at_end=True)
    return {"rows": rows, "metadata": metadata, "devices": devices, "truncated": truncated_line is not None,
            "truncated_line": truncated_line,
            "last_complete_section": _last_complete(rows) if truncated_line is not None else None}


def _last_complete(rows):
    if not rows:
        return "the table header (no row read whole)"
    return f"the row for {rows[-1]['size']} bytes"


def _check_has_rows(table, at_end=False):
    if table is not None and table[2] == 0:
        raise ParseError("table header is followed by no whole rows", table[1], truncated=at_end,
                         last_complete="the table header" if at_end else None)


def _data_follows(lines, lineno):
    """Whether a data row comes after line `lineno`: then a short row is not the last one."""
    return any(line.strip()[:1].isdigit() for line in lines[lineno:])


def _read_header(words, lineno):
    """(leading column names, number of timed groups) from the words of the header line."""
    leading = list(_LEADING_COLUMNS)
    if words[: len(leading)] != leading:
        raise ParseError(f"unrecognised table header: expected {' '.join(leading)} first", lineno)
    leading += ["root"] if words[len(leading): len(leading) + 1] == ["root"] else []
    rest = words[len(leading):]
    groups = [rest[start: start + 4] for start in range(0, len(rest), 4)]
    timed = [len(names) == 4 and tuple(names[:3]) == _TIMED_COLUMNS and names[3] in _WRONG_COLUMNS for names in groups]
    if len(groups) not in (1, 2) or not all(timed):
        raise ParseError("unrecognised table header: expected one or two groups of 'time algbw busbw #wrong' "
                         f"after {' '.join(leading)}", lineno)
    return leading, len(groups)


def _read_row(leading, groups, cells, lineno):
    row = {}
    for name, cell in zip(leading, cells):
        if name in ("type", "redop"):
            row[name] = cell
        elif _INT.fullmatch(cell):
            row[name] = int(cell)
        else:
            raise ParseError(f"{name} should be a whole number, not {cell!r}", lineno)
    timed = cells[len(leading):]
    row["out_of_place"] = _read_group(timed[:4], lineno)
    row["in_place"] = _read_group(timed[4:8], lineno) if groups == 2 else None
    return row


def _read_group(cells, lineno):
    numbers = {}
    for name, cell in zip(("time_us", "algbw", "busbw", "wrong"), cells):
        if cell != "N/A" and not NUMBER.fullmatch(cell):
            what = "the #wrong column should be a number or N/A" if name == "wrong" else f"{name} should be a number"
            raise ParseError(f"{what}, not {cell!r}", lineno)
        # N/A: no number (nccl_bench prints N/A for NaN or infinity): missing. #wrong may be an int.
        numbers[name] = None if cell == "N/A" else int(cell) if _INT.fullmatch(cell) and name == "wrong" else float(cell)
    return numbers


def _read_comment(stripped, metadata, devices):
    rank = _RANK_LINE.match(stripped)
    if rank:
        number, pid, host, device, bus, name = rank.groups()
        devices.append({"rank": int(number), "pid": int(pid), "host": host, "device": int(device),
                        "bus_id": bus, "name": name})
        return
    for key, (pattern, convert) in _COMMENT_FIELDS.items():
        found = pattern.search(stripped)
        if found and key not in metadata:
            metadata[key] = convert(found.group(1))

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
ParseError naming the line (truncated, with the rows read whole in `partial`). With
strict=False a cut-off *last* row is left out and the result says so (truncated=True,
truncated_line=N), so the whole rows can still be shown.

Rows pasted without their header (and without the footer) are recognised by their shape:
size and count (whole numbers), type and redop (words), then only numbers and N/A, in one of
the layouts nccl-tests has printed: an optional root, then one or two groups of time, algbw,
busbw and an optional #wrong/error column (a post may have dropped that column; `wrong` is then
None). `header_found` says which way the table was read. Lines are read after
`gputopo.parsers.prepare_lines` (launcher prefixes, an editor's line numbers, escape codes).
"""

import re

from . import NUMBER, ParseError, nothing_found, only_blank_after, prepare_lines

_LEADING_COLUMNS = ("size", "count", "type", "redop")
# A data row without its header: size count type redop, then numbers (or N/A) only.
_BARE_ROW = re.compile(
    r"^\d+\s+\d+\s+[a-z][a-z0-9_]*\s+[a-z][a-z0-9_]*"
    r"((?:\s+(?:N/A|" + NUMBER.pattern + r"))+)\s*$"
)
# Numbers after redop -> (root column, timed groups, columns per group) for every layout.
_BARE_LAYOUTS = {
    9: (True, 2, 4),
    8: (False, 2, 4),
    7: (True, 2, 3),
    6: (False, 2, 3),
    5: (True, 1, 4),
    3: (False, 1, 3),
}
_TIMED_COLUMNS = ("time", "algbw", "busbw")
_WRONG_COLUMNS = ("#wrong", "wrong", "error", "#error", "errors")
# Per-iteration statistics after #wrong with -I 1 (src/util.cu writeResultHeader, v2.19.2-v2.19.6).
_PER_ITERATION_COLUMNS = ("i_min", "i_max", "i_p99", "i_cv%")
_INT = re.compile(r"-?\d+")
_RANK_LINE = re.compile(
    r"#\s*Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]*)\]\s*(.*?)\s*$"
)
_COMMENT_FIELDS = {
    "n_threads": (re.compile(r"\bnThread\s+(\d+)"), int),
    "n_gpus": (re.compile(r"\bnGpus\s+(\d+)"), int),
    "min_bytes": (re.compile(r"\bminBytes\s+(\d+)"), int),
    "max_bytes": (re.compile(r"\bmaxBytes\s+(\d+)"), int),
    "warmup_iters": (re.compile(r"\bwarmup iters:\s*(\d+)"), int),
    # "iters:" that is not the tail of "warmup iters:" or "agg iters:".
    "iters": (re.compile(r"(?<!warmup )(?<!agg )\biters:\s*(\d+)"), int),
    "validation": (re.compile(r"\bvalidation:\s*(\d+)"), int),
    "collective": (
        re.compile(r"#\s*Collective(?: test starting)?\s*:\s*(\S+)", re.IGNORECASE),
        lambda name: name[: -len("_perf")] if name.endswith("_perf") else name,
    ),
    "nccl_version": (re.compile(r"NCCL version (\S+)"), str),
    # nccl-tests 2.17 on: "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809"
    "nccl_tests_version": (re.compile(r"#\s*nccl-tests version (\S+)"), str),
    "nccl_library": (re.compile(r"nccl-library=(\d+)"), lambda code: version_of_code(int(code))),
    "avg_busbw_gbs": (
        re.compile(r"#\s*Avg bus bandwidth\s*:\s*(" + NUMBER.pattern + r")\s*$"),
        float,
    ),
    "out_of_bounds": (re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)"), int),
    "out_of_bounds_ok": (
        re.compile(r"#\s*Out of bounds values\s*:\s*\d+\s+(\S+)"),
        lambda word: word == "OK",
    ),
}


def parse(text, strict=True):
    """Parse an nccl-tests table; see the module docstring for `strict`."""
    metadata, devices, rows = {}, [], []
    table = None  # [column layout, header line number, rows read under this header]
    truncated_line = None
    lines = prepare_lines(text)

    def partial():
        return _result(list(rows), dict(metadata), list(devices), None, True, truncated=True)

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
                    raise ParseError(
                        error.what + ": the text stops inside the header",
                        lineno,
                        truncated=True,
                        last_complete=_last_complete(rows),
                        partial=partial(),
                    ) from None
            else:
                _read_comment(stripped, metadata, devices)
            continue
        # Only lines starting with a digit are data; NCCL INFO lines may be interleaved.
        if table is None or not stripped[:1].isdigit():
            continue
        leading, groups, per_group = table[0]
        width = len(leading) + per_group * groups
        cells = stripped.split()
        if len(cells) < width:
            if strict or _data_follows(lines, lineno):
                cut = not _data_follows(lines, lineno)
                what = f"row has {len(cells)} cells but the header has {width} (cut short?)"
                raise ParseError(
                    f"{what}: {stripped!r}",
                    lineno,
                    truncated=cut,
                    last_complete=_last_complete(rows),
                    partial=partial() if cut else None,
                )
            truncated_line = lineno
            continue
        if len(cells) > width:
            raise ParseError(f"row has {len(cells)} cells but the header has {width}", lineno)
        rows.append(_read_row(leading, groups, cells, lineno, per_group))
        table[2] += 1

    if table is None:
        return _bare_rows(text, lines, metadata, devices, strict)
    _check_has_rows(table, at_end=True, partial=partial())
    return _result(rows, metadata, devices, truncated_line, True)


def _result(rows, metadata, devices, truncated_line, header_found, truncated=None):
    """The parser's result; `truncated` defaults to whether a last row was left out."""
    cut = truncated_line is not None if truncated is None else truncated
    return {
        "rows": rows,
        "metadata": metadata,
        "devices": devices,
        "truncated": cut,
        "truncated_line": truncated_line,
        "last_complete_section": _last_complete(rows) if cut else None,
        "header_found": header_found,
    }


def _bare_rows(text, lines, metadata, devices, strict):
    """A table pasted without its header: its rows, read by their shape (module docstring)."""
    found = [
        (lineno, line.strip())
        for lineno, line in enumerate(lines, start=1)
        if _BARE_ROW.match(line.strip())
    ]
    counts = [len(line.split()) - 4 for _, line in found]
    common = max(set(counts), key=counts.count) if counts else None
    if common not in _BARE_LAYOUTS:
        raise nothing_found(
            text,
            "no nccl-tests table header found (a '# size count type ...' "
            "line), and no lines shaped like its rows",
        )
    root, groups, per_group = _BARE_LAYOUTS[common]
    leading = list(_LEADING_COLUMNS) + (["root"] if root else [])
    rows, truncated_line = [], None
    for number, (lineno, line) in enumerate(found):
        cells = line.split()
        if len(cells) - 4 == common:
            rows.append(_read_row(leading, groups, cells, lineno, per_group))
            continue
        last = number == len(found) - 1 and only_blank_after(lines, lineno - 1)
        what = f"row has {len(cells)} cells but the rows above it have {common + 4}: {line!r}"
        if last and not strict:
            truncated_line = lineno
            continue
        partial = _result(rows, metadata, devices, lineno, False) if last else None
        raise ParseError(
            what, lineno, truncated=last, last_complete=_last_complete(rows), partial=partial
        )
    return _result(rows, metadata, devices, truncated_line, False)


def _last_complete(rows):
    if not rows:
        return "the table header (no row read whole)"
    return f"the row for {rows[-1]['size']} bytes"


def _check_has_rows(table, at_end=False, partial=None):
    if table is not None and table[2] == 0:
        raise ParseError(
            "table header is followed by no whole rows",
            table[1],
            truncated=at_end,
            last_complete="the table header" if at_end else None,
            partial=partial if at_end else None,
        )


def _data_follows(lines, lineno):
    """Whether a data row comes after line `lineno`: then a short row is not the last one."""
    return any(line.strip()[:1].isdigit() for line in lines[lineno:])


def _read_header(words, lineno):
    """(leading column names, number of timed groups, columns per group) from the words of the
    header line."""
    leading = list(_LEADING_COLUMNS)
    if words[: len(leading)] != leading:
        raise ParseError(f"unrecognised table header: expected {' '.join(leading)} first", lineno)
    leading += ["root"] if words[len(leading) : len(leading) + 1] == ["root"] else []
    rest = words[len(leading) :]
    # -I 1 (nccl-tests 2.19.2 on) adds i_min i_max i_p99 i_cv% after each group's #wrong
    per_group = 8 if tuple(rest[4:8]) == _PER_ITERATION_COLUMNS else 4
    groups = [rest[start : start + per_group] for start in range(0, len(rest), per_group)]
    timed = [
        len(names) == per_group
        and names[0] in ("time", "cputime")
        and tuple(names[1:3]) == _TIMED_COLUMNS[1:]
        and names[3] in _WRONG_COLUMNS
        and tuple(names[4:]) in ((), _PER_ITERATION_COLUMNS)
        for names in groups
    ]
    if len(groups) not in (1, 2) or not all(timed):
        raise ParseError(
            "unrecognised table header: expected one or two groups of 'time algbw busbw #wrong' "
            f"after {' '.join(leading)}",
            lineno,
        )
    return leading, len(groups), per_group


def _read_row(leading, groups, cells, lineno, per_group=4):
    row = {}
    for name, cell in zip(leading, cells):
        if name in ("type", "redop"):
            row[name] = cell
        elif _INT.fullmatch(cell):
            row[name] = int(cell)
        else:
            raise ParseError(f"{name} should be a whole number, not {cell!r}", lineno)
    timed = cells[len(leading) :]
    row["out_of_place"] = _read_group(timed[:per_group], lineno)
    row["in_place"] = _read_group(timed[per_group : 2 * per_group], lineno) if groups == 2 else None
    return row


def _read_group(cells, lineno):
    numbers = {}
    for name, cell in zip(("time_us", "algbw", "busbw", "wrong"), cells):
        if cell != "N/A" and not NUMBER.fullmatch(cell):
            what = (
                "the #wrong column should be a number or N/A"
                if name == "wrong"
                else f"{name} should be a number"
            )
            raise ParseError(f"{what}, not {cell!r}", lineno)
        # N/A: no number (nccl_bench prints N/A for NaN or infinity): missing. #wrong may be an int.
        numbers[name] = (
            None
            if cell == "N/A"
            else int(cell)
            if _INT.fullmatch(cell) and name == "wrong"
            else float(cell)
        )
    numbers.setdefault("wrong", None)  # a table without the error column has no value for it
    if len(cells) == 8:  # -I 1: the per-iteration statistics (us, us, us, %)
        extra = cells[4:]
        bad = [cell for cell in extra if not NUMBER.fullmatch(cell)]
        if bad:
            raise ParseError(f"per-iteration statistics should be numbers, not {bad[0]!r}", lineno)
        names = ("min_us", "max_us", "p99_us", "cv_pct")
        numbers["per_iteration"] = dict(zip(names, map(float, extra)))
    return numbers


def _read_comment(stripped, metadata, devices):
    rank = _RANK_LINE.match(stripped)
    if rank:
        number, pid, host, device, bus, name = rank.groups()
        devices.append(
            {
                "rank": int(number),
                "pid": int(pid),
                "host": host,
                "device": int(device),
                "bus_id": bus,
                "name": name,
            }
        )
        return
    for key, (pattern, convert) in _COMMENT_FIELDS.items():
        found = pattern.search(stripped)
        if found and key not in metadata:
            metadata[key] = convert(found.group(1))


def version_of_code(code):
    """ "2.28.9" for NCCL_VERSION_CODE 22809 (from 2.9 on), "2.8.4" for 2804 (before)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"

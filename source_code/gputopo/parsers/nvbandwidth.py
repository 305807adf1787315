"""Parser for NVIDIA nvbandwidth's text output (https://github.com/NVIDIA/nvbandwidth).

What the tool prints, read from its source at tags v0.1 to v0.8 (output.cpp, inline_common.h
or common.h, nvbandwidth.cpp, testcases_ce.cpp, testcases_sm.cpp):

    nvbandwidth Version: v0.8
    Built from Git version: v0.8
    CUDA Runtime Version: 13000          (and CUDA Driver Version, Driver Version)
    <host name>                          (v0.8 prints it before the device list)
    Device 0: NVIDIA A100-SXM4-80GB (00000000:34:00)   (v0.2: the name alone)
    Running device_to_device_memcpy_read_ce.
    memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
               0         1
     0       N/A     26.34               (v0.1 and the README's example: 0.00 on the diagonal)
     1     26.34       N/A
    SUM device_to_device_memcpy_read_ce 52.68      (absent in the README's example; v0.8 may
                                                    print "&&&& PERF <key> <sum>..." instead)

A test can print several matrices (the bidirectional ones: Read1/Write1, Read2/Write2, Total),
latency tests print "(ns)" matrices, a test that cannot run prints "Waiving <name>." (before
v0.8) or "Waived: ", and an error prints a line of its own. Lines the parser does not know
(notes, host names, warnings) are skipped.

Returns the header's versions, the devices and the tests (status "ran", "waived" or "error"),
each with its matrices; a matrix's `values` hold None where nvbandwidth printed N/A or, for
GPU x GPU matrices, 0.00 on the diagonal (the self-copy is not measured; `diagonal` says
which), and `sum` is the SUM line (None without one).

A run cut off inside a matrix (fewer rows than columns in a GPU x GPU matrix, a row with
fewer cells than the header, a test announced by "Running" with nothing after it) raises
ParseError(truncated=True); the last test read whole is named, and `partial` holds what was read
(the matrix being read keeps its whole rows). Lines are read after
`gputopo.parsers.prepare_lines` (escape codes in any spelling, line numbers, prefixes).

Data direction in the device-to-device tests (testcases_ce.cpp and testcases_sm.cpp, v0.1 to
v0.8): in a *_read_* test the cell (row r, column c) is a copy from GPU c into GPU r, issued
in GPU r's context; in a *_write_* test it is a copy from GPU r into GPU c, issued in GPU r's
context. `pair_gbs()` applies this.
"""

import copy
import re

from . import ParseError, only_blank_after, prepare_lines

# The header lines: "nvbandwidth Version: v0.8", "CUDA Runtime Version: 13000", ...
_HEADER = re.compile(
    r"^(nvbandwidth |Built from Git |Driver )[Vv]ersion:\s*(\S+)"
    r"|^(CUDA Runtime |CUDA Driver )Version:\s*(\d+)"
)
_HEADER_KEYS = {
    "nvbandwidth ": "version",
    "Built from Git ": "git_version",
    "CUDA Runtime ": "cuda_runtime_version",
    "CUDA Driver ": "cuda_driver_version",
    "Driver ": "driver_version",
}
_DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+)\))?$")
_RUNNING = re.compile(r"^Running (\S+?)\.?$")
_WAIVING = re.compile(r"^Waiving (\S+?)\.?$")
_WAIVED = re.compile(r"^Waived:?\s*(.*)$")
_ERROR = re.compile(r"^(?:ERROR|Error|ASSERT)\b:?\s*(.*)$")
_SUM = re.compile(r"^(?:SUM|&&&& PERF) (\S+) (-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)")
_TITLE = re.compile(
    r"^(?:memcpy|memory latency|Device to Device Latency)\b.*?"
    r"(?:(CE|SM)\s+)?(?:(GPU|CPU)\(row\)\s*(->|<-|<->)\s*)?(GPU|CPU)\(column\)"
    r"(?:\s+(\w+))?\s*(?:bandwidth\s*)?\((GB/s|ns)\)\s*$"
)
_CELL = re.compile(r"^(?:N/A|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)$")
_METHOD = re.compile(r"\b(CE|SM)\b")


def parse(text):
    """Parse nvbandwidth's text output; ParseError on empty, matrix-less or cut-off input."""
    result = {
        "version": None,
        "git_version": None,
        "cuda_runtime_version": None,
        "cuda_driver_version": None,
        "driver_version": None,
        "devices": [],
        "tests": [],
    }
    lines = [line.rstrip() for line in prepare_lines(text)]
    if not any(line.strip() for line in lines):
        raise ParseError("empty input")
    test = None  # the test being read
    matrix = None  # the matrix being read
    done = []  # names of the tests read whole

    def cut(what, lineno):
        """The ParseError for a text that stops here, with what was read."""
        partial = copy.deepcopy(result)
        for found_test in partial["tests"]:
            found_test["matrices"] = [m for m in found_test["matrices"] if m["values"]]
            for found in found_test["matrices"]:
                _settle(found)
        return ParseError(
            what, lineno, truncated=True, last_complete=done[-1] if done else None, partial=partial
        )

    def finish_matrix(lineno, at_end=False):
        nonlocal matrix
        if matrix is None:
            return
        found = matrix
        rows = len(found["values"])
        square = found["rows"] == "GPU" and found["columns"] == "GPU" and found["column_labels"]
        expected = len(found["column_labels"]) if square else None
        if at_end and (rows == 0 or (expected is not None and rows < expected)):
            have = f"{rows} of its {expected} rows" if expected is not None else f"{rows} rows"
            raise cut(f"matrix {found['title']!r} has {have}: the text stops there", lineno)
        if rows == 0:  # a title and nothing under it: said in the test's message, not a matrix
            test["matrices"].remove(found)
            test["status"], test["message"] = "error", f"{found['title']!r} printed without rows"
        matrix = None

    def finish_test(lineno, at_end=False):
        nonlocal test
        finish_matrix(lineno, at_end)
        if test is None:
            return
        if test["status"] == "ran" and not test["matrices"]:
            if at_end:
                raise cut(
                    f"test {test['name']} started but printed no matrix: the text stops there",
                    lineno,
                )
            test["status"], test["message"] = "error", test["message"] or "no matrix printed"
        done.append(test["name"])
        test = None

    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if matrix is not None:
            found = matrix
            tokens = line.split()
            if not line:
                if found["values"]:
                    finish_matrix(lineno)
                continue
            if found["column_labels"] is None:
                found["column_labels"] = tokens
                continue
            if (
                len(tokens) >= 2
                and all(_CELL.match(t) for t in tokens[1:])
                and not _SUM.match(line)
            ):
                if len(tokens) - 1 != len(found["column_labels"]):
                    at_end = only_blank_after(lines, lineno - 1)
                    what = (
                        f"row {tokens[0]} of {found['title']!r} has {len(tokens) - 1} cells "
                        f"but its header has {len(found['column_labels'])}"
                    )
                    if at_end:
                        raise cut(what + ": the text stops there", lineno)
                    raise ParseError(what, lineno)
                found["row_labels"].append(tokens[0])
                found["values"].append([None if t == "N/A" else float(t) for t in tokens[1:]])
                continue
            finish_matrix(lineno)
        summed = _SUM.match(line)
        if summed:
            if test is not None and test["matrices"] and test["matrices"][-1]["sum"] is None:
                test["matrices"][-1]["sum"] = float(summed.group(2))
                # The SUM line names its test: a paste without the "Running" line gets its name
                # here.
                test["name"] = test["name"] or summed.group(1)
            continue
        title = _TITLE.match(line)
        if title:
            if (
                test is None
            ):  # a matrix pasted without its "Running" line (the README's example has one)
                test = {"name": None, "status": "ran", "message": None, "matrices": []}
                result["tests"].append(test)
            method, rows, arrow, columns, variant, unit = title.groups()
            method = method or (_METHOD.search(line).group(1) if _METHOD.search(line) else None)
            found = {
                "title": line,
                "method": method,
                "rows": rows,
                "columns": columns,
                "arrow": arrow,
                "variant": variant if variant not in (None, "bandwidth") else None,
                "unit": unit,
                "row_labels": [],
                "column_labels": None,
                "values": [],
                "diagonal": None,
                "sum": None,
            }
            test["matrices"].append(found)
            matrix = found
            continue
        running = _RUNNING.match(line)
        if running:
            finish_test(lineno)
            test = {"name": running.group(1), "status": "ran", "message": None, "matrices": []}
            result["tests"].append(test)
            continue
        waiving = _WAIVING.match(line)
        if waiving:
            finish_test(lineno)
            result["tests"].append(
                {"name": waiving.group(1), "status": "waived", "message": None, "matrices": []}
            )
            done.append(waiving.group(1))
            continue
        waived = _WAIVED.match(line)
        if waived:
            named = (
                test is not None and not test["matrices"]
            )  # "Running x." then "Waived: ...": x was waived
            if named:
                test["status"], test["message"] = "waived", waived.group(1) or None
            finish_test(lineno)
            if not named:
                result["tests"].append(
                    {
                        "name": None,
                        "status": "waived",
                        "message": waived.group(1) or None,
                        "matrices": [],
                    }
                )
            continue
        error = _ERROR.match(line)
        if error and test is not None:
            test["status"], test["message"] = "error", test["message"] or line
            continue
        header, device = _HEADER.match(line), _DEVICE.match(line)
        if header:
            result[_HEADER_KEYS[header[1] or header[3]]] = header[2] or int(header[4])
        elif device:
            result["devices"].append(
                {
                    "index": int(device.group(1)),
                    "name": device.group(2).strip(),
                    "pci_bus_id": device.group(3),
                }
            )
    finish_test(len(lines), at_end=True)
    if not any(t["matrices"] or t["status"] != "ran" for t in result["tests"]):
        raise ParseError("no nvbandwidth test found (no 'Running <test>.' line and no matrix)")
    for test in result["tests"]:
        for found in test["matrices"]:
            _settle(found)
    return result


def _settle(found):
    """Expected shape, diagonal: a GPU x GPU matrix is square; its diagonal is not measured."""
    found["row_labels"] = [
        int(label) if label.isdigit() else label for label in found["row_labels"]
    ]
    found["column_labels"] = [
        int(label) if label.isdigit() else label for label in found["column_labels"] or []
    ]
    if found["rows"] == "GPU" and found["columns"] == "GPU" and found["unit"] == "GB/s":
        printed = set()
        for r, label in enumerate(found["row_labels"]):
            if label in found["column_labels"]:
                c = found["column_labels"].index(label)
                cell = found["values"][r][c]
                printed.add("N/A" if cell is None else f"{cell:.2f}")
                if cell == 0.0:
                    found["values"][r][c] = None
        found["diagonal"] = (
            "N/A" if printed == {"N/A"} else ("0.00" if printed == {"0.00"} else None)
        )


def find_matrix(parsed, test_name, variant=None):
    """The first matrix of the named test (and variant, e.g. "Total"), or None."""
    for test in parsed["tests"]:
        if test["name"] == test_name:
            for found in test["matrices"]:
                if variant is None or found["variant"] == variant:
                    return found
    return None


def pair_gbs(parsed, test_name, src, dst):
    """GB/s of a copy from GPU src to GPU dst (CUDA ordinals) in a device-to-device test, or None.

    *_read_* tests hold that copy in cell (dst, src), *_write_* tests in cell (src, dst).
    """
    found = find_matrix(parsed, test_name)
    if found is None or found["unit"] != "GB/s":
        return None
    row, column = (dst, src) if "_read_" in test_name else (src, dst)
    if row not in found["row_labels"] or column not in found["column_labels"]:
        return None
    return found["values"][found["row_labels"].index(row)][found["column_labels"].index(column)]

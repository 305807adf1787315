"""Parser for nvbandwidth's JSON output (`nvbandwidth -j`, v0.5 and later).

The schema, read from NVIDIA/nvbandwidth json_output.cpp (JsonOutput) and nvbandwidth.cpp at
tags v0.5 to v0.8 (jsoncpp's toStyledString, printed once at the end of the run):

    {"nvbandwidth": {"version": "v0.8", "git_version": "v0.8", "CUDA Runtime Version": 13000,
                     "Driver Version": "580.105.08",
                     "GPU Device list": ["0: NVIDIA GB200 (00000008:06:00): (host)", ...],
                     "testcases": [{
                         "name": "device_to_device_memcpy_write_ce",
                         "status": "Passed" | "Waived" | "Running" | "Error" | "Not Found",
                         "bandwidth_description": "memcpy CE GPU(row) <- GPU(column) ...",
                         "bandwidth_matrix": [["N/A", "389.1", ...], ...],   (strings)
                         "sum": 2712.3, ["min", "max", "average" with -v],
                         ["error": "..."]}],
                     ["error": "...", "warning": "..."]}}

A test that prints several matrices (the bidirectional host tests: Read1, Read2, Total) calls
addTestcaseResults once per matrix, which appends the rows of each to the one
`bandwidth_matrix` and keeps the last description and sum: such a matrix is returned as it is,
with `rows_per_matrix` saying how many rows each printed matrix had when the row count is a
multiple of the column count's matrix height (1 for CPU rows, the column count for GPU rows).

Returns the `nvbandwidth` text parser's shape: {version, git_version, cuda_runtime_version,
cuda_driver_version, driver_version, devices: [{index, name, pci_bus_id, host}], tests: [{name,
status ("ran", "waived", "error", "not found" or "running"), message, matrices: [{title, method,
rows, columns, arrow, variant, unit, row_labels, column_labels, values, diagonal, sum}]}],
run_error, run_warning} (the file's "error" and "warning"). A test left "Running" is one the
run never finished. A JSON text cut short raises ParseError(truncated=True) with what was read
in `partial`.
"""

import re

from . import ParseError
from .jsontext import load
from .nvbandwidth import _TITLE, _settle

_DEVICE = re.compile(
    r"^\s*(\d+):\s*(.+?)(?:\s*\(([0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+)\))?(?::\s*\((.*)\))?\s*$"
)
_STATUS = {
    "passed": "ran",
    "waived": "waived",
    "error": "error",
    "not found": "not found",
    "running": "running",
}


def parse(text):
    """Parse `nvbandwidth -j` output; see the module docstring."""
    document, cut_line = load(text)
    body = document.get("nvbandwidth") if isinstance(document, dict) else None
    if not isinstance(body, dict):
        raise ParseError('not nvbandwidth JSON output (no "nvbandwidth" object at its top)', 1)
    try:
        result = _read(body)
    except (TypeError, ValueError, AttributeError) as error:
        raise ParseError(f"nvbandwidth JSON with a value of the wrong kind: {error}", 1) from None
    if cut_line is not None:
        whole = [
            test["name"]
            for test in result["tests"]
            if test["status"] != "running" and (test["matrices"] or test["status"] != "ran")
        ]
        raise ParseError(
            "the JSON text stops before its end",
            cut_line,
            truncated=True,
            last_complete=whole[-1] if whole else None,
            partial=result,
        )
    return result


def _read(body):
    devices = []
    for entry in body.get("GPU Device list") or []:
        found = _DEVICE.match(str(entry))
        if found:
            devices.append(
                {
                    "index": int(found.group(1)),
                    "name": found.group(2),
                    "pci_bus_id": found.group(3),
                    "host": found.group(4),
                }
            )
    tests = [_test(case) for case in body.get("testcases") or [] if isinstance(case, dict)]
    runtime = body.get("CUDA Runtime Version")
    driver_api = body.get("CUDA Driver Version", body.get("CUDA Driver API Version"))
    return {
        "version": _text(body.get("version")),
        "git_version": _text(body.get("git_version")),
        "cuda_runtime_version": runtime if isinstance(runtime, int) else None,
        "cuda_driver_version": driver_api if isinstance(driver_api, int) else None,
        "driver_version": _text(body.get("Driver Version")),
        "devices": devices,
        "tests": tests,
        "run_error": _text(body.get("error")),
        "run_warning": _text(body.get("warning")),
    }


def _text(value):
    return None if value is None else str(value)


def _test(case):
    status = case.get("status")
    status = None if status is None else _STATUS.get(str(status).lower(), str(status))
    test = {
        "name": _text(case.get("name")),
        "status": status,
        "message": _text(case.get("error")),
        "matrices": [],
    }
    rows = case.get("bandwidth_matrix")
    if isinstance(rows, list) and rows:
        test["matrices"].append(
            _matrix(str(case.get("bandwidth_description", "")), rows, case.get("sum"))
        )
    return test


def _matrix(title, rows, total):
    title_found = _TITLE.match(title)
    method, row_kind, arrow, column_kind, variant, unit = (
        title_found.groups() if title_found else (None,) * 6
    )
    values = [[None if str(cell).strip() == "N/A" else float(cell) for cell in row] for row in rows]
    width = max(len(row) for row in values)
    found = {
        "title": title,
        "method": method or ("CE" if " CE " in title else "SM" if " SM " in title else None),
        "rows": row_kind,
        "columns": column_kind,
        "arrow": arrow,
        "variant": variant if variant not in (None, "bandwidth") else None,
        "unit": unit or "GB/s",
        "row_labels": [str(i) for i in range(len(values))],
        "column_labels": [str(i) for i in range(width)],
        "values": values,
        "diagonal": None,
        "sum": float(total) if isinstance(total, (int, float)) else None,
    }
    height = 1 if row_kind == "CPU" else width if row_kind == "GPU" else None
    if height and len(values) > height and len(values) % height == 0:
        found["rows_per_matrix"] = height
        found["row_labels"] = [str(i % height) for i in range(len(values))]
    _settle(found)
    return found

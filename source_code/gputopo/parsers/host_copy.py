"""Host<->GPU copies: the course's CUDA program (source_code/host_copy_bench) and the PyTorch
lab (source_code/labs/host_device_copy.py). One row per line, after '#' comment lines:

    host_copy_bench:   size direction memory copies  time algbw  time algbw #wrong
                  8        h2d    pinned     20      1.52      0.01        5.10      0.00        0
    the lab:           bytes direction memory time_us GB/s check
              1048576        h2d    pinned      24.69    42.48 ok

host_copy_bench prints two times per row: the per-copy time on the GPU (copies held behind a
gate kernel and released together; N/A for pageable memory) and the latency of one copy
(start to arrival of one copy timed alone), each with its GB/s (10^9 bytes); #wrong counts
bytes that differed. Its rows read as {bytes, direction, memory, copies, gpu_us, gpu_gbs,
latency_us, latency_gbs, wrong, check}, None where it printed N/A. The lab prints one time per
row, copies queued back to back without a gate ({bytes, direction, memory, time_us, gbs,
check}): at small sizes that is the host's cost of issuing a copy, not a latency.

Both end a whole run with '# data check: ...'. Without that line the run was cut off: the
rows read so far are kept, marked truncated (truncated_line: where the text stops,
last_complete_section: the last row), and its data check is "incomplete", never "all
correct" (all_correct False); the CLI then prints the JSON, one line on stderr, and exits 2.
Any other line (a warning, a shell's note) is skipped. No measurement line at all (no GPU,
no PyTorch, a crash) is a ParseError.
"""

import re

from . import ANSI_ESCAPE, NUMBER, ParseError, last_nonblank

PROGRAM = "host_copy_bench"
LAB = "host_device_copy.py"
INCOMPLETE = "incomplete: the run stops before its '# data check' line"

_CELL = rf"({NUMBER.pattern}|N/A)"
BENCH_ROW = re.compile(
    rf"^\s*(\d+)\s+(h2d|d2h)\s+(pinned|pageable)\s+(\d+)\s+{_CELL}\s+{_CELL}"
    rf"\s+{_CELL}\s+{_CELL}\s+(\d+)\s*$"
)
ROW = re.compile(r"^\s*(\d+)\s+(h2d|d2h)\s+(pinned|pageable)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")
DEVICE = re.compile(r"^# host_device_copy: device (\d+) \((.*)\)")
BENCH_DEVICE = re.compile(
    r"^# device (\d+): (.*) \(PCI ([^,]+), compute capability ([\d.]+)\); "
    r"CUDA driver (\S+), runtime (\S+)"
)


def _number(text):
    return None if text == "N/A" else float(text)


def _bench_row(groups):
    size, direction, memory, copies, gpu_us, gpu_gbs, lat_us, lat_gbs, wrong = groups
    return {
        "bytes": int(size),
        "direction": direction,
        "memory": memory,
        "copies": int(copies),
        "gpu_us": _number(gpu_us),
        "gpu_gbs": _number(gpu_gbs),
        "latency_us": _number(lat_us),
        "latency_gbs": _number(lat_gbs),
        "wrong": int(wrong),
        "check": "ok" if int(wrong) == 0 else "WRONG",
    }


def _lab_row(groups):
    size, direction, memory, time_us, gbs, check = groups
    return {
        "bytes": int(size),
        "direction": direction,
        "memory": memory,
        "time_us": float(time_us),
        "gbs": float(gbs),
        "check": check,
    }


def parse(text):
    lines = ANSI_ESCAPE.sub("", text).splitlines()
    rows, footer = [], None
    result = {"program": None, "device": None, "gpu": None, "cuda": None}
    for line in lines:
        match = BENCH_ROW.match(line)
        if match:
            rows.append(_bench_row(match.groups()))
            result["program"] = PROGRAM
            continue
        match = ROW.match(line)
        if match:
            rows.append(_lab_row(match.groups()))
            result["program"] = result["program"] or LAB
            continue
        found = BENCH_DEVICE.match(line) or DEVICE.match(line)
        if found:
            result["device"], result["gpu"] = int(found.group(1)), found.group(2)
            if found.re is BENCH_DEVICE:
                result["cuda"] = {"driver": found.group(5), "runtime": found.group(6)}
        elif line.startswith("# data check:"):
            footer = line.split(":", 1)[1].strip()
    if not rows:
        first = next((line.strip() for line in lines if line.strip()), "nothing")
        raise ParseError(f"no measurement line (it printed: {first[:120]})")
    complete = footer is not None
    last = rows[-1]
    result.update(
        rows=rows,
        complete=complete,
        truncated=not complete,
        truncated_line=None if complete else last_nonblank(lines),
        last_complete_section=None
        if complete
        else f"the row for {last['bytes']} bytes {last['direction']} {last['memory']}",
        data_check=footer if complete else INCOMPLETE,
        all_correct=complete
        and footer.startswith("all copies correct")
        and all(r["check"] == "ok" for r in rows),
    )
    return result

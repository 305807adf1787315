"""The host<->GPU copy lab's output (source_code/labs/host_device_copy.py), one row per line:

      1048576        h2d    pinned      24.69    42.48 ok

bytes, direction (h2d or d2h), memory (pinned or pageable), time of one copy in us, GB/s
(10^9 bytes) and the data check. Lines starting with '#' are the lab's header and footer; the
footer '# data check: ...' ends a whole run, so an output without it was cut off (complete is
False, the rows read so far are kept). Any other line (a warning, a shell's note) is skipped.
No measurement line at all (no GPU, no PyTorch, a crash) is a ParseError.
"""
import re

from . import ANSI_ESCAPE, ParseError

ROW = re.compile(r"^\s*(\d+)\s+(h2d|d2h)\s+(pinned|pageable)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")
DEVICE = re.compile(r"^# host_device_copy: device (\d+) \((.*)\)")


def parse(text):
    rows, device, gpu, footer = [], None, None, None
    for line in ANSI_ESCAPE.sub("", text).splitlines():
        match = ROW.match(line)
        if match:
            size, direction, memory, time_us, gbs, check = match.groups()
            rows.append({"bytes": int(size), "direction": direction, "memory": memory,
                         "time_us": float(time_us), "gbs": float(gbs), "check": check})
            continue
        found = DEVICE.match(line)
        if found:
            device, gpu = int(found.group(1)), found.group(2)
        elif line.startswith("# data check:"):
            footer = line.split(":", 1)[1].strip()
    if not rows:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "nothing")
        raise ParseError(f"no measurement line (it printed: {first[:120]})")
    return {"device": device, "gpu": gpu, "rows": rows, "complete": footer is not None,
            "all_correct": footer == "all copies correct" and all(r["check"] == "ok" for r in rows)}

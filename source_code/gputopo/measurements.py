"""One measurement row for every tool: the P2P program, nccl-tests, the host benchmark, the CNN.

A row is a dict with exactly these fields (`FIELDS`), so one pandas table holds every tool and
the notebooks' comparisons become a groupby or a pivot:

    tool       "p2p" | "nccl-bench" | "nccl-tests" | "hostbench" | "cnn"
    system     a folder name under reference_systems/, or "this machine"
    source     "live" (measured in this session) or "recorded" (a stored file); read this
               field, never a sentence, to tell the two apart
    src, dst   text labels or None: a GPU number ("0"), the GPUs of a collective ("0,1", with
               dst None), or an endpoint ("host memory", "loopback")
    op         "unidirectional" | "bidirectional" | "latency" (P2P), the collective
               ("all_reduce", ...), "memcpy" | "pingpong" (host), "train" (CNN)
    bytes      int or None: message size; for "train", the gradient bytes all-reduced per step
    time_us    float or None: the time of one operation; for "train", one optimizer step
               (global batch / images per second)
    algbw_gbs, busbw_gbs   float or None, GB/s (10^9 bytes per second)
    transport  text or None: the path NCCL used, as the caller's label says
    settings   dict of plain values (text, numbers, bools, None): what else describes the run
               (NCCL_* variables, batch, framework, GPU count, the matrix a P2P cell came from,
               and for "train" the throughput itself: `images_per_sec`)

Choices:
- The fields stay fixed. A number that only one tool has (images/s, accuracy) lives in
  `settings`; `frame()` turns every settings key into a column of the same name, so
  `df.groupby("setting")["images_per_sec"]` works. A settings key may not repeat a field name.
- P2P: one row per GPU pair per matrix. op is "unidirectional", "bidirectional" or "latency";
  settings["p2p"] is "enabled" or "disabled"; settings["mode"] is "write" or "read" where the
  matrix says which (else None); latency rows carry settings["timer"] "gpu" or "cpu"; and
  settings["matrix"] keeps the parser's key (e.g. "unidirectional_write", "write_gpu").
  Bandwidth cells go in algbw_gbs (busbw None), latency cells in time_us. A cell the program
  printed as N/A is a row with the value None. src is the row's device number (row_indices);
  dst is the column's: the rows' devices for a whole matrix, 0..n-1 for an excerpt of some
  rows (the rule of lessons.labels_of).
- nccl-tests: one row per size, out-of-place by default (the column the course reads);
  in_place=True adds the in-place rows as well. settings["placement"] says which.
- hostbench: one row per size of a `hostbench.Series`: time_us and algbw_gbs = size / time.
- `frame(rows)`: pandas DataFrame, the fields as columns (settings flattened, see above).
- `write_rows` appends JSON Lines under the results store's lock (never overwrites);
  `read_rows` reads them back. Every bad row raises ValueError with one line.

Standard library at import; pandas is imported inside `frame`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from gputopo.parsers.p2p import matrix_labels

FIELDS = ("tool", "system", "source", "src", "dst", "op", "bytes", "time_us", "algbw_gbs",
          "busbw_gbs", "transport", "settings")
TOOLS = ("p2p", "nccl-bench", "nccl-tests", "hostbench", "cnn")
SOURCES = ("live", "recorded")
THIS_MACHINE = "this machine"

_NUMBER_FIELDS = ("time_us", "algbw_gbs", "busbw_gbs")
_TEXT_OR_NONE = ("src", "dst", "transport")
_PLAIN = (str, int, float, bool, type(None))


def row(tool: str, system: str, source: str, op: str, *, src: Optional[str] = None, dst: Optional[str] = None,
        bytes: Optional[int] = None, time_us: Optional[float] = None, algbw_gbs: Optional[float] = None,
        busbw_gbs: Optional[float] = None, transport: Optional[str] = None,
        settings: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One checked row (ValueError if a field is wrong)."""
    made = {"tool": tool, "system": system, "source": source, "src": src, "dst": dst, "op": op,
            "bytes": bytes, "time_us": time_us, "algbw_gbs": algbw_gbs, "busbw_gbs": busbw_gbs,
            "transport": transport, "settings": dict(settings or {})}
    return check_row(made)


def check_row(candidate: Any) -> Dict[str, Any]:
    """The row itself if it has exactly FIELDS with valid values; else ValueError (one line)."""
    if not isinstance(candidate, dict):
        raise ValueError(f"a measurement row must be a dict, not {type(candidate).__name__}")
    missing = [name for name in FIELDS if name not in candidate]
    if missing:
        raise ValueError(f"measurement row has no field {missing[0]!r}")
    extra = sorted(str(name) for name in candidate if name not in FIELDS)
    if extra:
        raise ValueError(f"measurement row has an unknown field {extra[0]!r} (extra values go in settings)")
    if candidate["tool"] not in TOOLS:
        raise ValueError(f"unknown tool {candidate['tool']!r} (one of {', '.join(TOOLS)})")
    if candidate["source"] not in SOURCES:
        raise ValueError(f"source must be 'live' or 'recorded', not {candidate['source']!r}")
    for name in ("system", "op"):
        if not isinstance(candidate[name], str) or not candidate[name]:
            raise ValueError(f"{name} must be non-empty text, not {candidate[name]!r}")
    for name in _TEXT_OR_NONE:
        if candidate[name] is not None and not isinstance(candidate[name], str):
            raise ValueError(f"{name} must be text or None, not {candidate[name]!r}")
    size = candidate["bytes"]
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ValueError(f"bytes must be a whole number >= 0 or None, not {size!r}")
    for name in _NUMBER_FIELDS:
        value = candidate[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{name} must be a number or None, not {value!r}")
    settings = candidate["settings"]
    if not isinstance(settings, dict):
        raise ValueError(f"settings must be a dict, not {type(settings).__name__}")
    for key, value in settings.items():
        if not isinstance(key, str) or key in FIELDS:
            raise ValueError(f"settings key {key!r} must be text and not a row field's name")
        if not isinstance(value, _PLAIN):
            raise ValueError(f"settings[{key!r}] must be text, a number, a bool or None, "
                             f"not {type(value).__name__}")
    return candidate


# --- converters: what the package's parsers return -> rows -------------------------------------

def _p2p_matrix_settings(group: str, key: str) -> Dict[str, Any]:
    """op and settings of one matrix of the p2p parser (see the module docstring)."""
    if group == "bandwidth_gbs":
        direction, kind = key.split("_", 1)   # unidirectional_write, bidirectional_disabled, ...
        op = direction
    else:
        kind, timer = key.rsplit("_", 1)      # write_gpu, disabled_cpu, ...
        op = "latency"
    p2p = "disabled" if kind == "disabled" else "enabled"
    mode = kind if kind in ("write", "read") else None
    settings = {"matrix": key, "p2p": p2p, "mode": mode}
    if op == "latency":
        settings["timer"] = timer
    return {"op": op, "settings": settings}


def from_p2p(parsed: Dict[str, Any], system: str, source: str, *, bytes: Optional[int] = None,
             settings: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Rows of every bandwidth and latency matrix of the p2p parser's result (one per cell)."""
    rows = []
    for group in ("bandwidth_gbs", "latency_us"):
        for key, matrix in parsed.get(group, {}).items():
            how = _p2p_matrix_settings(group, key)
            # a whole matrix: columns are its rows' devices; an excerpt of some rows: 0..n-1
            sources, columns = matrix_labels(parsed, key)
            for src, cells in zip(sources, matrix):
                for dst, value in zip(columns, cells):
                    values = {"time_us": value} if group == "latency_us" else {"algbw_gbs": value}
                    rows.append(row("p2p", system, source, how["op"], src=str(src), dst=str(dst),
                                    bytes=bytes if group == "bandwidth_gbs" else None,
                                    settings={**how["settings"], **(settings or {})}, **values))
    return rows


def from_nccl_tests(parsed: Dict[str, Any], system: str, source: str, *, tool: str = "nccl-tests",
                    op: Optional[str] = None, transport: Optional[str] = None, in_place: bool = False,
                    settings: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Rows of an nccl-tests table (the nccl-tests parser's result), one per size.

    op defaults to the table's own "# Collective" line; tool is "nccl-tests" or, for the
    course's own program, "nccl-bench". src is the ranks' devices, "0,1", or "host:device"
    labels when the ranks sit on several hosts; gpus is the number of ranks listed (else nGpus). settings gets gpus, nccl_version, type, redop and
    placement besides what the caller passes (a file name, NCCL_* variables).
    """
    metadata = parsed.get("metadata", {})
    op = op or metadata.get("collective")
    if not op:
        raise ValueError("the table names no collective (no '# Collective' line): pass op=")
    ranks = parsed.get("devices", [])
    across_hosts = len({rank["host"] for rank in ranks}) > 1
    devices = [f"{rank['host']}:{rank['device']}" if across_hosts else str(rank["device"]) for rank in ranks]
    gpus = len(devices) or metadata.get("n_gpus") or None
    placements = ("out_of_place", "in_place") if in_place else ("out_of_place",)
    rows = []
    for table_row in parsed["rows"]:
        for placement in placements:
            timed = table_row.get(placement)
            if timed is None:
                continue
            rows.append(row(tool, system, source, op, src=",".join(devices) or None,
                            bytes=table_row["size"], time_us=timed["time_us"], algbw_gbs=timed["algbw"],
                            busbw_gbs=timed["busbw"], transport=transport,
                            settings={"gpus": gpus, "nccl_version": metadata.get("nccl_version"),
                                      "type": table_row["type"], "redop": table_row["redop"],
                                      "placement": placement.replace("_", "-"), **(settings or {})}))
    return rows


# hostbench Series names (their start) -> (op, src, dst)
_HOST_PATHS = (("host memory copy", ("memcpy", "host memory", "host memory")),
               ("loopback", ("pingpong", "loopback", "loopback")))


def from_hostbench(series: Any, system: str = THIS_MACHINE, source: str = "live", *,
                   settings: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """Rows of a hostbench.Series (or of the dict measure_all returns), one per size."""
    if isinstance(series, dict):
        return [made for one in series.values() for made in from_hostbench(one, system, source, settings=settings)]
    path = next((how for start, how in _HOST_PATHS if series.name.startswith(start)), None)
    if path is None:
        raise ValueError(f"unknown hostbench series {series.name!r}")
    op, src, dst = path
    rows = []
    for (size, seconds), repeats in zip(series.rows, series.repeats or [None] * len(series.rows)):
        rows.append(row("hostbench", system, source, op, src=src, dst=dst, bytes=int(size),
                        time_us=seconds * 1e6, algbw_gbs=size / seconds / 1e9 if seconds > 0 else None,
                        settings={"path": series.name, "repeats": repeats, **(settings or {})}))
    return rows


# NCCL_* variables every course run sets that do not choose a path: left out of the setting label.
_BACKGROUND_VARIABLES = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_VERSION", "NCCL_SOCKET_IFNAME",
                         "NCCL_NVLS_ENABLE")


def setting_label(nccl_env: Optional[Dict[str, str]]) -> str:
    """'default', or the NCCL_* variables that choose a path: 'NCCL_P2P_LEVEL=LOC'."""
    chosen = [f"{name}={value}" for name, value in sorted((nccl_env or {}).items())
              if name.startswith("NCCL_") and name not in _BACKGROUND_VARIABLES]
    return " ".join(chosen) or "default"


def from_cnn_record(record: Dict[str, Any], system: str, source: str, *, transport: Optional[str] = None,
                    settings: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One "train" row of a CNN record (the JSON that cnn_fmnist.py --json-out writes).

    time_us is one step: global batch / median images per second; bytes the gradient bytes;
    settings hold images_per_sec (the median) and its min and max, the setting label, the
    NCCL_* variables, framework, batch_per_worker, workers (the GPU count), test_accuracy.
    """
    summary = record.get("summary") or {}
    rate = summary.get("images_per_sec_median")
    if not isinstance(rate, (int, float)):
        raise ValueError("CNN record has no summary images_per_sec_median")
    workers = record.get("workers")
    batch = record.get("batch_per_worker")
    global_batch = record.get("global_batch") or (workers * batch if workers and batch else None)
    nccl_env = record.get("nccl_env") or {}
    return row("cnn", system, source, "train", src=record.get("cuda_visible_devices"),
               bytes=record.get("gradient_bytes"), time_us=global_batch / rate * 1e6 if global_batch else None,
               transport=transport,
               settings={"images_per_sec": rate, "images_per_sec_min": summary.get("images_per_sec_min"),
                         "images_per_sec_max": summary.get("images_per_sec_max"),
                         "setting": setting_label(nccl_env), **{k: str(v) for k, v in sorted(nccl_env.items())},
                         "framework": record.get("framework"), "batch_per_worker": batch,
                         "workers": workers, "test_accuracy": summary.get("test_accuracy"),
                         **(settings or {})})


# --- one table, and the append-only store -----------------------------------------------------

def frame(rows: Iterable[Dict[str, Any]]):
    """A pandas DataFrame: the fields as columns, then one column per settings key (first seen
    first; None/NaN where a row lacks it). The settings column itself is left out."""
    import pandas as pd

    flat, extra = [], []
    for one in rows:
        check_row(one)
        for key in one["settings"]:
            if key not in extra:
                extra.append(key)
        flat.append({**{name: one[name] for name in FIELDS if name != "settings"}, **one["settings"]})
    columns = [name for name in FIELDS if name != "settings"] + extra
    table = pd.DataFrame(flat, columns=columns)
    return table.astype({"bytes": "Int64"}) if len(table) else table


def write_rows(path: Any, rows: Iterable[Dict[str, Any]]) -> Path:
    """Append rows as JSON Lines to `path` (created if absent, never truncated).

    Every row is checked first, so a bad row writes nothing; the lines are written in one
    append under the results store's lock (gputopo.results), so writers never interleave.
    """
    from .results import append_locked

    checked = [check_row(one) for one in rows]
    encoded = "".join(json.dumps(one, sort_keys=False) + "\n" for one in checked).encode("utf-8")
    return append_locked(Path(path), encoded)


def read_rows(path: Any) -> List[Dict[str, Any]]:
    """Every row of a JSON Lines file, in order; [] if the file does not exist.
    A line that is not JSON or not a valid row: ValueError naming the file and line."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rows.append(check_row(json.loads(line)))
            except json.JSONDecodeError:
                raise ValueError(f"{path}:{number}: not a JSON line") from None
            except ValueError as error:
                raise ValueError(f"{path}:{number}: {error}") from None
    return rows


# --- every recorded file of reference_systems/ as rows ----------------------------------------

# all_reduce_perf-g8.txt, nccl-bench-all_gather-g2.txt: the collective when the table has no line for it
_OP_IN_NAME = re.compile(r"(?:nccl-bench-)?([a-z]+(?:_[a-z]+)*?)(?:_perf)?(?:-.*)?\.txt$")


def recorded_rows(systems: Optional[Iterable[str]] = None, *, transport_of: Any = None) -> List[Dict[str, Any]]:
    """Rows of every recorded P2P matrix, nccl-tests table and CNN record (source "recorded").

    settings["file"] names the file each row came from. `transport_of(text, file name)`, when
    given (the notebook glue's label function), fills nccl-tests rows' transport; else None.
    Tables the parser finds cut short keep their whole rows (strict=False).
    """
    from . import reference

    rows: List[Dict[str, Any]] = []
    for system in systems or reference.list_systems():
        for name in reference.find(system, "p2p"):
            rows += from_p2p(reference.load(system, "p2p", filename=name), system, "recorded",
                             settings={"file": name})
        for name in reference.find(system, "nccl-tests"):
            parsed = reference.load(system, "nccl-tests", filename=name, strict=False)
            label = transport_of(reference.read_text(system, name), name) if transport_of else None
            named = _OP_IN_NAME.match(name)
            rows += from_nccl_tests(parsed, system, "recorded", transport=label, settings={"file": name},
                                    op=parsed["metadata"].get("collective") or (named and named.group(1)),
                                    tool="nccl-bench" if name.startswith("nccl-bench") else "nccl-tests")
        folder = reference.REFERENCE_DIR / system / "horovod-cnn"
        for record_file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            record = json.loads(record_file.read_text(encoding="utf-8"))
            rows.append(from_cnn_record(record, system, "recorded", settings={"file": record_file.name}))
    return rows

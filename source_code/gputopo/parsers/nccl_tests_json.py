"""Parser for the JSON file that nccl-tests writes with `-J FILE` (nccl-tests 2.19).

The schema, read from NVIDIA/nccl-tests src/util.cu (jsonOutputInit, writeDeviceReport,
writeBenchmarkLine*, writePerIterReport, writeResultFooter, writeErrors, jsonOutputFinalize)
and src/common.cu at tags v2.19.0 (JSON_FILE_VERSION 1), v2.19.2 (2) and v2.19.6 (3):

    {"version": 3, "start_time": "2026-12-05 10:00:00", "args": [argv...], "env": ["K=V"...],
     "nccl_version": 23007,                                   (NCCL_VERSION_CODE of the library)
     "config": {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor" | "step_bytes",
                "warmup_iters", "iterations", "aggregated_iterations", "validation", "graph",
                "blocking_collectives": "true"|"false", ["per_iter_timing", "per_iter_skip" (2+)],
                "parallel_init", "devices": [{"rank", "group", "pid", "hostname", "device",
                                              "device_hex", "device_info"}]},
     "results": [{"size", "count", "type", "redop", "root": "    -1" (printf "%6i"),
                  "out_of_place": {"time" | "cpu_time", "alg_bw", "bus_bw", "nwrong"} | null,
                  ["out_of_place_per_iter": {...} (2+, with -I 1)],
                  "in_place": {...}, ["in_place_per_iter": {...}],
                  "actual_iterations", "experiment_name"}],
     "out_of_bounds": {"count", "okay": "true"|"false"},
     "average_bus_bandwidth": {"bandwidth", "okay": "true"|"false"|"unchecked"},
     "errors": [...], "end_time": "..."}

Doubles are printed with "%lf" ("nan" as a string; an infinity would be a bare inf, which is
read as null), booleans as the strings "true"/"false", nwrong as a double or null (-c 0).

Returns the `nccl-tests` text parser's result (rows with out_of_place/in_place time_us, algbw,
busbw, wrong; metadata; devices), so both read alike, plus `json_version`, `start_time`,
`end_time`, `args`, `errors` and `step_factor`/`step_bytes`; a row keeps its per-iteration
statistics under `per_iteration` ({"out_of_place": {...}, "in_place": {...}}) when the run
had them. A file that stops early (a run killed while writing it) or a run that ended before
its summary (no average_bus_bandwidth) raises ParseError(truncated=True) with the rows read
whole in `partial`.
"""

import os

from . import ParseError
from .jsontext import load
from .nccl_tests import version_of_code

_TIMED = {"alg_bw": "algbw", "bus_bw": "busbw"}


def parse(text):
    """Parse an nccl-tests `-J` JSON file; see the module docstring."""
    document, cut_line = load(text)
    if not isinstance(document, dict) or not ({"results", "config"} & set(document)):
        raise ParseError('not an nccl-tests JSON file (no "config" or "results" at its top)', 1)
    try:
        result = _read(document, cut_line is not None)
    except (TypeError, ValueError, AttributeError, KeyError) as error:
        raise ParseError(f"nccl-tests JSON with a value of the wrong kind: {error}", 1) from None
    last = result["last_complete_section"] = _last(result["rows"])
    if cut_line is not None:
        result.update(truncated=True, truncated_line=cut_line)
        raise ParseError(
            "the JSON file stops before its end (a run killed while writing it?)",
            cut_line,
            truncated=True,
            last_complete=last,
            partial=result,
        )
    if "average_bus_bandwidth" not in document:
        errors = "; ".join(str(e) for e in result["errors"]) or "no error recorded"
        line = max(1, len(text.rstrip().splitlines()))
        result.update(truncated=True, truncated_line=line)
        raise ParseError(
            f"the run ended before its summary ({errors})",
            line,
            truncated=True,
            last_complete=last,
            partial=result,
        )
    result["last_complete_section"] = None
    return result


def _last(rows):
    return f"the row for {rows[-1]['size']} bytes" if rows else None


def _read(document, cut):
    config = document.get("config") or {}
    rows = [
        _row(entry)
        for entry in document.get("results") or []
        if not cut or ("in_place" in entry and "actual_iterations" in entry)
    ]
    metadata = {}
    for key, name in (
        ("nthreads", "n_threads"),
        ("ngpus", "n_gpus"),
        ("minimum_bytes", "min_bytes"),
        ("maximum_bytes", "max_bytes"),
        ("warmup_iters", "warmup_iters"),
        ("iterations", "iters"),
        ("validation", "validation"),
    ):
        if isinstance(config.get(key), (int, float)):
            metadata[name] = int(config[key])
    args = [str(arg) for arg in document.get("args") or []]
    if args:
        program = os.path.basename(args[0])
        program = program[: -len("_mpi")] if program.endswith("_mpi") else program
        metadata["collective"] = program[: -len("_perf")] if program.endswith("_perf") else program
    if isinstance(document.get("nccl_version"), int):
        metadata["nccl_version"] = version_of_code(document["nccl_version"])
    bandwidth = document.get("average_bus_bandwidth") or {}
    if isinstance(bandwidth.get("bandwidth"), (int, float)):
        metadata["avg_busbw_gbs"] = float(bandwidth["bandwidth"])
    bounds = document.get("out_of_bounds") or {}
    if isinstance(bounds.get("count"), int):
        metadata["out_of_bounds"] = bounds["count"]
        metadata["out_of_bounds_ok"] = str(bounds.get("okay")).lower() == "true"
    devices = [
        {
            "rank": d.get("rank"),
            "pid": d.get("pid"),
            "host": d.get("hostname"),
            "device": d.get("device"),
            "bus_id": d.get("device_hex"),
            "name": d.get("device_info"),
            "group": d.get("group"),
        }
        for d in config.get("devices") or []
        if isinstance(d, dict)
    ]
    return {
        "rows": rows,
        "metadata": metadata,
        "devices": devices,
        "truncated": False,
        "truncated_line": None,
        "last_complete_section": None,
        "header_found": True,
        "json_version": document.get("version"),
        "start_time": document.get("start_time"),
        "end_time": document.get("end_time"),
        "args": args,
        "errors": [str(e) for e in document.get("errors") or []],
        "step_factor": config.get("step_factor"),
        "step_bytes": config.get("step_bytes"),
    }


def _row(entry):
    row = {
        "size": int(entry["size"]),
        "count": int(entry["count"]),
        "type": str(entry["type"]),
        "redop": str(entry["redop"]),
    }
    if entry.get("root") is not None:
        row["root"] = int(str(entry["root"]).strip())
    row["out_of_place"] = _timed(entry.get("out_of_place"))
    row["in_place"] = _timed(entry.get("in_place"))
    per_iteration = {
        place: entry[f"{place}_per_iter"]
        for place in ("out_of_place", "in_place")
        if isinstance(entry.get(f"{place}_per_iter"), dict)
    }
    if per_iteration:
        row["per_iteration"] = per_iteration
    return row


def _timed(group):
    """A timed group as the text parser gives it; None where nccl-tests wrote null."""
    if not isinstance(group, dict):
        return None
    time = group.get("time", group.get("cpu_time"))
    numbers = {"time_us": _number(time)}
    numbers.update({name: _number(group.get(key)) for key, name in _TIMED.items()})
    wrong = _number(group.get("nwrong"))
    numbers["wrong"] = int(wrong) if wrong is not None and wrong == int(wrong) else wrong
    return numbers


def _number(value):
    """A number as written; None for null, "nan" or anything that is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)

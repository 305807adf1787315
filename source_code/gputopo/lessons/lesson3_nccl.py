"""Glue for notebook 3 (NCCL and P2P levels): tables built from the runner, parsers and links.

Nothing here launches, parses or draws on its own terms; it arranges what `gputopo.runner`,
`gputopo.parsers.nccl_log`, `gputopo.reference`, `gputopo.links` and `gputopo.alphabeta`
provide, so that the notebook's cells stay one or two lines long.

    from gputopo.lessons import lesson3_nccl as nl
    print(nl.level_table())                 # expected transport: each setting x each path type
    print(nl.channel_table(parsed_log))     # NCCL connection lines grouped by transport
    rows = nl.recorded_runs()               # runner.reference_sweep() + each log's epoch range
    for (system, batch), group in nl.comparable_groups(rows).items(): print(nl.runs_table(group))
    live = nl.run_live(machine)             # sweep on >= 2 GPUs, else one CPU/Gloo run
    nl.allreduce_share(params, link_gbs, images_per_sec, batch_per_worker)
    nl.compare_repeats(a, b)                # a change against the run-to-run spread

Standard library only at import time.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo import linkcodes, runner
from gputopo.selfcheck import text_table

# Path types of NCCL, closest first, that a pair of GPUs in one server can have (LOC is the
# same GPU, NVB a hop through a third GPU's NVLink; neither is a pair the course runs).
PATH_COLUMNS = linkcodes.TOPO_PATH_TYPES


# ------------------------------------------------------------------------------------------
# What NCCL should choose
# ------------------------------------------------------------------------------------------

def level_settings() -> List[Tuple[str, Dict[str, str]]]:
    """(label, environment) for the default, each NCCL_P2P_LEVEL and the two disable switches."""
    legacy: Dict[str, List[int]] = {}
    for number, name in sorted(runner.LEGACY_P2P_LEVELS.items()):
        legacy.setdefault(name, []).append(number)
    settings = [("no variable set (default)", {})]
    for fact in runner.P2P_LEVEL_FACTS:
        numbers = legacy.get(fact["level"])
        label = f"NCCL_P2P_LEVEL={fact['level']}"
        if numbers:
            label += " (or " + " or ".join(str(n) for n in numbers) + ")"
        settings.append((label, {"NCCL_P2P_LEVEL": fact["level"]}))
    settings.append(("NCCL_P2P_DISABLE=1", {"NCCL_P2P_DISABLE": "1"}))
    settings.append(("NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1",
                     {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}))
    return settings


def level_rows(cpu_vendor: str = "GenuineIntel") -> List[List[str]]:
    """One row per setting: its label, then the transport NCCL picks for each path type."""
    return [[label] + [runner.expected_transport(env, path, cpu_vendor) or "?" for path in PATH_COLUMNS]
            for label, env in level_settings()]


def level_table(cpu_vendor: str = "GenuineIntel") -> str:
    """level_rows() as aligned text, with the path types as column titles."""
    return text_table(level_rows(cpu_vendor), header=("setting \\ path between the GPUs",) + PATH_COLUMNS)


# ------------------------------------------------------------------------------------------
# NCCL log -> transport table
# ------------------------------------------------------------------------------------------

def channel_rows(parsed: Dict[str, Any]) -> List[Tuple[str, str, int, str]]:
    """(transport, 'via' text, number of connection lines, the rank pairs) per kind of connection.

    `parsed` is what `gputopo.parsers.nccl_log.parse` returns.
    """
    groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for channel in parsed.get("channels", []):
        groups.setdefault((channel["transport"], channel["via"]), []).append(channel)
    rows = []
    for (transport, via), channels in sorted(groups.items()):
        pairs = sorted({f"{c['src']}->{c['dst']}" for c in channels})
        rows.append((transport, via, len(channels), " ".join(pairs)))
    return rows


def channel_table(parsed: Dict[str, Any]) -> str:
    rows = channel_rows(parsed)
    if not rows:
        return "no NCCL connection lines in this log"
    return text_table(rows, header=("transport", "via (as NCCL printed it)", "connections", "rank -> rank"))


# ------------------------------------------------------------------------------------------
# Runs: recorded and live, in one tidy shape
# ------------------------------------------------------------------------------------------

def recorded_runs() -> List[Dict[str, Any]]:
    """One row per (system, pair, setting, batch, framework) of the recorded runs.

    The course's own H200 recordings hold three runs per setting: median and range over those
    runs (`range_over` "3 runs"). The DGX logs of the old lab are one run each: their range is
    over that run's epochs (`range_over` "epochs of 1 run"), a weaker measure of noise.
    """
    from gputopo import reference
    rows = []
    for row in runner.summarize(runner.reference_sweep()):
        row = dict(row)
        if row["runs"] > 1:
            row["range_over"] = f"{row['runs_ok']} runs"
        else:
            row["images_per_sec_min"] = row["images_per_sec_max"] = None
            row["range_over"] = "-"
            log_file = row.get("log_file")  # reference_systems/<system>/<file> of a one-log row
            if row.get("epoch_rates"):
                rates = row["epoch_rates"]
                row["images_per_sec_min"], row["images_per_sec_max"] = min(rates), max(rates)
                row["range_over"] = "epochs of 1 run"
            elif log_file:
                system, name = log_file.split("/", 1)
                epochs = reference.load(system, "horovod", filename=name)["epochs"]
                rates = [e["images_per_sec"] for e in epochs]
                row["images_per_sec_min"], row["images_per_sec_max"] = min(rates), max(rates)
                row["range_over"] = "epochs of 1 run"
        rows.append(row)
    return rows


def comparable_groups(rows: Sequence[Dict[str, Any]]) -> Dict[Tuple[str, Any], List[Dict[str, Any]]]:
    """Rows grouped by (system, batch per worker): only rows inside one group may be compared."""
    groups: Dict[Tuple[str, Any], List[Dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row.get("system", ""), row.get("batch_per_worker")), []).append(row)
    return groups


def _rate(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def runs_table(rows: Sequence[Dict[str, Any]]) -> str:
    """The transport NCCL chose beside the throughput, one line per setting (or per run).

    Refuses rows with different batch sizes: images/s of different batches do not compare.
    """
    if not rows:
        return "No live runs."
    batches = {row.get("batch_per_worker") for row in rows}
    if len(batches) > 1:
        raise ValueError(f"rows with different batch sizes per worker {sorted(map(str, batches))}: "
                         f"split them with comparable_groups() first")
    table = []
    for row in rows:
        spread = "-"
        if row.get("images_per_sec_min") is not None:
            spread = f"{_rate(row['images_per_sec_min'])}-{_rate(row['images_per_sec_max'])}"
        chosen = row.get("transports") or ("no NCCL (one GPU)" if "," not in str(row["pair"])
                                           else "(no log)" if row.get("ok") else "failed")
        table.append((row["pair"], row.get("link") or "?", row["setting"],
                      row.get("framework") or "?", row.get("expected_transport") or "?", chosen,
                      _rate(row.get("images_per_sec_median")) if row.get("ok") else "-", spread,
                      row.get("range_over") or (f"{row['runs_ok']} runs" if row.get("runs") else "-")))
    return text_table(table, header=("GPUs", "link", "setting", "framework", "expected",
                                     "NCCL log says", "images/s (median)", "range", "range over"))


def differs(rows: Sequence[Dict[str, Any]], setting: str, baseline: str = "default") -> str:
    """Whether `setting` differs from `baseline` beyond the noise of repeated runs.

    A difference counts only when the two ranges (lowest to highest run) do not overlap;
    otherwise it is within what repeating the same setting already gives.
    """
    a = next(r for r in rows if r["setting"] == baseline)
    b = next(r for r in rows if r["setting"] == setting)
    change = (b["images_per_sec_median"] / a["images_per_sec_median"] - 1) * 100
    if None in (a.get("images_per_sec_min"), b.get("images_per_sec_min")):
        return f"{change:+.1f} % (no range known: cannot tell from noise)"
    apart = b["images_per_sec_max"] < a["images_per_sec_min"] or b["images_per_sec_min"] > a["images_per_sec_max"]
    return f"{change:+.1f} % " + ("(ranges apart: a real difference)" if apart
                                 else "(ranges overlap: within the noise of repeated runs)")


@dataclasses.dataclass
class LiveRuns:
    """What run_live() did: a sentence, the rows, the exact command and log of the last run."""
    message: str
    rows: List[Dict[str, Any]]
    command: List[str]
    log_path: Optional[str]
    result: Optional[runner.RunResult] = None  # the CPU run (None after a GPU sweep)
    source: str = "live"  # "live", or "reference" when nothing ran and recorded data stands in
    runs: Optional[List[Dict[str, Any]]] = None  # every run of a GPU sweep (rows: per setting)


def _row_of_cpu_run(result: runner.RunResult) -> Dict[str, Any]:
    return {"system": "this machine (CPU)", "pair": "CPU x2", "link": "none (two processes)",
            "setting": "default", "env": {}, "expected_transport": "no NCCL",
            "framework": result.framework, "source": "live", "runs": 1,
            "runs_ok": int(result.ok), "range_over": "epochs of 1 run",
            "transports": "Gloo, no NCCL" if result.ok else "",
            "batch_per_worker": result.batch_per_worker,
            "images_per_sec_median": result.images_per_sec_median,
            "images_per_sec_min": (result.summary or {}).get("images_per_sec_min"),
            "images_per_sec_max": (result.summary or {}).get("images_per_sec_max"),
            "ok": result.ok, "reason": result.reason}


# GPUTOPO_LIVE_CNN=0 skips notebook 3's live training (a dry run of the course on a slow
# machine; the stand-in machines of the tests): the notebook then shows only recorded runs.
LIVE_SWITCH = "GPUTOPO_LIVE_CNN"


def run_live(machine, *, cpu_timeout: float = 120.0, gpu_timeout: float = runner.DEFAULT_TIMEOUT_S,
             repeats: int = 3, progress=print, **run_kwargs) -> LiveRuns:
    """The live part of the notebook, whatever the machine has.

    Two or more GPUs: runner.sweep() over the best and worst pair, every setting `repeats`
    times, summarized to median and range per setting (a progress line per run); when the
    first run fails (e.g. Horovod missing) the others are not tried and `source` says the
    notebook shows recorded data. Fewer GPUs: one short CPU run with Gloo (a pair needs two GPUs).
    GPUTOPO_LIVE_CNN=0 in the environment: nothing runs, and `source` says "reference".
    """
    from gputopo import results

    if os.environ.get(LIVE_SWITCH) == "0":
        return LiveRuns(f"Live CNN runs are switched off here ({LIVE_SWITCH}=0): the recorded runs "
                        "below stand in (recorded data, not this machine).", [], [], None,
                        source="reference")
    if runner.usable_gpu_count(machine) >= 2 and getattr(machine, "best_pair", None):
        before = len(results.load_records(runner.RESULT_KIND))
        runs = runner.sweep(machine=machine, timeout=gpu_timeout, repeats=repeats,
                            progress=progress, **run_kwargs)
        rows = runner.summarize(runs)
        good = sum(r["ok"] for r in runs)
        framework = next((r["framework"] for r in runs if r.get("framework")), None)
        if good == 0:
            message = (f"The live GPU sweep did not run: {runs[0]['reason']}. The recorded runs "
                       f"below show every setting instead (recorded data, not this machine).")
            source = "reference"
        else:
            message = ("Live sweep on this machine" + (f" with {framework}" if framework else "")
                       + f": {good} of {len(runs)} runs succeeded ({repeats} per setting).")
            source = "live"
        new = results.load_records(runner.RESULT_KIND)[before:]
        last = new[-1] if new else {}
        return LiveRuns(message, rows, last.get("command") or [], last.get("log_path"),
                        source=source, runs=runs)

    result = runner.run_experiment(gpus=None, machine=machine, timeout=cpu_timeout, **run_kwargs)
    gpus, usable = getattr(machine, "gpu_count", 0) or 0, runner.usable_gpu_count(machine)
    why = ("no GPU is visible" if gpus == 0 else
           "a GPU pair needs two GPUs and this machine has one" if gpus == 1 else
           f"{gpus} GPUs are listed but this job may use {usable} of them (CUDA_VISIBLE_DEVICES "
           f"or the CUDA driver)")
    if result.ok:
        message = (f"One live run on the CPU ({why}) with {result.framework}: two Horovod "
                   f"workers, Gloo all-reduce, {result.duration:.0f} s in all.")
    else:
        message = f"The live CPU run did not finish: {result.reason}"
    return LiveRuns(message, [_row_of_cpu_run(result)], result.command, result.log_path, result,
                    source="live" if result.ok else "reference")


def live_log_table(live: LiveRuns) -> str:
    """The last live run's NCCL connections as a table; for a run without NCCL lines (CPU and
    Gloo), the lines the CNN script printed instead."""
    from gputopo.parsers import ParseError
    from gputopo.parsers.nccl_log import parse
    if not live.log_path:
        return "No log: the run did not start."
    with open(live.log_path, encoding="utf-8", errors="replace") as fh:
        log = fh.read()
    try:
        parsed = parse(log)
    except ParseError:
        parsed = {"channels": []}
    if parsed["channels"]:
        return channel_table(parsed)
    lines = [line for line in log.splitlines() if re.search(r"\b(WORKER|EPOCH|SUMMARY) ", line)]
    return ("No NCCL connection lines in this log (Gloo did the all-reduce). What the workers printed:\n"
            + ("\n".join(lines) if lines else "(nothing)"))


# ------------------------------------------------------------------------------------------
# Why this CNN barely notices
# ------------------------------------------------------------------------------------------

def allreduce_share(parameters: int, link_gbs: float, images_per_sec: float, batch_per_worker: int,
                    workers: int = 2, bytes_per_parameter: int = 4) -> Dict[str, float]:
    """Gradient bytes per step, their ring all-reduce time over a link, and its share of a step.

    The step time comes from the measured throughput (lesson5_collectives.step_time_ms): all workers
    together process workers x batch_per_worker images per step. The all-reduce time is the bandwidth term of the
    ring model (alphabeta.ring_allreduce_time_us with alpha = 0): a lower bound for the
    transfer, and an upper bound for what it adds to a step when nothing overlaps it.
    """
    from gputopo import alphabeta
    from gputopo.lessons.lesson5_collectives import step_time_ms
    gradient_bytes = parameters * bytes_per_parameter
    step_ms = step_time_ms(images_per_sec, workers, batch_per_worker)
    allreduce_ms = alphabeta.ring_allreduce_time_us(gradient_bytes, workers, 0.0, link_gbs) / 1e3
    return {"gradient_mb": gradient_bytes / 1e6, "allreduce_ms": allreduce_ms,
            "step_ms": step_ms, "share": allreduce_ms / step_ms}


def relative_change(rows: Sequence[Dict[str, Any]], baseline: str) -> List[Tuple[str, str, str]]:
    """(pair, setting, change of median images/s against the `baseline` setting of the first pair)."""
    base = next(r for r in rows if r["setting"] == baseline)["images_per_sec_median"]
    return [(r["pair"], r["setting"], f"{(r['images_per_sec_median'] / base - 1) * 100:+.1f} %")
            for r in rows if r.get("images_per_sec_median") is not None]


# The course's NCCL benchmark on the same H200 pair, one all_reduce table per transport
# (reference_systems/h200-nvswitch-pair/, notebook 5 plots them).
TRANSPORT_BENCHMARKS = (
    ("P2P (default)", "nccl-bench-all_reduce.txt"),
    ("SHM (NCCL_P2P_LEVEL=LOC)", "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt"),
    ("NET/Socket (P2P and SHM disabled)", "nccl-bench-all_reduce-sockets.txt"),
)


def time_at_size(rows: Sequence[Dict[str, Any]], size: float) -> float:
    """Out-of-place time (us) of an nccl-tests table at `size` bytes, interpolated linearly
    between the two measured sizes around it (the table doubles the size each row)."""
    points = sorted((r["size"], r["out_of_place"]["time_us"]) for r in rows
                    if r["out_of_place"].get("time_us") is not None)
    for (s0, t0), (s1, t1) in zip(points, points[1:]):
        if s0 <= size <= s1:
            return t0 + (t1 - t0) * (size - s0) / (s1 - s0)
    raise ValueError(f"{size:.0f} bytes lies outside the measured sizes "
                     f"{points[0][0]}-{points[-1][0]}")


def gradient_allreduce_rows(gradient_bytes: int, step_ms: float,
                            system: str = "h200-nvswitch-pair") -> List[Tuple[str, str, str, str]]:
    """(transport, busbw at that size, measured all_reduce time, share of one training step)
    for one all-reduce of the CNN's gradients, read from the recorded NCCL benchmark tables.

    The share is an upper bound of what the transfer adds to a step: Horovod starts reducing
    the first gradients while backpropagation is still computing the others.
    """
    from gputopo import reference
    out = []
    for label, filename in TRANSPORT_BENCHMARKS:
        rows = reference.load(system, "nccl-tests", filename=filename)["rows"]
        us = time_at_size(rows, gradient_bytes)
        busbw = gradient_bytes / (us * 1e-6) / 1e9  # 2 GPUs: busbw = algbw (factor 2(n-1)/n = 1)
        out.append((label, f"{busbw:,.1f} GB/s", f"{us / 1e3:.3f} ms",
                    f"{us / 1e3 / step_ms * 100:.1f} %"))
    return out


# ------------------------------------------------------------------------------------------
# Reading NCCL's own log
# ------------------------------------------------------------------------------------------

# What to look for in an NCCL_DEBUG=INFO log, in the order NCCL prints it: (pattern, what the
# line tells). The first line of rank 0 that matches each pattern is shown.
LOG_LANDMARKS = (
    (r"NCCL version", "the library's version and the CUDA it was built for"),
    (r"_ENABLE set by environment|P2P_LEVEL set by environment|set by environment to",
     "every NCCL variable read from the environment is echoed"),
    (r"Bootstrap: Using", "the socket the ranks use to exchange set-up information"),
    (r"ncclCommInitRank .* Init START", "this rank: CUDA device, NVML (nvidia-smi) index, PCI bus id"),
    (r"Affinity for GPU|Setting affinity", "CPU cores NCCL's threads may use (the GPU's NUMA node)"),
    (r"nRanks \d+ nNodes", "the communicator: ranks, nodes, ranks on this node"),
    (r"Channel 00/\d+ :", "ring 0 of N channels and the order of ranks around it"),
    (r"Trees \[0\]", "trees per channel: child/child/child -> me -> parent (-1: none)"),
    (r"coll channels", "channels per algorithm; 'nvls channels' is NVLink SHARP (0 when off)"),
    (r"Init COMPLETE", "set-up done"),
    (r"Channel 00/0 : |Channel 00 : ", "the transport of one connection: rank[GPU] -> rank[GPU] via ..."),
)


def annotated_log(text: str, rank: int = 0) -> List[Tuple[str, str]]:
    """(line, meaning) for each landmark of LOG_LANDMARKS found in rank `rank`'s NCCL INFO lines.

    Launcher prefixes ("[0]<stdout>:") and the host:pid:tid prefix are cut so the line reads
    as NCCL wrote it.
    """
    own = []
    for line in text.splitlines():
        prefix = re.match(r"\[(\d+)\]<std(?:out|err)>:", line)
        if prefix and int(prefix.group(1)) != rank:
            continue
        if "NCCL INFO" in line:
            own.append("NCCL INFO" + line.split("NCCL INFO", 1)[1])
    out = []
    for pattern, meaning in LOG_LANDMARKS:
        hit = next((l for l in own if re.search(pattern, l)), None)
        if hit is not None:
            out.append((hit if len(hit) <= 110 else hit[:62] + " ... " + hit[-43:], meaning))
    return out


# "Channel 03/24 :    0   1": ring 3 of 24 and its ranks (connection lines go on with "[" or "->").
_RING_CHANNELS = re.compile(r"Channel \d+/(\d+) :((?:\s+\d+)+)\s*$", re.MULTILINE)


def ring_channels(text: str) -> Optional[int]:
    """How many channels (rings) NCCL opened, from its 'Channel 00/24 : 0 1' lines."""
    counts = [int(m.group(1)) for m in _RING_CHANNELS.finditer(text)]
    return max(counts) if counts else None


def channel_count_rows() -> List[Tuple[str, str, str, str, str]]:
    """(system, GPUs, setting, transport, channels) for the first recorded log of each setting."""
    rows, seen = [], set()
    for row in runner.reference_sweep():
        key = (row["system"], row["pair"], row["setting"])
        if "," not in row["pair"] or not row.get("log_file") or key in seen:
            continue
        seen.add(key)
        from gputopo import reference
        file = reference.REFERENCE_DIR / row["log_file"]
        if not file.is_file():
            continue
        count = ring_channels(file.read_text(encoding="utf-8", errors="replace"))
        rows.append((row["system"], row["pair"], row["setting"], row.get("transports") or "?",
                     "?" if count is None else str(count)))
    return rows


def compare_repeats(baseline: Sequence[float], other: Sequence[float]) -> Dict[str, Any]:
    """Is `other` different from `baseline`, given the run-to-run spread of both?

    Each argument holds repeated measurements of one setting (images/s of several runs or
    epochs). Returns {"change": relative change of the medians, "baseline_range",
    "other_range": (min, max), "spread": the larger relative range of the two
    ((max - min) / median), "verdict"}. The verdict is "beyond the run-to-run spread" only when
    the two ranges do not overlap and the change is larger than the larger spread; otherwise
    "within the run-to-run spread": a -3.9 % and a -6.3 % change are judged by the same rule,
    not by their size alone. At least two values each, else ValueError.
    """
    import statistics

    if len(baseline) < 2 or len(other) < 2:
        raise ValueError("give at least two repeated measurements of each setting")
    b_med, o_med = statistics.median(baseline), statistics.median(other)
    b_range, o_range = (min(baseline), max(baseline)), (min(other), max(other))
    spread = max((b_range[1] - b_range[0]) / b_med, (o_range[1] - o_range[0]) / o_med)
    change = o_med / b_med - 1
    separate = o_range[1] < b_range[0] or o_range[0] > b_range[1]
    verdict = ("beyond the run-to-run spread" if separate and abs(change) > spread
               else "within the run-to-run spread")
    return {"change": change, "baseline_range": b_range, "other_range": o_range, "spread": spread, "verdict": verdict}

"""Glue for notebook 5 (NCCL and P2P levels): tables built from the runner, parsers and links.

Nothing here launches, parses or draws on its own terms; it arranges what `gputopo.runner`,
`gputopo.parsers.nccl_log`, `gputopo.reference`, `gputopo.links` and `gputopo.alphabeta`
provide, so that the notebook's cells stay one or two lines long.

    from gputopo.lessons import lesson3_nccl as nl
    print(nl.level_table("GenuineIntel", "2.28.3"))  # expected transport: setting x path type
    print(nl.default_level_table())         # NCCL's default P2P level by release and CPU
    print(nl.text_table(nl.shm_exception_rows()))  # NET instead of SHM, containers, NVML
    print(nl.channel_table(parsed_log))     # NCCL connection lines grouped by transport
    rows = nl.recorded_runs()               # runner.reference_sweep() + each log's epoch range
    for (system, batch), group in nl.comparable_groups(rows).items(): print(nl.runs_table(group))
    live = nl.run_live(machine)             # sweep on >= 2 GPUs, else one CPU/Gloo run
    nl.allreduce_share(params, link_gbs, images_per_sec, batch_per_worker)
    nl.compare_repeats(a, b)                # a change against the run-to-run spread
    nl.run_to_run_noise()                   # THE course's noise figure (notebook 4 imports it too)
    nl.differs(rows, "NCCL_P2P_LEVEL=LOC")  # a setting against the default, with n and chance
    print(nl.format_annotated_log(nl.annotated_log(log_text)))  # NCCL's own lines, whole

Standard library only at import time.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo import linkcodes, ncclpaths, runner
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


def level_rows(cpu_vendor: str = "GenuineIntel", nccl_version: Optional[str] = None,
               local_gpus: Optional[int] = 2) -> List[List[str]]:
    """One row per setting: its label, then the transport NCCL picks for each path type
    ("?" where it cannot be told), under the rules of `nccl_version` (None: the newest) for a job
    with `local_gpus` GPUs in the node and no network card in the node (nics=()), so that
    ncclTopoCheckNet can never prefer NET."""
    return [[label] + [runner.expected_transport(env, path, cpu_vendor, nccl_version=nccl_version,
                                                 local_gpus=local_gpus, nics=()) or "?"
                       for path in PATH_COLUMNS]
            for label, env in level_settings()]


def level_table(cpu_vendor: str = "GenuineIntel", nccl_version: Optional[str] = None,
                local_gpus: Optional[int] = 2) -> str:
    """level_rows() as aligned text, with the path types as column titles."""
    return text_table(level_rows(cpu_vendor, nccl_version, local_gpus),
                      header=("setting \\ path between the GPUs",) + PATH_COLUMNS)


# (label, cpu_vendor, GPUs of the job in the node) for the table of defaults by release.
DEFAULT_CPUS = (("Intel", "GenuineIntel", 8), ("ARM", "aarch64", 8), ("AMD, 2 GPUs", "AuthenticAMD", 2),
                ("AMD, 4-8 GPUs", "AuthenticAMD", 8))
# One release of each row of ncclpaths.DEFAULT_LEVEL_BY_VERSION (2.4-2.5: integer scheme).
DEFAULT_VERSIONS = ("2.4.8", "2.6.4", "2.7.8", "2.22.3", "2.23.4", "2.28.3")


def default_level_rows(versions: Sequence[str] = DEFAULT_VERSIONS) -> List[List[str]]:
    """NCCL's default P2P level for each release (rows) and CPU (columns, DEFAULT_CPUS), from
    ncclpaths.default_p2p_level; the cells name what decides when the CPU vendor does not."""
    rows = []
    for version in versions:
        cells = []
        for _, vendor, gpus in DEFAULT_CPUS:
            level = ncclpaths.default_p2p_level(vendor, version, gpus)
            if level is None and ncclpaths.version_tuple(version) < (2, 6, 0):
                level = "3 (old integers)"
            elif level is None:
                level = "PXB if Broadwell, else " + ("SYS" if version.startswith("2.6") else "PHB")
            cells.append(level)
        rows.append([version] + cells)
    return rows


def default_level_table(versions: Sequence[str] = DEFAULT_VERSIONS) -> str:
    return text_table(default_level_rows(versions),
                      header=("NCCL",) + tuple(label for label, _, _ in DEFAULT_CPUS))


def shm_exception_rows(nccl_version: str = "2.28.3") -> List[Tuple[str, str]]:
    """(situation, transport NCCL should use) for the cases where neither the level table nor
    its SHM column is the answer; each transport from runner.expected_transport."""
    def expect(env, path, **facts):
        return runner.expected_transport(env, path, "GenuineIntel", nccl_version=facts.pop("version", nccl_version),
                                         local_gpus=2, **facts) or "?"
    # ncclTopoCheckNet looks at each GPU's best NIC separately (src/graph/paths.cc, v2.14.3-1 and
    # v2.28.3-1): for a PHB pair that takes two NICs, one under each GPU's PCIe switch.
    close_nic = {"nics": [("PIX", "PHB"), ("PHB", "PIX")], "nic_faster": True}
    return [
        ("PHB pair, no network card in the node (the level table)", expect({}, "PHB", nics=())),
        ("PHB pair, network cards not known", expect({}, "PHB")),
        ("PHB pair, each GPU PIX/PXB to its own NIC, faster than their own path (NCCL >= 2.14)",
         expect({}, "PHB", **close_nic)),
        ("  the same with NCCL_NET_DISABLE_INTRA=1", expect({"NCCL_NET_DISABLE_INTRA": "1"}, "PHB", **close_nic)),
        ("  the same on NCCL 2.12", expect({}, "PHB", version="2.12.12", **close_nic)),
        ("two processes with different /dev/shm (separate containers), NVLink pair",
         expect({}, "NVL", same_shm=False)),
        ("NVLink pair that NVML reports P2P-disabled (NCCL >= 2.12.7)", expect({}, "NVL", nvml_p2p_ok=False)),
        ("  the same with NCCL_IGNORE_DISABLED_P2P=1, no network card",
         expect({"NCCL_IGNORE_DISABLED_P2P": "1"}, "NVL", nvml_p2p_ok=False, nics=())),
    ]


# The recorded system whose NCCL release the notebook reasons about when this machine has none.
RECORDED_NCCL_SYSTEM = "h200-nvswitch-pair"


def reasoned_nccl_version(machine) -> Tuple[Optional[str], str]:
    """(version, where it comes from): this machine's NCCL library when one was found, else the
    release of the course's recorded runs on RECORDED_NCCL_SYSTEM."""
    here = getattr(machine, "nccl_version", None)
    if here:
        return here, "the NCCL library found on this machine"
    recorded = next((r["nccl_version"] for r in runner.recorded_cnn_runs(RECORDED_NCCL_SYSTEM)
                     if r.get("nccl_version")), None)
    return recorded, (f"no NCCL library here; the release of the recorded runs in "
                      f"reference_systems/{RECORDED_NCCL_SYSTEM}/")


def machine_rule_text(machine) -> str:
    """The NCCL release, CPU vendor and default P2P level that apply to this machine, in a few
    lines (what notebook 5 reasons about here)."""
    version, where = reasoned_nccl_version(machine)
    vendor = ncclpaths.local_cpu_vendor()
    gpus = getattr(machine, "gpu_count", 0) or 0
    lines = [f"NCCL release reasoned about: {version or 'unknown'} ({where})",
             f"CPU vendor here: {vendor or 'unknown'}; GPUs listed here: {gpus}"]
    for job in sorted({2, max(gpus, 2)}):
        level = ncclpaths.default_p2p_level(vendor, version, job)
        lines.append(f"default P2P level for a job with {job} GPUs in this node: "
                     + (level or "cannot be told (see the table of defaults)"))
    return "\n".join(lines)


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


def chance_apart(runs_a: int, runs_b: int) -> float:
    """How often the ranges of `runs_a` and `runs_b` runs of the *same* setting do not overlap by
    chance alone: 2 of the C(a+b, a) equally likely orders put all of one below all of the other
    (3 and 3 runs: 2/20 = 10 %)."""
    import math
    return 2 / math.comb(runs_a + runs_b, runs_a)


def _runs(row: Dict[str, Any]) -> int:
    """Repeated runs behind a row's range (a range over the epochs of one run counts as 1)."""
    if str(row.get("range_over") or "").startswith("epochs"):
        return 1
    return int(row.get("runs_ok") or row.get("runs") or 0)


def differs(rows: Sequence[Dict[str, Any]], setting: str, baseline: str = "default",
            noise_pct: Optional[float] = None) -> str:
    """How `setting` compares with `baseline`: the change of the medians and what the repeats
    can say about it.

    With ranges of repeated runs that do not overlap: "ranges apart", with how often identical
    settings do that by chance (chance_apart: 10 % for 3 runs each). Overlapping ranges are no
    evidence of equality: the change is "not resolved by n runs", with the course's run-to-run
    noise (run_to_run_noise(), or `noise_pct`) as the size below which it cannot be resolved.
    One run (or a range over one run's epochs): no run-to-run range, cannot be told from noise.
    """
    a = next(r for r in rows if r["setting"] == baseline)
    b = next(r for r in rows if r["setting"] == setting)
    change = (b["images_per_sec_median"] / a["images_per_sec_median"] - 1) * 100
    n_a, n_b = _runs(a), _runs(b)
    if min(n_a, n_b) < 2 or None in (a.get("images_per_sec_min"), b.get("images_per_sec_min")):
        return f"{change:+.1f} % (one run: no run-to-run range, cannot tell from noise)"
    runs = f"{n_a} runs each" if n_a == n_b else f"{n_a} and {n_b} runs"
    apart = b["images_per_sec_max"] < a["images_per_sec_min"] or b["images_per_sec_min"] > a["images_per_sec_max"]
    if apart:
        return (f"{change:+.1f} % (ranges of {runs} apart; identical settings do that "
                f"{chance_apart(n_a, n_b) * 100:.0f} % of the time)")
    if noise_pct is None:
        noise_pct = run_to_run_noise().figure_pct
    return f"{change:+.1f} % (not resolved by {runs}: < {noise_pct:.1f} %)"


@dataclasses.dataclass(frozen=True)
class Noise:
    """Run-to-run noise of the course's recorded repeated runs (run_to_run_noise())."""
    rows: Tuple[Tuple[str, Any, str, str, int, float], ...]  # (system, batch, pair, setting, n, range %)
    figure_pct: float  # the largest range of repeats as % of their median: THE noise figure

    @property
    def runs(self) -> str:
        counts = sorted({row[4] for row in self.rows})
        return "-".join(str(c) for c in (counts[0], counts[-1])) if len(counts) > 1 else str(counts[0])

    @property
    def low_pct(self) -> float:
        return min(row[5] for row in self.rows)

    def sentence(self) -> str:
        systems = sorted({row[0] for row in self.rows})
        return (f"repeated runs of one setting spread by {self.low_pct:.1f} to {self.figure_pct:.1f} % "
                f"of their median (range of n = {self.runs} runs per setting, {len(self.rows)} "
                f"settings, recorded on {', '.join(systems)}): differences below about "
                f"{self.figure_pct:.1f} % are not resolved")


def run_to_run_noise(rows: Optional[Sequence[Dict[str, Any]]] = None) -> Noise:
    """THE course's noise figure, one definition for every notebook: for each setting with at
    least two recorded runs (reference_systems/*/horovod-cnn/), the range of its runs
    (max - min) as a percentage of their median; the figure is the largest of those ranges.
    `rows` defaults to recorded_runs() (a single run, or a range over epochs, does not count)."""
    rows = recorded_runs() if rows is None else rows
    out = []
    for row in rows:
        n = _runs(row)
        if n < 2 or row.get("images_per_sec_min") is None or not row.get("images_per_sec_median"):
            continue
        spread = (row["images_per_sec_max"] - row["images_per_sec_min"]) / row["images_per_sec_median"] * 100
        out.append((row["system"], row.get("batch_per_worker"), row["pair"], row["setting"], n, spread))
    if not out:
        raise ValueError("no setting with repeated runs: the noise figure needs at least two runs of one setting")
    return Noise(tuple(out), max(r[5] for r in out))


def noise_table(noise: Optional[Noise] = None) -> str:
    """run_to_run_noise()'s rows as text: system, batch, GPUs, setting, n runs, range %."""
    noise = noise or run_to_run_noise()
    return text_table([(system, batch, pair, setting, n, f"{pct:.1f} %")
                       for system, batch, pair, setting, n, pct in noise.rows],
                      header=("system", "batch", "GPUs", "setting", "n runs", "range / median"))


def added_step_ms(single: Dict[str, Any], pair: Dict[str, Any], workers: int = 2) -> Dict[str, float]:
    """Step time of one GPU and of `workers` GPUs at the same batch per GPU, from their median
    images/s, and what the second GPU adds per step (ms)."""
    from gputopo.lessons.lesson5_collectives import step_time_ms
    batch = pair["batch_per_worker"]
    one = step_time_ms(single["images_per_sec_median"], 1, single["batch_per_worker"])
    two = step_time_ms(pair["images_per_sec_median"], workers, batch)
    return {"one_gpu_ms": one, "two_gpu_ms": two, "added_ms": two - one}


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


# GPUTOPO_LIVE_CNN=0 skips notebook 5's live training (a dry run of the course on a slow
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
    lines = [re.sub(r"\bhost=\S+", "host=(this host)", line)
             for line in log.splitlines() if re.search(r"\b(WORKER|EPOCH|SUMMARY) ", line)]
    return ("No NCCL connection lines in this log (Gloo did the all-reduce). What the workers printed"
            " (host name left out):\n" + ("\n".join(lines) if lines else "(nothing)"))


def command_text(command: Optional[Sequence[str]]) -> str:
    """A run's command line as a shell would take it, with paths inside the course's folder
    written relative to it (./source_code/..., ./results/...) and the Python interpreter by its
    name, so that the line reads the same wherever the course is checked out."""
    if not command:
        return "no command was run"
    root = str(runner.SOURCE_DIR.parent)
    words = []
    for word in command:
        word = str(word)
        if os.path.basename(word).startswith("python") and os.path.isabs(word):
            word = os.path.basename(word)
        elif word == root or word.startswith(root + os.sep):
            word = "." + word[len(root):]
        words.append(word)
    return shlex.join(words)


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
# (reference_systems/h200-nvswitch-pair/, notebook 4 plots them).
# (transport label, the recorded NCCL benchmark files of that transport): every recorded run of
# the same all_reduce sweep counts; a transport with several runs is summarised by their median.
TRANSPORT_BENCHMARKS = (
    ("P2P (default)", ("nccl-bench-all_reduce.txt",)),
    ("SHM (NCCL_P2P_LEVEL=LOC)", ("nccl-bench-all_reduce-P2P_LEVEL-LOC.txt",)),
    ("NET/Socket (P2P and SHM disabled)", ("nccl-bench-all_reduce-sockets.txt",
                                           "nccl-bench-all_reduce-sockets-run2.txt",
                                           "nccl-bench-all_reduce-sockets-repeat1.txt",
                                           "nccl-bench-all_reduce-sockets-repeat2.txt",
                                           "nccl-bench-all_reduce-sockets-repeat3.txt")),
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


def gradient_allreduce_runs(gradient_bytes: int, system: str = "h200-nvswitch-pair"
                            ) -> Dict[str, List[float]]:
    """{transport label: time (ms) of one all-reduce of `gradient_bytes` in each recorded run},
    read from the recorded NCCL benchmark tables of `system` (TRANSPORT_BENCHMARKS)."""
    from gputopo import reference
    return {label: [time_at_size(reference.load(system, "nccl-tests", filename=name)["rows"],
                                 gradient_bytes) / 1e3 for name in filenames]
            for label, filenames in TRANSPORT_BENCHMARKS}


def gradient_allreduce_ms(gradient_bytes: int, system: str = "h200-nvswitch-pair") -> Dict[str, float]:
    """{transport label: median time (ms) of one all-reduce of `gradient_bytes` over the
    recorded runs} (gradient_allreduce_runs)."""
    return {label: statistics.median(times)
            for label, times in gradient_allreduce_runs(gradient_bytes, system).items()}


def gradient_allreduce_rows(gradient_bytes: int, step_ms: float,
                            system: str = "h200-nvswitch-pair") -> List[Tuple[str, str, str, str, str]]:
    """(transport, recorded runs, busbw at that size, all_reduce time, share of one training step)
    for one all-reduce of the CNN's gradients, read from the recorded NCCL benchmark tables. With
    several runs the time is their median with the range in brackets, and busbw and the share
    follow from the median.

    The share is what the transfer would add to a step if nothing overlapped it; whether
    Horovod hides part of it behind the backward pass is not measured here.
    """
    out = []
    for label, times in gradient_allreduce_runs(gradient_bytes, system).items():
        ms = statistics.median(times)
        busbw = gradient_bytes / (ms * 1e-3) / 1e9  # 2 GPUs: busbw = algbw (factor 2(n-1)/n = 1)
        runs = "1 run" if len(times) == 1 else f"{len(times)} runs"
        time = f"{ms:.3f} ms" if len(times) == 1 else \
            f"{ms:.3f} ms (median; {min(times):.3f}-{max(times):.3f})"
        out.append((label, runs, f"{busbw:,.1f} GB/s", time, f"{ms / step_ms * 100:.1f} %"))
    return out


# ------------------------------------------------------------------------------------------
# Verdicts on the notebook's numbers (gputopo.verdicts)
# ------------------------------------------------------------------------------------------


def _workers(row: Dict[str, Any]) -> int:
    pair = str(row.get("pair", ""))
    return 2 if pair.startswith("CPU") else len(pair.split(","))


def live_gpu_name(machine, row: Dict[str, Any]) -> Optional[str]:
    """The name of the first GPU of a live row's pair ("0,1"), or None (a CPU row, GPU unknown)."""
    pair = str(row.get("pair", ""))
    if not re.fullmatch(r"\d+(,\d+)*", pair):
        return None
    first = int(pair.split(",")[0])
    gpu = next((g for g in (getattr(machine, "gpus", None) or []) if getattr(g, "index", None) == first), None)
    return getattr(gpu, "name", None) or None


OWN_REFERENCE = "none"  # the status printed where a recorded row would be judged against itself


def own_reference(kind: str, value: Optional[float]):
    """The line for a recorded row that is its own reference: no verdict (its range is built from
    these same runs, so it could not fail). The same wording in notebooks 4 and 5."""
    from gputopo import verdicts
    return verdicts.Verdict(kind, value, OWN_REFERENCE, "this row is its own reference: "
                            "`verdicts.cnn_reference` builds the range from these same runs",
                            unit=verdicts.UNITS.get(kind, ""))


def _forced(row: Dict[str, Any]) -> Optional[str]:
    """The NCCL variables of a row's setting that forced its transport ("NCCL_P2P_LEVEL=LOC"), or None."""
    env = row.get("env") or {}
    forced = [f"{k}={v}" for k, v in sorted(env.items()) if k in ("NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE",
                                                                  "NCCL_SHM_DISABLE")]
    return " ".join(forced) or None


def cnn_verdict(row: Dict[str, Any], gpu: Optional[str], against: Optional[str] = None, recorded: bool = False):
    """The verdict on one row's median images/s: against the recorded runs of the GPU model `gpu`
    (a name such as "NVIDIA H200", or a recorded system's name), the same batch per GPU, number
    of GPUs and, for a recorded row, the same pair link (`topo -m`), and the setting `against`
    (the row's own setting when None). A CPU row has no GPU model: "not comparable". A recorded
    row (recorded=True) of the reference setting is its own reference: "none"."""
    from gputopo import verdicts
    cpu = str(row.get("pair", "")).startswith("CPU")
    setting = against or row.get("setting")
    reference = None if cpu or not gpu else verdicts.cnn_reference(
        "cnn_images_per_sec", gpu, row.get("batch_per_worker"), setting,
        workers=_workers(row), link=row.get("link") if recorded else None)
    if recorded and reference and setting == row.get("setting"):
        return own_reference("cnn_images_per_sec", row.get("images_per_sec_median"))
    transport, forced = row.get("transports") or None, _forced(row)
    if forced and setting == row.get("setting"):
        # judged against runs of its own setting: they were forced the same way, so the forced
        # transport explains nothing
        transport, forced = None, None
    return verdicts.judge("cnn_images_per_sec", row.get("images_per_sec_median"), reference=reference,
                          transport=transport, forced=forced)


def verdict_line(label: str, verdict, number: str = "{:,.0f}") -> str:
    """One line per verdict: status, why, the expected range; for "low" its reasons, one a line."""
    line = f"verdict, {label}: {verdict.status} ({verdict.why})"
    if verdict.expected:
        unit = f" {verdict.unit}" if verdict.unit else ""
        line += f"; expected {number.format(verdict.expected[0])}-{number.format(verdict.expected[1])}{unit}"
    if verdict.status == "low":
        line += "".join(f"\n  reason {n}: {reason} -- check: {check}"
                        for n, (reason, check) in enumerate(verdict.reasons, 1))
    return line


def once(lines: Sequence[str]) -> str:
    """Verdict lines joined, each block of reasons printed once: a later verdict with the same
    reasons says "  reasons as above" instead."""
    out, seen = [], set()
    for line in lines:
        head, _, reasons = line.partition("\n")
        if reasons and reasons in seen:
            out.append(head + "\n  reasons as above")
        else:
            seen.add(reasons)
            out.append(line)
    return "\n".join(out)


def cnn_verdict_lines(rows: Sequence[Dict[str, Any]], gpu=None, against: Optional[str] = None,
                      machine=None) -> str:
    """verdict_line for every row of a runs table. gpu: the GPU model (a recorded table passes its
    system's name); machine: a live machine, whose GPU of each row's pair names the model."""
    out = []
    for row in rows:
        name = live_gpu_name(machine, row) if machine is not None else gpu
        pair = str(row.get("pair"))
        label = f"{'' if pair.startswith('CPU') else 'GPUs '}{pair} {row.get('setting')}"
        if against and against != row.get("setting"):
            label += f" (against the recorded {against})"
        out.append(verdict_line(label, cnn_verdict(row, name, against, recorded=machine is None)))
    return once(out)


def scaling_verdict(single: Dict[str, Any], pair: Dict[str, Any], gpu: Optional[str], recorded: bool = True):
    """The verdict on two GPUs' scaling efficiency (pair median / (2 x one-GPU median)) against
    the recorded runs of the same GPU model and batch, default setting. Recorded rows of the
    default setting (recorded=True) are their own reference: "none"."""
    from gputopo import verdicts
    value = None
    if single.get("images_per_sec_median") and pair.get("images_per_sec_median"):
        value = pair["images_per_sec_median"] / (2 * single["images_per_sec_median"])
    if recorded and value is not None and pair.get("setting") == "default":
        return own_reference("cnn_scaling_efficiency", value)
    reference = verdicts.cnn_reference("cnn_scaling_efficiency", gpu, pair.get("batch_per_worker"),
                                       "default", workers=2) if gpu else None
    return verdicts.judge("cnn_scaling_efficiency", value, reference=reference)


def gradient_busbw_verdicts(gradient_bytes: int, link, system: str = "h200-nvswitch-pair"):
    """[(transport label, busbw GB/s, verdict)] for the busbw of one all-reduce of the gradient,
    read from the recorded benchmark tables as gradient_allreduce_rows does."""
    from gputopo import verdicts
    out = []
    for label, times in gradient_allreduce_runs(gradient_bytes, system).items():
        busbw = gradient_bytes / (statistics.median(times) * 1e-3) / 1e9  # 2 GPUs: busbw = algbw
        transport = label.split()[0].split("/")[0]
        out.append((label, busbw, verdicts.judge("allreduce_busbw", busbw, link, size=gradient_bytes,
                                                 transport=transport)))
    return out


# ------------------------------------------------------------------------------------------
# Reading NCCL's own log
# ------------------------------------------------------------------------------------------

# What to look for in an NCCL_DEBUG=INFO log, in the order NCCL prints it: (pattern, what the
# line says). Each pattern names one line explicitly; the first line of rank 0 that matches it is
# shown, whole. Meanings checked against NCCL's source at v2.28.3-1 where named.
LOG_LANDMARKS = (
    (r"NCCL version \S+", "the library's version and the CUDA it was built for: every rule of this "
     "notebook depends on the version"),
    (r"NCCL_SOCKET_IFNAME set by environment", "a variable NCCL read from the environment (NCCL echoes "
     "each one); Horovod's launcher set this one, so bootstrap and sockets use that interface"),
    (r"NET/IB : No device found", "the InfiniBand/RoCE plugin found no RDMA device: no NET/IB and no "
     "GPUDirect RDMA on this machine, so no NIC can take a pair away from SHM"),
    (r"Using network \w+", "the network transport of this communicator (here TCP sockets): between "
     "nodes, and inside this node only for a pair that neither P2P nor SHM connects"),
    (r"ncclCommInitRank .*cudaDev \d+ nvmlDev \d+ busId \S+ .*Init START",
     "this rank's GPU: CUDA ordinal (cudaDev), nvidia-smi index (nvmlDev), PCI bus id (busId)"),
    (r"Affinity for GPU \d+ is", "the CPU set NCCL pins its threads to: the process's mask ('CPU "
     "affinity') intersected with the cores of the GPU's NUMA node ('GPU affinity', from sysfs; "
     "src/graph/topo.cc ncclTopoGetCpuAffinity). 'empty, ignoring' means that intersection is "
     "empty, here because the GPU affinity is empty, and NCCL keeps the process's own mask"),
    (r"NCCL_NVLS_ENABLE set by environment", "NVLink SHARP switched off: the course sets "
     "NCCL_NVLS_ENABLE=0 when the variable is unset"),
    (r"nRanks \d+ nNodes \d+ localRanks \d+ localRank \d+ MNNVL \d+", "the communicator: ranks, "
     "nodes, ranks on this node; MNNVL 0: no multi-node NVLink (NVLink does not reach other nodes)"),
    (r"Channel 00/\d+ :", "ring 0 of N channels and the order of ranks around it"),
    (r"Trees \[0\]", "trees per channel: child/child/child -> me -> parent (-1: none)"),
    (r"coll channels", "channels per algorithm; 'nvls channels' are NVLink SHARP's (0: not used)"),
    (r"Init COMPLETE", "set-up done"),
    (r"Channel 00/0 : |Channel 00 : ", "the transport of one connection: rank[GPU] -> rank[GPU] via ..."),
)


def annotated_log(text: str, rank: int = 0) -> List[Tuple[str, str]]:
    """(line, meaning) for each landmark of LOG_LANDMARKS found in rank `rank`'s NCCL INFO lines,
    each line whole.

    Launcher prefixes ("[0]<stdout>:") and the host:pid:tid prefix are cut so the line reads
    as NCCL wrote it.
    """
    own = []
    for line in text.splitlines():
        prefix = re.match(r"\[(\d+)\]<std(?:out|err)>:", line)
        if prefix and int(prefix.group(1)) != rank:
            continue
        if "NCCL INFO" in line:
            own.append("NCCL INFO" + line.split("NCCL INFO", 1)[1].rstrip())
    out = []
    for pattern, meaning in LOG_LANDMARKS:
        hit = next((l for l in own if re.search(pattern, l)), None)
        if hit is not None:
            out.append((hit, meaning))
    return out


def format_annotated_log(pairs: Sequence[Tuple[str, str]], width: int = 100) -> str:
    """annotated_log()'s pairs as text: every line whole, wrapped at `width` (continuations
    indented by two spaces), its meaning below it after '<-'."""
    import textwrap
    out = []
    for line, meaning in pairs:
        out += textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False) or [""]
        out += textwrap.wrap(meaning, width, initial_indent="      <- ", subsequent_indent="         ")
    return "\n".join(out)


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

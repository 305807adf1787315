"""What notebook 5 needs beside the commands' own output: NCCL's P2P rule as a table, the
recorded CNN runs grouped per setting, step times, and the alpha-beta model against the step.

    from gputopo.lessons import training
    print(training.level_table("GenuineIntel", "2.28.3"))   # setting x path type -> transport
    runs = training.recorded_runs()                         # the 2x H200 runs, one row per setting
    steps = training.cnn_steps(runs, 512)                   # one-GPU and two-GPU step (ms)

Every number comes from a file in reference_systems/ or from the learner's own run folder.
"""
from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo import alphabeta, linkcodes, ncclpaths, reference
from gputopo.parsers import PARSERS, ParseError
from gputopo.selfcheck import text_table

PATH_COLUMNS = linkcodes.TOPO_PATH_TYPES
RECORDED = "h200-nvswitch-pair"

# The settings a learner types, and what each sets (NCCL's env.html names every variable).
SETTINGS = (("default", {}), ("NCCL_P2P_LEVEL=LOC", {"NCCL_P2P_LEVEL": "LOC"}),
            ("NCCL_P2P_LEVEL=NVL", {"NCCL_P2P_LEVEL": "NVL"}), ("NCCL_P2P_LEVEL=PIX", {"NCCL_P2P_LEVEL": "PIX"}),
            ("NCCL_P2P_LEVEL=PXB", {"NCCL_P2P_LEVEL": "PXB"}), ("NCCL_P2P_LEVEL=PHB", {"NCCL_P2P_LEVEL": "PHB"}),
            ("NCCL_P2P_LEVEL=SYS", {"NCCL_P2P_LEVEL": "SYS"}), ("NCCL_P2P_DISABLE=1", {"NCCL_P2P_DISABLE": "1"}),
            ("NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}))


def level_rows(cpu_vendor: str = "GenuineIntel", nccl_version: Optional[str] = None,
               local_gpus: int = 2) -> List[List[str]]:
    """One row per setting: the transport ncclpaths.expected_transport gives for each path type
    ("?" where it cannot be told), for a node without network cards (nics=())."""
    return [[label] + [ncclpaths.expected_transport(env, path, cpu_vendor, nccl_version=nccl_version,
                                                    local_gpus=local_gpus, nics=()) or "?"
                       for path in PATH_COLUMNS] for label, env in SETTINGS]


def level_table(cpu_vendor: str = "GenuineIntel", nccl_version: Optional[str] = None, local_gpus: int = 2) -> str:
    return text_table(level_rows(cpu_vendor, nccl_version, local_gpus),
                      header=("setting \\ path type",) + PATH_COLUMNS)


# ------------------------------------------------------------------------------------------
# Recorded runs: reference_systems/<system>/horovod-cnn/horovod-cnn-<fw>-b<batch>-gpus-<ids>-<setting>-r<n>.txt
# ------------------------------------------------------------------------------------------
_NAME = re.compile(r"horovod-cnn-(?P<fw>\w+)-b(?P<batch>\d+)-gpus-(?P<gpus>\d+(?:-\d+)*)-(?P<setting>.+)-r(?P<run>\d+)\.txt$")


def setting_of(name_part: str) -> str:
    """'NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1' -> 'NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1'."""
    if name_part == "default":
        return "default"
    return " ".join(f"{name}={value}" for name, value in re.findall(r"(NCCL_[A-Z0-9_]+?)-([^_]+)", name_part))


def transports(text: str) -> str:
    """The transports of NCCL's 'Channel ... via' lines in a log, e.g. 'P2P' or 'SHM'; '-' when
    the log has none (one GPU, or a CPU run with Gloo)."""
    try:
        channels = PARSERS["nccl-log"](text).get("channels") or []
    except ParseError:
        return "-"
    return "/".join(sorted({c["transport"] for c in channels})) or "-"


def recorded_runs(system: str = RECORDED) -> List[Dict[str, Any]]:
    """One row per (batch, GPUs, setting): median, min and max of the runs' images/s (each run's
    SUMMARY median over its timed epochs), n runs, and the transport NCCL logged."""
    groups: Dict[Tuple[int, str, str], List[Tuple[float, str]]] = {}
    for path in sorted((reference.REFERENCE_DIR / system / "horovod-cnn").glob("*.txt")):
        match = _NAME.match(path.name)
        if not match:
            continue
        text = path.read_text(errors="replace")
        parsed = PARSERS["horovod"](text)
        summary = parsed.get("summary") or {}
        if summary.get("images_per_sec_median"):
            key = (int(match["batch"]), match["gpus"].replace("-", ","), setting_of(match["setting"]))
            epochs = [e["images_per_sec"] for e in parsed.get("epochs") or []]
            timed = epochs[1:] if len(epochs) > 1 else epochs  # SUMMARY leaves the first epoch out
            groups.setdefault(key, []).append((summary["images_per_sec_median"], transports(text), timed))
    rows = []
    for (batch, gpus, setting), runs in sorted(groups.items(), key=_order):
        rates = [r for r, _, _ in runs]
        epochs = [e for _, _, timed in runs for e in timed] or rates
        link = reference.system_info(system).get("cnn", {}).get("pairs", {}).get(gpus, {}).get("link")
        rows.append({"system": system_label(system), "workers": gpus.count(",") + 1, "link": link,
                     "batch_per_worker": batch, "pair": gpus, "setting": setting, "runs": len(rates),
                     "images_per_sec_median": statistics.median(rates), "images_per_sec_min": min(rates),
                     "images_per_sec_max": max(rates), "epoch_images_per_sec_range": (min(epochs), max(epochs)),
                     "transport": "/".join(sorted({t for _, t, _ in runs}))})
    return rows


def _order(item) -> Tuple[int, int, int]:
    (batch, gpus, setting), _ = item
    labels = [label for label, _ in SETTINGS]
    return batch, len(gpus), labels.index(setting) if setting in labels else len(labels)


def system_label(system: str) -> str:
    """A recorded system's short name, e.g. '2x H200 NVSwitch' (its system.json "label", else the folder)."""
    return reference.system_info(system).get("cnn", {}).get("label") or system


def run_to_run_noise(rows: Optional[Sequence[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """The course's noise figure: for each recorded setting with at least two runs, (max - min) /
    median of its images/s in %; "figure_pct" is the largest, "rows" (GPUs, batch, setting, n, %)."""
    rows = recorded_runs() if rows is None else rows
    out = [(r["pair"], r["batch_per_worker"], r["setting"], r["runs"],
            (r["images_per_sec_max"] - r["images_per_sec_min"]) / r["images_per_sec_median"] * 100)
           for r in rows if r["runs"] >= 2]
    if not out:
        raise ValueError("no setting with repeated runs: the noise figure needs at least two runs of one setting")
    return {"figure_pct": max(r[4] for r in out), "rows": out}


def runs_table(rows: Sequence[Dict[str, Any]]) -> str:
    return text_table([(r["batch_per_worker"], r["pair"], r["setting"], r["transport"], r["runs"],
                        f"{r['images_per_sec_median']:,.0f}",
                        f"{r['images_per_sec_min']:,.0f}-{r['images_per_sec_max']:,.0f}") for r in rows],
                      header=("batch/GPU", "GPUs", "setting", "NCCL log says", "n runs", "images/s median", "range"))


def step_time_ms(images_per_sec: float, workers: int, batch_per_worker: int) -> float:
    """One step of the whole job: every worker takes one batch, so workers x batch images."""
    return workers * batch_per_worker / images_per_sec * 1e3


def cnn_steps(rows: Sequence[Dict[str, Any]], batch_per_worker: int, setting: str = "default") -> Dict[str, Any]:
    """The one-GPU step and the two-GPU step under `setting` at one batch per GPU, from
    recorded_runs() rows of ONE system; ValueError naming what is missing."""
    one = next((r for r in rows if r["batch_per_worker"] == batch_per_worker and "," not in r["pair"]), None)
    two = next((r for r in rows if r["batch_per_worker"] == batch_per_worker and r["pair"].count(",") == 1
                and r["setting"] == setting), None)
    if one is None or two is None:
        raise ValueError(f"no {'one-GPU' if one is None else 'two-GPU ' + setting} run at batch {batch_per_worker} per GPU")
    one_ms = step_time_ms(one["images_per_sec_median"], 1, batch_per_worker)
    two_ms = step_time_ms(two["images_per_sec_median"], 2, batch_per_worker)
    return {"batch_per_worker": batch_per_worker, "setting": setting, "one_gpu_ms": one_ms, "one_gpu_runs": one["runs"],
            "two_gpu_ms": two_ms, "two_gpu_runs": two["runs"], "added_ms": two_ms - one_ms,
            "two_gpu_ms_range": (step_time_ms(two["images_per_sec_max"], 2, batch_per_worker),
                                 step_time_ms(two["images_per_sec_min"], 2, batch_per_worker)),
            # one run: the spread of its timed epochs; several: the spread of the runs
            "one_gpu_ms_range": (step_time_ms(one["epoch_images_per_sec_range"][1] if one["runs"] == 1
                                              else one["images_per_sec_max"], 1, batch_per_worker),
                                 step_time_ms(one["epoch_images_per_sec_range"][0] if one["runs"] == 1
                                              else one["images_per_sec_min"], 1, batch_per_worker)),
            "efficiency": two["images_per_sec_median"] / (2 * one["images_per_sec_median"])}


# ------------------------------------------------------------------------------------------
# The alpha-beta model of notebook 4, fitted to the recorded benchmark of each transport
# ------------------------------------------------------------------------------------------
TRANSPORT_BENCHMARKS = (
    ("P2P", "default", ("nccl-bench-all_reduce.txt",)),
    ("SHM", "NCCL_P2P_LEVEL=LOC", ("nccl-bench-all_reduce-P2P_LEVEL-LOC.txt",)),
    ("NET (sockets)", "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1",
     ("nccl-bench-all_reduce-sockets.txt", "nccl-bench-all_reduce-sockets-run2.txt",
      "nccl-bench-all_reduce-sockets-repeat1.txt", "nccl-bench-all_reduce-sockets-repeat2.txt",
      "nccl-bench-all_reduce-sockets-repeat3.txt")),
)


def transport_fits(system: str = RECORDED) -> List[Dict[str, Any]]:
    """Per transport: (alpha us per step, busbw GB/s) of alphabeta.fit_from_table for each recorded
    2-GPU all_reduce table, and their medians."""
    out = []
    for transport, setting, files in TRANSPORT_BENCHMARKS:
        fits = [alphabeta.fit_from_table(reference.load(system, "nccl-tests", filename=f), "all_reduce", 2)
                for f in files]
        out.append({"transport": transport, "setting": setting, "runs": len(fits),
                    "alpha_us": statistics.median(a for a, _ in fits), "busbw_gbps": statistics.median(b for _, b in fits),
                    "busbw_range": (min(b for _, b in fits), max(b for _, b in fits))})
    return out


def allreduce_ms(gradient_bytes: float, fit: Dict[str, Any], workers: int = 2) -> float:
    """The model's time of one ring all-reduce of `gradient_bytes` (alphabeta.ring_allreduce_time_us)."""
    return float(alphabeta.ring_allreduce_time_us(gradient_bytes, workers, fit["alpha_us"], fit["busbw_gbps"])) / 1e3


def where_the_step_goes(rows: Sequence[Dict[str, Any]], gradient_bytes: int, batch_per_worker: int,
                        fits: Sequence[Dict[str, Any]]) -> List[Tuple[str, ...]]:
    """One row per transport: one-GPU step (n=1: range of its epochs), two-GPU step (median of n
    runs, range), what the second GPU adds, the model's all-reduce of the gradient (range: the
    fit's busbw range), and what the model leaves unexplained, each median [lowest to highest]."""
    out = []
    for fit in fits:
        steps = cnn_steps(rows, batch_per_worker, fit["setting"])
        (one_lo, one_hi), (two_lo, two_hi) = steps["one_gpu_ms_range"], steps["two_gpu_ms_range"]
        model = allreduce_ms(gradient_bytes, fit)
        lo_bw, hi_bw = fit.get("busbw_range") or (fit["busbw_gbps"], fit["busbw_gbps"])
        model_lo, model_hi = (allreduce_ms(gradient_bytes, dict(fit, busbw_gbps=hi_bw)),
                              allreduce_ms(gradient_bytes, dict(fit, busbw_gbps=lo_bw)))
        added_lo, added_hi = two_lo - one_hi, two_hi - one_lo
        out.append((fit["transport"], f"{steps['one_gpu_ms']:.2f} [{one_lo:.2f}-{one_hi:.2f}]",
                    f"{steps['two_gpu_ms']:.2f} [{two_lo:.2f}-{two_hi:.2f}] (n={steps['two_gpu_runs']})",
                    f"{steps['added_ms']:.2f} [{added_lo:.2f}-{added_hi:.2f}]",
                    f"{model:.3f}" + (f" [{model_lo:.2f}-{model_hi:.2f}]" if model_hi - model_lo > 5e-4 else ""),
                    f"{steps['added_ms'] - model:.2f} [{added_lo - model_hi:.2f}-{added_hi - model_lo:.2f}]"))
    return out


_STEPTIME = re.compile(r"^STEPTIME (.*)$", re.MULTILINE)


def steptime(text: str) -> Optional[Dict[str, float]]:
    """The STEPTIME line of labs/ddp_fmnist.py (rank 0's step split, ms), or None without one."""
    found = _STEPTIME.findall(text)
    if not found:
        return None
    return {key: float(value) for key, value in (item.split("=", 1) for item in found[-1].split())}


def _summary(path: Path) -> Optional[Dict[str, Any]]:
    """The SUMMARY line of a saved run, or None (no such file, the run failed or was cut off)."""
    if not path.is_file():
        return None
    try:
        return PARSERS["horovod"](path.read_text(errors="replace")).get("summary")
    except ParseError:
        return None


def read_runs(folder: Path, pattern: str = "*.txt") -> List[Tuple[str, str, str]]:
    """(file, transport NCCL logged, images/s) of each run the learner saved in `folder`; a file
    without a SUMMARY line (the run failed or was cut off) says so instead of a number."""
    out = []
    for path in sorted(Path(folder).glob(pattern)):
        summary = _summary(path)
        rate = f"{summary['images_per_sec_median']:,.0f}" if summary else "no SUMMARY line (incomplete)"
        out.append((path.name, transports(path.read_text(errors="replace")), rate))
    return out


def live_step_rows(folder: Path, gradient_bytes: int, fits: Sequence[Dict[str, Any]],
                   one_gpu: str = "horovod-one-gpu-0.txt", pairs: str = "horovod-pair-*.txt") -> List[Tuple[str, ...]]:
    """where_the_step_goes() for the learner's own runs: the one-GPU run `one_gpu` against each
    two-GPU run in `folder` whose NCCL log names one transport of `fits`; [] without a complete
    one-GPU run (then nothing live can be set beside the model)."""
    one = _summary(Path(folder) / one_gpu)
    if not one:
        return []
    one_ms = step_time_ms(one["images_per_sec_median"], one["workers"], one["batch_per_worker"])
    by_transport = {fit["transport"].split()[0]: fit for fit in fits}
    out = []
    for path in sorted(Path(folder).glob(pairs)):
        two, transport = _summary(path), transports(path.read_text(errors="replace"))
        if not two or transport not in by_transport or two["batch_per_worker"] != one["batch_per_worker"]:
            continue
        two_ms = step_time_ms(two["images_per_sec_median"], two["workers"], two["batch_per_worker"])
        model = allreduce_ms(gradient_bytes, by_transport[transport], two["workers"])
        out.append((path.name, transport, f"{one_ms:.2f}", f"{two_ms:.2f}", f"{two_ms - one_ms:.2f}",
                    f"{model:.3f}", f"{two_ms - one_ms - model:.2f}"))
    return out


# ------------------------------------------------------------------------------------------
# labs/step_breakdown.py: one worker against two, the extra split by Horovod's timeline
# ------------------------------------------------------------------------------------------
STEP_SERIES = ("cpu-gloo-pair/step_breakdown", "h100-single-gpu/step_breakdown-*")


def step_series(live_folder: Optional[Path] = None) -> List[Tuple[str, List[Dict[str, Any]]]]:
    """(label, completed Horovod runs) of the learner's results.jsonl in `live_folder` (when it has
    one) and of every recorded series; label: where it ran, framework, workers, rounds."""
    files = [("this machine", Path(live_folder) / "results.jsonl")] if live_folder else []
    files += [(f"{p.parent.parent.name}/{p.parent.name}", p) for pattern in STEP_SERIES
              for p in sorted(reference.REFERENCE_DIR.glob(f"{pattern}/results.jsonl"))]
    out = []
    for where, path in files:
        if not path.is_file():
            continue
        rows = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:  # a line cut off by an interrupted run
                continue
        ok = [dict(r, folder=str(path.parent)) for r in rows
              if r.get("mode") == "horovod" and r.get("rc") == 0 and r.get("step_ms") is not None]
        if ok:
            workers, rounds = max(r["workers"] for r in ok), len({(r["series"], r["round"]) for r in ok})
            label = (f"{where}: {ok[0]['framework']}, {workers} worker{'s' * (workers > 1)} at most, "
                     f"{rounds} round{'s' * (rounds > 1)}")
            out.append((label, ok))
    return out


def _spread(values: Sequence[Optional[float]], digits: int = 1) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f} to {max(values):.{digits}f}]"


def operations_per_step(row: Dict[str, Any]) -> Optional[float]:
    """Median collective operations per step of one run (a fused operation counts once), from its
    timeline's summary or from its saved timeline (run_dir/timeline.json.gz); None without one."""
    if (row.get("timeline") or {}).get("operations") is not None:
        return row["timeline"]["operations"]
    path = Path(row.get("folder") or ".") / str(row.get("run_dir") or "") / "timeline.json.gz"
    if not row.get("run_dir") or not path.is_file():
        return None
    try:
        steps = PARSERS["horovod-timeline"](gzip.decompress(path.read_bytes()).decode("utf-8", "replace"))["steps"]
    except (ParseError, OSError, EOFError):
        return None
    return statistics.median(s["operations"] for s in steps["per_step"]) if steps["per_step"] else None


def step_split(rows: Sequence[Dict[str, Any]]) -> Dict[Tuple[float, int], Dict[str, List[Optional[float]]]]:
    """Per (cycle ms, fusion bytes): per round, the one-worker step (that round's one-worker run of
    the same setting, else its run at the defaults), the parallel step, the extra, and the extra's
    split from the timeline (ms): collective, framework (fusion copies, waits, negotiation, rest),
    negotiation, unexplained = extra - collective - framework. One-worker-only series: 'one' alone."""
    out: Dict[Tuple[float, int], Dict[str, List[Optional[float]]]] = {}
    parallel = [r for r in rows if r["workers"] > 1]
    for r in parallel or rows:
        key = (r["cycle_time_ms"], r["fusion_threshold_bytes"])
        cols = out.setdefault(key, {k: [] for k in ("one", "two", "extra", "collective", "framework",
                                                   "negotiate", "unexplained", "operations")})
        if not parallel:
            cols["one"].append(r["step_ms"])
            continue
        same = [b for b in rows if b["workers"] == 1 and (b["series"], b["round"]) == (r["series"], r["round"])]
        base = next((b for b in same if (b["cycle_time_ms"], b["fusion_threshold_bytes"]) == key), None)
        base = base or (same[0] if same else None)
        extra = None if base is None else r["step_ms"] - base["step_ms"]
        split = r.get("timeline") or {}
        coll = split["collective_us"] / 1e3 if split else None
        frame = sum(split[k] for k in ("fusion_copy_us", "wait_us", "negotiate_us", "other_us")) / 1e3 if split else None
        for name, value in (("one", base and base["step_ms"]), ("two", r["step_ms"]), ("extra", extra),
                            ("collective", coll), ("framework", frame),
                            ("negotiate", split["negotiate_us"] / 1e3 if split else None),
                            ("unexplained", None if extra is None or coll is None else extra - coll - frame),
                            ("operations", operations_per_step(r))):
            cols[name].append(value)
    return out


def model_ms(gradient_bytes: int, operations: float, fit: Dict[str, Any], workers: int = 2) -> float:
    """The alpha-beta all-reduce time of one step's gradients sent in `operations` all-reduces
    (the count the timeline shows; Horovod fuses only the tensors ready in the same cycle, so it
    is not one per fusion buffer); the model is linear in bytes, so k all-reduces of S/k bytes."""
    calls = max(1.0, float(operations))
    return calls * allreduce_ms(gradient_bytes / calls, fit, workers)


def step_table(series: Sequence[Tuple[str, List[Dict[str, Any]]]], gradient_bytes: int,
               fit: Dict[str, Any]) -> str:
    """One block per series: per setting, median [min to max] over the rounds (ms per step), the
    collective operations per step the timeline shows, and the model's all-reduce of the
    gradients (`fit`) in that many operations, beside the timeline's collective."""
    blocks = []
    for label, rows in series:
        lines = []
        for (cycle, fusion), c in sorted(step_split(rows).items()):
            n = len([v for v in c["one"] if v is not None])
            if not c["two"]:
                lines.append((f"{cycle:g}", f"{fusion:,}", _spread(c["one"]), n, "-", "-", "-", "-", "-", "-", "-"))
                continue
            workers = max(r["workers"] for r in rows)
            models = [None if k is None else model_ms(gradient_bytes, k, fit, workers) for k in c["operations"]]
            lines.append((f"{cycle:g}", f"{fusion:,}", _spread(c["one"]), len(c["two"]), _spread(c["two"]),
                          _spread(c["extra"]), _spread(c["operations"]), _spread(c["collective"]),
                          _spread(models, 2), _spread(c["framework"]), _spread(c["unexplained"])))
        blocks.append(label + "\n" + text_table(lines, header=(
            "cycle ms", "fusion B", "1 worker", "n", "2 workers", "extra", "ops/step", "collective",
            f"model ({fit['transport'].split()[0]})", "framework", "unexplained")))
    return "\n\n".join(blocks) if blocks else "no step-breakdown series to show"

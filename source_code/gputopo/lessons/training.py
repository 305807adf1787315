"""What notebook 5 needs beside the commands' own output: the settings a learner types, the saved
CNN runs (recorded, or the learner's own) grouped per setting, the one-GPU step against the
two-GPU step beside the alpha-beta model, Horovod's timeline split of the extra, and the
published training runs where the link changed the step. Every number comes from a file in
reference_systems/ or from the learner's own run folder.
"""

from __future__ import annotations

import csv
import fnmatch
import gzip
import io
import json
import re
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo import alphabeta, linkcodes, live, reference
from gputopo.parsers import PARSERS, ParseError
from gputopo.selfcheck import text_table

PATH_COLUMNS = linkcodes.TOPO_PATH_TYPES
RECORDED = reference.REFERENCE_DIR / "h200-nvswitch-pair" / "horovod-cnn"

# The settings a learner types (NCCL's env.html names every variable).
SETTINGS = (
    "default",
    "NCCL_P2P_LEVEL=LOC",
    "NCCL_P2P_LEVEL=NVL",
    "NCCL_P2P_LEVEL=PIX",
    "NCCL_P2P_LEVEL=PXB",
    "NCCL_P2P_LEVEL=PHB",
    "NCCL_P2P_LEVEL=SYS",
    "NCCL_P2P_DISABLE=1",
    "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1",
)


# Saved runs of cnn_fmnist.py. Recorded: horovod-cnn-<fw>-b<batch>-gpus-<ids>-<setting>-r<n>.txt;
# the notebook's commands: horovod-pair-<ids>[-<setting>].txt, horovod-one-gpu-<ids>.txt.
_NAME = re.compile(r"-(?P<gpus>\d+(?:-\d+)*)(?:-(?P<setting>default|NCCL_.+?))?(?:-r\d+)?\.txt$")
# Every rank of the CNN scripts prints `WORKER rank=R size=N local_rank=L device=D ...`
# (CONTRIBUTING, "Contracts between parts"); device=CPU: the workers trained on the CPU, with Gloo.
_CPU_WORKER = re.compile(r"^(?:\[[\d,]+\](?:<std\w+>)?:)?WORKER .*\bdevice=CPU\b", re.MULTILINE)


def setting_of(name_part: Optional[str]) -> str:
    """'NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1' -> 'NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1'."""
    pairs = re.findall(r"(NCCL_[A-Z0-9_]+?)-([^_]+)", name_part or "")
    return " ".join(f"{name}={value}" for name, value in pairs) or "default"


def ran_on_cpu(saved: Path) -> bool:
    """True when a saved training log's WORKER lines say device=CPU: its workers all-reduced with
    Gloo, so it has no NCCL lines. False for a GPU run and for a file that was not written."""
    saved = Path(saved)
    return saved.is_file() and bool(_CPU_WORKER.search(saved.read_text(errors="replace")))


def transports(text: str) -> str:
    """The transports of NCCL's 'Channel ... via' lines in a log, e.g. 'P2P' or 'SHM'; '-' when
    the log has none (one GPU, or a CPU run with Gloo)."""
    try:
        channels = PARSERS["nccl-log"](text).get("channels") or []
    except ParseError:
        return "-"
    return "/".join(sorted({c["transport"] for c in channels})) or "-"


def recorded_instead(why: str, recorded: str) -> live.Output:
    """A recorded NCCL log (system/file), printed whole after `why` in live.read's words: the
    stand-in for a run that has no NCCL lines for a reason live.read cannot see (a CPU run)."""
    label = live.recorded_label(recorded)
    text = (reference.REFERENCE_DIR / recorded).read_text(errors="replace")
    print(f"{live.RECORDED_MARK} {why}.\nBelow, a recorded run on {label}:\n")
    print(text.rstrip("\n"))
    return live.Output(text, PARSERS["nccl-log"](text), False, label)


def read_runs(folder: Path = RECORDED, pattern: str = "*.txt") -> List[Dict[str, Any]]:
    """One row per (batch per GPU, GPUs, setting), in SETTINGS' order, of the runs saved in
    `folder`: n runs with a SUMMARY line, the median of their images/s (each run's SUMMARY median
    over its timed epochs), min and max (of the runs; of the timed epochs when n = 1), the
    transport NCCL logged. A file without SUMMARY (a failed or cut-off run) is a row of its own:
    batch 0, runs 0."""
    groups: Dict[Tuple[Any, ...], List[Tuple[Optional[Dict[str, Any]], str]]] = {}
    for path in sorted(Path(folder).glob(pattern)):
        text, match = path.read_text(errors="replace"), _NAME.search(path.name)
        try:
            parsed = PARSERS["horovod"](text)
        except ParseError:
            parsed = {}
        summary = parsed.get("summary")
        pair = match["gpus"].replace("-", ",") if match else path.stem
        if _CPU_WORKER.search(text):  # CUDA_VISIBLE_DEVICES= : Gloo on the CPU
            pair += " (CPU)"
        if summary:
            key = (summary["batch_per_worker"], pair, setting_of(match and match["setting"]))
        else:
            key = (0, pair, path.name)
        groups.setdefault(key, []).append((parsed if summary else None, transports(text)))
    rows = []

    def order(group):
        (batch, pair, setting), _ = group
        return batch, pair, (SETTINGS + (setting,)).index(setting)

    for (batch, pair, setting), runs in sorted(groups.items(), key=order):
        rates = [p["summary"]["images_per_sec_median"] for p, _ in runs if p]
        # n = 1: the range of its timed epochs (SUMMARY leaves the first epoch out)
        extremes = rates
        if len(rates) == 1:
            extremes = [e["images_per_sec"] for e in runs[0][0]["epochs"][1:]] or rates
        rows.append(
            {
                "batch_per_worker": batch,
                "pair": pair,
                "workers": pair.count(",") + 1,
                "setting": setting,
                "transport": "/".join(sorted({t for _, t in runs})),
                "runs": len(rates),
                "images_per_sec_median": statistics.median(rates) if rates else None,
                "images_per_sec_min": min(extremes, default=None),
                "images_per_sec_max": max(extremes, default=None),
            }
        )
    return rows


# The alpha-beta model of notebook 4, fitted to the recorded benchmark of each transport
TRANSPORT_BENCHMARKS = (
    ("P2P", "default", "nccl-bench-all_reduce.txt"),
    ("SHM", "NCCL_P2P_LEVEL=LOC", "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt"),
    (
        "NET (sockets)",
        "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1",
        "nccl-bench-all_reduce-sockets*.txt",
    ),
)


def transport_fits(system: str = "h200-nvswitch-pair") -> List[Dict[str, Any]]:
    """Per transport: (alpha us per step, busbw GB/s) of alphabeta.fit_from_table for each recorded
    2-GPU all_reduce table matching the file pattern, and their medians."""
    out = []
    for transport, setting, pattern in TRANSPORT_BENCHMARKS:
        names = fnmatch.filter(reference.find(system, "nccl-tests"), pattern)
        fits = [
            alphabeta.fit_from_table(
                reference.load(system, "nccl-tests", filename=name), "all_reduce", 2
            )
            for name in names
        ]
        busbw = [b for _, b in fits]
        out.append(
            {
                "transport": transport,
                "setting": setting,
                "runs": len(fits),
                "alpha_us": statistics.median(a for a, _ in fits),
                "busbw_gbps": statistics.median(busbw),
                "busbw_range": (min(busbw), max(busbw)),
            }
        )
    return out


def spread(values: Sequence[Optional[float]], digits: int = 2) -> str:
    """'median [lowest to highest]' of the values (None left out), the value alone when they all
    agree at `digits`, '-' without any."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    text = f"{statistics.median(values):.{digits}f}"
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return text if low == high else f"{text} [{low} to {high}]"


def step_rows(
    rows: Sequence[Dict[str, Any]],
    gradient_bytes: int,
    batch_per_worker: int,
    fits: Sequence[Dict[str, Any]],
) -> List[Dict[str, Any]]:
    """Per two-GPU row of read_runs() at `batch_per_worker` whose log names a transport of `fits`,
    against the one-GPU row, ms as [lowest, median, highest]: "one", "two" (GPUs x batch /
    images/s), "added" (two - one), "model" (the fit's all-reduce of the gradient; range: its
    busbw range), "unexplained" (added - model); extremes combine extremes. [] without a one-GPU
    row."""

    def ms(row: Dict[str, Any]) -> List[float]:
        rates = (row["images_per_sec_max"], row["images_per_sec_median"], row["images_per_sec_min"])
        return [row["workers"] * batch_per_worker / rate * 1e3 for rate in rates]

    at = [r for r in rows if r["batch_per_worker"] == batch_per_worker and r["runs"]]
    one = next((ms(r) for r in at if r["workers"] == 1), None)
    by_transport = {fit["transport"].split()[0]: fit for fit in fits}
    out = []
    for row in (r for r in at if one and r["workers"] == 2 and r["transport"] in by_transport):
        fit, two = by_transport[row["transport"]], ms(row)
        low_bw, high_bw = fit.get("busbw_range") or (fit["busbw_gbps"],) * 2
        model = [
            alphabeta.ring_allreduce_time_us(gradient_bytes, 2, fit["alpha_us"], bw) / 1e3
            for bw in (high_bw, fit["busbw_gbps"], low_bw)
        ]
        added = [two[0] - one[2], two[1] - one[1], two[2] - one[0]]
        out.append(
            {
                "setting": row["setting"],
                "transport": row["transport"],
                "runs": row["runs"],
                "one": one,
                "pair": row["pair"],
                "two": two,
                "added": added,
                "model": model,
                "unexplained": [added[0] - model[2], added[1] - model[1], added[2] - model[0]],
            }
        )
    return out


def steptime(text: str) -> Optional[Dict[str, float]]:
    """The STEPTIME line of labs/ddp_fmnist.py (rank 0's step split, ms), or None without one.
    Numbers as floats; a word stays a word (bucket_cap_mb=default: DDP's own buckets)."""
    found = re.findall(r"^STEPTIME (.*)$", text, re.MULTILINE)
    if not found:
        return None
    fields = dict(item.split("=", 1) for item in found[-1].split() if "=" in item)
    return {
        key: value if re.fullmatch(r"[a-z]+", value) else float(value)
        for key, value in fields.items()
    }


# Published training runs with a slower and a faster link (reference_systems/_published-training/)
PUBLISHED = reference.REFERENCE_DIR / "_published-training"
SIZES_FILE = "model-sizes.csv"


def _csv_with_header(path: Path) -> Tuple[List[str], List[Dict[str, str]]]:
    """The '#' comment lines of a CSV file (without '# ') and its rows."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    notes = [line[1:].strip() for line in lines if line.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(l for l in lines if not l.startswith("#")))))
    return notes, rows


def _source(notes: Sequence[str]) -> str:
    """The comment block's 'Source: ...' sentence with the comment lines after it joined."""
    for index, note in enumerate(notes):
        if note.startswith("Source:"):
            return " ".join([note[len("Source:") :].strip()] + list(notes[index + 1 :]))
    return ""


def published_runs(folder: Path = PUBLISHED) -> List[Dict[str, Any]]:
    """One row per model of every study file in `folder` (all *.csv but model-sizes.csv): study
    (file stem), model, precision, unit, the slower and the faster link (the last two columns:
    names and values), one GPU (a column named '1x ...' with a value, else None), source (the
    '# Source:' comment) and gain: how much faster the faster link trains, in % (a rate: faster /
    slower; a time per step: slower / faster); smallest gain first. A value that is not a number
    is an error naming the file."""
    out = []
    for path in sorted(Path(folder).glob("*.csv")):
        if path.name == SIZES_FILE:
            continue
        notes, rows = _csv_with_header(path)
        for row in rows:
            columns = list(row)
            slower, faster = columns[-2], columns[-1]
            one = next((c for c in columns if c.startswith("1x ") and row[c]), None)
            try:
                values = {c: float(row[c]) for c in (slower, faster) + ((one,) if one else ())}
            except (TypeError, ValueError):
                raise ValueError(
                    f"{path.name}: row {row.get('model')!r} has a value that is not a number"
                ) from None
            rate = row["unit"].endswith("/s")
            ratio = values[faster] / values[slower] if rate else values[slower] / values[faster]
            out.append(
                {
                    "study": path.stem,
                    "model": row["model"],
                    "precision": row["precision"],
                    "unit": row["unit"],
                    "rate": rate,
                    "slower_link": slower,
                    "slower": values[slower],
                    "faster_link": faster,
                    "faster": values[faster],
                    "one_gpu": values[one] if one else None,
                    "gain_percent": (ratio - 1) * 100,
                    "source": _source(notes),
                }
            )
    return sorted(out, key=lambda row: row["gain_percent"])


def model_parameters(folder: Path = PUBLISHED) -> Dict[str, int]:
    """model -> parameters, from model-sizes.csv (each row names its source)."""
    return {
        row["model"]: int(row["parameters"])
        for row in _csv_with_header(Path(folder) / SIZES_FILE)[1]
    }


def added_share(row: Dict[str, Any]) -> Tuple[float, float]:
    """What the second GPU adds to the one-GPU step, in % of that step, over the slower and over
    the faster link, from the rates of one GPU and of two (same batch per GPU): a two-GPU step
    takes 2 x batch / rate2, one GPU's batch / rate1, so the ratio is 2 x rate1 / rate2."""
    if row["one_gpu"] is None or not row["rate"]:
        raise ValueError(f"{row['study']} {row['model']}: no one-GPU rate to compare with")
    return tuple((2 * row["one_gpu"] / row[link] - 1) * 100 for link in ("slower", "faster"))


# labs/step_breakdown.py: one worker against two, the extra split by Horovod's timeline
STEP_SERIES = ("cpu-gloo-pair/step_breakdown", "h100-single-gpu/step_breakdown-*")


LIVE_SERIES = "the machine that ran this cell"


def step_series(live_folder: Optional[Path] = None) -> List[Tuple[str, List[Dict[str, Any]]]]:
    """(label, completed Horovod runs) of the learner's results.jsonl in `live_folder` (when it has
    one; labelled LIVE_SERIES) and of every recorded series; label: where it ran, framework,
    workers, rounds."""
    files = [(LIVE_SERIES, Path(live_folder) / "results.jsonl")] if live_folder else []
    files += [
        (f"{p.parent.parent.name}/{p.parent.name}", p)
        for pattern in STEP_SERIES
        for p in sorted(reference.REFERENCE_DIR.glob(f"{pattern}/results.jsonl"))
    ]
    out = []
    for where, path in files:
        rows = []
        for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
            try:
                rows.append(json.loads(line))
            except ValueError:  # a line cut off by an interrupted run
                continue
        ok = [
            dict(r, folder=str(path.parent))
            for r in rows
            if r.get("mode") == "horovod" and r.get("rc") == 0 and r.get("step_ms") is not None
        ]
        if ok:
            workers = max(r["workers"] for r in ok)
            rounds = len({(r["series"], r["round"]) for r in ok})
            out.append(
                (
                    f"{where}: {ok[0]['framework']}, {workers} worker{'s' * (workers > 1)} "
                    f"at most, {rounds} round{'s' * (rounds > 1)}",
                    ok,
                )
            )
    return out


def operations_per_step(row: Dict[str, Any]) -> Optional[float]:
    """Median collective operations per step of one run (a fused operation counts once), from its
    timeline's summary (runs of today's step_breakdown.py) or from its saved timeline
    (run_dir/timeline.json.gz, the recorded series); None without one."""
    if (row.get("timeline") or {}).get("operations") is not None:
        return row["timeline"]["operations"]
    path = Path(row.get("folder") or ".") / str(row.get("run_dir") or "") / "timeline.json.gz"
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        per_step = PARSERS["horovod-timeline"](text)["steps"]["per_step"]
    except (ParseError, OSError, EOFError):
        return None
    return statistics.median(s["operations"] for s in per_step) if per_step else None


Split = Dict[Tuple[float, int], Dict[str, List[Optional[float]]]]
_FRAMEWORK_PARTS = ("fusion_copy_us", "wait_us", "negotiate_us", "other_us")


def step_split(rows: Sequence[Dict[str, Any]]) -> Split:
    """Per (cycle ms, fusion bytes): per round, the one-worker step (that round's one-worker run of
    the same setting, else its run at the defaults), the parallel step, the extra, and the extra's
    split from the timeline (ms): collective, framework (fusion copies, waits, negotiation, rest),
    unexplained = extra - collective - framework. One-worker-only series: 'one' alone."""
    out: Split = {}
    parallel = [r for r in rows if r["workers"] > 1]
    for r in parallel or rows:
        key = (r["cycle_time_ms"], r["fusion_threshold_bytes"])
        cols = out.setdefault(
            key,
            {
                k: []
                for k in (
                    "one",
                    "two",
                    "extra",
                    "collective",
                    "framework",
                    "unexplained",
                    "operations",
                )
            },
        )
        if not parallel:
            cols["one"].append(r["step_ms"])
            continue
        same = [
            b
            for b in rows
            if b["workers"] == 1 and (b["series"], b["round"]) == (r["series"], r["round"])
        ]
        base = next(
            (b for b in same if (b["cycle_time_ms"], b["fusion_threshold_bytes"]) == key),
            same[0] if same else None,
        )
        extra = None if base is None else r["step_ms"] - base["step_ms"]
        split = r.get("timeline") or {}
        coll = split["collective_us"] / 1e3 if split else None
        frame = sum(split[k] for k in _FRAMEWORK_PARTS) / 1e3 if split else None
        unexplained = None if extra is None or coll is None else extra - coll - frame
        for name, value in (
            ("one", base and base["step_ms"]),
            ("two", r["step_ms"]),
            ("extra", extra),
            ("collective", coll),
            ("framework", frame),
            ("unexplained", unexplained),
            ("operations", operations_per_step(r)),
        ):
            cols[name].append(value)
    return out


def step_table(
    series: Sequence[Tuple[str, List[Dict[str, Any]]]], gradient_bytes: int, fit: Dict[str, Any]
) -> str:
    """One block per series: per setting, median [min to max] over the rounds (ms per step), the
    collective operations per step the timeline shows, and the model (`fit`) sending the gradients
    in that many all-reduces: k x T(S/k), as Horovod fuses only the tensors ready in one cycle."""
    blocks = []
    for label, rows in series:
        lines, workers = [], max(r["workers"] for r in rows)
        for (cycle, fusion), c in sorted(step_split(rows).items()):
            models = [
                None
                if k is None
                else k
                / 1e3
                * alphabeta.ring_allreduce_time_us(
                    gradient_bytes / k, workers, fit["alpha_us"], fit["busbw_gbps"]
                )
                for k in c["operations"]
            ]
            lines.append(
                (
                    f"{cycle:g}",
                    f"{fusion:,}",
                    spread(c["one"], 1),
                    len(c["two"] or c["one"]),
                    spread(c["two"], 1),
                    spread(c["extra"], 1),
                    spread(c["operations"], 1),
                    spread(c["collective"], 1),
                    spread(models),
                    spread(c["framework"], 1),
                    spread(c["unexplained"], 1),
                )
            )
        blocks.append(
            label
            + "\n"
            + text_table(
                lines,
                header=(
                    "cycle ms",
                    "fusion B",
                    "1 worker",
                    "n",
                    "2 workers",
                    "extra",
                    "ops/step",
                    "collective",
                    f"model ({fit['transport'].split()[0]})",
                    "framework",
                    "unexplained",
                ),
            )
        )
    return "\n\n".join(blocks) if blocks else "no step-breakdown series to show"

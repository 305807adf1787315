#!/usr/bin/env python3
"""Where the data-parallel step time goes: one worker against two, the extra split by Horovod's
timeline.

From the repository root (every run appends to OUT/results.jsonl and keeps its raw output
under OUT/runs/; nothing is overwritten):

    python source_code/labs/step_breakdown.py --out results/steps --gloo  # CPU, TensorFlow
    python source_code/labs/step_breakdown.py --out results/steps \
        --framework pytorch  # one GPU per worker
    python source_code/labs/step_breakdown.py --out results/steps \
        --cycle-times 1 --fusion-thresholds 0
    python source_code/labs/step_breakdown.py --out results/steps --gloo \
        --pairs 0.1:134217728,1:134217728,5:134217728,1:0
    python source_code/labs/step_breakdown.py --out results/steps --ddp --cpu  # torchrun, Gloo
    python source_code/labs/step_breakdown.py --out results/steps --ddp --extra-params 25600000
    python source_code/labs/step_breakdown.py --out results/steps \
        --framework pytorch --workers 1  # one GPU
    python source_code/labs/step_breakdown.py --table results/steps/results.jsonl  # table only

Horovod mode: each round runs the CNN (source_code/cnn_fmnist.py) once with one worker at
Horovod's defaults (the baseline) and once with two workers for every pair of
HOROVOD_CYCLE_TIME (--cycle-times, ms; Horovod 0.28.1's default is 1 ms, operations.cc:527) and
HOROVOD_FUSION_THRESHOLD (--fusion-thresholds, bytes; the default is 128 MiB, operations.cc:519;
0 turns tensor fusion off, docs/tensor-fusion.rst), in an order rotated every round so that
each setting meets the machine's drift as often early as late. Every run writes a timeline
(HOROVOD_TIMELINE, read by `python -m gputopo horovod-timeline`), the baseline too, so both pay
its cost. With one worker Horovod all-reduces no gradient (Horovod 0.28.1: the TensorFlow
optimizer's tf.cond on size() > 1, horovod/tensorflow/__init__.py:396; the PyTorch optimizer
registers its gradient hooks only when size() > 1, horovod/torch/optimizer.py:105), so the
baseline's step has none of the work below. Two workers need two devices: NCCL refuses two ranks
on one GPU ("Duplicate GPU detected", src/init.cc:808 at NCCL v2.28.3-1), so on a one-GPU
machine use --workers 1 (does a setting move the one-worker step?) or run both workers on the
CPU (CUDA_VISIBLE_DEVICES= ... --gloo).

ms per step = an epoch's seconds / its steps, median over the timed epochs (all but the first).
The table gives, per setting: one worker, two workers, the extra (two minus one, paired within
each round), and the extra split from rank 0's timeline (medians over the timed steps):
the collective (GLOO_ALLREDUCE / NCCL_ALLREDUCE), Horovod's framework time (negotiation, which
includes waiting for the other rank and for the next cycle; waiting for data and the GPU queue;
fusion-buffer copies; the rest of the operation; long negotiations mean the workers are out of
step, Horovod's maintainers in horovod/horovod#2391), and what is left unexplained = extra -
collective - framework. Timeline phases can overlap the framework's compute (early gradients
are negotiated while backward goes on), so "unexplained" can be negative: it is then time the
timeline shows that the step did not pay. Each cell: median [min to max] n runs.

DDP mode (--ddp): the same CNN under PyTorch DDP (source_code/labs/ddp_fmnist.py, launched with
torchrun), one and two workers per bucket size (--bucket-caps, MiB; DDP's default is 25 with a
1 MiB first bucket, and an explicit cap sets the first bucket too,
torch/nn/parallel/distributed.py), read from its STEPTIME line; extra split into
allreduce_wait_ms (the communication that did not hide behind backward) and the rest,
unexplained. Needs PyTorch.

The environment passes to every child untouched except for the HOROVOD_* variable under test
(and HOROVOD_TIMELINE); NCCL variables are never set here (NCCL_NVLS_ENABLE stays what the
shell says; the course's Makefile exports 0).
"""

import argparse
import datetime
import gzip
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SOURCE))
from gputopo.parsers import ParseError  # noqa: E402
from gputopo.parsers.horovod_log import parse as parse_log  # noqa: E402
from gputopo.parsers.horovod_timeline import parse as parse_timeline  # noqa: E402

PROG = "step_breakdown.py"
FRAMEWORK_KEYS = ("fusion_copy_us", "wait_us", "negotiate_us", "other_us")
DEFAULT_FUSION = 128 * 1024 * 1024  # Horovod 0.28.1, horovod/common/operations.cc:519


class Bad(Exception):
    """Bad input: printed as one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Bad(message)


def numbers(convert, low):
    def parse(text):
        try:
            values = [convert(part) for part in text.split(",")]
        except ValueError:
            values = []
        if not values or any(not low <= v < float("inf") for v in values):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated numbers >= {low}, got {text!r}"
            )
        return values

    return parse


def make_parser():
    p = Parser(
        prog=PROG,
        description="One worker against two: ms per step and the extra split "
        "into collective, framework and unexplained time (Horovod timeline or DDP's STEPTIME).",
    )
    p.add_argument(
        "--out", metavar="DIR", help="folder for results.jsonl, tables.txt and runs/ (appended)"
    )
    p.add_argument(
        "--table", metavar="RESULTS_JSONL", help="only print the table of a results.jsonl"
    )
    p.add_argument(
        "--framework",
        choices=("tensorflow", "pytorch"),
        default="tensorflow",
        help="passed to cnn_fmnist.py (default %(default)s)",
    )
    p.add_argument("--rounds", type=numbers(int, 1), default=[5], help="paired rounds (default 5)")
    p.add_argument(
        "--cycle-times",
        type=numbers(float, 0),
        default=[0.1, 1.0, 5.0],
        help="HOROVOD_CYCLE_TIME values in ms (default 0.1,1,5)",
    )
    p.add_argument(
        "--fusion-thresholds",
        type=numbers(int, 0),
        default=[DEFAULT_FUSION, 0],
        help=(
            f"HOROVOD_FUSION_THRESHOLD values in bytes (default {DEFAULT_FUSION},0; 0 = no fusion)"
        ),
    )
    p.add_argument(
        "--pairs",
        metavar="CYCLE:FUSION,...",
        default=None,
        help="run only these (cycle ms, fusion bytes) pairs instead of every combination",
    )
    p.add_argument(
        "--workers",
        type=numbers(int, 1),
        default=[2],
        help="workers of the parallel run (default 2); 1 = only one-worker runs, one per "
        "setting (a one-GPU machine: does the setting move a one-worker step?)",
    )
    p.add_argument(
        "--gloo", action="store_true", help="horovodrun --gloo (no MPI needed; CPU runs)"
    )
    p.add_argument(
        "--epochs",
        type=numbers(int, 2),
        default=[2],
        help="epochs per run; the first is not timed (default 2)",
    )
    p.add_argument("--steps-per-epoch", type=numbers(int, 1), default=[30], help="default 30")
    p.add_argument(
        "--batch-size", type=numbers(int, 1), default=[64], help="per worker (default 64)"
    )
    p.add_argument(
        "--ddp", action="store_true", help="PyTorch DDP under torchrun instead of Horovod"
    )
    p.add_argument(
        "--bucket-caps",
        type=numbers(float, 0.001),
        default=[25.0, 1.0],
        help="DDP bucket_cap_mb values (default 25,1)",
    )
    p.add_argument(
        "--extra-params",
        type=numbers(int, 0),
        default=[0],
        help="DDP: N more parameters all-reduced every step (bandwidth-bound variant)",
    )
    p.add_argument("--cpu", action="store_true", help="DDP: train on the CPU with Gloo")
    p.add_argument(
        "--timeout", type=numbers(float, 1), default=[600.0], help="seconds per run (default 600)"
    )
    return p


def parse_args(argv):
    args = make_parser().parse_args(argv)
    for name in (
        "rounds",
        "workers",
        "epochs",
        "steps_per_epoch",
        "batch_size",
        "extra_params",
        "timeout",
    ):
        values = getattr(args, name)
        if len(values) != 1:
            raise Bad(f"--{name.replace('_', '-')} takes one value, got {len(values)}")
        setattr(args, name, values[0])
    if args.pairs is not None:
        try:
            args.pairs = [
                (float(c), int(f)) for c, f in (p.split(":") for p in args.pairs.split(","))
            ]
        except ValueError:
            raise Bad(
                "--pairs expects CYCLE_MS:FUSION_BYTES,... e.g. 1:0,5:134217728, "
                f"got {args.pairs!r}"
            ) from None
        if any(not (0 <= c < float("inf")) or f < 0 for c, f in args.pairs):
            raise Bad(f"--pairs values must be >= 0, got {args.pairs}")
    if args.table:
        return args
    if not args.out:
        raise Bad("--out DIR is required (or --table RESULTS_JSONL)")
    if args.ddp:
        if importlib.util.find_spec("torch") is None:
            raise Bad(
                "--ddp needs PyTorch, which is not installed in this Python "
                f"({sys.executable}); run without --ddp for the Horovod CNN"
            )
    else:
        needs = {"tensorflow": "tensorflow", "pytorch": "torch"}[args.framework]
        for module in ("horovod", needs):
            if importlib.util.find_spec(module) is None:
                raise Bad(
                    f"--framework {args.framework} needs {module}, which is not installed "
                    f"in this Python ({sys.executable})"
                )
    return args


# ------------------------------------------------------------------------------------------
# Table maths (pure; tests/test_step_breakdown.py checks it on a recorded results.jsonl)
# ------------------------------------------------------------------------------------------


def describe(values):
    """(median, min, max, n) of the values, or None when there is none."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values), len(values)


def cell(values):
    d = describe(values)
    return "-" if d is None else f"{d[0]:.1f} [{d[1]:.1f} to {d[2]:.1f}] n={d[3]}"


def setting_of(row):
    if row["mode"] == "ddp":
        return ("ddp", row["bucket_cap_mb"], row.get("extra_params", 0))
    return ("horovod", row["cycle_time_ms"], row["fusion_threshold_bytes"])


def table_rows(rows):
    """results.jsonl rows -> one dict per setting of the parallel runs, values per round.

    The baseline of a round is that round's one-worker run of the same setting when there is one
    (DDP, where each bucket size has its own), else its one-worker run at Horovod's defaults.
    """
    ok = [r for r in rows if r.get("rc") == 0 and r.get("step_ms") is not None]
    out = []
    parallel = [r for r in ok if r["workers"] > 1]
    for setting in sorted({setting_of(r) for r in parallel}, key=str):
        mine = [r for r in parallel if setting_of(r) == setting]
        base, two, extra, coll, frame, nego, unexpl = [], [], [], [], [], [], []
        for r in mine:
            same = [
                b
                for b in ok
                if b["workers"] == 1
                and b["batch"] == r["batch"]
                and b["series"] == r["series"]
                and b["round"] == r["round"]
                and b["mode"] == r["mode"]
            ]
            exact = [b for b in same if setting_of(b) == setting]
            b = (exact or same or [None])[0]
            two.append(r["step_ms"])
            e = None if b is None else r["step_ms"] - b["step_ms"]
            base.append(None if b is None else b["step_ms"])
            extra.append(e)
            if r["mode"] == "ddp":
                c, f = r["steptime"]["allreduce_wait_ms"], 0.0
                n = None
            else:
                split = r.get("timeline") or {}
                if not split:
                    c = f = n = None
                else:
                    c = split["collective_us"] / 1e3
                    f = sum(split[k] for k in FRAMEWORK_KEYS) / 1e3
                    n = split["negotiate_us"] / 1e3
            coll.append(c)
            frame.append(f)
            nego.append(n)
            unexpl.append(None if e is None or c is None else e - c - f)
        out.append(
            {
                "setting": setting,
                "one": base,
                "two": two,
                "extra": extra,
                "collective": coll,
                "framework": frame,
                "negotiate": nego,
                "unexplained": unexpl,
                "workers": mine[0]["workers"],
                "failed": sum(1 for r in rows if r.get("rc") != 0 and setting_of(r) == setting),
            }
        )
    return out


def format_table(rows):
    lines = []
    for mode in ("horovod", "ddp"):
        mine = [t for t in table_rows(rows) if t["setting"][0] == mode]
        if not mine:
            continue
        if mode == "horovod":
            lines.append(
                "Horovod: ms per step, median [min to max] n paired rounds; collective and "
                "framework from rank 0's timeline"
            )
            head = (
                "cycle ms",
                "fusion B",
                "1 worker",
                "N workers",
                "extra",
                "collective",
                "framework",
                "of it negotiation",
                "unexplained",
            )
        else:
            lines.append(
                "DDP: ms per step, median [min to max] n paired rounds; collective = "
                "allreduce_wait_ms (STEPTIME)"
            )
            head = (
                "bucket MiB",
                "extra params",
                "1 worker",
                "N workers",
                "extra",
                "collective",
                "framework",
                "of it negotiation",
                "unexplained",
            )
        lines.append(" | ".join(head))
        for t in mine:
            _, a, b = t["setting"]
            fields = [f"{a:g}", f"{b}"] + [
                cell(t[k])
                for k in (
                    "one",
                    "two",
                    "extra",
                    "collective",
                    "framework",
                    "negotiate",
                    "unexplained",
                )
            ]
            fields[3] = f"{fields[3]} ({t['workers']} workers)"
            lines.append(
                " | ".join(fields)
                + (f"  ({t['failed']} failed runs left out)" if t["failed"] else "")
            )
    ok = [r for r in rows if r.get("rc") == 0 and r.get("step_ms") is not None]
    if ok and all(r["workers"] == 1 for r in ok):
        lines.append("one worker only: ms per step, median [min to max] n rounds")
        for setting in sorted({setting_of(r) for r in ok}, key=str):
            lines.append(
                f"{setting[0]} {setting[1]:g} {setting[2]} | "
                + cell([r["step_ms"] for r in ok if setting_of(r) == setting])
            )
    return "\n".join(lines) if lines else "no completed run in the results"


def read_results(path):
    rows = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise Bad(f"cannot read {path}: {exc.strerror}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            setting_of(row)
            row["workers"], row["round"], row["series"], row["batch"]  # noqa: B018
        except (ValueError, KeyError, TypeError):
            raise Bad(f"not a results line of {PROG} ({path}:{lineno})") from None
        rows.append(row)
    if not rows:
        raise Bad(f"no results line in {path}")
    return rows


# ------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------


def read_steptime(text):
    """The *_ms fields of ddp_fmnist.py's last STEPTIME line, as floats; None without one."""
    found = None
    for line in text.splitlines():
        if "STEPTIME " in line:
            fields = (
                part.split("=", 1) for part in line.split("STEPTIME ", 1)[1].split() if "=" in part
            )
            try:
                found = {k: float(v) for k, v in fields if k.endswith("_ms")}
            except ValueError:
                found = None
    return found


def timed_median(split_steps, timed):
    steps = split_steps[-timed:] if timed else split_steps
    if not steps:
        return None
    return {k: statistics.median(s[k] for s in steps) for k in steps[0]} | {
        "steps_used": len(steps)
    }


def run_one(args, out, series, rnd, workers, knob, stamp):
    label = (
        f"r{rnd}-ddp-w{workers}-bucket{knob:g}"
        if args.ddp
        else f"r{rnd}-w{workers}-cycle{knob[0]:g}-fusion{knob[1]}"
    )
    run_dir, again = out / "runs" / f"{stamp}-{label}", 1
    while run_dir.exists():  # never reuse a run's folder
        again += 1
        run_dir = out / "runs" / f"{stamp}-{label}-{again}"
    run_dir.mkdir(parents=True)
    env = dict(os.environ)
    common = [
        "--epochs",
        str(args.epochs),
        "--steps-per-epoch",
        str(args.steps_per_epoch),
        "--batch-size",
        str(args.batch_size),
    ]
    if args.ddp:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(workers),
            str(SOURCE / "labs" / "ddp_fmnist.py"),
            *common,
            "--bucket-cap-mb",
            f"{knob:g}",
            "--extra-params",
            str(args.extra_params),
        ]
        command += ["--cpu"] if args.cpu else []
    else:
        timeline = run_dir / "timeline.json"
        env.update(
            HOROVOD_TIMELINE=str(timeline),
            HOROVOD_CYCLE_TIME=f"{knob[0]:g}",
            HOROVOD_FUSION_THRESHOLD=str(knob[1]),
        )
        command = [
            sys.executable,
            "-m",
            "horovod.runner.launch",
            "-np",
            str(workers),
            "-H",
            f"localhost:{workers}",
            *(["--gloo"] if args.gloo else []),
            sys.executable,
            str(SOURCE / "cnn_fmnist.py"),
            "--framework",
            args.framework,
            *common,
            "--test-images",
            "100",
        ]
    shown = " ".join(
        f"{k}={env[k]}"
        for k in ("HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD", "HOROVOD_TIMELINE")
        if not args.ddp
    )
    (run_dir / "command.txt").write_text(f"{shown} {' '.join(command)}\n".lstrip())
    started = time.time()
    try:
        done = subprocess.run(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=args.timeout,
        )
        rc, text = done.returncode, done.stdout
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout or ""
        rc, text = (
            124,
            partial.decode("utf-8", "replace") if isinstance(partial, bytes) else partial,
        )
    (run_dir / "output.txt").write_text(text)
    row = {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "series": series,
        "round": rnd,
        "mode": "ddp" if args.ddp else "horovod",
        "workers": workers,
        "batch": args.batch_size,
        "epochs": args.epochs,
        "steps_per_epoch": args.steps_per_epoch,
        "rc": rc,
        "wall_s": round(time.time() - started, 1),
        "run_dir": str(run_dir.relative_to(out)),
        "step_ms": None,
    }
    timed = args.steps_per_epoch * (args.epochs - 1)
    if args.ddp:
        row.update(bucket_cap_mb=knob, extra_params=args.extra_params, steptime=read_steptime(text))
        row["step_ms"] = (row["steptime"] or {}).get("step_ms")
    else:
        row.update(framework=args.framework, cycle_time_ms=knob[0], fusion_threshold_bytes=knob[1])
        try:
            epochs = [e for e in parse_log(text)["epochs"] if e["epoch"] > 1]
            row["step_ms"] = statistics.median(
                e["seconds"] * 1e3 / args.steps_per_epoch for e in epochs
            )
        except (ParseError, KeyError, statistics.StatisticsError):
            pass
        if timeline.exists():
            raw = timeline.read_bytes()
            try:
                parsed = parse_timeline(raw.decode("utf-8", "replace"))
                row["timeline"] = timed_median(parsed["steps"]["per_step"], timed)
                row["timeline_incomplete"] = parsed["incomplete"]
            except ParseError as exc:
                row["timeline_error"] = str(exc)
            with gzip.open(run_dir / "timeline.json.gz", "wb") as fh:  # the same bytes, smaller
                fh.write(raw)
            timeline.unlink()
    with open(out / "results.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")
    print(
        f"{label}: rc={rc} "
        f"step_ms={row['step_ms'] if row['step_ms'] is None else round(row['step_ms'], 2)} "
        f"wall={row['wall_s']}s",
        flush=True,
    )
    return row


def main(argv=None):
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if args.table:
            print(format_table(read_results(args.table)))
            return 0
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
    except Bad as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: cannot create {args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    if (
        not args.ddp
        and shutil.which("horovodrun") is None
        and importlib.util.find_spec("horovod.runner") is None
    ):
        print(f"{PROG}: error: horovod's launcher is not installed", file=sys.stderr)
        return 2
    series = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if args.ddp:
        plan = [(w, cap) for cap in args.bucket_caps for w in sorted({1, args.workers})]
    else:
        base = (1.0, DEFAULT_FUSION)
        pairs = args.pairs or [(c, f) for c in args.cycle_times for f in args.fusion_thresholds]
        plan = (
            [(1, pair) for pair in pairs]
            if args.workers == 1
            else [(1, base)] + [(args.workers, pair) for pair in pairs]
        )
    print(
        f"series {series}: {args.rounds} rounds x {len(plan)} runs -> {out / 'results.jsonl'}",
        flush=True,
    )
    rows = []
    for rnd in range(1, args.rounds + 1):
        shift = (rnd - 1) % len(plan)
        for workers, knob in plan[shift:] + plan[:shift]:
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
            rows.append(run_one(args, out, series, rnd, workers, knob, stamp))
    table = format_table(rows)
    with open(out / "tables.txt", "a") as fh:
        fh.write(f"series {series} ({' '.join(sys.argv[1:])})\n{table}\n\n")
    print(table)
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

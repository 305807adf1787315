"""Run the Horovod CNN (source_code/cnn_fmnist.py) on a GPU pair under chosen NCCL settings.

    from gputopo import runner
    r = runner.run_experiment(gpus=(0, 3), env={"NCCL_P2P_LEVEL": "LOC"})
    r.ok, r.reason, r.framework, r.summary["images_per_sec_median"], r.transports  # ... ["SHM"]
    runs = runner.sweep(repeats=3)     # best and worst pair x the five SETTINGS, 3 runs each
    rows = runner.summarize(runs)      # one row per setting: median and range over the runs
    runner.plot_sweep(rows)            # bars with error bars from the lowest to the highest run
    runner.reference_sweep()           # recorded runs: the course's H200 pair, the lab's DGX logs

    python -m gputopo.runner --gpus 0,1 --repeats 3 --record-dir DIR    # the same from a shell

What run_experiment() does (checks, launch, environment, timeouts, failure categories,
recording): the docstring of gputopo/experiment.py.

Where it lives: one run in gputopo/experiment.py, sweeps and recorded runs in
gputopo/sweep.py, NCCL_P2P_LEVEL facts in gputopo/ncclpaths.py, plot_sweep in gputopo/plots.py;
this module is the command line (the current notebooks still say `runner.X` for some of them).
NCCL_P2P_LEVEL facts (P2P_LEVEL_FACTS) come from NCCL's documentation and source; the
test suite checks them against the recorded DGX-1 logs in reference_systems/.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo.experiment import DEFAULT_TIMEOUT_S, FRAMEWORKS
from gputopo.sweep import SETTINGS, record_name, summarize, sweep

# Until notebooks 4 and 5 and gputopo/lessons/lesson3_nccl.py are replaced, they say runner.X for
# these; each is defined in the module named. Delete this block with them; import from there.
from gputopo.experiment import (  # noqa: F401
    RESULT_KIND, SOURCE_DIR, RunResult, horovod_frameworks, run_experiment, usable_gpu_count)
from gputopo.ncclpaths import (  # noqa: F401
    LEGACY_P2P_LEVELS, P2P_LEVEL_FACTS, P2P_LEVEL_SOURCES, expected_transport, local_cpu_vendor, nic_paths,
    path_type_of_link)
from gputopo.plots import plot_sweep  # noqa: F401
from gputopo.sweep import recorded_cnn_runs, reference_sweep  # noqa: F401


# ------------------------------------------------------------------------------------------
# Command line: record a sweep (what reference_systems/h200-nvswitch-pair/horovod-cnn/ holds)
# ------------------------------------------------------------------------------------------

def _parse_pair(text: str) -> Tuple[int, ...]:
    try:
        gpus = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,1, got {text!r}") from None
    if not gpus or min(gpus) < 0:
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,1, got {text!r}")
    return gpus


def _cli_parser():
    from gputopo.cliutil import OneLineParser
    parser = OneLineParser(
        prog="python -m gputopo.runner",
        description="Train the course's Horovod CNN under NCCL settings, several times each, and "
                    "print the median and range of images/s per setting. With --record-dir, "
                    "every run's full log (NCCL INFO lines included) and JSON record are kept "
                    "there under names that say framework, batch, GPUs, setting and repeat.")
    parser.add_argument("--gpus", type=_parse_pair, action="append", metavar="I,J",
                        help="GPUs to run on (nvidia-smi indices); repeat for several pairs; "
                             "default: this machine's best and worst pair. One index = one worker")
    parser.add_argument("--settings", default="all",
                        help="comma-separated setting numbers 1-%d of %s, or 'all' (default)"
                             % (len(SETTINGS), ", ".join(f"{i + 1}={n}" for i, (n, _) in
                                                        enumerate(SETTINGS))))
    parser.add_argument("--repeats", type=int, default=3, help="runs per setting (default 3)")
    parser.add_argument("--batch-size", type=int, default=None, help="images per GPU per step")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per run")
    parser.add_argument("--framework", choices=FRAMEWORKS, default=None,
                        help="default: the one Horovod is built for (TensorFlow when both)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="seconds per run before it is killed (default %(default)s)")
    parser.add_argument("--record-dir", metavar="DIR", default=None,
                        help="keep each run's log (.txt) and record (.json) in DIR; an existing "
                             "file is never overwritten (the run stops first)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    import json
    import shutil
    from gputopo.cliutil import UsageError

    parser = _cli_parser()
    try:
        args = parser.parse_args(argv)
        if args.repeats < 1:
            raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
        if args.settings == "all":
            settings = list(SETTINGS)
        else:
            try:
                settings = [SETTINGS[int(n) - 1] for n in args.settings.split(",")]
                if any(int(n) < 1 for n in args.settings.split(",")):
                    raise IndexError
            except (ValueError, IndexError):
                raise UsageError(f"--settings: expected numbers 1-{len(SETTINGS)} or 'all', "
                                 f"got {args.settings!r}") from None
        if args.record_dir and not os.path.isdir(args.record_dir):
            raise UsageError(f"--record-dir does not exist ({args.record_dir})")
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2

    from gputopo.detect import detect_once  # discovery only when the command line runs
    machine = detect_once(check_horovod=False)
    kwargs = {"batch_size": args.batch_size, "epochs": args.epochs, "timeout": args.timeout,
              "framework": args.framework}
    pairs = args.gpus
    if pairs is None and (getattr(machine, "gpu_count", 0) or 0) < 2:
        print(f"{parser.prog}: error: a sweep needs two GPUs and this machine has "
              f"{getattr(machine, 'gpu_count', 0) or 0}; give --gpus I for a one-GPU run",
              file=sys.stderr)
        return 2
    by_pair: Dict[int, List[Tuple[int, ...]]] = {}
    for pair in pairs or []:
        by_pair.setdefault(len(pair), []).append(pair)
    groups = sorted(by_pair.items()) or [(2, None)]

    def keep(row):
        if not args.record_dir:
            return
        gpus = [int(g) for g in row["pair"].split(",")]
        base = os.path.join(args.record_dir, record_name(row.get("framework"),
                                                         row["batch_per_worker"], gpus,
                                                         row["env"], row["repeat"]))
        for ext, source in ((".txt", row.get("log_path")), (".json", None)):
            target = base + ext
            if os.path.exists(target):
                raise FileExistsError(target)
            if ext == ".txt" and source:
                shutil.copyfile(source, target)
            elif ext == ".json" and row.get("record") is not None:
                with open(target, "x", encoding="utf-8") as fh:
                    json.dump(row["record"], fh, indent=1, sort_keys=True)
                    fh.write("\n")

    rows: List[Dict[str, Any]] = []
    try:
        for np_, group_pairs in groups:
            # One worker has no peer: only the default setting means anything there.
            rows += sweep(pairs=group_pairs, settings=settings if np_ > 1 else settings[:1],
                          repeats=args.repeats, machine=machine,
                          progress=lambda line: print(line, flush=True), on_run=keep,
                          np=np_, **kwargs)
    except FileExistsError as exc:
        print(f"{parser.prog}: error: {exc} exists; not overwritten (use a new --record-dir)",
              file=sys.stderr)
        return 2
    table = [(r["pair"], r["setting"], r.get("framework") or "-", r.get("batch_per_worker"),
              r.get("transports") or "-", f"{r['runs_ok']}/{r['runs']}",
              "-" if r["images_per_sec_median"] is None else f"{r['images_per_sec_median']:,.0f}",
              "-" if r["images_per_sec_min"] is None else
              f"{r['images_per_sec_min']:,.0f}-{r['images_per_sec_max']:,.0f}")
             for r in summarize(rows)]
    from gputopo.selfcheck import text_table
    print(text_table(table, header=("GPUs", "setting", "framework", "batch", "NCCL transport",
                                    "runs ok", "images/s median", "range")))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

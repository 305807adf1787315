"""Sweeps of the CNN over GPU pairs and NCCL settings, their summary, and the recorded runs.

    from gputopo import sweep
    runs = sweep.sweep(repeats=3)      # best and worst pair x the five SETTINGS, 3 runs each
    rows = sweep.summarize(runs)       # one row per setting: median and range over the runs
    sweep.reference_sweep()            # recorded runs: the course's H200 pair, the lab's DGX logs

The recorded systems' facts (labels, CPU vendor, each pair's link, each log's settings) are
their reference_systems/<system>/system.json. (`gputopo.runner` re-exports all of it.)
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo.experiment import _machine, _parse_nccl, _parse_throughput, _read_record, run_experiment
from gputopo.ncclpaths import (expected_transport, legacy_level_name, local_cpu_vendor, nic_paths,
                               nvls_state, path_type_of_link)

# The sweep's settings: (name, NCCL variables). Order = order in the table and the plot.
SETTINGS: Tuple[Tuple[str, Dict[str, str]], ...] = (
    ("default", {}),
    ("NCCL_P2P_LEVEL=NVL", {"NCCL_P2P_LEVEL": "NVL"}),
    ("NCCL_P2P_LEVEL=PIX", {"NCCL_P2P_LEVEL": "PIX"}),
    ("NCCL_P2P_LEVEL=LOC", {"NCCL_P2P_LEVEL": "LOC"}),
    ("P2P and SHM disabled", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}),
)



def _pair_text(pair) -> str:
    return ",".join(str(g) for g in pair)


def _transports_text(transports: Sequence[str]) -> str:
    return "+".join(transports) if transports else ""


def setting_tag(variables: Dict[str, str]) -> str:
    """File-name form of a setting: 'default', 'NCCL_P2P_LEVEL-NVL', 'NCCL_P2P_DISABLE-1_...'."""
    if not variables:
        return "default"
    return "_".join(f"{k}-{v}" for k, v in sorted(variables.items()))


def sweep(pairs: Optional[Sequence[Sequence[int]]] = None,
          settings: Sequence[Tuple[str, Dict[str, str]]] = SETTINGS, *, repeats: int = 1,
          machine=None, progress=None, on_run=None, **run_kwargs) -> List[Dict[str, Any]]:
    """Run every pair under every setting `repeats` times; one row per run.

    pairs=None takes the best and the worst pair of this machine's `nvidia-smi topo -m`.
    Needs at least two GPUs (on fewer, reference_sweep() shows recorded results) unless
    pairs is given explicitly. The repeats of one setting are spread over the sweep (setting
    1..5, then again), so a drift of the machine does not land on one setting only.
    progress: a function called with one line after each run (e.g. print); on_run: one
    called with each row as soon as its run has finished.
    Other keyword arguments go to run_experiment(). summarize() turns the rows into one row
    per (pair, setting) with the median and range over the repeats.
    """
    machine = _machine(machine)
    if pairs is None:
        count = getattr(machine, "gpu_count", 0) or 0
        best, worst = getattr(machine, "best_pair", None), getattr(machine, "worst_pair", None)
        if count < 2 or not best:
            raise ValueError(f"a sweep needs at least two GPUs and their topology; this machine "
                             f"has {count} GPU(s) (reference_sweep() shows recorded DGX-1 runs)")
        pairs = [tuple(best)] + ([tuple(worst)] if worst and tuple(worst) != tuple(best) else [])
    vendor = local_cpu_vendor()
    rows = []
    total = len(pairs) * len(settings) * repeats
    for repeat in range(1, repeats + 1):
        for pair in pairs:
            link = machine.link_between(*pair) if (hasattr(machine, "link_between")
                                                   and len(pair) == 2) else None
            for name, variables in settings:
                result = run_experiment(gpus=tuple(pair), env=dict(variables), machine=machine,
                                        **run_kwargs)
                row = {
                    "system": "this machine",
                    "source": "live",
                    "pair": _pair_text(pair),
                    "link": link,
                    "setting": name,
                    "env": dict(variables),
                    "repeat": repeat,
                    "framework": result.framework,
                    "expected_transport": expected_transport(
                        variables, path_type_of_link(link), vendor, nccl_version=result.nccl_version,
                        local_gpus=len(pair),
                        nics=nic_paths(getattr(machine, "topology", None), *pair) if len(pair) == 2 else None),
                    "transports": _transports_text(result.transports),
                    "p2p_level_in_log": result.p2p_level,
                    "nccl_version": result.nccl_version,
                    "nvls": nvls_state(result.env, result.nccl_version),
                    "batch_per_worker": result.batch_per_worker,
                    "images_per_sec_median": result.images_per_sec_median,
                    "test_accuracy": (result.summary or {}).get("test_accuracy"),
                    "ok": result.ok,
                    "reason": result.reason,
                    "log_path": result.log_path,
                    "record": result.record,
                }
                rows.append(row)
                if on_run is not None:
                    on_run(row)
                if progress is not None:
                    done = f"{row['images_per_sec_median']:,.0f} images/s" if result.ok else \
                        result.reason
                    progress(f"[{len(rows)}/{total}] GPUs {row['pair']} {name} (repeat {repeat}): "
                             f"{done}" + (f", NCCL: {row['transports']}" if row["transports"] else "")
                             + f" ({result.duration:.0f} s)")
                if len(rows) == 1 and not result.ok:
                    # The first run (the default setting) failed: the others share its cause.
                    if progress is not None:
                        progress("the first run failed; the other settings were not tried")
                    return rows
    return rows


def summarize(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per (system, pair, setting, batch, framework): the median over the repeats of each
    run's median images/s, the lowest and highest of them, how many runs succeeded, and the
    transports NCCL chose (all that any run's log showed). Order of first appearance.

    `images_per_sec_min` / `_max` are the range over repeats (each run's median epoch), which
    is what says whether two settings differ: a difference smaller than the range is noise.
    """
    groups: Dict[Tuple, List[Dict[str, Any]]] = {}
    for row in rows:
        key = (row.get("system"), row["pair"], row["setting"], row.get("batch_per_worker"),
               row.get("framework"))
        groups.setdefault(key, []).append(row)
    out = []
    for group in groups.values():
        good = [r for r in group if r.get("ok") and r.get("images_per_sec_median") is not None]
        rates = [r["images_per_sec_median"] for r in good]
        transports: List[str] = []
        for r in group:
            for t in (r.get("transports") or "").split("+"):
                if t and t not in transports:
                    transports.append(t)
        first = dict(group[0])
        for key in ("repeat", "log_path", "record", "epochs_shown"):
            first.pop(key, None)
        first.update({
            "runs": len(group), "runs_ok": len(good),
            "images_per_sec_median": statistics.median(rates) if rates else None,
            "images_per_sec_min": min(rates) if rates else None,
            "images_per_sec_max": max(rates) if rates else None,
            "transports": "+".join(transports),
            "ok": bool(good),
            "reason": (group[0].get("reason", "") if len(group) == 1
                       else "ok" if good else group[-1].get("reason", "")),
        })
        accuracies = [r["test_accuracy"] for r in good if r.get("test_accuracy") is not None]
        if accuracies:
            first["test_accuracy"] = statistics.median(accuracies)
        out.append(first)
    return out


def reference_runs() -> Dict[str, Dict[str, Any]]:
    """{system: its system.json's "cnn" facts} for every recorded system with CNN runs, in the
    order of the course's tables: what the logs do not print themselves (a label, the CPU
    vendor for NCCL's default P2P level, the link and NCCL path type of each GPU pair)."""
    from . import reference
    found = []
    for system in reference.list_systems():
        info = reference.system_info(system)
        if info.get("cnn"):
            found.append((info["cnn"].get("order", len(found)), system,
                          dict(info["cnn"], cpu_vendor=info.get("cpu_vendor"))))
    return {system: facts for _, system, facts in sorted(found, key=lambda item: item[0])}


def _pair_facts(facts: Dict[str, Any], pair: str) -> Tuple[Optional[str], Optional[str]]:
    # (link as the course says it, NCCL path type) of a GPU pair of a recorded system
    entry = (facts.get("pairs") or {}).get(pair) or {}
    return entry.get("link"), entry.get("path_type")


def _rule_version(nccl: Dict[str, Any]) -> Optional[str]:
    """The NCCL release whose rules a recorded log is checked against: the one it prints, or,
    when it prints none but spells SHM "via direct shared memory", 2.12 (the last release with
    that spelling: src/transport/shm.cc at v2.12.12-1; "via SHM/%s/%s" from v2.13.4-1). Every
    2.x before it gives the same transport for the recorded rows; what matters is that it
    predates ncclTopoCheckNet (2.14), so SHM cannot have stepped aside for a NIC."""
    if nccl.get("nccl_version"):
        return nccl["nccl_version"]
    if any(ch.get("via") == "direct shared memory" for ch in nccl.get("channels") or ()):
        return "2.12"
    return None


def _recorded_nics(system: str, pair: str):
    """nic_paths() of a recorded system's GPU pair from its recorded `nvidia-smi topo -m`
    (() when that lists no NIC), or None when the system has no recorded topo -m."""
    from . import reference
    names = reference.find(system, "topo")
    gpus = [int(g) for g in pair.split(",") if g.strip().isdigit()]
    if "nvidia-smi-topo-m.txt" not in names or len(gpus) != 2:
        return None
    try:
        return nic_paths(reference.load(system, "topo", filename="nvidia-smi-topo-m.txt"), *gpus)
    except Exception:  # a recorded file the parser refuses: the NICs stay unknown
        return None


def _setting_of(variables: Dict[str, str]) -> str:
    """How a recorded run's NCCL settings read in a table: "default", "NCCL_P2P_LEVEL=LOC (0)"."""
    if not variables:
        return "default"
    value = variables.get("NCCL_P2P_LEVEL")
    if value is not None and len(variables) == 1:
        name = legacy_level_name(value)
        return f"NCCL_P2P_LEVEL={name}" + (f" ({value})" if value != name else "")
    return " ".join(f"{key}={val}" for key, val in sorted(variables.items()))


def _csv_condition_matches(condition: str, setting_env: Dict[str, str]) -> bool:
    level = setting_env.get("NCCL_P2P_LEVEL")
    if level is None:
        return condition.startswith("default") or "(default)" in condition
    return condition.startswith(f"NCCL_P2P_LEVEL={level} ")


def _reference_summary_rows() -> List[Tuple[str, Dict[str, str]]]:
    """(file label, row) for every row of the recorded summary CSVs (horovod-cnn-summary.csv)."""
    from . import reference
    out = []
    for system in reference_runs():
        for name in reference.find(system, "csv"):
            if name.startswith("horovod-cnn-summary"):
                for row in reference.load(system, "csv", name)["rows"]:
                    # the CSV is kept as published; it names the A100 folder by its old name
                    row = dict(row, system=reference.system_of(row["system"]) or row["system"])
                    out.append((f"{system}/{name}", row))
    return out


# The course's own recordings: <system>/horovod-cnn/<record_name()>.txt (log) and .json (record).
CNN_RUNS_FOLDER = "horovod-cnn"
_RECORD_NAME = re.compile(r"horovod-cnn-(?P<framework>[a-z]+)-b(?P<batch>\d+)-gpus-"
                          r"(?P<gpus>\d+(?:-\d+)*)-(?P<tag>[A-Za-z].*)-r(?P<repeat>\d+)\.txt$")


def recorded_cnn_runs(system: str) -> List[Dict[str, Any]]:
    """One row per run recorded by `python -m gputopo.runner --record-dir` for `system`
    (reference_systems/<system>/horovod-cnn/), in the shape of sweep() rows."""
    from . import reference
    folder = reference.REFERENCE_DIR / system / CNN_RUNS_FOLDER
    facts = reference_runs().get(system, {"label": system, "cpu_vendor": None, "pairs": {}})
    known = {setting_tag(env): (name, env) for name, env in SETTINGS}
    rows = []
    for log_file in sorted(folder.glob("horovod-cnn-*.txt")) if folder.is_dir() else []:
        match = _RECORD_NAME.match(log_file.name)
        if not match or match.group("tag") not in known:
            continue
        name, variables = known[match.group("tag")]
        record = _read_record(log_file.with_suffix(".json")) or {}
        log = log_file.read_text(encoding="utf-8", errors="replace")
        nccl = _parse_nccl(log)
        epochs_rows, summary = _parse_throughput(log)
        summary = record.get("summary") or summary or {}
        pair = match.group("gpus").replace("-", ",")
        link, path_type = _pair_facts(facts, pair)
        rows.append({
            "system": facts["label"], "source": "recorded", "pair": pair, "link": link,
            "setting": name, "env": dict(variables), "repeat": int(match.group("repeat")),
            "framework": match.group("framework"),
            "expected_transport": (expected_transport(variables, path_type, facts["cpu_vendor"],
                                                      nccl_version=_rule_version(nccl),
                                                      local_gpus=len(pair.split(",")),
                                                      nics=_recorded_nics(system, pair))
                                   if "," in pair else "none (one GPU)"),
            "transports": _transports_text(nccl["transports"]),
            "p2p_level_in_log": nccl["p2p_level"],
            "nccl_version": nccl["nccl_version"],
            "nvls": nvls_state(record.get("nccl_env"), nccl["nccl_version"]),
            "batch_per_worker": int(match.group("batch")),
            "workers": record.get("workers") or len(pair.split(",")),
            "images_per_sec_median": summary.get("images_per_sec_median"),
            "test_accuracy": summary.get("test_accuracy"),
            # the timed epochs: the first (start-up) counts only when it is the only one
            "epoch_rates": [e["images_per_sec"] for e in (epochs_rows[1:] or epochs_rows)],
            "ok": summary.get("images_per_sec_median") is not None,
            "reason": f"recorded: reference_systems/{system}/{CNN_RUNS_FOLDER}/{log_file.name}",
            "log_file": f"{system}/{CNN_RUNS_FOLDER}/{log_file.name}",
        })
    return rows


def reference_sweep() -> List[Dict[str, Any]]:
    """The sweep table built from the recorded DGX-1 V100 / DGX A100 logs (no GPU needed).

    One row per log (via gputopo.reference), plus rows of the summary CSV that have no log
    (the A100 NVLink default run, which used batch 8192 per GPU, not 512: batch_per_worker is a
    column so rows of different batch sizes are never compared silently). images/s is the
    median of the epochs the log shows.
    """
    from . import reference

    summary_rows = _reference_summary_rows()
    systems = reference_runs()
    rows, seen = [], set()
    for system, facts in systems.items():
        # The logs system.json describes ("gpus", "env", ...); the course's own recordings
        # (horovod-cnn/) come from recorded_cnn_runs() below.
        logs = {name: reference.file_settings(system, name) for name in reference.find(system, "nccl-log")}
        logs = {name: settings for name, settings in logs.items() if settings.get("gpus")}
        nccl_logs = {name: reference.load(system, "nccl-log", filename=name) for name in logs}
        throughput = {name: reference.load(system, "horovod", filename=name) for name in logs
                      if name in reference.find(system, "horovod")}
        for name in sorted(nccl_logs):
            settings = logs[name]
            pair = settings["gpus"]
            variables = dict(settings.get("env") or {})
            setting = _setting_of(variables)
            nccl = nccl_logs[name]
            rates = [e["images_per_sec"] for e in throughput.get(name, {}).get("epochs", [])]
            link, path_type = _pair_facts(facts, pair)
            seen.add((system, pair, setting.split(" ")[0]))
            rows.append({
                "system": facts["label"],
                "source": "recorded",
                "framework": settings.get("framework"),
                "nccl_version": nccl["nccl_version"],
                "nvls": facts.get("nvls") or nvls_state(None, nccl["nccl_version"]),
                "pair": pair,
                "link": link,
                "setting": setting,
                "env": variables,
                "expected_transport": expected_transport(variables, path_type, facts["cpu_vendor"],
                                                         nccl_version=_rule_version(nccl),
                                                         local_gpus=len(pair.split(",")),
                                                         nics=_recorded_nics(system, pair)),
                "transports": _transports_text(nccl["transports"]),
                "p2p_level_in_log": nccl["p2p_level"],
                "batch_per_worker": settings.get("batch_per_worker"),
                "images_per_sec_median": statistics.median(rates) if rates else None,
                "epochs_shown": len(rates),
                "ok": True,
                "reason": f"recorded: reference_systems/{system}/{name}",
                "log_file": f"{system}/{name}",
            })
    # Summary rows without a log of their own (the A100 default run), after all the logs.
    for label, row in summary_rows:
        facts = systems.get(row["system"])
        if facts is None or not _csv_condition_matches(row["condition"], {}):
            continue
        key = (row["system"], row["gpus"], "default")
        if key in seen:
            continue
        seen.add(key)
        link, path_type = _pair_facts(facts, row["gpus"])
        rows.append({
            "system": facts["label"],
            "source": "recorded",
            "framework": "tensorflow",
            "nccl_version": None,
            "nvls": facts.get("nvls") or nvls_state(None, None),
            "pair": row["gpus"],
            "link": link,
            "setting": "default",
            "env": {},
            "expected_transport": expected_transport({}, path_type, facts["cpu_vendor"],
                                                     local_gpus=len(str(row["gpus"]).split(","))),
            "transports": "",  # no NCCL log was published for this run
            "p2p_level_in_log": None,
            "batch_per_worker": int(row["batch_size_per_gpu"]),
            "images_per_sec_median": float(row["images_per_sec_approx"]),
            "epochs_shown": None,
            "ok": True,
            "reason": f"recorded: reference_systems/{label} (approximate value, no NCCL log "
                      f"published)",
        })
    for system in systems:
        rows += recorded_cnn_runs(system)
    order = {name: i for i, (name, _) in enumerate(SETTINGS)}
    systems = [facts["label"] for facts in systems.values()]
    rows.sort(key=lambda r: (systems.index(r["system"]), r.get("batch_per_worker") or 0, r["pair"],
                             order.get(r["setting"].split(" ")[0], len(order)), r["setting"],
                             r.get("repeat") or 0))
    return rows


def record_name(framework: Optional[str], batch: int, gpus: Sequence[int], variables: Dict[str, str],
                repeat: int) -> str:
    """'horovod-cnn-pytorch-b64-gpus-0-1-NCCL_P2P_LEVEL-NVL-r2' (no extension)."""
    return (f"horovod-cnn-{framework or 'unknown'}-b{batch}-gpus-{'-'.join(map(str, gpus))}-"
            f"{setting_tag(variables)}-r{repeat}")

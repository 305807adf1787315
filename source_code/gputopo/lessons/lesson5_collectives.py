"""Glue for notebook 4 (collectives and scaling): recorded NCCL tables, ring and tree models,
step time and scaling efficiency.

    from gputopo.lessons import lesson5_collectives as lessons
    lessons.nccl_tables("all_reduce")          # every recorded all-reduce table, with transport and NVLS state
    lessons.ring_schedule(4)                   # who sends which chunk in each step (gputopo.alphabeta)
    lessons.nccl_tables("all_reduce", cuda_graph=True)   # the runs with CUDA graphs (-G): no host launch cost
    lessons.live_tables(ncclbench.run, lessons.TRANSPORTS)   # the benchmark run here (two or more GPUs)
    lessons.fit_table(fits, system)            # one system's fits as printed rows (full NVLS label)
    lessons.cnn_steps(runner.summarize(runner.reference_sweep()), "2x H200 NVSwitch", 512)
                                               # one system's one- and two-GPU step times, chosen by name
    lessons.multinode_rows(...)                # the ring beyond one node, bounded by the node's NICs
    lessons.step_time_ms(100000, 2, 512)       # images/s and batch -> time of one step
    lessons.recorded_clusters()                # published multi-node runs against alphabeta.whatif
    figure, panel = lessons.whatif_panel()     # the what-if panel: static table + plot, ipywidgets box
    lessons.net_lines("nccl-398-socket-excerpt.txt")   # the NET lines of a published multi-node log

numpy and matplotlib are imported inside the functions that need them (CONTRIBUTING.md).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo import reference
from gputopo.units import format_bytes
from gputopo.alphabeta import ring_schedule, simulate_ring_allreduce  # noqa: F401  (notebook 4's lessons.ring_schedule)

# Collectives (notebook 4)

# Which transport a recorded table used: its system.json's "transport" for the file, else its
# "# Transports:" line, nccl_bench's summary after the table, e.g.
# "# Transports NCCL reported (...): P2P/direct pointer: 48;"
_TRANSPORT_LINE = re.compile(r"^#\s*Transports NCCL reported[^:]*:\s*(.+?)\s*$", re.MULTILINE)


def transport_of(text: str, settings: Optional[Dict[str, Any]] = None) -> str:
    """A label for the path NCCL used: the file's settings (reference.file_settings), else the
    table's own line."""
    if (settings or {}).get("transport"):
        return settings["transport"]
    line = _TRANSPORT_LINE.search(text)
    if line:
        # "P2P/direct pointer: 48; SHM/direct/direct: 8;" -> "P2P/direct pointer, SHM/direct/direct"
        kinds = [part.rsplit(":", 1)[0].strip() for part in line.group(1).split(";") if part.strip()]
        return f"default ({', '.join(kinds)})"
    return "default (NCCL's choice)"


# nccl_bench's header when the timed iterations ran as one CUDA graph (-G), e.g.
# "# CUDA graph mode: the 20 iterations are captured in one graph per GPU ..."
_GRAPH_LINE = re.compile(r"^#\s*CUDA graph mode", re.MULTILINE)


def launch_mode(text: str) -> str:
    """"CUDA graph" when a recorded table's header says its iterations ran as CUDA graphs
    (nccl_bench -G, whose times hold no host launch cost), else "plain launches"."""
    return "CUDA graph" if _GRAPH_LINE.search(text) else "plain launches"


def gpu_count(parsed: Dict[str, Any]) -> Optional[int]:
    """How many ranks ran a parsed nccl-tests style table: its "Using devices" list first
    (one line per rank, whatever launched them), else its nGpus line, else None.

    nGpus counts the GPUs driven by ONE process: a single process with -g 8 prints nGpus 8,
    but mpirun, srun or torchrun with one process per GPU (nccl-tests -g 1, nccl_bench's
    one-process-per-GPU mode) print nGpus 1 however many ranks took part, so nGpus alone
    would make such a table a one-rank run (gputopo.measurements counts the same way).
    """
    devices = parsed.get("devices") or []
    return len(devices) or (parsed.get("metadata") or {}).get("n_gpus") or None


def nccl_tables(op: str = "all_reduce", systems: Optional[Sequence[str]] = None,
                cuda_graph: bool = False) -> List[Dict[str, Any]]:
    """Every recorded nccl-tests style table of one operation.

    Rows: {system, file, parsed, n, transport, nvls, launch, op}. n is `gpu_count`: the
    table's device list, else its nGpus line. Only files named for the operation and at most a GPU count
    (nccl-bench-all_reduce.txt, all_reduce_perf-g8.txt), or with one more word when their
    system.json gives them a transport (-sockets, -P2P_LEVEL-LOC), so repeats with other
    iteration counts (nccl-bench-all_reduce-n100.txt) are left out. With cuda_graph=True, the
    same names ending in -cuda-graph instead (nccl_bench -G: the host's launch cost is not in
    their times), with the transport of the name without that ending.
    """
    from gputopo.alphabeta import _op_name

    op = _op_name(op)
    tail = "-cuda-graph" if cuda_graph else ""
    plain = re.compile(rf"(nccl-bench-)?{op}(_perf)?(-g\d+)?(?P<more>-.+?)?{tail}\.txt")
    out = []
    for system in systems or reference.list_systems():
        for name in reference.find(system, "nccl-tests"):
            match = plain.fullmatch(name)
            if not match or (not cuda_graph and name.endswith("-cuda-graph.txt")):
                continue
            settings = reference.file_settings(system, name[: len(name) - len(tail) - 4] + ".txt")
            if match.group("more") and not settings.get("transport"):
                continue
            parsed = reference.load(system, "nccl-tests", filename=name, strict=False)
            n = gpu_count(parsed)
            text = reference.read_text(system, name)
            out.append({"system": system, "file": name, "parsed": parsed, "n": n, "op": op,
                        "transport": transport_of(text, settings), "nvls": nvls_state(text, system),
                        "launch": launch_mode(text), "text": text})
    return out


# NCCL_NVLS_ENABLE as a run's header (`NCCL_NVLS_ENABLE=0`) or NCCL's log ("set by environment to 0") gives it.
_NVLS_SET = re.compile(r"NCCL_NVLS_ENABLE(?:=| set by environment to )(\w+)")


def nvls_state(text: str, system: Optional[str] = None) -> str:
    """NVLink SHARP (NVLS) state of a recorded NCCL run, from its own text.

    "off (NCCL_NVLS_ENABLE=0)" when the run's header or NCCL's log says so (the course's
    recording machines keep it off); "n/a (no NVSwitch)" for a machine without NVSwitch,
    where NCCL has no NVLS to use; otherwise "not recorded".
    """
    from gputopo.ncclpaths import nvls_state as from_environment  # one place for the labels

    setting = _NVLS_SET.search(text)
    if setting:
        return from_environment({"NCCL_NVLS_ENABLE": setting.group(1)}, None)
    if system is not None:
        try:
            nvswitch = reference.system_info(system).get("nvswitch")
        except (ValueError, OSError):
            nvswitch = None
        if not nvswitch:
            return "n/a (no NVSwitch)"
    return "not recorded"


def live_nvls_label(environ: Dict[str, str], nccl_version: Optional[str] = None) -> str:
    """NVLS state of a benchmark run live here, from the environment it ran in.

    ncclbench.run adds NCCL_NVLS_ENABLE=0 when the variable is unset, and the Makefile,
    the Dockerfile and environment/course.def export 0 unless the instructor set another
    value, so an unset variable and 0 are both the course default ("NVLS off (course
    default)"); an exported 1 is an instructor's opt-in (gputopo.ncclpaths.nvls_state).
    """
    from gputopo.ncclpaths import nvls_state as from_environment

    return from_environment({"NCCL_NVLS_ENABLE": environ.get("NCCL_NVLS_ENABLE", "0")}, nccl_version)


# The transports notebook 4 runs live, as in notebook 5: NCCL's own choice, shared memory, sockets.
TRANSPORTS = {"default": {}, "SHM (NCCL_P2P_LEVEL=LOC)": {"NCCL_P2P_LEVEL": "LOC"},
              "NET (sockets; P2P and SHM disabled)": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}}


def live_tables(run, transports: Dict[str, Dict[str, str]], environ: Optional[Dict[str, str]] = None,
                nccl_version: Optional[str] = None, max_bytes: int = 256 * 2**20,
                op: str = "all_reduce") -> Tuple[List[Dict[str, Any]], List[str]]:
    """Run the course's benchmark here under each transport (plain launches), then under the
    default settings once more with CUDA graphs (-G), and return (tables, lines).

    run: `gputopo.ncclbench.run` (or anything with its keywords and result). tables: rows in
    `nccl_tables`' format, system "this machine", n from `gpu_count`, NVLS from
    `live_nvls_label` of the environment each run had, launch "plain launches" or "CUDA
    graph". lines: one sentence per run for the notebook to show; when a run falls back to
    a recording (run["mode"] != "live"), its reason, and nothing more is run.
    """
    import os

    environ = dict(os.environ if environ is None else environ)
    plan = [(name, env, False) for name, env in transports.items()] + [("default", {}, True)]
    tables: List[Dict[str, Any]] = []
    lines: List[str] = []
    for name, env, graph in plan:
        result = run(op, env=env, max_bytes=max_bytes, cuda_graph=graph)
        if result.get("mode") != "live":
            first = (result.get("text") or "").splitlines()[0].lstrip("# ") if result.get("text") else "not run live"
            lines.append(f"{first} " + ("The live runs above stay; the recorded runs below stand in for the rest."
                                        if tables else "The recorded runs below stand in."))
            break
        parsed = result["parsed"]
        nvls = live_nvls_label({**environ, **{k: v for k, v in env.items() if v is not None}}, nccl_version)
        launch = "CUDA graph" if graph else "plain launches"
        tables.append({"system": "this machine", "file": "live" + (" -G" if graph else ""), "parsed": parsed,
                       "op": op, "n": gpu_count(parsed), "transport": name, "nvls": nvls, "launch": launch,
                       "text": result.get("text") or ""})
        last = parsed["rows"][-1]
        lines.append(f"{name}, {launch}: {len(parsed['rows'])} sizes on {gpu_count(parsed)} GPUs, busbw at "
                     f"{format_bytes(last['size'])}: {last['out_of_place']['busbw']} GB/s; {nvls}")
    return tables, lines


def fit_rows(tables: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The ring model's alpha per step (us) and bus bandwidth (GB/s) of each table, fitted
    with `alphabeta.fit_from_table`: keys "alpha_step_us" and "busbw_gbps". The bus bandwidth
    is what each GPU moves through its bottleneck, not the rate of one link."""
    from gputopo import alphabeta

    out = []
    for t in tables:
        alpha, beta = alphabeta.fit_from_table(t["parsed"], t["op"], t["n"])
        rows = t["parsed"]["rows"]
        out.append({**t, "alpha_step_us": alpha, "busbw_gbps": beta,
                    "small_us": rows[0]["out_of_place"]["time_us"], "small_bytes": rows[0]["size"],
                    "big_busbw": rows[-1]["out_of_place"]["busbw"], "big_bytes": rows[-1]["size"]})
    return out


FIT_HEADER = ("transport", "launch", "NVLS", "GPUs", "alpha/step us", "busbw GB/s", "smallest msg us",
              "largest busbw GB/s")


def fit_table(fits: Sequence[Dict[str, Any]], system: str) -> List[Tuple]:
    """One system's fitted tables as rows under FIT_HEADER, with each table's whole NVLS
    label ("NVLS off (course default)", "n/a (no NVSwitch)", ...), never a cut of it."""
    return [(f["transport"], f["launch"], f["nvls"], f["n"], f"{f['alpha_step_us']:.2f}", f"{f['busbw_gbps']:.1f}",
             f"{f['small_us']:.1f}", f"{f['big_busbw']:.1f} at {format_bytes(f['big_bytes'])}")
            for f in fits if f["system"] == system]


def curve_label(f: Dict[str, Any]) -> str:
    """A legend entry that tells every fitted table apart: system, transport's first word,
    launch (plain launches or CUDA graph) and GPU count."""
    return f"{f['system']}, {f['transport'].split(' ')[0]}, {f['launch']}, n={f['n']}"


def two_gpu_fits(fits: Sequence[Dict[str, Any]], host: str, prefix: str = "h200-nvswitch") -> List[Dict[str, Any]]:
    """The 2-GPU fits of every system whose name starts with prefix, for setting against a
    step recorded on `host`: a fit from another system keeps its numbers but its system
    reads "<system> (another host)", and its transport carries the launch mode."""
    return [{**f, "system": f["system"] if f["system"] == host else f"{f['system']} (another host)",
             "transport": f"{f['transport']}, {f['launch']}"}
            for f in fits if f["system"].startswith(prefix) and f["n"] == 2]


def tree_allreduce_time_us(size_bytes: float, n: int, alpha_us: float, beta_gbps: float) -> float:
    """Simplified pipelined (double binary) tree all-reduce: 2 ceil(log2 n) alpha + 2 S / beta.

    A reduce up a tree and a broadcast down it each pay one alpha per tree level; with the
    data pipelined in chunks, each GPU's link carries about the whole buffer once per phase.
    A model for comparing shapes of curves, not NCCL's own tuning model.
    """
    if n < 2:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * alpha_us + 2 * size_bytes / (beta_gbps * 1e3)


def gpu_count_rows(prefix: str = "h200-nvswitch", op: str = "all_reduce") -> List[Dict[str, Any]]:
    """Default-transport all-reduce tables (plain launches) of every recorded system whose name
    starts with `prefix` (h200-nvswitch-pair, -4gpu, -8gpu, ...), fitted, sorted by GPU count."""
    tables = [t for t in nccl_tables(op) if t["system"].startswith(prefix) and t["transport"].startswith("default")]
    return sorted(fit_rows(tables), key=lambda r: r["n"])


def common_size(rows: Sequence[Dict[str, Any]], wanted: int) -> int:
    """The largest size <= wanted that every table measured (for a fair busbw comparison):
    the tables as measurement rows, grouped by size, kept where every table has a row."""
    from gputopo import measurements

    table = measurements.frame([
        row for t in rows for row in measurements.from_nccl_tests(
            t["parsed"], t["system"], "recorded", op=t["op"], settings={"table": f"{t['system']}/{t['file']}"})])
    if table.empty:
        raise ValueError("the tables share no size at or below the one asked for")
    tables_per_size = table.groupby("bytes")["table"].nunique()
    shared = tables_per_size[tables_per_size == len(rows)].index
    fitting = [int(size) for size in shared if size <= wanted]
    if not fitting:
        raise ValueError("the tables share no size at or below the one asked for")
    return max(fitting)


def measured_at(parsed: Dict[str, Any], size: int, column: str = "busbw") -> float:
    """One out-of-place value (time_us, algbw or busbw) of a table at an exact size."""
    for row in parsed["rows"]:
        if row["size"] == size:
            return row["out_of_place"][column]
    raise ValueError(f"the table has no row for {size} bytes")


def predicted_busbw(size_bytes: float, n: int, alpha_us: float, beta_gbps: float) -> float:
    """busbw the ring model predicts: S / T(S, n) x 2(n-1)/n, in GB/s."""
    from gputopo import alphabeta

    time_us = alphabeta.ring_allreduce_time_us(size_bytes, n, alpha_us, beta_gbps)
    return size_bytes / (time_us * 1e3) * alphabeta.busbw_factor("all_reduce", n)


# ---------------------------------------------------------------------------------------
# Training steps

def step_time_ms(images_per_sec: float, workers: int, batch_per_worker: int) -> float:
    """Time of one training step: every worker processes one batch, so all of them together
    process workers x batch images per step; images/s counts images of all workers."""
    if images_per_sec <= 0:
        raise ValueError("images per second must be positive")
    return workers * batch_per_worker / images_per_sec * 1e3


def scaling_efficiency(compute_ms: float, comm_ms: float, overlap: float = 0.0) -> float:
    """Share of ideal speed-up with a fixed batch per worker (weak scaling).

    A step takes compute + (1 - overlap) x communication; with one GPU it takes compute alone.
    So efficiency = compute / (compute + (1 - overlap) x comm). overlap is the share of the
    all-reduce hidden behind the backward pass (0: none, 1: all).
    """
    if not 0 <= overlap <= 1:
        raise ValueError("overlap is a share between 0 and 1")
    return compute_ms / (compute_ms + (1 - overlap) * comm_ms)


def ring_vs_tree_rows(alpha_us: float, beta_gbps: float, size_bytes: float, counts: Sequence[int]) -> List[Tuple]:
    """(n, ring us, tree us, faster) for one message size on several GPU counts."""
    from gputopo import alphabeta

    out = []
    for n in counts:
        ring = float(alphabeta.ring_allreduce_time_us(size_bytes, n, alpha_us, beta_gbps))
        tree = tree_allreduce_time_us(size_bytes, n, alpha_us, beta_gbps)
        out.append((n, f"{ring:.1f}", f"{tree:.1f}", "ring" if ring < tree else "tree"))
    return out


def comm_rows(fits: Sequence[Dict[str, Any]], size_bytes: float, n: int, step_ms: float) -> List[Tuple]:
    """For each fitted table: predicted ring all-reduce of size_bytes on n GPUs, and its share
    of a step of step_ms. Rows: (system, transport, GPUs the fit came from, alpha per step us,
    busbw GB/s, predicted us, share)."""
    from gputopo import alphabeta

    out = []
    for f in fits:
        t = float(alphabeta.ring_allreduce_time_us(size_bytes, n, f["alpha_step_us"], f["busbw_gbps"]))
        out.append((f["system"], f["transport"], f.get("n"), f"{f['alpha_step_us']:.2f}", f"{f['busbw_gbps']:.1f}",
                    f"{t:.0f}", f"{t / (step_ms * 1e3):.1%}"))
    return out


def gpu_count_figure(points: Sequence[Dict[str, Any]], alpha_us: float, beta_gbps: float, size_bytes: int,
                     counts: Sequence[int] = (2, 4, 8, 16), title: str = ""):
    """Two panels against GPU count: busbw at size_bytes and the smallest message's time.

    points: fitted tables (fit_rows) drawn as markers (recorded, or measured here); dashed lines: the ring model
    with the given alpha per step and bus bandwidth. No tree curve: inside one node NCCL's
    tree is a chain, and a single node's smallest-message time includes the host's launch
    cost, so these points cannot tell a tree from a ring.
    """
    from matplotlib.figure import Figure

    from gputopo.plots import format_bytes

    figure = Figure(figsize=(10, 4.4), layout="constrained")
    left, right = figure.subplots(1, 2)
    ns = list(counts)
    left.plot(ns, [predicted_busbw(size_bytes, n, alpha_us, beta_gbps) for n in ns], "--", color="0.2", label="ring model")
    right.plot(ns, [2 * (n - 1) * alpha_us for n in ns], "--", color="0.2", label="ring model: 2(n-1) alpha")
    # One colour and one legend entry per recorded system; a node measured on 2, 4 and 8 of
    # its GPUs is one connected series.
    by_system: Dict[str, List[Dict[str, Any]]] = {}
    for p in sorted(points, key=lambda p: p["n"]):
        by_system.setdefault(p["system"], []).append(p)
    for system, series in by_system.items():
        gpus = [p["n"] for p in series]
        (line,) = left.plot(gpus, [measured_at(p["parsed"], size_bytes) for p in series], "o-",
                            label=f"{system} ({'measured here' if system == 'this machine' else 'recorded'})")
        small = format_bytes(series[0]["small_bytes"])
        right.plot(gpus, [p["small_us"] for p in series], "o-", color=line.get_color(),
                   label=f"{system}, {small} ({'measured here' if system == 'this machine' else 'recorded'})")
    left.set(xlabel="GPUs", ylabel="busbw (GB/s)", title=f"bus bandwidth at {format_bytes(size_bytes)}", ylim=(0, None))
    right.set(xlabel="GPUs", ylabel="time (us)", title="smallest message (includes host launch)", ylim=(0, None))
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.grid(alpha=0.3)
        # Below the panel, so that no legend covers a curve.
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, frameon=False)
    if title:
        figure.suptitle(title)
    return figure


def multinode_rows(busbw_in_node_gbps: float, alpha_in_node_us: float, node_nic_gbps: float, alpha_net_us: float,
                   size_bytes: float, gpus_per_node: int, node_counts: Sequence[int]) -> List[Tuple]:
    """(GPUs, nodes, busbw bound GB/s, predicted all-reduce us, x one node) for a ring over 1..N nodes.

    Inside one node the fitted in-node alpha and bus bandwidth apply; from two nodes on the
    node's total NIC bandwidth (node_nic_gbps, e.g. `alphabeta.total_nic_gbps(8, 400)`) bounds
    the bus bandwidth (`alphabeta.multinode_busbw_gbps`). The last column is the time over
    that of one node.
    """
    from gputopo import alphabeta

    one_node = float(alphabeta.ring_allreduce_time_us(size_bytes, gpus_per_node, alpha_in_node_us, busbw_in_node_gbps))
    out = []
    for nodes in node_counts:
        busbw = alphabeta.multinode_busbw_gbps(busbw_in_node_gbps, node_nic_gbps, nodes)
        t = float(alphabeta.multinode_allreduce_time_us(size_bytes, gpus_per_node, nodes, alpha_in_node_us,
                                                        busbw_in_node_gbps, alpha_net_us, node_nic_gbps))
        out.append((gpus_per_node * nodes, nodes, f"{busbw:.1f}", f"{t:.0f}", f"{t / one_node:.2f}"))
    return out


# ---------------------------------------------------------------------------------------
# One system's CNN steps, and scaling on that system

def cnn_steps(summary: Sequence[Dict[str, Any]], system: str, batch_per_worker: int,
              setting: str = "default") -> Dict[str, Any]:
    """The one-GPU and two-GPU step times of ONE recorded system, selected by its name.

    summary: `runner.summarize(...)` rows; system: their "system" label (e.g. "2x H200
    NVSwitch"). The one-GPU run (no all-reduce) gives the compute time of a step; the two-GPU
    run under `setting` gives the step with communication. Both must exist at that batch per
    GPU, else ValueError naming what is missing: a step is never taken from another system's row.
    """
    rows = [r for r in summary if r.get("system") == system and r.get("batch_per_worker") == batch_per_worker
            and r.get("images_per_sec_median")]
    if not rows:
        known = sorted({str(r.get("system")) for r in summary})
        raise ValueError(f"no recorded CNN run of {system!r} at batch {batch_per_worker} per GPU (systems: {', '.join(known)})")
    one = next((r for r in rows if "," not in str(r["pair"]) and r.get("setting") == "default"), None)
    two = next((r for r in rows if str(r["pair"]).count(",") == 1 and r.get("setting") == setting), None)
    if one is None or two is None:
        missing = "one-GPU" if one is None else f"two-GPU {setting}"
        raise ValueError(f"{system} has no {missing} run at batch {batch_per_worker} per GPU")
    return {
        "system": system, "batch_per_worker": batch_per_worker, "setting": setting, "pair": two["pair"],
        "one_gpu_ms": step_time_ms(one["images_per_sec_median"], 1, batch_per_worker),
        "one_gpu_images_per_sec": one["images_per_sec_median"], "one_gpu_runs": one.get("runs_ok", one.get("runs")),
        "two_gpu_ms": step_time_ms(two["images_per_sec_median"], 2, batch_per_worker),
        "two_gpu_images_per_sec": two["images_per_sec_median"], "two_gpu_runs": two.get("runs_ok", two.get("runs")),
        "two_gpu_range": (two.get("images_per_sec_min"), two.get("images_per_sec_max")),
        "efficiency": two["images_per_sec_median"] / (2 * one["images_per_sec_median"]),
        **_ranges(one, two, batch_per_worker),
    }


def _ranges(one: Dict[str, Any], two: Dict[str, Any], batch_per_worker: int) -> Dict[str, Any]:
    """Over the two-GPU runs' range of images/s (each run's median epoch; min, max): the step
    (slow, fast), the time the second worker adds and the efficiency. The one-GPU step is the
    one-GPU row's median (a single run in the course's recordings), so these ranges carry
    only the two-GPU runs' spread."""
    low, high = two.get("images_per_sec_min"), two.get("images_per_sec_max")
    if not low or not high:
        return {"two_gpu_ms_range": None, "added_ms_range": None, "efficiency_range": None}
    one_ms = step_time_ms(one["images_per_sec_median"], 1, batch_per_worker)
    slow, fast = step_time_ms(low, 2, batch_per_worker), step_time_ms(high, 2, batch_per_worker)
    return {"two_gpu_ms_range": (fast, slow), "added_ms_range": (fast - one_ms, slow - one_ms),
            "efficiency_range": (low / (2 * one["images_per_sec_median"]), high / (2 * one["images_per_sec_median"]))}


def scaling_rows(compute_ms: float, in_node: Dict[int, Tuple[float, float]], node_nic_gbps: float,
                 gpus_per_node: int, sizes_bytes: Sequence[float], counts: Sequence[int]) -> List[Tuple]:
    """(GPUs, nodes, busbw bound GB/s, efficiency for each size) with the ring model, no overlap.

    in_node maps a GPU count inside one node to its fitted (alpha per step us, busbw GB/s);
    a count above gpus_per_node spans count // gpus_per_node nodes and uses the fit of
    gpus_per_node GPUs, bounded by the node's total NIC bandwidth (node_nic_gbps), with the
    network's alpha taken equal to the node's. compute_ms is the one-GPU step of the same system.
    """
    from gputopo import alphabeta

    out = []
    for n in counts:
        nodes, per_node = (1, n) if n <= gpus_per_node else (n // gpus_per_node, gpus_per_node)
        if per_node not in in_node:
            raise ValueError(f"no in-node fit for {per_node} GPUs")
        alpha, busbw = in_node[per_node]
        bound = alphabeta.multinode_busbw_gbps(busbw, node_nic_gbps, nodes)
        effs = [scaling_efficiency(compute_ms, float(alphabeta.multinode_allreduce_time_us(
            size, per_node, nodes, alpha, busbw, alpha, node_nic_gbps)) / 1e3) for size in sizes_bytes]
        out.append((n, nodes, f"{bound:.1f}", *(f"{e:.1%}" for e in effs)))
    return out


# ---------------------------------------------------------------------------------------
# Multi-node without a cluster: the what-if panel over the recorded clusters

# Message sizes the panel offers (bytes).
WHATIF_SIZES = tuple(2**k for k in range(10, 35, 2))
# Node counts the static view and the plot use.
WHATIF_NODES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# The NVLink sets that can do NVLS (NVLink SHARP in the third-generation NVSwitch on): HGX
# H100/H200, HGX B200 and GB200 (NCCL's NVLS needs NVSwitch with SHARP; notebook 4 "What NVLS
# would change").
_NVLS_LINKS = ("H100 SXM5", "H200 SXM", "B200 / GB200", "h200-nvswitch-8gpu")


def _nvlink_line_rates() -> Dict[str, float]:
    """{"NVLink 4: H100 SXM5": 450.0, ...}: one GPU's NVLink bandwidth per direction (gputopo.links)."""
    from gputopo import links

    return {row["link"]: float(row["per_direction_gbs"]) for row in links.link_table()
            if str(row["link"]).startswith("NVLink")}


def _last_busbw(system: str, filename: str) -> Tuple[int, float]:
    rows = reference.load(system, "nccl-tests", filename=filename)["rows"]
    return rows[-1]["size"], rows[-1]["out_of_place"]["busbw"]


def link_options(machine=None) -> List[Dict[str, Any]]:
    """The panel's in-node links: this machine (when it has two GPUs), two recorded nodes, the
    NVLink sets of gputopo.links, and "none" (one GPU per node, or PCIe only).

    Each: {label, line_gbps (per GPU per direction, or None), busbw_gbps (recorded in-node busbw,
    or None: line rate x NCCL's ring efficiency), nvls (the hardware can do NVLS)}.
    """
    rates = _nvlink_line_rates()
    options = []
    if machine is not None and getattr(machine, "visible_gpu_count", 0) >= 2:
        from gputopo import links

        peak = links.machine_peak(machine, 0, 1)
        if peak.gbs:
            options.append({"label": f"this machine: GPU0-GPU1, {peak.gbs:.0f} GB/s per direction",
                            "line_gbps": peak.gbs, "busbw_gbps": None, "nvls": False})
    for system, filename, line_key in (("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g8.txt", "NVLink 4: H200 SXM"),
                                       ("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt", "NVLink 2: Tesla V100 SXM2")):
        if system in reference.list_systems():
            _, busbw = _last_busbw(system, filename)
            options.append({"label": f"recorded {system}: busbw {busbw:.0f} GB/s on 8 GPUs",
                            "line_gbps": rates.get(line_key), "busbw_gbps": busbw,
                            "nvls": system.startswith("h200")})
    for label, gbps in rates.items():
        options.append({"label": f"{label} ({gbps:.0f} GB/s per direction)", "line_gbps": gbps, "busbw_gbps": None,
                        "nvls": any(key in label for key in _NVLS_LINKS)})
    options.append({"label": "none (one GPU per node, or PCIe only)", "line_gbps": None, "busbw_gbps": None, "nvls": False})
    return options


def recorded_clusters() -> List[Dict[str, Any]]:
    """Every recorded system whose system.json has a "cluster" entry, against the what-if model.

    Each row: system, machine, the cluster's facts, the recorded busbw (the last row's
    out-of-place busbw of its table, or the published figure), the model's bound and estimate
    (`alphabeta.cluster_busbw`), their ratio, the provenance of the figure (calibration: from the
    same posts as the model's NIC factor; inferred: the cluster's facts were inferred from its
    result; independent) and, for ring runs only, whether the recorded value lies in
    [(1 - TOLERANCE_BELOW) x estimate, line-rate bound]. A run that was likely NVLS has "within"
    None: NVLS busbw is not bounded by any link's line rate (nccl-tests #212).
    """
    from gputopo import alphabeta

    rates = _nvlink_line_rates()
    out = []
    for system in reference.list_systems():
        info = reference.system_info(system)
        cluster = info.get("cluster")
        if not cluster:
            continue
        if cluster.get("file"):
            size, recorded = _last_busbw(system, cluster["file"])
            what = f"{cluster.get('op', 'all_reduce')} table, {size / 2**20:.0f} MiB"
        else:
            size, recorded = None, float(cluster["recorded_busbw_gbps"])
            what = "published figure"
        link = rates.get(cluster.get("in_node_link") or "")
        bound, estimate = alphabeta.cluster_busbw(cluster, link)
        nvls = cluster.get("nvls") == "likely"
        low = (1 - alphabeta.TOLERANCE_BELOW) * estimate
        within = None if nvls else low <= recorded <= bound * (1 + 1e-9)
        out.append({"system": system, "machine": info.get("machine", ""), "source": info.get("source", ""),
                    "nodes": cluster["nodes"], "gpus_per_node": cluster["gpus_per_node"],
                    "nics_per_node": cluster["nics_per_node"], "nic_gbit": cluster["nic_gbit"],
                    "nvlink_domain_gpus": cluster.get("nvlink_domain_gpus"), "fabric": cluster.get("fabric", ""),
                    "algorithm": cluster.get("algorithm", ""), "what": what, "size": size, "nvls": nvls,
                    "provenance": cluster.get("provenance", "not stated"), "tuned": cluster.get("tuned", True),
                    "recorded_gbps": recorded, "bound_gbps": bound, "estimate_gbps": estimate,
                    "ratio": recorded / estimate, "within": within})
    return out


def _within_text(c: Dict[str, Any]) -> str:
    if c["within"] is None:
        return "not tested (NVLS likely)"
    if c["within"]:
        return "yes"
    return "outside (untuned)" if not c["tuned"] else "NO"


def cluster_rows(clusters: Sequence[Dict[str, Any]]) -> List[Tuple]:
    """Rows for a text table of the recorded clusters against the model."""
    return [(c["system"], f"{c['nodes'] if c['nodes'] else '?'} x {c['gpus_per_node']}",
             f"{c['nics_per_node']} x {c['nic_gbit']:g}G" + (f" (NVLink domain {c['nvlink_domain_gpus']})"
                                                              if c["nvlink_domain_gpus"] else ""),
             c["what"], c["provenance"], f"{c['recorded_gbps']:.2f}",
             f"{c['bound_gbps']:.1f}" if math.isfinite(c["bound_gbps"]) else "none (NVLS)",
             f"{c['estimate_gbps']:.1f}" + (" (NVLS)" if c["nvls"] else ""),
             f"{c['ratio']:.2f}", _within_text(c)) for c in clusters]


def whatif_settings(**changes) -> Dict[str, Any]:
    """The panel's default settings (an HGX H100-class node: 8 GPUs, 8 x 400 Gb/s, rails aligned,
    PXN and GPUDirect RDMA on, NVLS off as the course's default), with `changes` applied."""
    settings = {"gpus_per_node": 8, "link": "NVLink 4: H100 SXM5", "nics_per_node": 8, "nic_gbit": 400,
                "rails_aligned": True, "pxn": True, "gdr": True, "spine_oversubscription": 2.0,
                "nodes": 2, "algorithm": "ring", "nvls": False, "size": 2**30}
    unknown = set(changes) - set(settings)
    if unknown:
        raise ValueError(f"unknown what-if settings: {', '.join(sorted(unknown))}")
    settings.update(changes)
    return settings


def _option_for(settings: Dict[str, Any], options: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    wanted = settings["link"]
    for option in options:
        if option["label"] == wanted or option["label"].startswith(wanted):
            return option
    raise ValueError(f"unknown in-node link {wanted!r}")


def whatif_result(settings: Dict[str, Any], options: Optional[Sequence[Dict[str, Any]]] = None,
                  clusters: Optional[Sequence[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """alphabeta.whatif for the panel's settings, plus the recorded clusters that match them
    (same NIC count and rate, and the same GPUs per node)."""
    from gputopo import alphabeta

    options = link_options() if options is None else options
    option = _option_for(settings, options)
    nvls = bool(settings["nvls"]) and option["nvls"]
    result = alphabeta.whatif(settings["gpus_per_node"], option["line_gbps"], settings["nics_per_node"],
                              settings["nic_gbit"], settings["nodes"], settings["size"],
                              algorithm=settings["algorithm"], gdr=settings["gdr"], pxn=settings["pxn"],
                              rails_aligned=settings["rails_aligned"],
                              spine_oversubscription=settings["spine_oversubscription"], nvls=nvls,
                              in_node_busbw_gbps=option["busbw_gbps"])
    if settings["nvls"] and not option["nvls"]:
        result["notes"].append("NVLS needs NVSwitch with SHARP (H100/H200/B200/GB200): ignored for this link")
    clusters = recorded_clusters() if clusters is None else clusters
    result["matches"] = [c for c in clusters if c["nics_per_node"] == settings["nics_per_node"]
                         and c["nic_gbit"] == settings["nic_gbit"] and c["gpus_per_node"] == settings["gpus_per_node"]]
    result["nvls_used"] = nvls
    return result


def whatif_text(settings: Dict[str, Any], result: Dict[str, Any]) -> str:
    """A few lines for people: the prediction, what bounds it, the notes and the matching recordings."""
    from gputopo.units import format_bytes

    lines = [f"{settings['nodes']} node(s) x {settings['gpus_per_node']} GPUs = {result['gpus']} GPUs, "
             f"{settings['algorithm']}, NVLS {'on (opt-in)' if result['nvls_used'] else 'off (course default)'}, "
             f"all-reduce of {format_bytes(settings['size'])}",
             f"predicted busbw {result['busbw_gbps']:.1f} GB/s ("
             + (f"line-rate bound {result['bound_gbps']:.1f} GB/s" if math.isfinite(result['bound_gbps'])
                else "no line-rate bound: NVLS busbw is not a wire bandwidth, nccl-tests #212") + "), "
             f"bounded by: {result['bound_by']}",
             f"all-reduce time {result['time_us'] / 1e3:.3f} ms, algbw {result['algbw_gbps']:.1f} GB/s"]
    lines += [f"note: {note}" for note in result["notes"]]
    if result["matches"]:
        lines += ["recorded clusters with these NICs and GPUs per node:"]
        lines += [f"  {c['system']}: {c['recorded_gbps']:.2f} GB/s busbw ({c['what']}, "
                  f"{str(c['nodes']) + ' nodes' if c['nodes'] else 'nodes not stated'}, {c['provenance']})"
                  for c in result["matches"]]
    else:
        lines.append("no recorded cluster has these NICs and GPUs per node")
    return "\n".join(lines)


def whatif_static(settings_list: Optional[Sequence[Dict[str, Any]]] = None) -> List[Tuple]:
    """Rows of the static view: a few fixed settings at 1, 2, 16 and 1024 nodes."""
    options = link_options()
    clusters = recorded_clusters()
    if settings_list is None:
        settings_list = [whatif_settings(nodes=nodes) for nodes in (1, 2, 16, 1024)]
        settings_list += [whatif_settings(nodes=16, gdr=False), whatif_settings(nodes=16, rails_aligned=False, pxn=False),
                          whatif_settings(nodes=2, algorithm="tree"),
                          whatif_settings(link="NVLink 3: A100 SXM4", nics_per_node=4, nic_gbit=200, nodes=3)]
    rows = []
    for s in settings_list:
        r = whatif_result(s, options, clusters)
        rows.append((s["link"].split(":")[-1].strip(), s["gpus_per_node"], f"{s['nics_per_node']} x {s['nic_gbit']}G",
                     s["nodes"], s["algorithm"], "on" if s["gdr"] else "off (NIC behind CPU)",
                     "yes" if s["rails_aligned"] else ("no, PXN on" if s["pxn"] else "no, PXN off"),
                     f"{r['busbw_gbps']:.1f}", r["bound_by"], f"{r['time_us'] / 1e3:.2f}"))
    return rows


def whatif_panel(machine=None, show_static: bool = True):
    """Notebook 4's what-if panel: (static figure, interactive panel).

    Prints the static table and builds the static plot (what nbval and the HTML report keep,
    figure None with show_static=False); the panel is the ipywidgets box of sliders and
    dropdowns when ipywidgets can be imported, else None, and a line says so.
    """
    from gputopo import plots
    from gputopo.selfcheck import text_table
    from gputopo.units import format_bytes

    options = link_options(machine)
    clusters = recorded_clusters()
    figure = None
    if show_static:
        print(text_table(whatif_static(), header=("link", "GPUs/node", "NICs/node", "nodes", "algorithm", "GDR",
                                                  "rails aligned", "busbw GB/s", "bounded by", "1 GiB ms")))
        curves = {}
        for label, s in (("8 x 400G, H100 NVLink", whatif_settings()),
                         ("8 x 400G, NIC behind CPU / no GDR", whatif_settings(gdr=False)),
                         ("4 x 200G, A100 NVLink", whatif_settings(link="NVLink 3: A100 SXM4", nics_per_node=4, nic_gbit=200))):
            curves[label] = [(n, whatif_result(dict(s, nodes=n), options, clusters)["busbw_gbps"]) for n in WHATIF_NODES]
        figure = plots.whatif_figure(curves, clusters)
    try:
        import ipywidgets as widgets
    except ImportError:
        print("(ipywidgets is not installed: the interactive panel needs it; the table and plot are its static view)")
        return figure, None
    labels = [o["label"] for o in options]
    default = next(label for label in labels if label.startswith("NVLink 4: H100 SXM5"))
    controls = {
        "gpus_per_node": widgets.IntSlider(value=8, min=1, max=8, description="GPUs/node"),
        "link": widgets.Dropdown(options=labels, value=default, description="in-node link",
                                 layout=widgets.Layout(width="520px")),
        "nics_per_node": widgets.IntSlider(value=8, min=1, max=8, description="NICs/node"),
        "nic_gbit": widgets.Dropdown(options=[100, 200, 400, 800], value=400, description="NIC Gb/s"),
        "rails_aligned": widgets.Checkbox(value=True, description="rails aligned"),
        "pxn": widgets.Checkbox(value=True, description="PXN"),
        "spine_oversubscription": widgets.FloatSlider(value=2.0, min=1.0, max=4.0, step=0.5, description="spine x:1"),
        "gdr": widgets.Checkbox(value=True, description="GDR (off: NIC behind CPU)"),
        "nodes": widgets.SelectionSlider(options=list(WHATIF_NODES), value=2, description="nodes"),
        "algorithm": widgets.ToggleButtons(options=["ring", "tree"], value="ring", description="algorithm"),
        "nvls": widgets.Checkbox(value=False, description="NVLS (opt-in; NVSwitch with SHARP only)"),
        "size": widgets.SelectionSlider(options=[(format_bytes(s), s) for s in WHATIF_SIZES], value=2**30,
                                        description="message"),
    }
    output = widgets.Output()

    def update(*_):
        settings = whatif_settings(**{key: control.value for key, control in controls.items()})
        output.clear_output(wait=True)
        with output:
            try:
                print(whatif_text(settings, whatif_result(settings, options, clusters)))
            except ValueError as error:
                print(f"not a valid setting: {error}")

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return figure, widgets.VBox([widgets.HBox([widgets.VBox(list(controls.values())[:6]),
                                       widgets.VBox(list(controls.values())[6:])]), output])


# ---------------------------------------------------------------------------------------
# Reading the NET lines of a multi-node NCCL log

# Published multi-node NCCL_DEBUG=INFO excerpts (a "_" folder: not a system of its own).
MULTINODE_LOGS = reference.REFERENCE_DIR / "_multinode-logs"
# What follows "via " on a network connection line, as NCCL prints it (src/transport/net.cc at
# v2.28.3-1): NET/<plugin>/<NIC index>, then "(<proxy rank>)" when PXN hands the data to another
# GPU's NIC, "/GDRDMA" with GPUDirect RDMA ("(PCI)" when that goes through PCIe), "/Shared" for
# shared buffers. NCCL 2.4 printed "NET/IB/0" the same way.
_NET_ROUTE = re.compile(r"^NET/(?P<net>[^/]+)/(?P<nic>\d+)(?:\((?P<proxy>\d+)\))?(?P<gdr>/GDRDMA)?"
                        r"(?P<pci>\(PCI\))?(?P<shared>/Shared)?$")


def net_route(via: str) -> Optional[Dict[str, Any]]:
    """{net, nic, proxy_rank, gdr, shared} of a "via NET/..." text; None for any other transport.

    "NET/IB/0/GDRDMA" -> net "IB", NIC 0, GPUDirect RDMA; "NET/IB/3(7)/GDRDMA" -> NIC 3 reached
    through rank 7's GPU (PXN); "NET/Socket/0" -> TCP sockets, no GPUDirect.
    """
    match = _NET_ROUTE.match(via.strip())
    if not match:
        return None
    return {"net": match["net"], "nic": int(match["nic"]),
            "proxy_rank": int(match["proxy"]) if match["proxy"] else None,
            "gdr": bool(match["gdr"]), "shared": bool(match["shared"])}


def multinode_logs() -> List[str]:
    """File names of the published multi-node log excerpts."""
    return sorted(p.name for p in MULTINODE_LOGS.glob("*.txt"))


def net_lines(name: str) -> List[Tuple]:
    """(channel, from rank[dev], to rank[dev], send/receive, network, NIC, PXN via rank, GDR) for
    each NET connection of one published log, read by gputopo.parsers.nccl_log."""
    from gputopo.parsers import nccl_log

    if name not in multinode_logs():
        raise ValueError(f"no published log {name!r}; there are: {', '.join(multinode_logs())}")
    parsed = nccl_log.parse((MULTINODE_LOGS / name).read_text(encoding="utf-8"))
    rows = []
    for c in parsed["channels"]:
        route = net_route(c["via"]) if c["transport"] == "NET" else None
        if route is None:
            continue
        src = f"{c['src']}[{c['src_device']}]" if c["src_device"] is not None else str(c["src"])
        dst = f"{c['dst']}[{c['dst_device']}]" if c["dst_device"] is not None else str(c["dst"])
        rows.append((c["channel"], src, dst, c["direction"] or "-", route["net"], route["nic"],
                     "-" if route["proxy_rank"] is None else route["proxy_rank"], "yes" if route["gdr"] else "no"))
    return rows


def log_summary_rows() -> List[Tuple]:
    """One row per published log: transports, networks, NICs seen, GPUDirect RDMA, PXN."""
    from gputopo.parsers import nccl_log

    out = []
    for name in multinode_logs():
        parsed = nccl_log.parse((MULTINODE_LOGS / name).read_text(encoding="utf-8"))
        routes = [net_route(c["via"]) for c in parsed["channels"] if c["transport"] == "NET"]
        routes = [r for r in routes if r]
        out.append((name, ", ".join(parsed["transports"]), ", ".join(sorted({r["net"] for r in routes})),
                    ", ".join(str(n) for n in sorted({r["nic"] for r in routes})),
                    "yes" if routes and all(r["gdr"] for r in routes) else "no",
                    "yes" if any(r["proxy_rank"] is not None for r in routes) else "no"))
    return out


# ---------------------------------------------------------------------------------------
# Verdicts (gputopo.verdicts) on the busbw of each all-reduce table


def _gpu_total_link(codes: Sequence[str], nvswitch: Optional[bool]):
    """(count, how): the NVLinks one GPU's rings can use, from its topo -m codes to its peers.
    Through NVSwitch (or with one peer) every code names all of the GPU's links (NV18 to each
    peer of an H200): the count is that code's. In a direct mesh (V100 hybrid cube mesh: NV1
    and NV2 to different peers) each code names the links to that peer only, and NCCL spreads
    its rings over all of them (notebook 4, Bus bandwidth): the count is their sum."""
    counts = [int(m.group(1)) for m in (re.fullmatch(r"NV(\d+)", c or "") for c in codes) if m]
    if not counts:
        return None, "no NVLink in topo -m"
    if nvswitch or len(codes) == 1 or (nvswitch is None and len(set(counts)) == 1):
        return counts[0], f"NV{counts[0]} to every peer"
    return sum(counts), "sum of GPU0's codes " + "+".join(f"NV{c}" for c in counts)


def recorded_busbw_link(system: str):
    """(verdicts.Link, facts) for the busbw of an all-reduce recorded on `system`: GPU0's
    total NVLinks from its recorded `nvidia-smi topo -m` (and `nvidia-smi nvlink -s` where
    recorded), the GPU's name from its P2P output or its system.json "machine". (None, why)
    when the facts are not recorded. Never raises."""
    from gputopo import verdicts
    from gputopo.parsers import nvidia_smi

    try:
        row = reference.load(system, "topo")["links"]["GPU0"]
        codes = [code for peer, code in row.items() if peer != "GPU0" and peer.startswith("GPU")]
        info = reference.system_info(system)
        count, how = _gpu_total_link(codes, info.get("nvswitch"))
        if count is None:
            return None, f"{system}: {how} (GPU0's row), so no NVLink peak to judge busbw against"
        facts = f"nvidia-smi-topo-m.txt {how}"
        if "nvidia-smi-nvlink-s.txt" in reference.files(system):
            active = nvidia_smi.nvlink_link_counts(reference.read_text(system, "nvidia-smi-nvlink-s.txt"))
            if "GPU0" in active:
                count = min(count, active["GPU0"]["active"])
                facts += f", nvidia-smi-nvlink-s.txt {active['GPU0']['active']} links active on GPU0"
        p2p = reference.find(system, "p2p")
        if p2p:
            name = "p2pBandwidthLatencyTest.txt" if "p2pBandwidthLatencyTest.txt" in p2p else p2p[0]
            gpu = reference.load(system, "p2p", name)["devices"][0]["name"]
            facts += f", {gpu} ({name})"
        else:
            gpu = info.get("machine") or ""
            found = re.search(r"(Tesla |NVIDIA )?[A-Z]+\d+[-\w]*", gpu)
            gpu = found.group(0) if found else gpu
            facts += f", {gpu} (system.json)"
        return verdicts.Link("nvlink", gpu, count=count, gpu=gpu), f"{system}: {facts}"
    except Exception as error:  # a verdict is a side note: never stop the notebook
        return None, f"{system}: the link could not be read from its recorded files ({error})"


def live_busbw_link(machine):
    """(verdicts.Link, facts) for a live all-reduce over all visible GPUs: GPU0 and GPU1's link
    as this machine reports it (`verdicts.link_from_machine`, which counts only active links), or,
    in a direct NVLink mesh (topo -m shows different NV codes from GPU0 to its peers), GPU0's
    NVLinks summed from those codes. Never raises."""
    from gputopo import verdicts

    try:
        link = verdicts.link_from_machine(machine, 0, 1)
        indices = sorted(g.index for g in machine.gpus if g.index != 0)
        codes = [machine.link_between(0, i) for i in indices]
        count, how = _gpu_total_link(codes, None)
        mesh = len({c for c in codes if re.fullmatch(r"NV\d+", c or "")}) > 1
        if link is not None and link.type == "nvlink" and mesh and count:
            link = verdicts.Link("nvlink", link.generation, count=count, gpu=link.gpu)
            return link, f"this machine: topo -m {how}, {link.describe()}"
        if link is None:
            return None, "this machine: the link between GPU0 and GPU1 is not known"
        return link, f"this machine: link as it reports it between GPU0 and GPU1, {link.describe()}"
    except Exception as error:
        return None, f"this machine: the link is not known ({error})"


def busbw_verdicts(tables: Sequence[Dict[str, Any]], machine=None) -> Tuple[List[Tuple[str, Any]], List[str]]:
    """([(label, verdicts.Verdict)], [facts]): one verdict per all-reduce table, its busbw at its
    largest message (`verdicts.judge_nccl_output`), on the link recorded on its own system
    (`recorded_busbw_link`) or, for a live table, the link this machine reports
    (`live_busbw_link`). A table whose link is unknown gets a "not comparable" verdict saying so."""
    from gputopo import verdicts

    links_of: Dict[str, Tuple[Any, str]] = {}
    out, facts = [], []
    for t in tables:
        system = t["system"]
        if system not in links_of:
            links_of[system] = live_busbw_link(machine) if system == "this machine" else recorded_busbw_link(system)
            facts.append("link " + ("as " if system == "this machine" else "recorded on ") + links_of[system][1])
        link, why = links_of[system]
        label = f"{'measured here' if system == 'this machine' else system}, {t['n']} GPUs, {t['transport']}, {t['launch']}"
        if link is None:
            rows = t["parsed"]["rows"]
            out.append((label, verdicts.Verdict("allreduce_busbw", rows[-1]["out_of_place"]["busbw"] if rows else None,
                                                verdicts.NOT_COMPARABLE, f"no link to judge against: {why}")))
            continue
        out.append((label, verdicts.judge_nccl_output(t.get("text") or "", link)))
    return out, facts


def busbw_verdict_at(table: Dict[str, Any], size: int, machine=None):
    """verdicts.Verdict on one table's busbw at `size` bytes, on the link of `busbw_verdicts`
    (below the plateau, `verdicts.PLATEAU_BYTES`, it is "not comparable")."""
    from gputopo import verdicts

    system = table["system"]
    link, why = live_busbw_link(machine) if system == "this machine" else recorded_busbw_link(system)
    if link is None:
        return verdicts.Verdict("allreduce_busbw", None, verdicts.NOT_COMPARABLE, f"no link to judge against: {why}")
    return verdicts.judge_nccl_output(table.get("text") or "", link, size=size)


def cnn_verdict_lines(steps: Dict[str, Any]) -> List[str]:
    """One line each for the recorded two-GPU images/s and scaling efficiency that `cnn_steps`
    returns: no verdict. `verdicts.cnn_reference` would judge them against the recorded runs of
    the same GPU model, batch and setting, which are these very runs, so a verdict could not fail."""
    what = (f"this row is its own reference: recorded on {steps['system']}, and `verdicts.cnn_reference` "
            f"builds the range from these same {steps['two_gpu_runs']} runs")
    return [f"verdict, two-GPU images/s: none ({what})",
            f"verdict, two-GPU scaling efficiency: none ({what})"]

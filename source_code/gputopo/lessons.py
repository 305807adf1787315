"""Glue for notebooks 2, 4 and 5: recorded systems side by side, efficiency and step-time tables.

Nothing here measures, parses text formats or draws a single plot type of its own: it puts
together what `gputopo.reference`, `gputopo.links`, `gputopo.alphabeta`, `gputopo.plots` and
`gputopo.runner` provide, so that the notebooks' cells stay one or two lines long.

    from gputopo import lessons
    lessons.reference_p2p()                    # every recorded P2P test, merged per system
    lessons.efficiency_rows(parsed, link, gpu, lessons.peer_access(parsed, system))
                                               # measured / peak for each GPU pair; pairs without
                                               # peer access are labelled staged, never "P2P"
    lessons.v100_wirings()                     # the DGX-1 and the 2019 blog server: same GPUs, two wirings
    lessons.side_by_side("bidirectional_enabled")   # one heatmap per system, one figure
    lessons.nccl_tables("all_reduce")          # every recorded all-reduce table, with transport and NVLS state
    lessons.multinode_rows(...)                # the ring beyond one node, bounded by the NIC
    lessons.compare_repeats(a, b)              # a change against the run-to-run spread
    lessons.step_time_ms(100000, 2, 512)       # images/s and batch -> time of one step

numpy and matplotlib are imported inside the functions that need them (CONTRIBUTING.md).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from gputopo import links, reference

# ---------------------------------------------------------------------------------------
# P2P matrices (notebook 4)

# parser key -> (short label, direction factor of the peak, P2P path?)
# Bidirectional matrices add both directions, so their ceiling is twice the one-way peak.
# P2P=Disabled copies are staged through host memory, so their ceiling is a PCIe x16 link.
P2P_MATRICES = {
    "unidirectional_write": ("one-way, P2P writes", 1, True),
    "unidirectional_read": ("one-way, P2P reads", 1, True),
    "bidirectional_enabled": ("both ways, P2P", 2, True),
    "unidirectional_disabled": ("one-way, P2P disabled", 1, False),
    "bidirectional_disabled": ("both ways, P2P disabled", 2, False),
}

# Latency matrices of the p2p parser -> label.
LATENCY_LABELS = {
    "write_gpu": "latency, P2P writes (GPU timed)",
    "read_gpu": "latency, P2P reads (GPU timed)",
    "disabled_gpu": "latency, P2P disabled (GPU timed)",
}

# ---------------------------------------------------------------------------------------
# Two 8x V100 SXM2 servers with the same GPUs and different wiring (notebook 2).
#
# Both are "hybrid cube meshes" (two quads of four, six NVLink 2 links per GPU), but which
# pairs get two links, one link or none differs:
# - NVIDIA's DGX-1 with V100: GPU0 has one NVLink to GPUs 1 and 2, two to GPUs 3 and 4, and
#   none to GPUs 5, 6, 7. Source: NVIDIA DGX-1 with Tesla V100 System Architecture
#   whitepaper (2017), hybrid cube-mesh figure; GPU0's and GPU1's links are also printed in
#   the NCCL topology dump of a DGX-1 V100 in NVIDIA/nccl GitHub issue #671 (2022), and the
#   recorded DGX-1 P2P row (reference_systems/dgx1-v100/) shows the same classes: about
#   48 GB/s both ways to GPUs 1, 2, about 97 to GPUs 3, 4, about 14.5 to GPUs 5, 6, 7.
# - The 8x V100 server of the 2019 blog post (reference_systems/v100-sxm2-8gpu-server/): its
#   recorded `nvidia-smi topo -m` gives GPU0 NV2 to GPUs 3 and 6 and no NVLink to GPU 4.
# The DGX-1's links are data of its recorded system: reference_systems/dgx1-v100/system.json
# ("links": every pair's code, with the sources above).
DGX1_V100 = "DGX-1 (V100), NVIDIA's wiring"
BLOG_V100 = "8x V100 server of the 2019 blog (v100-sxm2-8gpu-server)"


def _pairs_topology(codes: Dict[Tuple[int, int], str], gpus: int = 8) -> Dict[str, Any]:
    """A topo-parser-shaped dict (gpus, links, ...) from {(i, j): link code}; other pairs SYS."""
    names = [f"GPU{i}" for i in range(gpus)]
    table: Dict[str, Dict[str, str]] = {a: {} for a in names}
    for i in range(gpus):
        for j in range(gpus):
            if i != j:
                table[f"GPU{i}"][f"GPU{j}"] = codes.get((min(i, j), max(i, j)), "SYS")
    return {"gpus": names, "nics": {}, "links": table, "cpu_affinity": {}, "numa_affinity": {},
            "gpu_numa_id": {}, "legend": {}}


def v100_wirings() -> Dict[str, Dict[str, Any]]:
    """The two 8x V100 servers of the course, by name: {name: topology dict}.

    The DGX-1 from NVIDIA's published wiring (its system.json), the blog's server from its
    recorded `nvidia-smi topo -m`. Both have the shape `gputopo.parsers.topo` returns, so
    `plots.topology_graph` draws either.
    """
    return {DGX1_V100: _pairs_topology(reference.known_links("dgx1-v100")["pairs"]),
            BLOG_V100: reference.load("v100-sxm2-8gpu-server", "topo")}


def wiring_differences(first: Dict[str, Any], second: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(pair "i-j", code in first, code in second) for every GPU pair whose link differs."""
    out = []
    gpus = sorted(set(first["gpus"]) & set(second["gpus"]), key=lambda g: int(g[3:]))
    for k, a in enumerate(gpus):
        for b in gpus[k + 1:]:
            x, y = first["links"][a][b], second["links"][a][b]
            if x != y:
                out.append((f"{a[3:]}-{b[3:]}", x, y))
    return out


def _p2p_file_order(name: str) -> Tuple[int, int, str]:
    # The plain run first; runs with a variant in their name (reads, kernel copies) after it.
    variant = any(word in name.lower() for word in ("read", "sm_copy", "sm-copy", "smcopy"))
    return (int(variant), len(name), name)


def reference_p2p(systems: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, Any]]:
    """{system: {"parsed", "files", "source_of", "gpu"}} for every system with a P2P test file.

    A system with several files (a writes run, a --p2p_read run, ...) gets one merged result:
    each matrix comes from the first file that has it, the plain run first; "source_of" says
    which file each matrix came from. Systems are found by their files, never listed by hand.
    """
    found = {}
    for system in systems or reference.list_systems():
        names = sorted(reference.find(system, "p2p"), key=_p2p_file_order)
        if not names:
            continue
        merged: Dict[str, Any] = {"devices": [], "peer_access": [], "connectivity": None,
                                  "bandwidth_gbs": {}, "latency_us": {}, "row_indices": {}}
        source_of: Dict[str, str] = {}
        for name in names:
            parsed = reference.load(system, "p2p", filename=name)
            for group in ("bandwidth_gbs", "latency_us"):
                for key, matrix in parsed[group].items():
                    if key not in merged[group]:
                        merged[group][key] = matrix
                        merged["row_indices"][key] = parsed["row_indices"][key]
                        source_of[key] = name
            for key in ("devices", "peer_access", "connectivity"):
                merged[key] = merged[key] or parsed[key]
        found[system] = {"parsed": merged, "files": names, "source_of": source_of,
                         "gpu": gpu_name(system, merged), "tool": tool_of(reference.read_text(system, names[0]))}
    return found


COURSE_TOOL = "the course's p2pBandwidthLatencyTest"
NVIDIA_TOOL = "NVIDIA's CUDA sample p2pBandwidthLatencyTest"


def tool_of(text: str) -> str:
    """Which program printed a P2P test output: the course's (its banner line, before the
    matrices, names the course) or NVIDIA's CUDA sample (same matrices, no such line)."""
    head = text.split("P2P Connectivity Matrix")[0].split("Bandwidth Matrix")[0]
    return COURSE_TOOL if "(gputopo course)" in head else NVIDIA_TOOL


def peer_access(parsed: Dict[str, Any], system: Optional[str] = None) -> Callable:
    """A function (i, j) -> True / False / None: may GPU i access GPU j's memory directly?

    From the output's P2P Connectivity Matrix (what CUDA reported) when it has one, else
    from the recorded system's system.json ("no_peer_access"), else None (unknown).
    On the DGX-1 the pairs without NVLink cross the two CPU sockets (SYS), where CUDA offers
    no peer access; their "P2P=Enabled" cells fall back to the staged copy.
    """
    matrix = parsed.get("connectivity")
    if matrix:
        order = [d.get("index", k) if isinstance(d, dict) else k for k, d in enumerate(parsed.get("devices") or [])]
        order = order if len(order) == len(matrix) else list(range(len(matrix)))

        def from_matrix(i, j):
            if i not in order or j not in order:
                return None
            return bool(matrix[order.index(i)][order.index(j)])
        return from_matrix
    recorded = reference.no_peer_access(system) if system in reference.list_systems() else None
    if recorded is not None:
        blocked = recorded[0]
        return lambda i, j: (min(i, j), max(i, j)) not in blocked
    return lambda i, j: None


def gpu_name(system: str, parsed: Optional[Dict[str, Any]] = None) -> str:
    """The GPU's name: from the test's Device lines, else the machine of the system's system.json."""
    devices = (parsed or {}).get("devices") or []
    if devices:
        return devices[0]["name"]
    return reference.describe(system)["machine"]


def link_lookup(system: Optional[str] = None, topology: Optional[Dict[str, Any]] = None) -> Callable:
    """A function (i, j) -> `topo -m` link code ("NV12", "SYS") or None when unknown.

    From `topology` (the topo parser's result, e.g. `detect().topology`) if given, else from the
    system's recorded `nvidia-smi topo -m` file, else from its system.json ("links").
    """
    table: Dict[Tuple[int, int], str] = {}
    if topology is None and system is not None and reference.find(system, "topo"):
        topology = reference.load(system, "topo", filename=reference.find(system, "topo")[0])
    if topology is not None:
        for first, row in (topology.get("links") or {}).items():
            for second, code in row.items():
                if first.startswith("GPU") and second.startswith("GPU"):
                    table[(int(first[3:]), int(second[3:]))] = code
    elif system is not None and reference.known_links(system) is not None:
        known = reference.known_links(system)
        if known["every_pair"]:  # e.g. HGX H200: every GPU's NVLinks go to the NVSwitch chips
            code = known["every_pair"]
            return lambda i, j: code if i != j else None
        for (i, j), code in known["pairs"].items():
            table[(i, j)] = table[(j, i)] = code
    return lambda i, j: table.get((i, j))


def labels_of(parsed: Dict[str, Any], key: str) -> Tuple[List[int], List[int]]:
    """(row device numbers, column device numbers) of one matrix of the p2p parser's result.

    An excerpt holds only some rows; its columns are still every device, numbered from 0.
    """
    rows = list(parsed["row_indices"][key])
    matrix = (parsed["bandwidth_gbs"].get(key) or parsed["latency_us"].get(key))
    width = len(matrix[0])
    columns = rows if len(rows) == width and sorted(rows) == rows else list(range(width))
    return rows, columns


def efficiency_rows(parsed: Dict[str, Any], link: Callable, gpu: Any,
                    peer: Optional[Callable] = None) -> List[Dict[str, Any]]:
    """Measured bandwidth against the link's peak, one row per GPU pair and matrix.

    P2P matrices are held against the NVLink or PCIe peak of the pair's `topo -m` code
    (`links.peak`); P2P-disabled ones against one PCIe x16 link of the GPU's generation,
    since a staged copy crosses PCIe twice through host memory. A cell of a "P2P=Enabled"
    matrix for a pair without peer access (`peer(i, j)` is False; default: the output's own
    connectivity matrix, see `peer_access`) is a staged copy too, and is labelled and held
    against PCIe like one. Bidirectional values are held against twice the one-way peak.
    gpu: a GPU name, or a detected Machine (then the PCIe and NVLink figures the machine
    reported come first, `links.machine_peak`). A peak the course cannot know is None, and the
    row's `why` says why.
    Rows: {matrix, what, pair, link, measured_gbs, peak_gbs, share, peer_access, why}.
    """
    peer = peer or peer_access(parsed)

    def peak_of(code, i, j):
        if isinstance(gpu, str) or gpu is None:
            return links.peak(code, gpu)
        return links.machine_peak(gpu, i, j, code)

    out = []
    for key, (what, factor, p2p_path) in P2P_MATRICES.items():
        matrix = parsed["bandwidth_gbs"].get(key)
        if not matrix:
            continue
        rows, columns = labels_of(parsed, key)
        for i, values in zip(rows, matrix):
            for j, value in zip(columns, values):
                if i == j:
                    continue
                code = link(i, j)
                access = peer(i, j)
                direct = p2p_path and access is not False
                if direct and not code:
                    found = links.Peak(None, why=f"the topology names no link between GPU{i} and GPU{j}")
                else:
                    found = peak_of(code if direct else "PHB", i, j)
                peak = found.gbs * factor if found.gbs else None
                label = what if direct or not p2p_path else f"{what.replace('P2P', 'P2P matrix')}, no peer access: staged"
                shown_link = (code or "?") if direct else ("via host" if not p2p_path else f"{code or '?'}, via host")
                out.append({"matrix": key, "what": label, "pair": f"{i}->{j}" if factor == 1 else f"{i}<->{j}",
                            "link": shown_link, "measured_gbs": value, "peak_gbs": peak,
                            "share": value / peak if peak else None, "peer_access": access,
                            "why": found.why})
    return out


def efficiency_table(rows: Sequence[Dict[str, Any]], pairs: Optional[Sequence[str]] = None) -> List[Tuple]:
    """efficiency_rows as printable tuples (what, pair, link, measured, peak, share).

    When a peak is unknown ("?"), one more row per distinct reason says why.
    """
    chosen = [r for r in rows if pairs is None or r["pair"].replace("<->", "->") in pairs]
    table = [(r["what"], r["pair"], r["link"], f"{r['measured_gbs']:.2f}",
              "?" if r["peak_gbs"] is None else f"{r['peak_gbs']:.2f}",
              "?" if r["share"] is None else f"{r['share']:.0%}") for r in chosen]
    reasons = dict.fromkeys(r.get("why") for r in chosen if r["peak_gbs"] is None and r.get("why"))
    table += [("? peak unknown:", reason, "", "", "", "") for reason in reasons]
    return table


def efficiency_summary(found: Dict[str, Dict[str, Any]]) -> List[Tuple]:
    """One row per system, kind of copy and link: how many cells, and the range of GB/s and
    of the share of peak. A short view of `efficiency_rows` for many systems at once."""
    out = []
    for system, entry in found.items():
        rows = efficiency_rows(entry["parsed"], link_lookup(system), entry["gpu"], peer_access(entry["parsed"], system))
        groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for r in rows:
            groups.setdefault((r["what"], r["link"]), []).append(r)
        for (what, link_code), members in groups.items():
            gbs = [m["measured_gbs"] for m in members]
            shares = [m["share"] for m in members if m["share"] is not None]
            out.append((system, what, link_code, len(members), f"{min(gbs):.1f}-{max(gbs):.1f}",
                        f"{min(shares):.0%}-{max(shares):.0%}" if shares else "?"))
    return out


def reference_summary(found: Optional[Dict[str, Dict[str, Any]]] = None) -> List[Tuple]:
    """One row per recorded system, for its first recorded pair (GPU0 -> GPU1 in practice).

    Columns: system, tool (which program printed it: `tool_of`), pair and link, one-way P2P,
    both ways P2P, one-way P2P disabled (GB/s), P2P latency, P2P-disabled latency (us), and
    the one-way P2P share of the link's peak.
    """
    found = reference_p2p() if found is None else found
    out = []
    for system, entry in found.items():
        parsed, link = entry["parsed"], link_lookup(system)
        rows, columns = labels_of(parsed, next(iter(parsed["row_indices"])))
        i = rows[0]
        j = next(c for c in columns if c != i)

        def cell(group, key, parsed=parsed, i=i, j=j):  # this iteration's values, bound
            matrix = parsed[group].get(key)
            if not matrix:
                return "-"
            r, c = labels_of(parsed, key)
            return f"{matrix[r.index(i)][c.index(j)]:.2f}"

        share = [e["share"] for e in efficiency_rows(parsed, link, entry["gpu"], peer_access(parsed, system))
                 if e["matrix"] == "unidirectional_write" and e["pair"] == f"{i}->{j}" and e["share"]]
        out.append((system, "course" if entry.get("tool", tool_of(reference.read_text(system, entry["files"][0]))) == COURSE_TOOL
                    else "NVIDIA sample", f"GPU{i}-GPU{j} {link(i, j) or '?'}",
                    cell("bandwidth_gbs", "unidirectional_write"), cell("bandwidth_gbs", "bidirectional_enabled"),
                    cell("bandwidth_gbs", "unidirectional_disabled"), cell("latency_us", "write_gpu"),
                    cell("latency_us", "disabled_gpu"), f"{share[0]:.0%}" if share else "-"))
    return out


def side_by_side(key: str, found: Optional[Dict[str, Dict[str, Any]]] = None, unit: Optional[str] = None):
    """One figure with a heatmap of matrix `key` for every recorded system that has it.

    `found` defaults to reference_p2p(); pass {"this machine": {"parsed": ...}} plus the
    recorded ones to put a live run beside them. Returns the Figure, or None if no system
    has this matrix.
    """
    from matplotlib.figure import Figure

    from gputopo import plots

    found = reference_p2p() if found is None else found
    group = "latency_us" if key in _latency_keys(found) else "bandwidth_gbs"
    having = {s: e for s, e in found.items() if e["parsed"][group].get(key)}
    if not having:
        return None
    widths = [len(e["parsed"][group][key][0]) + 2 for e in having.values()]
    figure = Figure(figsize=(min(22, 2.2 + 0.75 * sum(widths)), 3.4), layout="constrained")
    axes = figure.subplots(1, len(having), width_ratios=widths, squeeze=False)[0]
    for ax, (system, entry) in zip(axes, having.items()):
        rows, columns = labels_of(entry["parsed"], key)
        plots.p2p_heatmap(entry["parsed"][group][key], system, unit=unit or ("us" if group == "latency_us" else "GB/s"),
                          ax=ax, row_labels=[f"GPU{i}" for i in rows], column_labels=[f"GPU{j}" for j in columns])
        ax.title.set_fontsize(9)
    label = P2P_MATRICES[key][0] if key in P2P_MATRICES else LATENCY_LABELS.get(key, key.replace("_", " "))
    figure.suptitle(f"{label} ({'us' if group == 'latency_us' else 'GB/s'}); each panel has its own colour scale")
    return figure


def _latency_keys(found):
    return {k for e in found.values() for k in e["parsed"]["latency_us"]}


# ---------------------------------------------------------------------------------------
# Collectives (notebook 5)

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


def nccl_tables(op: str = "all_reduce", systems: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Every recorded nccl-tests style table of one operation.

    Rows: {system, file, parsed, n, transport, op}. n comes from the table's nGpus line or its
    device list. Only files named for the operation and at most a GPU count
    (nccl-bench-all_reduce.txt, all_reduce_perf-g8.txt), or with one more word when their
    system.json gives them a transport (-sockets, -P2P_LEVEL-LOC), so repeats with other
    iteration counts (nccl-bench-all_reduce-n100.txt) are left out.
    """
    from gputopo.alphabeta import _op_name

    op = _op_name(op)
    plain = re.compile(rf"(nccl-bench-)?{op}(_perf)?(-g\d+)?(?P<more>-.+)?\.txt")
    out = []
    for system in systems or reference.list_systems():
        for name in reference.find(system, "nccl-tests"):
            match = plain.fullmatch(name)
            settings = reference.file_settings(system, name)
            if not match or (match.group("more") and not settings.get("transport")):
                continue
            parsed = reference.load(system, "nccl-tests", filename=name, strict=False)
            n = parsed["metadata"].get("n_gpus") or len(parsed["devices"]) or None
            text = reference.read_text(system, name)
            out.append({"system": system, "file": name, "parsed": parsed, "n": n, "op": op,
                        "transport": transport_of(text, settings), "nvls": nvls_state(text, system)})
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


def tree_allreduce_time_us(size_bytes: float, n: int, alpha_us: float, beta_gbps: float) -> float:
    """Simplified pipelined (double binary) tree all-reduce: 2 ceil(log2 n) alpha + 2 S / beta.

    A reduce up a tree and a broadcast down it each pay one alpha per tree level; with the
    data pipelined in chunks, each GPU's link carries about the whole buffer once per phase.
    A model for comparing shapes of curves, not NCCL's own tuning model.
    """
    if n < 2:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * alpha_us + 2 * size_bytes / (beta_gbps * 1e3)


def ring_schedule(n: int) -> List[Tuple[int, str, List[Tuple[int, int, int]]]]:
    """The ring all-reduce's 2(n-1) steps: (step, phase, [(sender, receiver, chunk), ...]).

    The buffer is cut into n chunks. In reduce-scatter step s (1 ... n-1) GPU i sends chunk
    (i - s + 1) mod n to GPU i+1, which adds it to its own copy; after n-1 steps GPU i holds
    the full sum of chunk (i + 1) mod n. All-gather then passes the finished chunks on for
    another n-1 steps. Every GPU sends one chunk (S/n bytes) per step.
    """
    steps = []
    for s in range(1, n):
        steps.append((s, "reduce-scatter", [(i, (i + 1) % n, (i - s + 1) % n) for i in range(n)]))
    for s in range(1, n):
        steps.append((n - 1 + s, "all-gather", [(i, (i + 1) % n, (i - s + 2) % n) for i in range(n)]))
    return steps


def simulate_ring_allreduce(values: Sequence[Sequence[float]]) -> Tuple[List[List[float]], int]:
    """Run ring_schedule on real numbers: values[i] is GPU i's buffer of n chunks.

    Returns (every GPU's buffer after the last step, chunks each GPU sent). All buffers end
    equal to the element-wise sum, which is what an all-reduce must produce.
    """
    n = len(values)
    buffers = [list(map(float, v)) for v in values]
    if any(len(b) != n for b in buffers):
        raise ValueError("give each of the n GPUs a buffer of n chunks")
    sent = 0
    for _, phase, moves in ring_schedule(n):
        outgoing = [(src, dst, chunk, buffers[src][chunk]) for src, dst, chunk in moves]
        for _src, dst, chunk, value in outgoing:
            if phase == "reduce-scatter":
                buffers[dst][chunk] += value
            else:
                buffers[dst][chunk] = value
        sent += 1
    return buffers, sent


def gpu_count_rows(prefix: str = "h200-nvswitch", op: str = "all_reduce") -> List[Dict[str, Any]]:
    """Default-transport all-reduce tables of every recorded system whose name starts with
    `prefix` (h200-nvswitch-pair, -4gpu, -8gpu, ...), fitted, sorted by GPU count."""
    tables = [t for t in nccl_tables(op) if t["system"].startswith(prefix) and t["transport"].startswith("default")]
    return sorted(fit_rows(tables), key=lambda r: r["n"])


def common_size(rows: Sequence[Dict[str, Any]], wanted: int) -> int:
    """The largest size <= wanted that every table measured (for a fair busbw comparison)."""
    sizes = None
    for r in rows:
        these = {row["size"] for row in r["parsed"]["rows"]}
        sizes = these if sizes is None else sizes & these
    fitting = [s for s in (sizes or ()) if s <= wanted]
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


def heatmaps(parsed: Dict[str, Any], title: str, keys: Optional[Sequence[str]] = None) -> List[Any]:
    """A heatmap Figure for each bandwidth matrix (and the P2P latency) of one P2P test result.

    keys: parser keys to draw (default: every P2P_MATRICES entry present, then latencies).
    Row and column labels are the device numbers the test ran on (e.g. GPU0, GPU3).
    """
    from gputopo import plots

    keys = keys or [k for k in P2P_MATRICES if k in parsed["bandwidth_gbs"]] + [
        k for k in ("write_gpu", "read_gpu", "disabled_gpu") if k in parsed["latency_us"]]
    figures = []
    for key in keys:
        group = "latency_us" if key in parsed["latency_us"] else "bandwidth_gbs"
        rows, columns = labels_of(parsed, key)
        what = P2P_MATRICES[key][0] if key in P2P_MATRICES else LATENCY_LABELS.get(key, key)
        figures.append(plots.p2p_heatmap(parsed[group][key], f"{title}: {what}", unit="us" if group == "latency_us" else "GB/s",
                                         row_labels=[f"GPU{i}" for i in rows], column_labels=[f"GPU{j}" for j in columns]))
    return figures


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

    points: fitted tables (fit_rows) drawn as measured markers; dashed lines: the ring model
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
                            label=f"{system} (measured)")
        small = format_bytes(series[0]["small_bytes"])
        right.plot(gpus, [p["small_us"] for p in series], "o-", color=line.get_color(),
                   label=f"{system}, {small} (measured)")
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


def multinode_rows(busbw_in_node_gbps: float, alpha_in_node_us: float, nic_gbps_per_gpu: float, alpha_net_us: float,
                   size_bytes: float, gpus_per_node: int, node_counts: Sequence[int]) -> List[Tuple]:
    """(GPUs, nodes, busbw bound GB/s, predicted all-reduce us) for a ring over 1..N nodes.

    Inside one node the fitted in-node alpha and bus bandwidth apply; from two nodes on the
    network card bounds the bus bandwidth (`alphabeta.multinode_busbw_gbps`).
    """
    from gputopo import alphabeta

    out = []
    for nodes in node_counts:
        busbw = alphabeta.multinode_busbw_gbps(busbw_in_node_gbps, nic_gbps_per_gpu, nodes)
        t = float(alphabeta.multinode_allreduce_time_us(size_bytes, gpus_per_node, nodes, alpha_in_node_us,
                                                        busbw_in_node_gbps, alpha_net_us, nic_gbps_per_gpu))
        out.append((gpus_per_node * nodes, nodes, f"{busbw:.1f}", f"{t:.0f}"))
    return out


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

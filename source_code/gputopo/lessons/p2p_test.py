"""Notebook 3 (the P2P bandwidth and latency test): what the program does not print about its
matrices: each cell against the peak of the link it crossed (`gputopo.links`) with a verdict
(`gputopo.verdicts`), the recorded systems' outputs, heatmaps (`gputopo.plots`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

from gputopo import links, reference, verdicts
from gputopo.parsers.p2p import matrix_labels

# parser key -> (label, factor of the one-way peak: both ways is twice, P2P path? else staged)
P2P_MATRICES = {
    "unidirectional_write": ("one-way, P2P writes", 1, True),
    "unidirectional_read": ("one-way, P2P reads", 1, True),
    "bidirectional_enabled": ("both ways, P2P", 2, True),
    "unidirectional_disabled": ("one-way, P2P disabled", 1, False),
    "bidirectional_disabled": ("both ways, P2P disabled", 2, False),
}
LATENCY_LABELS = {
    "write_gpu": "latency, P2P writes",
    "read_gpu": "latency, P2P reads",
    "disabled_gpu": "latency, P2P disabled",
}
REPORT_HEADER = ("copy", "pair", "link", "GB/s", "peak GB/s", "share", "verdict")


def gpu_of(parsed: Dict[str, Any], system: Optional[str] = None) -> Optional[str]:
    """The GPU's name from the output's Device lines, else the recorded system's machine."""
    devices = parsed.get("devices") or []
    return (
        devices[0]["name"] if devices else reference.describe(system)["machine"] if system else None
    )


def method_parts(text: str) -> Tuple[str, str]:
    """(how, size) from the course program's `Method:` line: ("copy engine (cudaMemcpyPeerAsync),
    P2P reads", "67108864 elements (256.0 MiB)"); ("", "") for an output without one (NVIDIA's
    sample prints none)."""
    line = next((ln for ln in text.splitlines() if ln.startswith("Method:")), "")
    parts = line[len("Method:") :].split(";")
    if not line or len(parts) < 2:
        return ("", "")
    return parts[0].strip(), parts[1].split(" per copy")[0].strip()


def recorded(systems=None) -> Dict[str, Dict[str, Any]]:
    """{system: {"parsed", "files", "gpu", "tool"}} for every recorded system with a P2P test
    output; each matrix from the first file that has it, the plain run first; "tool": "course" or
    "NVIDIA sample"."""
    found = {}
    for system in systems or reference.list_systems():
        names = sorted(
            reference.find(system, "p2p"),
            key=lambda n: (any(w in n for w in ("read", "sm_copy")), len(n), n),
        )
        if not names:
            continue
        merged: Dict[str, Any] = {
            "devices": [],
            "connectivity": None,
            "bandwidth_gbs": {},
            "latency_us": {},
            "row_indices": {},
        }
        for name in names:
            parsed = reference.load(system, "p2p", filename=name)
            for group in ("bandwidth_gbs", "latency_us"):
                for key, matrix in parsed[group].items():
                    if key not in merged[group]:
                        merged[group][key] = matrix
                        merged["row_indices"][key] = parsed["row_indices"][key]
            for key in ("devices", "connectivity"):
                merged[key] = merged[key] or parsed[key]
        course = (
            "(gputopo course)"
            in reference.read_text(system, names[0]).split("P2P Connectivity Matrix")[0]
        )
        found[system] = {
            "parsed": merged,
            "files": names,
            "gpu": gpu_of(merged, system),
            "tool": "course" if course else "NVIDIA sample",
        }
    return found


def peer_access(parsed: Dict[str, Any], system: Optional[str] = None) -> Callable:
    """(i, j) -> True / False / None: did CUDA report peer access from GPU i to GPU j? From the
    output's P2P Connectivity Matrix, else the recorded system's system.json, else None."""
    matrix = parsed.get("connectivity")
    if matrix:
        order = [d.get("index", k) for k, d in enumerate(parsed.get("devices") or [])]
        order = order if len(order) == len(matrix) else list(range(len(matrix)))
        return lambda i, j: (
            bool(matrix[order.index(i)][order.index(j)]) if i in order and j in order else None
        )
    blocked = reference.no_peer_access(system) if system in reference.list_systems() else None
    return (
        (lambda i, j: (min(i, j), max(i, j)) not in blocked[0]) if blocked else (lambda i, j: None)
    )


def link_lookup(
    system: Optional[str] = None, topology: Optional[Dict[str, Any]] = None
) -> Callable:
    """(i, j) -> the `nvidia-smi topo -m` link code ("NV18", "SYS") or None: from `topology` (the
    topo parser's result of this machine), else the system's recorded topo -m, else its
    system.json."""
    table: Dict[Tuple[int, int], str] = {}
    if topology is None and system and reference.find(system, "topo"):
        topology = reference.load(system, "topo", filename=reference.find(system, "topo")[0])
    if topology is not None:
        for first, row in (topology.get("links") or {}).items():
            for second, code in row.items():
                if first.startswith("GPU") and second.startswith("GPU"):
                    table[(int(first[3:]), int(second[3:]))] = code
    elif system and reference.known_links(system) is not None:
        known = reference.known_links(system)
        if known["every_pair"]:
            return lambda i, j: known["every_pair"] if i != j else None
        for (i, j), code in known["pairs"].items():
            table[(i, j)] = table[(j, i)] = code
    return lambda i, j: table.get((i, j))


def link_of(code: Optional[str], gpu: Optional[str]):
    """verdicts.Link of a pair from its topo -m code and GPU name: "NV18" -> 18 NVLinks of that
    GPU's generation; another code -> the GPU's PCIe generation, x16; no code -> None."""
    found = re.fullmatch(r"NV(\d+)", str(code or ""))
    if found or not code:
        return found and verdicts.Link("nvlink", gpu, count=int(found.group(1)), gpu=gpu)
    return verdicts.Link(
        "pcie", getattr(links.spec_for(gpu), "pcie", None), links.PCIE_X16_LANES, gpu=gpu
    )


def efficiency_rows(
    parsed: Dict[str, Any],
    link: Callable,
    gpu: Optional[str] = None,
    system: Optional[str] = None,
    text: str = "",
) -> List[Dict[str, Any]]:
    """Each bandwidth cell between two GPUs against its link's peak (`links.peak`; both ways: twice)
    and its verdict, by copy method (a kernel when `text` says "Method: ... copy kernel"). Cells of
    P2P disabled or without peer access are staged: one PCIe x16 link, "not comparable"."""
    gpu, peer = gpu or gpu_of(parsed, system), peer_access(parsed, system)
    method = "sm" if re.search(r"Method: .*copy kernel", text) else "ce"
    out = []
    for key, (what, factor, p2p_path) in P2P_MATRICES.items():
        matrix = parsed["bandwidth_gbs"].get(key)
        if not matrix:
            continue
        rows, columns = matrix_labels(parsed, key)
        for i, values in zip(rows, matrix):
            for j, value in zip(columns, values):
                if i == j or value is None:
                    continue
                code, access = link(i, j), peer(i, j)
                direct = p2p_path and access is not False
                found = (
                    links.Peak(None, why=f"no link code known for GPU{i}-GPU{j}")
                    if direct and not code
                    else links.peak(code if direct else "PHB", gpu)
                )
                peak = found.gbs * factor if found.gbs else None
                verdict = verdicts.judge(
                    "p2p_both_ways" if factor == 2 else "p2p_one_way",
                    value,
                    link_of(code, gpu),
                    method=method if direct else "staged",
                )
                out.append(
                    {
                        "matrix": key,
                        "what": what
                        if direct or not p2p_path
                        else f"{what}: no peer access, staged",
                        "pair": f"{i}->{j}" if factor == 1 else f"{i}<->{j}",
                        "link": (code or "?") if direct else "via host",
                        "gbs": value,
                        "peak": peak,
                        "share": value / peak if peak else None,
                        "why": found.why,
                        "verdict": verdict,
                    }
                )
    return out


cut_off = verdicts.p2p_cut_off  # why a P2P test output stops before its end, else None


def report(
    parsed: Dict[str, Any],
    link: Callable,
    text: str = "",
    system: Optional[str] = None,
    gpu: Optional[str] = None,
) -> List[Tuple]:
    """efficiency_rows() as rows of REPORT_HEADER, then each reason for a "low" verdict (with the
    command that checks it) once; a one-GPU run, whose cells cross no link, gives one row saying
    so; a cut-off output one "incomplete" row."""
    why = cut_off(text) if text else None
    if why:
        return [("this output", "", "", "", "", "", f"incomplete ({why})")]
    rows = efficiency_rows(parsed, link, gpu, system, text)
    if not rows:
        return [
            (
                "one GPU only",
                "",
                "",
                "",
                "",
                "",
                "its cells cross no link between GPUs: no peak, no verdict",
            )
        ]
    out, reasons = [], {}
    for r in rows:
        verdict = r["verdict"]
        reasons.update(dict.fromkeys(f"{why} -- check: {check}" for why, check in verdict.reasons))
        out.append(
            (
                r["what"],
                r["pair"],
                r["link"],
                f"{r['gbs']:.2f}",
                "?" if r["peak"] is None else f"{r['peak']:.1f}",
                "?" if r["share"] is None else f"{r['share']:.0%}",
                f"{verdict.status} ({verdict.why})",
            )
        )
    return out + [("  low: reason", "", "", "", "", "", reason) for reason in reasons]


def by_link(rows: List[Tuple]) -> List[Tuple]:
    """report()'s rows, one per copy kind and link code when more than two GPUs took part (eight
    GPUs give 224 rows): pairs counted, GB/s and share as min-max, verdicts counted."""
    pairs = [r for r in rows if "->" in r[1]]
    if len({g for r in pairs for g in r[1].replace("<->", "->").split("->")}) <= 2:
        return rows
    groups: Dict[Tuple, List[Tuple]] = {}
    for r in pairs:
        groups.setdefault((r[0], r[2], r[4]), []).append(r)
    out = []
    for (what, code, peak), members in groups.items():
        gbs = [float(r[3]) for r in members]
        shares = sorted((r[5] for r in members if r[5] != "?"), key=lambda x: float(x.rstrip("%")))
        counts = Counter(r[6].split(" (")[0] for r in members)
        out.append(
            (
                what,
                f"{len(members)} pairs",
                code,
                f"{min(gbs):.2f}-{max(gbs):.2f}",
                peak,
                f"{shares[0]}-{shares[-1]}" if shares else "?",
                ", ".join(f"{n} {s}" for s, n in counts.items()),
            )
        )
    return out + [r for r in rows if "->" not in r[1]]


def ranges(found: Dict[str, Dict[str, Any]]) -> Dict[str, Tuple[float, float, int]]:
    """(lowest, highest, cells) over every recorded cell between two GPUs: NVLink P2P shares of
    peak, one-way staged shares of one PCIe x16 link, and GPU-timed latencies of P2P writes and
    of staged copies (P2P disabled, or "P2P=Enabled" without peer access)."""
    picked: Dict[str, List[float]] = {
        "NVLink P2P, share of peak": [],
        "staged one way, share of PCIe x16": [],
        "P2P write latency, us": [],
        "staged latency, us": [],
    }
    for system, entry in found.items():
        parsed, peer = entry["parsed"], peer_access(entry["parsed"], system)
        for r in efficiency_rows(parsed, link_lookup(system), entry["gpu"], system):
            if r["share"] is not None and r["link"].startswith("NV"):
                picked["NVLink P2P, share of peak"].append(r["share"])
            elif r["share"] is not None and r["matrix"] == "unidirectional_disabled":
                picked["staged one way, share of PCIe x16"].append(r["share"])
        for key in ("write_gpu", "disabled_gpu"):
            if parsed["latency_us"].get(key):
                rows, columns = matrix_labels(parsed, key)
                for i, values in zip(rows, parsed["latency_us"][key]):
                    for j, value in zip(columns, values):
                        if i != j and value is not None:
                            staged = key == "disabled_gpu" or peer(i, j) is False
                            picked[
                                "staged latency, us" if staged else "P2P write latency, us"
                            ].append(value)
    return {kind: (min(v), max(v), len(v)) for kind, v in picked.items() if v}


def heatmaps(found: Dict[str, Dict[str, Any]], key: str):
    """One figure: a heatmap of matrix `key` for each entry of `found` ({name: {"parsed": ...}})
    that has it, each panel on its own colour scale (the diagonal is grey). None if none has it."""
    from matplotlib.figure import Figure

    from gputopo import plots

    group = "latency_us" if key in LATENCY_LABELS else "bandwidth_gbs"
    having = {name: e["parsed"] for name, e in found.items() if e["parsed"][group].get(key)}
    if not having:
        return None
    widths = [len(p[group][key][0]) + 2 for p in having.values()]
    figure = Figure(figsize=(min(22, 2.2 + 0.75 * sum(widths)), 3.4), layout="constrained")
    axes = figure.subplots(1, len(having), width_ratios=widths, squeeze=False)[0]
    unit = "us" if group == "latency_us" else "GB/s"
    for ax, (name, parsed) in zip(axes, having.items()):
        rows, columns = matrix_labels(parsed, key)
        plots.p2p_heatmap(
            parsed[group][key],
            name,
            unit=unit,
            ax=ax,
            row_labels=[f"GPU{i}" for i in rows],
            column_labels=[f"GPU{j}" for j in columns],
        )
        ax.title.set_fontsize(9)
    label = P2P_MATRICES[key][0] if key in P2P_MATRICES else LATENCY_LABELS[key]
    figure.suptitle(f"{label} ({unit}); each panel has its own colour scale")
    return figure

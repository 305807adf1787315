"""Glue for notebook 3 (the P2P bandwidth and latency test): recorded systems side by side,
measured / peak for each GPU pair, heatmaps.

Nothing here measures, parses text formats or draws a single plot type of its own: it puts
together what `gputopo.reference`, `gputopo.links` and `gputopo.plots` provide, so that the
notebook's cells stay one or two lines long.

    from gputopo.lessons import lesson4_p2p as lessons
    lessons.reference_p2p()                    # every recorded P2P test, merged per system
    lessons.efficiency_rows(parsed, link, gpu, lessons.peer_access(parsed, system))
                                               # measured / peak for each GPU pair; pairs without
                                               # peer access are labelled staged, never "P2P"
    lessons.side_by_side("bidirectional_enabled")   # one heatmap per system, one figure

numpy and matplotlib are imported inside the functions that need them (CONTRIBUTING.md).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from gputopo import links, measurements, reference
from gputopo.parsers.p2p import matrix_labels

# P2P matrices (notebook 3)

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
    """(row device numbers, column device numbers) of one matrix of the p2p parser's result
    (an excerpt's columns are every device, from 0): `parsers.p2p.matrix_labels`."""
    return matrix_labels(parsed, key)


def efficiency_rows(parsed: Dict[str, Any], link: Callable, gpu: Any,
                    peer: Optional[Callable] = None) -> List[Dict[str, Any]]:
    """Measured bandwidth against the link's peak, one row per GPU pair and matrix.

    P2P matrices are held against the NVLink or PCIe peak of the pair's `topo -m` code
    (`links.peak`); P2P-disabled ones against one PCIe x16 link of the GPU's generation,
    since a staged copy crosses PCIe twice through host memory. A cell of a "P2P=Enabled"
    matrix for a pair without peer access (`peer(i, j)` is False; default: the output's own
    connectivity matrix, see `peer_access`) is a staged copy too, and is labelled and held
    against PCIe like one. Bidirectional values are held against twice the one-way peak.
    gpu: a GPU name, or a detected Machine (then the PCIe link the machine reported comes
    first and its active NVLinks are counted, `links.machine_peak`; an NVLink's rate per link
    is the data rate of `links`' table either way, so a live run and a recorded one of the
    same machine are held against the same peak). A peak the course cannot know is None, and
    the row's `why` says why; `note` says what the machine's links showed (fewer active,
    slower ones).
    Rows: {matrix, what, pair, link, measured_gbs, peak_gbs, share, peer_access, why, note}.
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
                            "why": found.why, "note": found.note})
    return out


def efficiency_table(rows: Sequence[Dict[str, Any]], pairs: Optional[Sequence[str]] = None) -> List[Tuple]:
    """efficiency_rows as printable tuples (what, pair, link, measured, peak, share).

    When a peak is unknown ("?"), one more row per distinct reason says why; a link the
    machine flagged (`links.Peak.note`) gets one more row per distinct note.
    """
    chosen = [r for r in rows if pairs is None or r["pair"].replace("<->", "->") in pairs]
    table = [(r["what"], r["pair"], r["link"], f"{r['measured_gbs']:.2f}",
              "?" if r["peak_gbs"] is None else f"{r['peak_gbs']:.2f}",
              "?" if r["share"] is None else f"{r['share']:.0%}") for r in chosen]
    reasons = dict.fromkeys(r.get("why") for r in chosen if r["peak_gbs"] is None and r.get("why"))
    table += [("? peak unknown:", reason, "", "", "", "") for reason in reasons]
    notes = dict.fromkeys(r.get("note") for r in chosen if r.get("note"))
    table += [("! link note:", note, "", "", "", "") for note in notes]
    return table


EFFICIENCY_HEADER = ("copy", "pair", "link", "GB/s", "peak GB/s", "share")


def efficiency_report(parsed: Dict[str, Any], link: Callable, gpu: Any, peer: Optional[Callable] = None) -> str:
    """The efficiency table of one P2P test result as text, or one true sentence when there is
    nothing to tabulate: a one-GPU run (its matrices hold only the copy inside that GPU, which
    crosses no link) or a run that printed no bandwidth matrix. Never a table with only its
    header."""
    from gputopo.selfcheck import text_table

    rows = efficiency_rows(parsed, link, gpu, peer)
    if rows:
        return text_table(efficiency_table(rows), header=EFFICIENCY_HEADER)
    devices = parsed.get("devices") or []
    bandwidth = parsed.get("bandwidth_gbs") or {}
    key = next((k for k in P2P_MATRICES if bandwidth.get(k)), None)
    if key is None:
        return "The run printed no bandwidth matrix, so there is nothing to hold against a link's peak."
    rows_of, columns = labels_of(parsed, key)
    if len(set(rows_of) | set(columns)) < 2 or len(devices) == 1:
        name = devices[0]["name"] if devices and devices[0].get("name") else "one GPU"
        inside = bandwidth[key][0][0] if bandwidth[key] and bandwidth[key][0] else None
        copy = f" (its {P2P_MATRICES[key][0]} matrix reads {inside:.2f} GB/s)" if inside is not None else ""
        return (f"This run had one GPU ({name}): every matrix holds only the copy inside that GPU{copy}, "
                "which crosses no link between GPUs, so there is no link peak to hold it against. "
                "Peaks and shares need two GPUs or more.")
    return "The run printed no bandwidth cell between two GPUs, so there is nothing to hold against a link's peak."


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
    # Every matrix cell of every system as a measurement row, then one pivot:
    # (system, GPU pair) x matrix -> GB/s (bandwidth rows) or us (latency rows).
    rows = [r for system, entry in found.items() for r in measurements.from_p2p(entry["parsed"], system, "recorded")]
    table = measurements.frame(rows)
    table["value"] = table["algbw_gbs"].where(table["algbw_gbs"].notna(), table["time_us"])
    cells = table.pivot_table(index=["system", "src", "dst"], columns="matrix", values="value", aggfunc="first")
    out = []
    for system, entry in found.items():
        parsed, link = entry["parsed"], link_lookup(system)
        sources, columns = labels_of(parsed, next(iter(parsed["row_indices"])))
        i = sources[0]
        j = next(c for c in columns if c != i)
        pair = cells.loc[(system, str(i), str(j))]

        def cell(key, pair=pair):  # this iteration's pair, bound
            value = pair.get(key)
            return "-" if value is None or value != value else f"{value:.2f}"  # absent or NaN

        share = [e["share"] for e in efficiency_rows(parsed, link, entry["gpu"], peer_access(parsed, system))
                 if e["matrix"] == "unidirectional_write" and e["pair"] == f"{i}->{j}" and e["share"]]
        out.append((system, "course" if entry.get("tool", tool_of(reference.read_text(system, entry["files"][0]))) == COURSE_TOOL
                    else "NVIDIA sample", f"GPU{i}-GPU{j} {link(i, j) or '?'}",
                    cell("unidirectional_write"), cell("bidirectional_enabled"), cell("unidirectional_disabled"),
                    cell("write_gpu"), cell("disabled_gpu"), f"{share[0]:.0%}" if share else "-"))
    return out


NVIDIA_FIGURES_PATTERN = "nvidia-tools-figures-*.json"


def nvidia_figures(system: str = "h200-nvswitch-pair") -> Dict[str, Any]:
    """The figures NVIDIA's own tools gave on a recorded system, as its folder records them
    (`nvidia-tools-figures-<date>.json`: figures written down when the tools ran, no raw
    output). Returns the file's data plus "file" (its name) and "p2p": {what: {"0->1": GB/s,
    ...}} for the P2P sample's figures. ValueError (one line) when the system has no such file.
    """
    import fnmatch
    import json

    names = sorted(n for n in reference.files(system) if fnmatch.fnmatch(n, NVIDIA_FIGURES_PATTERN))
    if not names:
        raise ValueError(f"{system} has no {NVIDIA_FIGURES_PATTERN} file of NVIDIA's figures")
    try:
        data = json.loads(reference.read_text(system, names[-1]))
        p2p = {entry["what"]: {k: v for k, v in entry.items() if k != "what"}
               for entry in data["p2pBandwidthLatencyTest"]["figures"]}
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{system}/{names[-1]} is not a figures file the course can read ({error})") from None
    return {**data, "file": names[-1], "p2p": p2p}


def share_ranges(found: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Tuple[float, float]]:
    """The lowest and highest share of peak, over every recorded cell, of two kinds of copy:
    "nvlink": P2P copies over NVLink (one way and both ways); "staged_one_way": one-way
    copies with P2P disabled, against one PCIe x16 link. The figures notebook 3's summary
    quotes."""
    found = reference_p2p() if found is None else found
    picked: Dict[str, List[float]] = {"nvlink": [], "staged_one_way": []}
    for system, entry in found.items():
        rows = efficiency_rows(entry["parsed"], link_lookup(system), entry["gpu"], peer_access(entry["parsed"], system))
        for r in rows:
            if r["share"] is None:
                continue
            if P2P_MATRICES[r["matrix"]][2] and r["link"].startswith("NV") and "via host" not in r["link"]:
                picked["nvlink"].append(r["share"])
            elif r["matrix"] == "unidirectional_disabled":
                picked["staged_one_way"].append(r["share"])
    return {kind: (min(values), max(values)) for kind, values in picked.items() if values}


LATENCY_KINDS = ("P2P writes", "P2P reads", "staged (P2P disabled, or no peer access)")


def latency_ranges(found: Optional[Dict[str, Dict[str, Any]]] = None
                   ) -> Dict[str, Tuple[float, float, int, List[str]]]:
    """{kind: (lowest us, highest us, cells, systems)} over every recorded GPU-timed latency cell
    between two different GPUs: P2P writes and P2P reads between GPUs with peer access, and
    staged copies (the P2P=Disabled matrix, plus "P2P=Enabled" cells of pairs without peer
    access, which CUDA stages through host memory). CPU-timed latencies are left out."""
    found = reference_p2p() if found is None else found
    picked: Dict[str, List[Tuple[float, str]]] = {kind: [] for kind in LATENCY_KINDS}
    for system, entry in found.items():
        parsed = entry["parsed"]
        peer = peer_access(parsed, system)
        for key, kind in (("write_gpu", "P2P writes"), ("read_gpu", "P2P reads"),
                          ("disabled_gpu", LATENCY_KINDS[2])):
            matrix = parsed["latency_us"].get(key)
            if not matrix:
                continue
            rows, columns = labels_of(parsed, key)
            for a, i in enumerate(rows):
                for b, j in enumerate(columns):
                    value = matrix[a][b] if a < len(matrix) and b < len(matrix[a]) else None
                    if i == j or value is None:
                        continue
                    staged = key == "disabled_gpu" or not peer(i, j)
                    picked[LATENCY_KINDS[2] if staged else kind].append((value, system))
    return {kind: (min(v for v, _ in cells), max(v for v, _ in cells), len(cells),
                   sorted({system for _, system in cells}))
            for kind, cells in picked.items() if cells}


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


def pair_copy_gbs(live: Optional[Dict[str, Any]], found: Dict[str, Dict[str, Any]],
                  system: str = "h200-nvswitch-pair") -> Tuple[float, str]:
    """GPU0 -> GPU1 one-way P2P write bandwidth and where it comes from (exercise 1).

    Measured here when the live run had two GPUs or more; otherwise the recorded `system` of
    `found` (reference_p2p()), saying why when a one-GPU live run has no such pair.
    """
    matrix = (live or {}).get("parsed", {}).get("bandwidth_gbs", {}).get("unidirectional_write") or []
    if len(matrix) >= 2 and len(matrix[0]) >= 2 and matrix[0][1] is not None:
        return matrix[0][1], "this machine"
    why = " (the live run here had one GPU: no GPU0 -> GPU1 pair)" if live else ""
    return found[system]["parsed"]["bandwidth_gbs"]["unidirectional_write"][0][1], f"recorded {system}{why}"


def _latency_keys(found):
    return {k for e in found.values() for k in e["parsed"]["latency_us"]}


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


# ---------------------------------------------------------------------------------------
# Verdicts (gputopo.verdicts) beside the efficiency figures: the same peak, one line each.

_VERDICT_KIND = {"unidirectional_write": "p2p_one_way", "unidirectional_read": "p2p_one_way",
                 "bidirectional_enabled": "p2p_both_ways", "unidirectional_disabled": "p2p_one_way",
                 "bidirectional_disabled": "p2p_both_ways"}


def recorded_link(code: Optional[str], gpu: Optional[str], system: Optional[str] = None):
    """verdicts.Link for a recorded pair from its `topo -m` code and GPU name (the recorded
    system's facts): "NV12" -> 12 NVLinks of that GPU's generation; any other code -> the
    GPU's PCIe generation from links.py's table (x16). None when the code is unknown. system:
    the recorded system the judged figures come from (verdicts: "range set from this recording"
    where a range rests on that system alone)."""
    import re

    from gputopo import verdicts

    found = re.fullmatch(r"NV(\d+)", str(code or ""))
    if found:
        return verdicts.Link("nvlink", gpu, count=int(found.group(1)), gpu=gpu, recorded_on=system)
    if not code:
        return None
    spec = links.spec_for(gpu)
    return verdicts.Link("pcie", getattr(spec, "pcie", None), links.PCIE_X16_LANES, gpu=gpu, recorded_on=system)


def _method(text: str) -> str:
    import re

    return "sm" if re.search(r"Method: .*copy kernel|--sm_copy|SM copy", text or "") else "ce"


def row_verdict(row: Dict[str, Any], link, text: str = ""):
    """The verdict on one efficiency_rows row over `link` (verdicts.Link): a P2P cell with
    peer access is judged by its copy method; a staged cell (P2P disabled, or no peer access)
    with method "staged", which verdicts calls not comparable."""
    from gputopo import verdicts

    kind = _VERDICT_KIND[row["matrix"]]
    staged = not P2P_MATRICES[row["matrix"]][2] or row.get("peer_access") is False
    both = kind == "p2p_both_ways"
    return verdicts.judge(kind, row["measured_gbs"], link, method="staged" if staged else _method(text),
                          direction="both" if both else "one-way", against="both" if both else "one-way")


def verdict_line(label: str, verdict) -> str:
    """One line per verdict, and the reasons (with their checks) only when it is "low"."""
    lines = verdict.text().splitlines()
    return "\n".join([f"{label}: {lines[0]}"] + [line for line in lines[1:] if line.startswith("  reason")])


def efficiency_verdicts(parsed: Dict[str, Any], link: Callable, gpu: Any, peer: Optional[Callable] = None,
                        text: str = "", machine: Any = None) -> List[str]:
    """One verdict line per row of efficiency_rows (the same cells, the same peak).

    The link of each pair: `verdicts.link_from_machine(machine, a, b)` for a live run, where a
    and b are the nvidia-smi indices of the device numbers the run printed (`gpu_indices`, p2ptest's
    map from CUDA ordinal to index: under CUDA_VISIBLE_DEVICES=2,3 ordinals 0,1 are GPUs 2,3),
    else `recorded_link(code, gpu)` from the recorded system's facts."""
    return _once([verdict_line(label, verdict) for label, verdict in _judged_rows(parsed, link, gpu, peer, text,
                                                                                  machine)])


def _once(lines: List[str]) -> List[str]:
    """The same lines, each block of reasons printed once: a later verdict with the same reasons
    says "  reasons as above"."""
    out, seen = [], set()
    for line in lines:
        head, _, reasons = line.partition("\n")
        out.append(head + "\n  reasons as above" if reasons and reasons in seen else line)
        seen.add(reasons)
    return out


def _index(gpu_indices: Optional[Dict[Any, Any]], ordinal: int) -> int:
    """nvidia-smi's index of a CUDA ordinal the run printed (keys may be ints or, after JSON, strings)."""
    found = (gpu_indices or {}).get(ordinal, (gpu_indices or {}).get(str(ordinal), ordinal))
    return int(found)


def _judged_rows(parsed, link, gpu, peer=None, text="", machine=None, live=None):
    from gputopo import verdicts

    indices = (live or {}).get("gpu_indices") or {}
    out = []
    for row in efficiency_rows(parsed, link, machine if machine is not None else gpu, peer):
        i, j = (int(n) for n in row["pair"].replace("<->", "->").split("->"))
        pair_link = (verdicts.link_from_machine(machine, _index(indices, i), _index(indices, j))
                     if machine is not None else recorded_link(link(i, j), gpu))
        out.append((f"{row['what']} {row['pair']}", row_verdict(row, pair_link, text)))
    return out


LIVE_VERDICT_LINES = 8  # more cells than two GPUs have: one count line, then only the "low" cells


def live_verdicts(live: Optional[Dict[str, Any]], machine: Any) -> List[str]:
    """Verdict lines for a live run: a cut-off output is "incomplete" (verdicts.judge_p2p_output);
    a one-GPU run's copy inside the GPU crosses no link and is "not comparable"; otherwise
    efficiency_verdicts with the links the machine reported."""
    from gputopo import verdicts

    if not live:
        return []
    parsed, text = live.get("parsed") or {}, live.get("text") or ""
    # judge_p2p_output only to see whether the output is whole; its pair must exist in the
    # output (a one-GPU run has only ordinal 0).
    ordinals = len((parsed.get("connectivity") or [[1, 1], [1, 1]]))
    whole = verdicts.judge_p2p_output(text, verdicts.Link("unknown"), 0, 1 if ordinals > 1 else 0)
    if len(whole) == 1 and whole[0].status == verdicts.INCOMPLETE:
        return [verdict_line("this run", whole[0])]
    bandwidth = parsed.get("bandwidth_gbs") or {}
    key = next((k for k in P2P_MATRICES if bandwidth.get(k)), None)
    if key is None:
        return []
    rows_of, columns = labels_of(parsed, key)
    if len(set(rows_of) | set(columns)) < 2:
        inside = bandwidth[key][0][0]
        local = verdicts.judge("p2p_one_way", inside, verdicts.Link("copy inside one GPU"))
        return [verdict_line(f"{P2P_MATRICES[key][0]}, inside GPU{rows_of[0]}", local)]
    indices = live.get("gpu_indices") or {}
    by_index = link_lookup(topology=getattr(machine, "topology", None) or {})
    judged = _judged_rows(parsed, lambda i, j: by_index(_index(indices, i), _index(indices, j)), None,
                          peer_access(parsed), text, machine=machine, live=live)
    if len(judged) <= LIVE_VERDICT_LINES:
        return _once([verdict_line(label, verdict) for label, verdict in judged])
    counts: Dict[str, int] = {}
    for _, verdict in judged:
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    return ([f"{len(judged)} cells: " + ", ".join(f"{n} {status}" for status, n in counts.items())]
            + [f"  not comparable, {n} cells: {why}" for why, n in _count(
                v.why for _, v in judged if v.status == "not comparable").items()]
            + _once([verdict_line(label, verdict) for label, verdict in judged if verdict.status != "as expected"
                     and verdict.status != "not comparable"]))


def _count(items) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


_SUMMARY_CELLS = (("unidirectional_write", "bandwidth_gbs", "p2p_one_way", False, "one-way P2P"),
                  ("bidirectional_enabled", "bandwidth_gbs", "p2p_both_ways", False, "both ways P2P"),
                  ("unidirectional_disabled", "bandwidth_gbs", "p2p_one_way", True, "one-way disabled"),
                  ("write_gpu", "latency_us", "p2p_latency", False, "P2P lat."),
                  ("disabled_gpu", "latency_us", "p2p_latency", True, "disabled lat."))


def pair_verdicts(entry: Dict[str, Any], system: str) -> Tuple[Any, List[Tuple[str, Any]]]:
    """(link, [(column, Verdict)]) for the first pair of reference_summary's row of `system`:
    the numbers that row shows, judged over the link the recorded system's facts give
    (recorded_link). A number the output does not have is left out."""
    from gputopo import verdicts

    parsed = entry["parsed"]
    sources, columns = labels_of(parsed, next(iter(parsed["row_indices"])))
    i = sources[0]
    j = next(c for c in columns if c != i)
    link = recorded_link(link_lookup(system)(i, j), entry["gpu"], system)
    text = reference.read_text(system, entry["files"][0])
    peer = peer_access(parsed, system)(i, j)
    out = []
    for key, group, kind, staged, label in _SUMMARY_CELLS:
        matrix = parsed[group].get(key)
        if not matrix:
            continue
        rows, cols = labels_of(parsed, key)
        if i not in rows or j not in cols:
            continue
        value = matrix[rows.index(i)][cols.index(j)]
        both = kind == "p2p_both_ways"
        out.append((label, verdicts.judge(kind, value, link, method="staged" if staged or peer is False
                                          else _method(text), direction="both" if both else "one-way",
                                          against="both" if both else "one-way")))
    return link, out


def verdicts_peak(link) -> Optional[float]:
    """The per-direction peak the verdicts hold a number against (verdicts.link_peak): the
    same figure as efficiency_rows' peak column for that pair."""
    from gputopo import verdicts

    return verdicts.link_peak(link).value


def link_facts(link) -> str:
    """The link a verdict used, in words: "NV12 on NVIDIA H100 PCIe: 12 links x 25 GB/s = 300 GB/s per direction"."""
    from gputopo import verdicts

    if link is None:
        return "link unknown"
    peak = verdicts.link_peak(link)
    code = f"NV{link.count}" if link.type == "nvlink" else link.describe()
    value = "unknown" if peak.value is None else f"{peak.value:.0f} GB/s"
    return f"{code} on {str(link.gpu).split(',')[0]}: {peak.what.split('(')[-1].rstrip(')')} = {value} per direction"


def short_verdict(verdict) -> str:
    """The status and its why, to print beside a number already on the line: "as expected (0.88 of the peak)"."""
    return f"{verdict.status} ({verdict.why})"


def verdict_counts(found: Dict[str, Dict[str, Any]]) -> List[str]:
    """One line per recorded system: how many of its efficiency_rows cells get each verdict,
    the lowest share among those "as expected", and every "low" cell with its pair."""
    out = []
    for system, entry in found.items():
        lookup, gpu = link_lookup(system), entry["gpu"]
        text = reference.read_text(system, entry["files"][0])
        counts: Dict[str, int] = {}
        low = []
        for row in efficiency_rows(entry["parsed"], lookup, gpu, peer_access(entry["parsed"], system)):
            i, j = (int(n) for n in row["pair"].replace("<->", "->").split("->"))
            verdict = row_verdict(row, recorded_link(lookup(i, j), gpu, system), text)
            counts[verdict.status] = counts.get(verdict.status, 0) + 1
            if verdict.status == "low":
                low.append(f"{row['what']} {row['pair']}")
        words = ", ".join(f"{n} {status}" for status, n in counts.items())
        out.append(f"{system}: {words}" + (f"; low: {', '.join(low)}" if low else ""))
    return out

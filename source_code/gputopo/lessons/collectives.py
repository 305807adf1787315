"""What notebook 4 (collectives and scaling) needs that no tool prints: the recorded all-reduce
tables with their transport, launch mode and NVLS state, the ring model fitted to them, the
multi-node what-if panel over the recorded clusters, and the NET lines of published logs.

    from gputopo.lessons import collectives
    collectives.nccl_tables("all_reduce")       # every recorded all-reduce table
    collectives.fit_rows(tables)                # alpha per ring step and bus bandwidth of each
    collectives.recorded_clusters()             # published multi-node runs against alphabeta.whatif
    figure, panel = collectives.whatif_panel()  # static table + plot, and the ipywidgets box
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo import alphabeta, links, reference, verdicts
from gputopo.ncclpaths import nvls_state as _nvls_label
from gputopo.parsers import nccl_log
from gputopo.units import format_bytes

# nccl_bench's summary after its table: "# Transports NCCL reported (...): P2P/direct pointer: 48;"
_TRANSPORT_LINE = re.compile(r"^#\s*Transports NCCL reported[^:]*:\s*(.+?)\s*$", re.MULTILINE)
_GRAPH_LINE = re.compile(r"^#\s*CUDA graph mode", re.MULTILINE)       # nccl_bench -G
_NVLS_SET = re.compile(r"NCCL_NVLS_ENABLE(?:=| set by environment to )(\w+)")


def table(system: str, name: str, text: str, parsed: Dict[str, Any], settings: Optional[Dict[str, Any]] = None,
          op: str = "all_reduce") -> Dict[str, Any]:
    """One table as the notebook uses it. n: the "Using devices" lines (one per rank, however
    launched; nGpus is 1 per process under torchrun or mpirun), else nGpus. NVLS: the run's own
    text, else the environment of this kernel for a live run, else "n/a" without NVSwitch."""
    line = _TRANSPORT_LINE.search(text)
    transport = (settings or {}).get("transport") or (
        "default (" + ", ".join(p.rsplit(":", 1)[0].strip() for p in line.group(1).split(";") if p.strip()) + ")"
        if line else "default (NCCL's choice)")
    setting = _NVLS_SET.search(text)
    if setting:
        nvls = _nvls_label({"NCCL_NVLS_ENABLE": setting.group(1)}, None)
    elif system == "this machine":
        value = os.environ.get("NCCL_NVLS_ENABLE")
        nvls = _nvls_label({"NCCL_NVLS_ENABLE": value} if value is not None else {}, None)
    else:
        nvls = "not recorded" if reference.system_info(system).get("nvswitch") else "n/a (no NVSwitch)"
    n = len(parsed.get("devices") or []) or (parsed.get("metadata") or {}).get("n_gpus")
    return {"system": system, "file": name, "parsed": parsed, "n": n, "op": op, "transport": transport,
            "nvls": nvls, "launch": "CUDA graph" if _GRAPH_LINE.search(text) else "plain launches", "text": text}


def nccl_tables(op: str = "all_reduce", systems: Optional[Sequence[str]] = None,
                cuda_graph: bool = False) -> List[Dict[str, Any]]:
    """Every recorded table of one operation, found by file name (nccl-bench-all_reduce-g8.txt,
    all_reduce_perf-g8.txt; with one more word only where system.json names its transport, so
    repeats such as -n100 are left out); cuda_graph=True: the same names ending in -cuda-graph."""
    op = alphabeta._op_name(op)
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
            out.append(table(system, name, reference.read_text(system, name),
                             reference.load(system, "nccl-tests", filename=name, strict=False), settings, op))
    return out


def fit_rows(tables: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each table with the ring model fitted to it (alphabeta.fit_from_table): alpha per ring step
    (us) and bus bandwidth (GB/s), and its smallest message's time and largest busbw."""
    out = []
    for t in tables:
        alpha, beta = alphabeta.fit_from_table(t["parsed"], t["op"], t["n"])
        rows = t["parsed"]["rows"]
        out.append({**t, "alpha_step_us": alpha, "busbw_gbps": beta,
                    "small_us": rows[0]["out_of_place"]["time_us"], "small_bytes": rows[0]["size"],
                    "big_busbw": rows[-1]["out_of_place"]["busbw"], "big_bytes": rows[-1]["size"]})
    return out


FIT_HEADER = ("file", "transport", "launch", "NVLS", "GPUs", "alpha/step us", "busbw GB/s", "smallest msg us",
              "largest busbw GB/s")


def fit_table(fits: Sequence[Dict[str, Any]], system: str) -> List[Tuple]:
    """One system's fits as rows under FIT_HEADER, each with its whole NVLS label."""
    return [(f["file"], f["transport"], f["launch"], f["nvls"], f["n"], f"{f['alpha_step_us']:.2f}",
             f"{f['busbw_gbps']:.1f}", f"{f['small_us']:.1f}", f"{f['big_busbw']:.1f} at {format_bytes(f['big_bytes'])}")
            for f in fits if f["system"] == system]


def predicted_busbw(size_bytes: float, n: int, alpha_us: float, beta_gbps: float) -> float:
    """busbw the ring model predicts: S / T(S, n) x 2(n-1)/n, in GB/s."""
    time_us = alphabeta.ring_allreduce_time_us(size_bytes, n, alpha_us, beta_gbps)
    return size_bytes / (time_us * 1e3) * alphabeta.busbw_factor("all_reduce", n)


def ring_vs_tree_rows(alpha_us: float, beta_gbps: float, size_bytes: float, counts: Sequence[int]) -> List[Tuple]:
    """(n, ring us, tree us, faster). The tree is a sketch, not NCCL's tuning model: a pipelined
    double binary tree pays 2 ceil(log2 n) alphas and moves about 2 S per GPU (2 S / beta)."""
    out = []
    for n in counts:
        ring = float(alphabeta.ring_allreduce_time_us(size_bytes, n, alpha_us, beta_gbps))
        tree = 2 * math.ceil(math.log2(n)) * alpha_us + 2 * size_bytes / (beta_gbps * 1e3)
        out.append((n, f"{ring:.1f}", f"{tree:.1f}", "ring" if ring < tree else "tree"))
    return out


def multinode_rows(busbw_in_node_gbps: float, alpha_in_node_us: float, node_nic_gbps: float, alpha_net_us: float,
                   size_bytes: float, gpus_per_node: int, node_counts: Sequence[int]) -> List[Tuple]:
    """(GPUs, nodes, busbw bound, all-reduce us, x one node): from two nodes on the node's NICs
    together (node_nic_gbps, alphabeta.total_nic_gbps) bound busbw (alphabeta.multinode_busbw_gbps)."""
    one = float(alphabeta.ring_allreduce_time_us(size_bytes, gpus_per_node, alpha_in_node_us, busbw_in_node_gbps))
    out = []
    for nodes in node_counts:
        busbw = alphabeta.multinode_busbw_gbps(busbw_in_node_gbps, node_nic_gbps, nodes)
        t = float(alphabeta.multinode_allreduce_time_us(size_bytes, gpus_per_node, nodes, alpha_in_node_us,
                                                        busbw_in_node_gbps, alpha_net_us, node_nic_gbps))
        out.append((gpus_per_node * nodes, nodes, f"{busbw:.1f}", f"{t:.0f}", f"{t / one:.2f}"))
    return out


# ---------------------------------------------------------------------------------------
# Multi-node without a cluster: the what-if panel (alphabeta.whatif) over the recorded clusters

WHATIF_SIZES = tuple(2**k for k in range(10, 35, 2))
WHATIF_NODES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# NVLS needs an NVSwitch with SHARP: HGX H100/H200, B200, GB200 (notebook 4, "What NVLS would change").
_NVLS_LINKS = ("H100 SXM5", "H200 SXM", "B200 / GB200", "h200-nvswitch-8gpu")


def _last_busbw(system: str, filename: str) -> Tuple[int, float]:
    rows = reference.load(system, "nccl-tests", filename=filename)["rows"]
    return rows[-1]["size"], rows[-1]["out_of_place"]["busbw"]


def link_options(your_fit: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """The panel's in-node links: your own fit (a fit_rows entry of two or more GPUs, first when
    given), two recorded 8-GPU nodes (their busbw), gputopo.links' NVLink sets (line rate per GPU
    per direction) and "none"; each {label, line_gbps, busbw_gbps, nvls}."""
    rates = {r["link"]: float(r["per_direction_gbs"]) for r in links.link_table() if str(r["link"]).startswith("NVLink")}
    options = []
    if your_fit and your_fit.get("n", 0) > 1 and your_fit.get("busbw_gbps", 0) > 0:
        options.append({"label": f"your fit: {your_fit['system']}, busbw {your_fit['busbw_gbps']:.0f} GB/s on "
                                 f"{your_fit['n']} GPUs", "line_gbps": None, "busbw_gbps": float(your_fit["busbw_gbps"]),
                        "nvls": False})
    for system, filename, key in (("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g8.txt", "NVLink 4: H200 SXM"),
                                  ("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt", "NVLink 2: Tesla V100 SXM2")):
        busbw = _last_busbw(system, filename)[1]
        options.append({"label": f"recorded {system}: busbw {busbw:.0f} GB/s on 8 GPUs", "line_gbps": rates.get(key),
                        "busbw_gbps": busbw, "nvls": system.startswith("h200")})
    options += [{"label": f"{label} ({gbps:.0f} GB/s per direction)", "line_gbps": gbps, "busbw_gbps": None,
                 "nvls": any(k in label for k in _NVLS_LINKS)} for label, gbps in rates.items()]
    return options + [{"label": "none (one GPU per node, or PCIe only)", "line_gbps": None, "busbw_gbps": None,
                       "nvls": False}]


def recorded_clusters() -> List[Dict[str, Any]]:
    """Every recorded system with a "cluster" entry in its system.json, against the model.

    recorded_gbps: its table's last out-of-place busbw, or the published figure. An untuned run
    (cluster "tuned": false) also has tuned_gbps, the same hardware's tuned figure from its source;
    the band (alphabeta.tolerance_text) is tested on the tuned figure. "within": the tested figure
    lies in [(1 - TOLERANCE_BELOW) x estimate, line-rate bound] (NVLS: no upper bound)."""
    rates = {r["link"]: float(r["per_direction_gbs"]) for r in links.link_table()}
    out = []
    for system in reference.list_systems():
        info = reference.system_info(system)
        c = info.get("cluster")
        if not c:
            continue
        if c.get("file"):
            size, recorded = _last_busbw(system, c["file"])
            what = f"{c.get('op', 'all_reduce')} table, {size / 2**20:.0f} MiB"
        else:
            size, recorded, what = None, float(c["recorded_busbw_gbps"]), "published figure"
        bound, estimate = alphabeta.cluster_busbw(c, rates.get(c.get("in_node_link") or ""))
        tuned = c.get("tuned_busbw_gbps")
        tested = recorded if tuned is None else float(tuned)
        within = (1 - alphabeta.TOLERANCE_BELOW) * estimate <= tested <= bound * (1 + 1e-9)
        out.append({"system": system, "machine": info.get("machine", ""), "nodes": c["nodes"],
                    "gpus_per_node": c["gpus_per_node"], "nics_per_node": c["nics_per_node"], "nic_gbit": c["nic_gbit"],
                    "nvlink_domain_gpus": c.get("nvlink_domain_gpus"), "what": what, "size": size,
                    "nvls": c.get("nvls") == "likely", "provenance": c.get("provenance", "not stated"),
                    "tuned": c.get("tuned", True), "recorded_gbps": recorded, "tuned_gbps": tuned,
                    "bound_gbps": bound, "estimate_gbps": estimate, "ratio": recorded / estimate,
                    "tested_ratio": tested / estimate, "within": within})
    return out


# The one public Blackwell NVLS on/off pair: 8x B300, all-reduce busbw 695 GB/s with NVLS off,
# 845 with it on (NVIDIA/nccl issue #2140, NCCL 2.30.4): its ring reaches 695/900 = 0.77 of
# NVLink 5's line rate, not Hopper's 370/450 = 0.82, and its NVLS gain is 845/695 = 1.216.
B300_RING_GBPS = 695.0
B300_NVLS_GAIN = 845.0 / 695.0


def gb200_nvls_gains(recorded_gbps: float) -> List[Tuple]:
    """The GB200 rack's ratio under each (ring, NVLS gain) one could assume for Blackwell (notebook 4).

    Rows: (what, ring GB/s, gain, estimate GB/s, ratio, in band). The first two take Hopper's ring
    efficiency (900 x 370/450 = 740); the third takes B300's own ring and gain: 695 x 845/695 = 845."""
    ring = 900.0 * alphabeta.NVLINK_RING_EFFICIENCY   # NVLink 5: 900 GB/s per direction
    tuner = alphabeta.NVLS_EFFICIENCY["blackwell"] / alphabeta.NVLS_EFFICIENCY["hopper"]
    gains = (("Hopper's ring and gain 480/370 (nccl-tests #212)", ring, alphabeta.NVLS_GAIN),
             ("Hopper's ring, 480/370 x 0.74/0.85, NCCL's tuner (the model's)", ring, alphabeta.NVLS_GAIN * tuner),
             ("B300's ring 695/900 = 0.77 x 845/695 (NVIDIA/nccl #2140)", B300_RING_GBPS, B300_NVLS_GAIN))
    low = 1 - alphabeta.TOLERANCE_BELOW
    return [(what, f"{r:.0f}", f"{gain:.3f}", f"{r * gain:.0f}", f"{recorded_gbps / (r * gain):.2f}",
             "yes" if recorded_gbps >= low * r * gain else "NO") for what, r, gain in gains]


def _in_band(c: Dict[str, Any], value: float) -> bool:
    return (1 - alphabeta.TOLERANCE_BELOW) * c["estimate_gbps"] <= value <= c["bound_gbps"] * (1 + 1e-9)


def cluster_rows(clusters: Sequence[Dict[str, Any]]) -> List[Tuple]:
    """Rows of the recorded clusters' table in the notebook."""
    return [(c["system"], f"{c['nodes'] or '?'} x {c['gpus_per_node']}",
             f"{c['nics_per_node']} x {c['nic_gbit']:g}G" + (f" (NVLink domain {c['nvlink_domain_gpus']})"
                                                           if c["nvlink_domain_gpus"] else ""),
             c["what"], c["provenance"],
             f"{c['recorded_gbps']:.2f}" + (f" untuned; tuned {c['tuned_gbps']:.2f}" if c["tuned_gbps"] else ""),
             f"{c['bound_gbps']:.1f}" if math.isfinite(c["bound_gbps"]) else "none (NVLS)",
             f"{c['estimate_gbps']:.1f}" + (" (NVLS)" if c["nvls"] else ""),
             f"{c['ratio']:.2f}" + (f"; tuned {c['tested_ratio']:.2f}" if c["tuned_gbps"] else ""),
             ("yes" if _in_band(c, c["recorded_gbps"]) else "NO") + " untuned; "
             + ("yes" if c["within"] else "NO") + " tuned" if c["tuned_gbps"]
             else "yes" if c["within"] else "NO") for c in clusters]


def whatif_settings(**changes) -> Dict[str, Any]:
    """The panel's defaults (an HGX H100-class node: 8 GPUs, 8 x 400 Gb/s, rails aligned, PXN and
    GPUDirect RDMA on, NVLS off as everywhere in the course) with `changes` applied."""
    settings = {"gpus_per_node": 8, "link": "NVLink 4: H100 SXM5", "nics_per_node": 8, "nic_gbit": 400,
                "rails_aligned": True, "pxn": True, "gdr": True, "spine_oversubscription": 2.0,
                "nodes": 2, "algorithm": "ring", "nvls": False, "size": 2**30}
    unknown = set(changes) - set(settings)
    if unknown:
        raise ValueError(f"unknown what-if settings: {', '.join(sorted(unknown))}")
    return {**settings, **changes}


def whatif_result(settings: Dict[str, Any], options=None, clusters=None) -> Dict[str, Any]:
    """alphabeta.whatif for the settings, plus the recorded clusters with the same NICs and GPUs per node."""
    options = link_options() if options is None else options
    option = next((o for o in options if o["label"] == settings["link"] or o["label"].startswith(settings["link"])), None)
    if option is None:
        raise ValueError(f"unknown in-node link {settings['link']!r}")
    nvls = bool(settings["nvls"]) and option["nvls"]
    result = alphabeta.whatif(settings["gpus_per_node"], option["line_gbps"], settings["nics_per_node"],
                              settings["nic_gbit"], settings["nodes"], settings["size"],
                              algorithm=settings["algorithm"], gdr=settings["gdr"], pxn=settings["pxn"],
                              rails_aligned=settings["rails_aligned"],
                              spine_oversubscription=settings["spine_oversubscription"], nvls=nvls,
                              in_node_busbw_gbps=option["busbw_gbps"],
                              nvls_generation="blackwell" if "B200" in option["label"] else "hopper")
    if settings["nvls"] and not option["nvls"]:
        result["notes"].append("NVLS needs NVSwitch with SHARP (H100/H200/B200/GB200): ignored for this link")
    clusters = recorded_clusters() if clusters is None else clusters
    result["matches"] = [c for c in clusters if (c["nics_per_node"], c["nic_gbit"], c["gpus_per_node"])
                         == (settings["nics_per_node"], settings["nic_gbit"], settings["gpus_per_node"])]
    result["nvls_used"] = nvls
    return result


def whatif_text(settings: Dict[str, Any], result: Dict[str, Any]) -> str:
    """The panel's lines: the prediction, what bounds it, notes, the matching recordings."""
    bound = (f"line-rate bound {result['bound_gbps']:.1f} GB/s" if math.isfinite(result["bound_gbps"])
             else "no line-rate bound: NVLS busbw is not a wire bandwidth, nccl-tests #212")
    lines = [f"{settings['nodes']} node(s) x {settings['gpus_per_node']} GPUs = {result['gpus']} GPUs, "
             f"{settings['algorithm']}, NVLS {'on (opt-in)' if result['nvls_used'] else 'off (course default)'}, "
             f"all-reduce of {format_bytes(settings['size'])}",
             f"predicted busbw {result['busbw_gbps']:.1f} GB/s ({bound}), bounded by: {result['bound_by']}",
             f"all-reduce time {result['time_us'] / 1e3:.3f} ms, algbw {result['algbw_gbps']:.1f} GB/s"]
    lines += [f"note: {note}" for note in result["notes"]]
    lines += (["recorded clusters with these NICs and GPUs per node:"]
              + [f"  {c['system']}: {c['recorded_gbps']:.2f} GB/s busbw ({c['what']}, "
                 f"{str(c['nodes']) + ' nodes' if c['nodes'] else 'nodes not stated'}, {c['provenance']})"
                 for c in result["matches"]]
              if result["matches"] else ["no recorded cluster has these NICs and GPUs per node"])
    return "\n".join(lines)


def whatif_static() -> List[Tuple]:
    """The static view's rows: fixed settings at 1, 2, 16 and 1024 nodes and four variations."""
    options, clusters = link_options(), recorded_clusters()
    settings_list = [whatif_settings(nodes=nodes) for nodes in (1, 2, 16, 1024)] + [
        whatif_settings(nodes=16, gdr=False), whatif_settings(nodes=16, rails_aligned=False, pxn=False),
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


def whatif_panel(show_static: bool = True, your_fit: Optional[Dict[str, Any]] = None):
    """(static figure, ipywidgets panel): prints the static table and draws the plot (what nbval
    and an exported notebook keep); the panel is None, with a line saying so, without ipywidgets.
    your_fit: a fit_rows entry measured here; the panel then offers it as an in-node link."""
    from gputopo import plots
    from gputopo.selfcheck import text_table

    options, clusters, figure = link_options(your_fit), recorded_clusters(), None
    if show_static:
        print(text_table(whatif_static(), header=("link", "GPUs/node", "NICs/node", "nodes", "algorithm", "GDR",
                                                  "rails aligned", "busbw GB/s", "bounded by", "1 GiB ms")))
        curves = {label: [(n, whatif_result(dict(s, nodes=n), options, clusters)["busbw_gbps"]) for n in WHATIF_NODES]
                  for label, s in (("8 x 400G, H100 NVLink", whatif_settings()),
                                   ("8 x 400G, NIC behind CPU / no GDR", whatif_settings(gdr=False)),
                                   ("4 x 200G, A100 NVLink", whatif_settings(link="NVLink 3: A100 SXM4",
                                                                             nics_per_node=4, nic_gbit=200)))}
        figure = plots.whatif_figure(curves, clusters)
    try:
        import ipywidgets as w
    except ImportError:
        print("(ipywidgets is not installed: the interactive panel needs it; the table and plot are its static view)")
        return figure, None
    labels = [o["label"] for o in options]
    controls = {
        "gpus_per_node": w.IntSlider(value=8, min=1, max=8, description="GPUs/node"),
        "link": w.Dropdown(options=labels, value=next(x for x in labels if x.startswith("NVLink 4: H100 SXM5")),
                           description="in-node link", layout=w.Layout(width="520px")),
        "nics_per_node": w.IntSlider(value=8, min=1, max=8, description="NICs/node"),
        "nic_gbit": w.Dropdown(options=[100, 200, 400, 800], value=400, description="NIC Gb/s"),
        "rails_aligned": w.Checkbox(value=True, description="rails aligned"),
        "pxn": w.Checkbox(value=True, description="PXN"),
        "spine_oversubscription": w.FloatSlider(value=2.0, min=1.0, max=4.0, step=0.5, description="spine x:1"),
        "gdr": w.Checkbox(value=True, description="GDR (off: NIC behind CPU)"),
        "nodes": w.SelectionSlider(options=list(WHATIF_NODES), value=2, description="nodes"),
        "algorithm": w.ToggleButtons(options=["ring", "tree"], value="ring", description="algorithm"),
        "nvls": w.Checkbox(value=False, description="NVLS (opt-in; NVSwitch with SHARP only)"),
        "size": w.SelectionSlider(options=[(format_bytes(s), s) for s in WHATIF_SIZES], value=2**30,
                                  description="message"),
    }
    output = w.Output()

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
    boxes = list(controls.values())
    return figure, w.VBox([w.HBox([w.VBox(boxes[:6]), w.VBox(boxes[6:])]), output])


# ---------------------------------------------------------------------------------------
# The NET lines of published multi-node NCCL logs

MULTINODE_LOGS = reference.REFERENCE_DIR / "_multinode-logs"
# After "via ", as NCCL prints it (src/transport/net.cc at v2.28.3-1): NET/<plugin>/<NIC>, then
# "(<rank>)" when PXN hands the data to another GPU's NIC, "/GDRDMA" with GPUDirect RDMA, "(PCI)",
# "/Shared" for shared buffers.
_NET_ROUTE = re.compile(r"^NET/(?P<net>[^/]+)/(?P<nic>\d+)(?:\((?P<proxy>\d+)\))?(?P<gdr>/GDRDMA)?"
                        r"(?P<pci>\(PCI\))?(?P<shared>/Shared)?$")


def net_route(via: str) -> Optional[Dict[str, Any]]:
    """{net, nic, proxy_rank, gdr, shared} of "NET/IB/3(7)/GDRDMA"; None for any other transport."""
    m = _NET_ROUTE.match(via.strip())
    return None if not m else {"net": m["net"], "nic": int(m["nic"]), "gdr": bool(m["gdr"]), "shared": bool(m["shared"]),
                               "proxy_rank": int(m["proxy"]) if m["proxy"] else None}


def multinode_logs() -> List[str]:
    return sorted(p.name for p in MULTINODE_LOGS.glob("*.txt"))


def _routes(name: str):
    if name not in multinode_logs():
        raise ValueError(f"no published log {name!r}; there are: {', '.join(multinode_logs())}")
    parsed = nccl_log.parse((MULTINODE_LOGS / name).read_text(encoding="utf-8"))
    return parsed, [(c, net_route(c["via"])) for c in parsed["channels"] if c["transport"] == "NET"]


def net_lines(name: str) -> List[Tuple]:
    """(channel, from rank[dev], to rank[dev], side, network, NIC, PXN via, GDRDMA) per NET line of a log."""
    def rank(r, dev):
        return f"{r}[{dev}]" if dev is not None else str(r)
    return [(c["channel"], rank(c["src"], c["src_device"]), rank(c["dst"], c["dst_device"]), c["direction"] or "-",
             r["net"], r["nic"], "-" if r["proxy_rank"] is None else r["proxy_rank"], "yes" if r["gdr"] else "no")
            for c, r in _routes(name)[1] if r]


def log_summary_rows() -> List[Tuple]:
    """(log, transports, networks, NICs, GDRDMA, PXN) per published log."""
    out = []
    for name in multinode_logs():
        parsed, routes = _routes(name)
        routes = [r for _, r in routes if r]
        out.append((name, ", ".join(parsed["transports"]), ", ".join(sorted({r["net"] for r in routes})),
                    ", ".join(str(n) for n in sorted({r["nic"] for r in routes})),
                    "yes" if routes and all(r["gdr"] for r in routes) else "no",
                    "yes" if any(r["proxy_rank"] is not None for r in routes) else "no"))
    return out


# ---------------------------------------------------------------------------------------
# Verdicts (gputopo.verdicts) on each recorded table's busbw

def recorded_busbw_link(system: str):
    """(verdicts.Link, facts) of GPU0's NVLinks as `system` recorded them: through NVSwitch every
    topo -m code names all of a GPU's links (NV18 to each peer of an H200); in a direct mesh (the
    V100's NV1 and NV2) each names the links to one peer, and NCCL's rings use them all, so they
    add up; `nvidia-smi nvlink -s` caps it by the active links. (None, why) when not recorded."""
    from gputopo.parsers import nvidia_smi

    try:
        row = reference.load(system, "topo")["links"]["GPU0"]
        codes = [c for peer, c in row.items() if peer != "GPU0" and peer.startswith("GPU")]
        counts = [int(m.group(1)) for m in (re.fullmatch(r"NV(\d+)", c or "") for c in codes) if m]
        if not counts:
            return None, f"{system}: no NVLink in GPU0's row of topo -m, so no NVLink peak to judge busbw against"
        info = reference.system_info(system)
        one = info.get("nvswitch") or len(codes) == 1 or (info.get("nvswitch") is None and len(set(counts)) == 1)
        count = counts[0] if one else sum(counts)
        facts = "nvidia-smi-topo-m.txt " + (f"NV{count} to every peer" if one else
                                             "sum of GPU0's codes " + "+".join(f"NV{c}" for c in counts))
        if "nvidia-smi-nvlink-s.txt" in reference.files(system):
            active = nvidia_smi.nvlink_link_counts(reference.read_text(system, "nvidia-smi-nvlink-s.txt")).get("GPU0")
            if active:
                count = min(count, active["active"])
                facts += f", nvidia-smi-nvlink-s.txt {active['active']} links active on GPU0"
        p2p = reference.find(system, "p2p")
        if p2p:
            name = "p2pBandwidthLatencyTest.txt" if "p2pBandwidthLatencyTest.txt" in p2p else p2p[0]
            gpu = reference.load(system, "p2p", name)["devices"][0]["name"]
            facts += f", {gpu} ({name})"
        else:
            found = re.search(r"(Tesla |NVIDIA )?[A-Z]+\d+[-\w]*", info.get("machine") or "")
            gpu = found.group(0) if found else (info.get("machine") or "")
            facts += f", {gpu} (system.json)"
        return verdicts.Link("nvlink", gpu, count=count, gpu=gpu), f"{system}: {facts}"
    except Exception as error:  # a verdict is a side note: never stop the notebook
        return None, f"{system}: the link could not be read from its recorded files ({error})"


def _link_of(system: str):
    if system == "this machine":
        return None, ("this machine: not judged here; set its busbw against your GPU's NVLinks in your own "
                      "`nvidia-smi topo -m` (notebook 2)")
    return recorded_busbw_link(system)


def busbw_verdicts(tables: Sequence[Dict[str, Any]]) -> Tuple[List[Tuple[str, Any]], List[str]]:
    """([(label, verdicts.Verdict)], link facts): one verdict per table on its busbw at its largest
    message (verdicts.judge_nccl_output) against the link recorded on its own system."""
    links_of: Dict[str, Tuple[Any, str]] = {}
    out, facts = [], []
    for t in tables:
        if t["system"] not in links_of:
            links_of[t["system"]] = _link_of(t["system"])
            facts.append(("link " if t["system"] == "this machine" else "link recorded on ") + links_of[t["system"]][1])
        out.append((f"{t['system']}, {t['n']} GPUs, {t['transport']}, {t['launch']}",
                    verdict_at(t, None, links_of[t["system"]])))
    return out, facts


def verdict_at(t: Dict[str, Any], size: Optional[int] = None, link_and_why=None):
    """verdicts.Verdict on one table's busbw at `size` (None: its largest message)."""
    link, why = link_and_why or _link_of(t["system"])
    if link is None:
        return verdicts.Verdict("allreduce_busbw", None, verdicts.NOT_COMPARABLE, f"no link to judge against: {why}")
    return verdicts.judge_nccl_output(t.get("text") or "", link, size=size)

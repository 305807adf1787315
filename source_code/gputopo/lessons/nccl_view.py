"""Notebook 6 (Inside NCCL): what no tool prints about NCCL's own view of a machine.

Reads what the parsers made of NCCL's topology dump (kind nccl-topo), graph dump (nccl-graph),
log (nccl-log), TUNING lines (nccl-tuning) and the benchmark's table (nccl-tests); prints them
as short tables, draws NCCL's tree beside `nvidia-smi topo -m`, says where the two views
differ, and scores a learner's predictions against the log without ever raising.
"""
import re

from gputopo import linkcodes, ncclpaths
from gputopo.units import format_bytes

COLOURS = {"Ring": "tab:blue", "Tree": "tab:green", "NVLS": "tab:purple", "NVLSTree": "tab:pink",
           "CollNetDirect": "tab:brown", "CollNetChain": "tab:olive", "PAT": "tab:cyan"}
HATCH = {"LL": "//", "LL128": "..", "Simple": ""}


def _bw(value):
    return "-" if value is None else f"{value:g} GB/s"


def topology_lines(topo):
    """One line per CPU, PCI device, GPU, NVLink group and NIC port, with the GB/s NCCL assigns."""
    lines = []
    for cpu in topo["cpus"]:
        lines.append(f"CPU  numaid {cpu['numaid']}  {cpu['vendor'] or ''} {cpu['arch'] or ''}")
        for pci in (p for p in topo["pci"] if p["numaid"] == cpu["numaid"]):
            depth, parent = "  ", pci["parent"]
            while parent:  # one indent per bridge above it
                depth, parent = depth + "  ", next((q["parent"] for q in topo["pci"] if q["busid"] == parent), None)
            lines.append(f"{depth}PCI {pci['busid']} {pci['kind']:8} {pci['link_speed']} x{pci['link_width']}"
                         f"  -> NCCL: {_bw(pci['nccl_bw_gbs'])}")
    for gpu in topo["gpus"]:
        lines.append(f"GPU dev {gpu['dev']} (rank {gpu['rank']}, sm {gpu['sm']}) at {gpu['busid']}, "
                     f"NUMA {gpu['numaid']}, PCI {_bw(gpu['pci_bw_gbs'])}")
        for link in gpu["nvlinks"]:
            lines.append(f"    NVLink x{link['count']} to {link['target_kind']} {link['target']}"
                         f"  -> NCCL: {_bw(link['nccl_bw_gbs'])}")
    for net in topo["nets"]:
        where = f"PCI {net['nic_busid']}" if net["nic_busid"] else "no PCI path (attached to the CPU)"
        lines.append(f"NIC {net['name']} dev {net['dev']}: {net['speed_mbps']} Mb/s, gdr {net['gdr']}, {where}"
                     f"  -> NCCL: {_bw(net['nccl_bw_gbs'])}")
    return lines


def graph_lines(graphs):
    """One line per graph NCCL searched, then its first channel's order."""
    lines = []
    for g in graphs["graphs"]:
        lines.append(f"graph {g['id']} {g['algorithm'] or '?':13} pattern {g['pattern']} ({g['pattern_name']}): "
                     f"{g['nchannels']} channels, speed intra {g['speedintra']} / inter {g['speedinter']} GB/s, "
                     f"type intra {g['typeintra']} / inter {g['typeinter']}")
        if g["channels"]:
            first = g["channels"][0]
            order = [f"NET {first['net_in']}"] if first["net_in"] is not None else []
            order += [f"GPU {dev}" for dev in first["gpus"]]
            order += [f"NET {first['net_out']}"] if first["net_out"] is not None else []
            lines.append(f"    channel 0: {' -> '.join(order)}")
    return lines


def differences(topo, smi):
    """Sentences: where NCCL's dump and `nvidia-smi topo -m` (parsed; None: not available) differ."""
    def tail(text):
        return f"; topo -m {text}." if smi else "."
    out = [f"GPUs: NCCL's dump holds {len(topo['gpus'])} (only those of the job's ranks on this host)"
           + tail(f"lists {len(smi.get('gpus') or []) if smi else 0} (every GPU the driver sees)")]
    for cpu in (c for c in topo["cpus"] if c["numaid"] is not None and c["numaid"] < 0):
        numa = ", ".join(sorted(set((smi or {}).get("numa_affinity", {}).values()) - {""})) or "nothing"
        out.append(f"NUMA: NCCL wrote numaid {cpu['numaid']}: it copies the GPU's sysfs numa_node, which is -1 "
                   "when the kernel assigns the device no node, then finds no node-1/cpumap "
                   "(src/graph/xml.cc at v2.28.3-1)" + tail(f"says NUMA affinity {numa}"))
    widths = [p for p in topo["pci"] if p["link_width"] == 0]
    if widths:
        out.append(f"PCIe width: {len(widths)} device(s) at link_width 0 (NCCL could not read the width; "
                   "topo.cc plans with x16)" + tail("prints no width at all"))
    slow = [p for p in topo["pci"] if p["kind"] == "bridge" and p["nccl_bw_gbs"] is not None and p["nccl_bw_gbs"] < 1]
    if slow:
        out.append(f"Bridges: {len(slow)} bridge(s) report {slow[0]['link_speed']} x{slow[0]['link_width']} "
                   f"({_bw(slow[0]['nccl_bw_gbs'])} to NCCL), likely a virtual machine's synthetic PCIe tree"
                   + tail("shows only path codes (PIX, PXB...) through it"))
    groups = {}  # GPUs with the same NVLinks in NCCL's dump and the same topo -m codes
    for gpu in (g for g in topo["gpus"] if g["nvlink_count"]):
        codes = ", ".join(sorted(set(((smi or {}).get("links") or {}).get(f"GPU{gpu['dev']}", {}).values())))
        total = sum(link["nccl_bw_gbs"] or 0 for link in gpu["nvlinks"])
        groups.setdefault((gpu["nvlink_count"], round(total, 1), codes), []).append(f"GPU{gpu['dev']}")
    for (count, total, codes), names in groups.items():
        out.append(f"NVLink: {', '.join(names)}: {count} NVLinks each in NCCL's dump ({total} GB/s to NCCL)"
                   + tail(f"codes to their peers: {codes or 'none'}"))
    nics = len((smi or {}).get("nics") or {})
    loose = [n["name"] for n in topo["nets"] if n["nic_busid"] is None]
    if loose:
        out.append(f"NICs: {', '.join(loose)} has no PCI path in NCCL's dump (a virtio NIC: 'Attaching to "
                   "first CPU' in the log)" + tail(f"lists {nics} NIC(s)"))
    elif topo["nets"]:
        out.append(f"NICs: NCCL lists {len(topo['nets'])} network port(s)" + tail(f"lists {nics} NIC(s)"))
    return out


def _layout(topo):
    """Positions of CPUs, PCI devices and NIC ports: leaves spread along x, depth down y."""
    children, pos, x = {}, {}, [0]
    for cpu in topo["cpus"]:
        children[("cpu", cpu["numaid"])] = (
            [("pci", p["busid"]) for p in topo["pci"] if p["parent"] is None and p["numaid"] == cpu["numaid"]]
            + [("net", n["name"]) for n in topo["nets"] if n["nic_busid"] is None and n["numaid"] == cpu["numaid"]])
    for p in topo["pci"]:
        children[("pci", p["busid"])] = [("pci", q["busid"]) for q in topo["pci"] if q["parent"] == p["busid"]]

    def place(node, depth):  # a parent sits above the middle of its children
        kids = children.get(node, [])
        for kid in kids:
            place(kid, depth + 1)
        pos[node] = (sum(pos[k][0] for k in kids) / len(kids) if kids else x[0], -depth)
        x[0] += 0 if kids else 1
    for cpu in topo["cpus"]:
        place(("cpu", cpu["numaid"]), 0)
    return children, pos


def draw(topo, smi=None, title="NCCL's topology dump"):
    """NCCL's tree (edges labelled with NCCL's GB/s), NVLinks to NVSwitches; beside it topo -m."""
    import matplotlib.pyplot as plt
    from gputopo import plots
    with_smi = bool(smi and smi.get("gpus"))
    fig, axes = plt.subplots(1, 2 if with_smi else 1, figsize=(15 if with_smi else 10, 5.5),
                             squeeze=False, gridspec_kw={"width_ratios": [1.6, 1] if with_smi else [1]})
    ax = axes[0][0]
    children, pos = _layout(topo)
    by_bus = {p["busid"]: p for p in topo["pci"]}
    gpu_at = {g["busid"]: g for g in topo["gpus"]}
    for node, kids in children.items():
        for kid in kids:
            (x0, y0), (x1, y1) = pos[node], pos[kid]
            ax.plot([x0, x1], [y0, y1], color="grey", lw=1, zorder=1)
            pci = by_bus.get(kid[1]) if kid[0] == "pci" else None
            bw = pci["nccl_bw_gbs"] if pci else next((n["nccl_bw_gbs"] for n in topo["nets"] if n["name"] == kid[1]), None)
            if bw is not None:
                ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"{bw:g}", fontsize=7, color="dimgrey")
    for (kind, key), (x, y) in pos.items():
        nets = [n["name"] for n in topo["nets"] if kind == "pci" and n["nic_busid"] == key]
        label, colour = ((f"CPU\nnuma {key}", "khaki") if kind == "cpu" else
                         (f"NIC {key}\n(no PCI)", "lightsalmon") if kind == "net" else
                         (f"GPU {gpu_at[key]['dev']}\nsm {gpu_at[key]['sm']}", "lightgreen") if key in gpu_at else
                         (f"NIC {nets[0]}", "lightsalmon") if nets else
                         (f"{by_bus[key]['kind']}\n{key[-7:]}", "lightgrey"))
        ax.text(x, y, label, ha="center", va="center", fontsize=7, zorder=3,
                bbox={"boxstyle": "round", "fc": colour, "ec": "black", "lw": 0.5})
    lowest = min(y for _x, y in pos.values())
    switch_y = lowest - 1.2
    linked = [g for g in topo["gpus"] if g["nvlinks"]]
    if linked:
        xs = [pos[("pci", g["busid"])][0] for g in linked]
        for gpu, gx in zip(linked, xs):
            bw = sum(link["nccl_bw_gbs"] or 0 for link in gpu["nvlinks"])
            ax.plot([gx, gx], [pos[("pci", gpu["busid"])][1], switch_y], color="tab:green", lw=2, zorder=1)
            ax.text(gx, switch_y + 0.5, f"{gpu['nvlink_count']} NVL\n{bw:.0f}", fontsize=6, color="tab:green")
        ax.text(sum(xs) / len(xs), switch_y, "NVSwitch / NVLink peers", ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "fc": "honeydew", "ec": "tab:green"})
    ax.set_ylim((switch_y if linked else lowest) - 0.8, 0.8)
    xs_all = [x for x, _y in pos.values()]
    ax.set_xlim(min(xs_all) - 0.8, max(xs_all) + 0.8)
    ax.axis("off")
    ax.set_title(f"{title}\n(numbers on edges: GB/s NCCL assigns the link)", fontsize=9)
    if with_smi:
        plots.topology_graph(smi, title="the same machine's nvidia-smi topo -m", ax=axes[0][1])
    fig.tight_layout()
    return fig


def plot_choices(tuning, bench=None, func="AllReduce", title=""):
    """NCCL's (algorithm, protocol) per message size as bands, the benchmark's busbw on top."""
    import matplotlib.pyplot as plt
    runs = tuning["switches"].get(func) or tuning["switches"].get("") or []
    fig, ax = plt.subplots(figsize=(10, 4))
    for run in runs:
        ax.axvspan(run["from_bytes"] / 1.41, run["to_bytes"] * 1.41, color=COLOURS.get(run["algo"], "grey"),
                   alpha=0.25, hatch=HATCH.get(run["proto"], "xx"), label=f"{run['algo']} / {run['proto']}")
    if bench and bench.get("rows"):
        rows = bench["rows"]
        ax.plot([r["size"] for r in rows], [r["out_of_place"]["busbw"] for r in rows], "o-", color="black",
                ms=3, label="busbw (out of place)")
    sizes = [r["from_bytes"] for r in runs] + [r["to_bytes"] for r in runs] + [
        r["size"] for r in (bench or {}).get("rows", [])]
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes + [8]) / 2, max(sizes + [2 ** 27]) * 2)  # at least the course's 8 B - 128 MiB sweep
    ax.set_xlabel("message size (bytes)")
    if bench and bench.get("rows"):
        ax.set_ylabel("busbw (GB/s)")
    else:
        ax.set_yticks([])
    ax.set_title(title or f"{func}: NCCL's algorithm / protocol per size", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def facts(log_text, graphs=None):
    """What a run's log (and graph dump) say: transports, channels, (algo, proto) per size."""
    from gputopo.parsers import ParseError, nccl_log, nccl_tuning
    found = {"nccl_version": None, "nranks": None, "transports": [], "channels": None,
             "graph_channels": None, "choices": {}, "p2p_level": None}
    try:
        tuning = nccl_tuning.parse(log_text or "")
    except ParseError:
        return found
    try:
        log = nccl_log.parse(log_text or "")
    except ParseError:  # a published excerpt of bare TUNING lines: no other NCCL line
        log = {}
    found.update(nccl_version=log.get("nccl_version"), nranks=log.get("nranks"),
                 transports=sorted(log.get("transports") or []), p2p_level=log.get("p2p_level"))
    counted = re.findall(r"NCCL INFO (\d+) coll channels", log_text)
    found["channels"] = int(counted[0]) if counted else None
    rings = [g for g in (graphs or {}).get("graphs", []) if g["algorithm"] == "ring"]
    found["graph_channels"] = rings[0]["nchannels"] if rings else None
    found["table"] = tuning.get("table")
    for choice in tuning["choices"]:
        if choice["algo"]:
            found["choices"][choice["bytes"]] = (choice["algo"], choice["proto"])
    return found


def _nearest(choices, size):
    """The logged size nearest to `size` and its choice; (None, None) when no logged size lies
    within a factor of 2 (a 128 MiB prediction is not scored against a sweep that stopped at 1 MiB)."""
    near = [b for b in choices if max(b, size) <= 2 * min(b, size)]
    if not near:
        return None, None
    best = min(near, key=lambda b: abs(b - size) / max(b, size))
    return best, choices[best]


def _transport_rule(found, pair_code, cpu_vendor):
    path = linkcodes.path_type(pair_code) if pair_code else None
    if path is None:
        return f"set PAIR_CODE to your pair's topo -m code ({pair_code!r} is not one) to see the rule"
    env = {"NCCL_P2P_LEVEL": found["p2p_level"]} if found["p2p_level"] else {}
    version = found["nccl_version"]
    rule = ncclpaths.expected_transport(env, path, cpu_vendor, nccl_version=version, local_gpus=2)
    nics = ""
    if rule is None:  # from 2.14 SHM depends on the NICs, unknown here: assume none is closer
        rule = ncclpaths.expected_transport(env, path, cpu_vendor, nccl_version=version, local_gpus=2, nics=())
        nics = ", if no NIC is closer to the GPUs than they are to each other"
    return (f"Rule: for a pair whose path is {path}, under {env or 'no P2P setting'}, NCCL "
            f"{version or '(no version in the log: newest rules)'} gives {rule}{nics} "
            "(gputopo.ncclpaths.expected_transport, read from src/graph/paths.cc per release)")


def _cell_times(table, pairs, size, func="AllReduce"):
    """' Init table: ...' with each (algo, proto) cell's latency + size / (1000 x bandwidth) in us;
    '' when the log has no table or no such row or cell."""
    row = ((table or {}).get("rows") or {}).get(func)
    if not row:
        return ""
    columns = [tuple(str(x).lower() for x in c) for c in table["columns"]]
    parts = []
    for pair in pairs:
        key = tuple(str(x).lower() for x in pair)
        if key not in columns or len(pair) != 2:
            continue
        latency, bandwidth = row[columns.index(key)]
        time = f"{latency + size / (1000 * bandwidth):.1f} us" if bandwidth else "not usable (bandwidth 0)"
        parts.append(f"{'/'.join(map(str, pair))} {latency} us + {size} B / {bandwidth} GB/s = {time}")
    return f" Init table, {func} at {size} B: " + "; ".join(parts) + "." if parts else ""


def score(prediction, found, pair_code=None, cpu_vendor=None):
    """Lines scoring each prediction against `found` (facts()); never raises on odd input."""
    lines, hits, checked = [], 0, 0
    prediction = prediction if isinstance(prediction, dict) else {}
    one_rank = found["nranks"] == 1
    want = str(prediction.get("transport") or "").upper()
    if not want:
        lines.append("transport: no prediction (set MY_PREDICTION['transport']).")
    elif not found["transports"]:
        why = "one rank connects to no peer" if one_rank else "no connection ('via') line in this log"
        lines.append(f"transport: you said {want or 'nothing'}; not scored: {why}.")
    else:
        checked += 1
        if want in found["transports"]:
            hits += 1
            lines.append(f"transport: {want}: right (the log's channels use {', '.join(found['transports'])}).")
        else:
            lines.append(f"transport: you said {want or 'nothing'}, the log shows {', '.join(found['transports'])}. "
                         + _transport_rule(found, pair_code, cpu_vendor) + ".")
    chans, have, graph = prediction.get("channels"), found["channels"], found["graph_channels"]
    if chans is None:
        lines.append("channels: no prediction (set MY_PREDICTION['channels']).")
    elif have is None:
        lines.append(f"channels: you said {chans}; not scored: the log has no 'coll channels' line.")
    else:
        checked += 1
        if chans == have:
            hits += 1
            lines.append(f"channels: {chans}: right (the log's 'coll channels').")
        else:
            searched = f"the ring graph NCCL searched has {graph}" if graph is not None else "NCCL's ring search"
            lines.append(f"channels: you said {chans}, the log says {have} coll channels: {searched} "
                         "(src/graph/search.cc keeps as many channels as the links' speed allows), NCCL "
                         "doubles them after connecting, then caps them at NCCL_MAX_NCHANNELS and raises them "
                         "to NCCL_MIN_NCHANNELS: min(MAX, 2 x graph), then at least MIN "
                         "(src/graph/connect.cc at v2.28.3-1, lines 452 and 490-491).")
    sizes = prediction.get("sizes") if isinstance(prediction.get("sizes"), dict) else {}
    for size, guess in sizes.items():
        if guess is None:
            shown = format_bytes(size) if isinstance(size, int) and size > 0 else repr(size)
            lines.append(f"{shown}: no prediction (put an (algorithm, protocol) pair there).")
            continue
        guess = tuple(guess) if isinstance(guess, (list, tuple)) else (guess,)
        said = "/".join(map(str, guess))
        if not isinstance(size, int) or size <= 0:
            lines.append(f"{size!r}: not scored: give the size as a number of bytes, e.g. 1 << 20.")
            continue
        seen, choice = _nearest(found["choices"], size)
        if choice is None:
            why = ("one rank: NCCL chooses no algorithm" if one_rank
                   else "no logged size within a factor of 2 of it" if found["choices"]
                   else "the log has no TUNING line (NCCL_DEBUG_SUBSYS=TUNING, NCCL 2.20+, rank 0)")
            lines.append(f"{format_bytes(size)}: you said {said}; not scored: {why}.")
            continue
        checked += 1
        if tuple(str(x).lower() for x in guess) == tuple(x.lower() for x in choice):
            hits += 1
            lines.append(f"{format_bytes(size)}: {'/'.join(choice)}: right (log line at {format_bytes(seen)}).")
        else:
            lines.append(f"{format_bytes(size)}: you said {said}, NCCL chose {'/'.join(choice)} at "
                         f"{format_bytes(seen)}: the smallest predicted time, latency + size / bandwidth per "
                         "algorithm and protocol (src/graph/tuning.cc, from the table NCCL prints at init; "
                         "src/enqueue.cc takes the minimum)."
                         + _cell_times(found.get("table"), (guess, choice), seen))
    lines.append(f"score: {hits} of the {checked} entries this log can check")
    return lines


def score_channels(predicted, log_text, setting, graphs=None):
    """Lines scoring a predicted "N coll channels" against the log of a run under `setting`;
    log_text None: this machine made no such log, and no run with that setting is recorded."""
    if log_text is None:
        return [f"channels under {setting}: not scored: no recorded run with this setting."]
    lines = score({"channels": predicted}, facts(log_text, graphs))
    return [f"{line} ({setting})" if line.startswith("channels:") else line
            for line in lines if line.startswith(("channels:", "score:"))]

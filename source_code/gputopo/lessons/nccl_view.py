"""Notebook 6 (Inside NCCL): what no tool prints about NCCL's own view of a machine: its topology
dump as a tree beside `nvidia-smi topo -m`, where the two views differ, what a run's log says,
and a learner's predictions scored against the log without ever raising.
"""

import re

from gputopo import linkcodes, ncclpaths
from gputopo.parsers import ParseError, nccl_log, nccl_tuning
from gputopo.units import format_bytes


def differences(topo, smi):
    """Sentences: where NCCL's dump and `nvidia-smi topo -m` (parsed; None: not available)
    differ."""
    smi = smi or {}

    def tail(text):
        return f"; topo -m {text}." if smi else "."

    out = [
        f"GPUs: NCCL's dump holds {len(topo['gpus'])} (only those of the job's ranks on this host)"
        + tail(f"lists {len(smi.get('gpus') or [])} (every GPU the driver sees)")
    ]
    for cpu in (c for c in topo["cpus"] if c["numaid"] is not None and c["numaid"] < 0):
        numa = ", ".join(sorted(set(smi.get("numa_affinity", {}).values()) - {""})) or "nothing"
        out.append(
            f"NUMA: NCCL wrote numaid {cpu['numaid']}: it copies the GPU's sysfs numa_node, "
            "which is -1 when the kernel assigns the device no node, then finds no node-1/cpumap "
            "(src/graph/xml.cc at v2.28.3-1)" + tail(f"says NUMA affinity {numa}")
        )
    widths = [p for p in topo["pci"] if p["link_width"] == 0]
    if widths:
        out.append(
            f"PCIe width: {len(widths)} device(s) at link_width 0 (NCCL could not read the width; "
            "topo.cc plans with x16)" + tail("prints no width at all")
        )
    slow = [
        p
        for p in topo["pci"]
        if p["kind"] == "bridge" and p["nccl_bw_gbs"] is not None and p["nccl_bw_gbs"] < 1
    ]
    if slow:
        out.append(
            f"Bridges: {len(slow)} bridge(s) report "
            f"{slow[0]['link_speed']} x{slow[0]['link_width']} "
            f"({slow[0]['nccl_bw_gbs']:g} GB/s to NCCL), "
            "likely a virtual machine's synthetic PCIe tree"
            + tail("shows only path codes (PIX, PXB...) through it")
        )
    groups = {}  # GPUs with the same NVLinks in NCCL's dump and the same topo -m codes
    for gpu in (g for g in topo["gpus"] if g["nvlink_count"]):
        codes = ", ".join(
            sorted(set((smi.get("links") or {}).get(f"GPU{gpu['dev']}", {}).values()))
        )
        total = sum(link["nccl_bw_gbs"] or 0 for link in gpu["nvlinks"])
        groups.setdefault((gpu["nvlink_count"], round(total, 1), codes), []).append(
            f"GPU{gpu['dev']}"
        )
    for (count, total, codes), names in groups.items():
        out.append(
            f"NVLink: {', '.join(names)}: {count} NVLinks each in NCCL's dump "
            f"({total} GB/s to NCCL)" + tail(f"codes to their peers: {codes or 'none'}")
        )
    nics = len(smi.get("nics") or {})
    loose = [n["name"] for n in topo["nets"] if n["nic_busid"] is None]
    if loose:
        out.append(
            f"NICs: {', '.join(loose)} has no PCI path in NCCL's dump (a virtio NIC: 'Attaching to "
            "first CPU' in the log)" + tail(f"lists {nics} NIC(s)")
        )
    elif topo["nets"]:
        out.append(
            f"NICs: NCCL lists {len(topo['nets'])} network port(s)" + tail(f"lists {nics} NIC(s)")
        )
    return out


def draw(topo, smi=None, title="NCCL's topology dump"):
    """NCCL's tree: CPUs on top, PCI devices and NICs below, each edge labelled with the GB/s NCCL
    assigns it, under each GPU its NVLinks (count, NCCL's GB/s in total); beside it the same
    machine's `nvidia-smi topo -m` (`smi`, parsed) when given."""
    from matplotlib.figure import Figure  # not pyplot: shown once, where the notebook displays it

    from gputopo import plots

    with_smi = bool(smi and smi.get("gpus"))
    fig = Figure(figsize=(15 if with_smi else 10, 5.5))
    axes = fig.subplots(
        1, 2 if with_smi else 1, squeeze=False, width_ratios=[1.6, 1] if with_smi else [1]
    )
    ax, gpus = axes[0][0], {g["busid"]: g for g in topo["gpus"]}
    nics = {n["nic_busid"]: n["name"] for n in reversed(topo["nets"]) if n["nic_busid"]}
    # node -> (label, colour, parent node, GB/s NCCL assigns the link to its parent)
    nodes = {
        ("cpu", c["numaid"]): (f"CPU\nnuma {c['numaid']}", "khaki", None, None)
        for c in topo["cpus"]
    }
    for p in topo["pci"]:
        gpu = gpus.get(p["busid"])
        label, colour = (
            (f"GPU {gpu['dev']}\nsm {gpu['sm']}", "lightgreen")
            if gpu
            else (f"NIC {nics[p['busid']]}", "lightsalmon")
            if p["busid"] in nics
            else (f"{p['kind']}\n{p['busid'][-7:]}", "lightgrey")
        )
        parent = ("pci", p["parent"]) if p["parent"] else ("cpu", p["numaid"])
        nodes[("pci", p["busid"])] = (label, colour, parent, p["nccl_bw_gbs"])
    for net in (n for n in topo["nets"] if n["nic_busid"] is None):
        nodes[("net", net["name"])] = (
            f"NIC {net['name']}\n(no PCI)",
            "lightsalmon",
            ("cpu", net["numaid"]),
            net["nccl_bw_gbs"],
        )
    pos, leaves = {}, [0]

    def place(
        node, depth
    ):  # leaves spread along x, depth down y; a parent above the middle of its children
        kids = [kid for kid, entry in nodes.items() if entry[2] == node]
        for kid in kids:
            place(kid, depth + 1)
        pos[node] = (sum(pos[k][0] for k in kids) / len(kids) if kids else leaves[0], -depth)
        leaves[0] += 0 if kids else 1

    for cpu in topo["cpus"]:
        place(("cpu", cpu["numaid"]), 0)
    for node, (label, colour, parent, bw) in nodes.items():
        if node not in pos:
            continue
        (x, y), (px, py) = pos[node], pos.get(parent, pos[node])
        if parent in pos:
            ax.plot([px, x], [py, y], color="grey", lw=1, zorder=1)
        if parent in pos and bw is not None:
            ax.text((px + x) / 2, (py + y) / 2, f"{bw:g}", fontsize=7, color="dimgrey")
        ax.text(
            x,
            y,
            label,
            ha="center",
            va="center",
            fontsize=7,
            zorder=3,
            bbox={"boxstyle": "round", "fc": colour, "ec": "black", "lw": 0.5},
        )
    for gpu in (g for g in topo["gpus"] if g["nvlinks"] and ("pci", g["busid"]) in pos):
        (x, y), total = (
            pos[("pci", gpu["busid"])],
            sum(link["nccl_bw_gbs"] or 0 for link in gpu["nvlinks"]),
        )
        ax.text(
            x,
            y - 0.3,
            f"{gpu['nvlink_count']} NVLinks\n{total:.0f} GB/s",
            ha="center",
            va="top",
            fontsize=6,
            color="tab:green",
        )
    ax.set_ylim(min(y for _x, y in pos.values()) - 1.0, 0.8)
    ax.set_xlim(min(x for x, _y in pos.values()) - 0.8, max(x for x, _y in pos.values()) + 0.8)
    ax.axis("off")
    ax.set_title(f"{title}\n(numbers on edges: GB/s NCCL assigns the link)", fontsize=9)
    if with_smi:
        plots.topology_graph(smi, title="the same machine's nvidia-smi topo -m", ax=axes[0][1])
    fig.tight_layout()
    return fig


def facts(log_text, graphs=None):
    """What a run's log (and graph dump) say: NCCL version, ranks, transports, NCCL_P2P_LEVEL, the
    "N coll channels" line, the ring graph's channels, the init table, (algo, proto) per size."""
    try:
        tuning = nccl_tuning.parse(log_text or "")
    except ParseError:  # no NCCL line at all
        tuning = {"choices": [], "table": None}
    try:
        log = nccl_log.parse(log_text or "")
    except ParseError:  # a published excerpt of bare TUNING lines: no other NCCL line
        log = {}
    counted = re.findall(r"NCCL INFO (\d+) coll channels", log_text or "")
    rings = [g["nchannels"] for g in (graphs or {}).get("graphs", []) if g["algorithm"] == "ring"]
    return {
        "nccl_version": log.get("nccl_version"),
        "nranks": log.get("nranks"),
        "p2p_level": log.get("p2p_level"),
        "transports": sorted(log.get("transports") or []),
        "channels": int(counted[0]) if counted else None,
        "graph_channels": rings[0] if rings else None,
        "table": tuning.get("table"),
        "choices": {c["bytes"]: (c["algo"], c["proto"]) for c in tuning["choices"] if c["algo"]},
    }


def _transport_rule(found, pair_code, cpu_vendor):
    """The transport NCCL's rules give a pair of this topo -m code, at the log's version and P2P
    level."""
    path = linkcodes.path_type(pair_code) if pair_code else None
    if path is None:
        return (
            f"set PAIR_CODE to your pair's topo -m code ({pair_code!r} is not one) to see the rule"
        )
    env = {"NCCL_P2P_LEVEL": found["p2p_level"]} if found["p2p_level"] else {}
    version = found["nccl_version"]
    rule = ncclpaths.expected_transport(env, path, cpu_vendor, nccl_version=version, local_gpus=2)
    # from 2.14 SHM depends on the NICs, unknown here: assume none is closer
    nics = "" if rule else ", if no NIC is closer to the GPUs than they are to each other"
    rule = rule or ncclpaths.expected_transport(
        env, path, cpu_vendor, nccl_version=version, local_gpus=2, nics=()
    )
    return (
        f"Rule: for a pair whose path is {path}, under {env or 'no P2P setting'}, NCCL "
        f"{version or '(no version in the log: newest rules)'} gives {rule}{nics} "
        "(gputopo.ncclpaths.expected_transport, read from src/graph/paths.cc per release)"
    )


def _cell_times(table, names, size, func="AllReduce"):
    """' Init table: ...' with, for each "Algo/Proto" of `names`, its cell's latency + size /
    (1000 x bandwidth) in us; '' when the log has no table or no such row or cell."""
    row = ((table or {}).get("rows") or {}).get(func) or []
    columns = ["/".join(map(str, c)).lower() for c in (table or {}).get("columns") or []]
    parts = []
    for name in (n for n in names if n.lower() in columns[: len(row)]):
        latency, bandwidth = row[columns.index(name.lower())]
        time = (
            f"{latency + size / (1000 * bandwidth):.1f} us"
            if bandwidth
            else "not usable (bandwidth 0)"
        )
        parts.append(f"{name} {latency} us + {size} B / {bandwidth} GB/s = {time}")
    return f" Init table, {func} at {size} B: " + "; ".join(parts) + "." if parts else ""


def score(prediction, found, pair_code=None, cpu_vendor=None):
    """Lines scoring each entry of `prediction` ("transport", "channels", "sizes"; a key left out is
    not scored) against `found` (facts()), then the score; never raises on odd input."""
    prediction = prediction if isinstance(prediction, dict) else {}
    lines, scored, one_rank = (
        [],
        [],
        found["nranks"] == 1,
    )  # scored: True (right) / False per entry checked
    if "transport" in prediction:
        want, have = str(prediction["transport"] or "").upper(), ", ".join(found["transports"])
        if not want:
            lines.append("transport: no prediction (set MY_PREDICTION['transport']).")
        elif not have:
            why = (
                "one rank connects to no peer"
                if one_rank
                else "no connection ('via') line in this log"
            )
            lines.append(f"transport: you said {want}; not scored: {why}.")
        else:
            scored.append(want in found["transports"])
            lines.append(
                f"transport: {want}: right (the log's channels use {have})."
                if scored[-1]
                else f"transport: you said {want}, the log shows {have}. "
                + _transport_rule(found, pair_code, cpu_vendor)
                + "."
            )
    if "channels" in prediction:
        chans, have, graph = prediction["channels"], found["channels"], found["graph_channels"]
        if chans is None:
            lines.append("channels: no prediction (set MY_PREDICTION['channels']).")
        elif have is None:
            lines.append(
                f"channels: you said {chans}; not scored: the log has no 'coll channels' line."
            )
        else:
            scored.append(chans == have)
            searched = (
                f"the ring graph NCCL searched has {graph}"
                if graph is not None
                else "NCCL's ring search"
            )
            lines.append(
                f"channels: {chans}: right (the log's 'coll channels')."
                if scored[-1]
                else f"channels: you said {chans}, the log says {have} coll channels: {searched} "
                "(src/graph/search.cc keeps as many channels as the links' speed allows), NCCL "
                "doubles them after connecting, then caps them at NCCL_MAX_CTAS and raises them "
                "to NCCL_MIN_CTAS (or their deprecated aliases NCCL_MAX/MIN_NCHANNELS; the more "
                "restrictive wins): min(MAX, 2 x graph), then at least MIN "
                "(src/graph/connect.cc at v2.28.3-1, lines 452 and 490-491)."
            )
    sizes = prediction.get("sizes") if isinstance(prediction.get("sizes"), dict) else {}
    for size, guess in sizes.items():
        valid = isinstance(size, int) and size > 0
        said = "/".join(map(str, guess)) if isinstance(guess, (list, tuple)) else str(guess)
        # the logged size nearest to it, within a factor of 2 (a 128 MiB prediction is not scored
        # against a sweep that stopped at 1 MiB)
        near = [b for b in found["choices"] if valid and max(b, size) <= 2 * min(b, size)]
        seen = min(near, key=lambda b: abs(b - size) / max(b, size)) if near else None
        choice = found["choices"].get(seen)
        if guess is None:
            shown = format_bytes(size) if valid else repr(size)
            lines.append(f"{shown}: no prediction (put an (algorithm, protocol) pair there).")
        elif not valid:
            lines.append(f"{size!r}: not scored: give the size as a number of bytes, e.g. 1 << 20.")
        elif choice is None:
            why = (
                "one rank: NCCL chooses no algorithm"
                if one_rank
                else "no logged size within a factor of 2 of it"
                if found["choices"]
                else "the log has no TUNING line (NCCL_DEBUG_SUBSYS=TUNING, NCCL 2.20+, rank 0)"
            )
            lines.append(f"{format_bytes(size)}: you said {said}; not scored: {why}.")
        else:
            scored.append(said.lower() == "/".join(choice).lower())
            lines.append(
                f"{format_bytes(size)}: {'/'.join(choice)}: right "
                f"(log line at {format_bytes(seen)})."
                if scored[-1]
                else f"{format_bytes(size)}: you said {said}, NCCL chose {'/'.join(choice)} at "
                f"{format_bytes(seen)}: the smallest predicted time, latency + size / bandwidth "
                "per algorithm and protocol (src/graph/tuning.cc, from the table NCCL prints at "
                "init; src/enqueue.cc takes the minimum)."
                + _cell_times(found["table"], (said, "/".join(choice)), seen)
            )
    lines.append(f"score: {sum(scored)} of the {len(scored)} entries this log can check")
    return lines

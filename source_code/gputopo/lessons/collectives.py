"""What notebook 4 needs that no tool prints: the recorded all-reduce tables (transport, launch
mode, NVLS state), a verdict on their busbw, a reader of NCCL's INIT lines for the log-reading
block, the published NVLS-on figures beside the course's NVLS-off run, and the multi-node what-if
panel over the recorded clusters. The models themselves are written out in the notebook's cells
with gputopo.alphabeta."""

from __future__ import annotations

import math
import os
import re
from typing import Any, Dict, List, Optional

from gputopo import alphabeta, links, reference, verdicts
from gputopo.parsers import nccl_log, nccl_tuning
from gputopo.selfcheck import text_table
from gputopo.units import format_bytes

# A run's NVLink SHARP (NCCL 2.17 and later, Hopper NVSwitch systems) from its NCCL_NVLS_ENABLE: 0
# the course sets when it is unset; 1 an instructor exported (the course never sets 1); unset: a run
# the course did not launch. What a live run's fits and tables are labelled: the notebook's stored
# copy shows the outputs of whichever machine executed it, not the reader's.
HERE = "the machine that executed this copy"
NVLS_LABELS = {
    "0": "NVLS off (course default)",
    "1": "NVLS on (NCCL_NVLS_ENABLE=1, opted in)",
    None: "NCCL_NVLS_ENABLE unset (NCCL decided)",
}
# nccl-bench-all_reduce-g8.txt, all_reduce_perf-g8.txt; "more" is a further word such as -n100
_TABLE_NAME = re.compile(r"(nccl-bench-)?all_reduce(_perf)?(-g\d+)?(?P<more>-.+?)?\.txt")


def table(
    system: str,
    name: str,
    text: str,
    parsed: Dict[str, Any],
    settings: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """One all-reduce table as the notebook uses it. n: the "Using devices" lines (one per rank,
    however launched; nGpus is 1 per process under torchrun or mpirun), else nGpus. NVLS: the
    run's own text, else this kernel's environment for a live run, else "not recorded"."""
    # nccl_bench's summary after its table: "# Transports NCCL reported (...): P2P/direct pointer:
    # 48;"
    line = re.search(r"^#\s*Transports NCCL reported[^:]*:\s*(.+?)\s*$", text, re.M)
    transport = (settings or {}).get("transport") or (
        "default ("
        + ", ".join(p.rsplit(":", 1)[0].strip() for p in line.group(1).split(";") if p.strip())
        + ")"
        if line
        else "default (NCCL's choice)"
    )
    setting = re.search(r"NCCL_NVLS_ENABLE(?:=| set by environment to )(\w+)", text)
    if setting or system == HERE:
        value = setting.group(1) if setting else os.environ.get("NCCL_NVLS_ENABLE")
        value = value if value is None else value.strip()
        nvls = NVLS_LABELS.get(value, f"NCCL_NVLS_ENABLE={value}")
    else:
        nvls = (
            "not recorded" if reference.system_info(system).get("nvswitch") else "n/a (no NVSwitch)"
        )
    n = len(parsed.get("devices") or []) or (parsed.get("metadata") or {}).get("n_gpus")
    return {
        "system": system,
        "file": name,
        "parsed": parsed,
        "n": n,
        "transport": transport,
        "nvls": nvls,
        "launch": "CUDA graph"
        if re.search(r"^#\s*CUDA graph mode", text, re.M)
        else "plain launches",
        "text": text,
    }


def nccl_tables() -> List[Dict[str, Any]]:
    """Every recorded all-reduce table, plain and CUDA-graph runs (-G, names ending in -cuda-graph),
    found by file name; a name with a further word only where system.json names its transport."""
    out = []
    for system in reference.list_systems():
        for name in reference.find(system, "nccl-tests"):
            plain = name.replace("-cuda-graph.txt", ".txt")
            match, settings = _TABLE_NAME.fullmatch(plain), reference.file_settings(system, plain)
            if match and (not match["more"] or settings.get("transport")):
                parsed = reference.load(system, "nccl-tests", filename=name, strict=False)
                out.append(table(system, name, reference.read_text(system, name), parsed, settings))
    return out


def recorded_busbw_link(system: str):
    """(verdicts.Link, facts) of GPU0's NVLinks as `system` recorded them, or (None, why): through
    NVSwitch every topo -m code names all of a GPU's links (NV18 to each peer of an H200); in a
    direct mesh (the V100's NV1 and NV2) each names the links to one peer, and NCCL's rings use
    them all, so they add up; `nvidia-smi nvlink -s` caps it by the active links."""
    from gputopo.parsers import nvidia_smi

    if system == HERE:
        return None, (
            f"{HERE}: not judged here; set its busbw against your GPU's NVLinks in your own "
            "`nvidia-smi topo -m` (notebook 2)"
        )
    try:
        codes = [
            c
            for peer, c in reference.load(system, "topo")["links"]["GPU0"].items()
            if peer != "GPU0" and peer.startswith("GPU")
        ]
        counts = [int(c[2:]) for c in codes if re.fullmatch(r"NV\d+", c or "")]
        if not counts:
            return (
                None,
                f"{system}: no NVLink in GPU0's row of topo -m, "
                "so no NVLink peak to judge busbw against",
            )
        info = reference.system_info(system)
        one = (
            info.get("nvswitch")
            or len(codes) == 1
            or (info.get("nvswitch") is None and len(set(counts)) == 1)
        )
        count = counts[0] if one else sum(counts)
        facts = "nvidia-smi-topo-m.txt " + (
            f"NV{count} to every peer"
            if one
            else "sum of GPU0's codes " + "+".join(f"NV{c}" for c in counts)
        )
        if "nvidia-smi-nvlink-s.txt" in reference.files(system):
            active = nvidia_smi.nvlink_link_counts(
                reference.read_text(system, "nvidia-smi-nvlink-s.txt")
            ).get("GPU0")
            if active:
                count = min(count, active["active"])
                facts += f", nvidia-smi-nvlink-s.txt {active['active']} links active on GPU0"
        gpu = re.search(r"(Tesla |NVIDIA )?[A-Z]+\d+[-\w]*", info["machine"]).group(0)
        return verdicts.Link(
            "nvlink", gpu, count=count, gpu=gpu
        ), f"{system}: {facts}, {gpu} (system.json)"
    except Exception as error:  # a verdict is a side note: never stop the notebook
        return None, f"{system}: the link could not be read from its recorded files ({error})"


def verdict_at(t: Dict[str, Any], size: Optional[int] = None):
    """verdicts.Verdict on a table's busbw at `size` (None: its largest message) against
    recorded_busbw_link."""
    link, why = recorded_busbw_link(t["system"])
    return (
        verdicts.judge_nccl_output(t["text"], link, size=size)
        if link
        else verdicts.Verdict(
            "allreduce_busbw", None, verdicts.NOT_COMPARABLE, f"no link to judge against: {why}"
        )
    )


def fit_report(fits: List[Dict[str, Any]]) -> str:
    """Notebook 4's fit table, per system: file, transport, launch, NVLS, GPUs, the fitted alpha per
    step and busbw (alphabeta.fit_from_table, set by the notebook as alpha_step_us and busbw_gbps),
    the smallest message's time and the largest message's busbw; then the link and a verdict per
    table on its largest message's busbw (verdict_at)."""
    header = (
        "file",
        "transport",
        "launch",
        "NVLS",
        "GPUs",
        "alpha/step us",
        "busbw GB/s",
        "smallest msg us",
        "largest busbw GB/s",
    )
    out = []
    for system in dict.fromkeys(f["system"] for f in fits):
        mine = [f for f in fits if f["system"] == system]
        rows = []
        for f in mine:
            first, last = f["parsed"]["rows"][0], f["parsed"]["rows"][-1]
            rows.append(
                (
                    f["file"],
                    f["transport"],
                    f["launch"],
                    f["nvls"],
                    f["n"],
                    f"{f['alpha_step_us']:.2f}",
                    f"{f['busbw_gbps']:.1f}",
                    f"{first['out_of_place']['time_us']:.1f}",
                    f"{last['out_of_place']['busbw']:.1f} at {format_bytes(last['size'])}",
                )
            )
        out += [
            f"measured on {HERE}:" if system == HERE else f"recorded on {system}:",
            text_table(rows, header=header),
            ("link: " if system == HERE else "link recorded on ") + recorded_busbw_link(system)[1],
        ]
        out += [f"verdict, {f['file']}: {verdict_at(f).text().splitlines()[0]}" for f in mine] + [
            ""
        ]
    return "\n".join(out)


# Reading NCCL's log (notebook 4's main path): real lines, each taken from a recorded file, and a
# reader that names their fields. Line formats from NCCL's source at v2.28.3-1 unless said.
_PAIR_LOG = "h200-nvswitch-pair/horovod-cnn/horovod-cnn-pytorch-b512-gpus-0-1-default-r1.txt"
_LOC_LOG = (
    "h200-nvswitch-pair/horovod-cnn/horovod-cnn-pytorch-b512-gpus-0-1-NCCL_P2P_LEVEL-LOC-r1.txt"
)
# (what the line shows, how to know it, the recorded file whose first such line stands in)
LOG_TOUR = (
    ("version", lambda m: m.startswith("NCCL version"), _PAIR_LOG),
    ("communicator", lambda m: m.startswith("comm ") and " nNodes " in m, _PAIR_LOG),
    ("trees", lambda m: m.startswith("Trees ["), _PAIR_LOG),
    (
        "ring order",
        lambda m: m.startswith("Channel ") and " via " not in m and " -> " not in m,
        _PAIR_LOG,
    ),
    ("channel count", lambda m: " coll channels," in m, _PAIR_LOG),
    ("P2P connection", lambda m: m.startswith("Channel ") and " via P2P" in m, _PAIR_LOG),
    ("SHM connection", lambda m: m.startswith("Channel ") and " via SHM" in m, _LOC_LOG),
    (
        "NET connection",
        lambda m: m.startswith("Channel ") and " via NET/IB" in m,
        "_multinode-logs/nccl-tests-133-ib-gdrdma-excerpt.txt",
    ),
    (
        "no GPUDirect RDMA",
        lambda m: "GPU Direct RDMA Disabled" in m,
        "_multinode-logs/nccl-1151-gdr-disabled-excerpt.txt",
    ),
    (
        "per-call choice",
        lambda m: " Bytes -> Algo " in m,
        "_nccl-dumps/nccl-tuning-4rank-a100-nv12-2.27.3-excerpt.txt",
    ),
)

# NCCL's path types by number, as src/graph/topo.h numbers them (PATH_LOC = 0 ...): the numbers
# in "GPU Direct RDMA Disabled ... (distance 7 > 4)". Inserted types shift the later numbers.
_PATH_NUMBERS = (  # (first release, names in order), each read at that tag
    ((2, 9), ("LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS")),  # v2.9.6-1
    ((2, 12), ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "NET")),  # v2.12.7-1
    ((2, 26), ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS", "NET")),  # v2.26.2-1
    (
        (2, 27),
        ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET"),
    ),  # v2.27.5-1
)


def path_type_name(number: int, nccl_version=(2, 28)) -> str:
    """The name of NCCL path type `number` in release `nccl_version` ((major, minor)), e.g. 7 ->
    "SYS" in 2.12-2.25, "PXN" from 2.27.5 (2.27.3 alone listed P2C after PXN)."""
    names = next(n for since, n in reversed(_PATH_NUMBERS) if tuple(nccl_version[:2]) >= since)
    return names[number] if 0 <= number < len(names) else f"?{number}"


def log_messages(text: str):
    """Each NCCL message of `text`: the text after NCCL's own prefix and any launcher's, as
    gputopo.parsers.nccl_log reads it."""
    for raw in text.splitlines():
        for _level, message in nccl_log.records(nccl_log.unwrap(raw)):
            if message.strip():
                yield message.strip()


def _bus_id(text: str) -> bool:
    """Whether a GPU field is a PCI bus id ("89000", "ca000") rather than a small number."""
    return len(text) >= 4 or any(ch in "abcdef" for ch in text.lower())


def _trees(message: str) -> str:
    first = message.split("[0]", 1)[1].split("[1]", 1)[0].strip()  # "1/-1/-1->0->-1"
    down, me, up = first.split("->")
    children = [c for c in down.split("/") if c != "-1"]
    kids = ("children " + ", ".join(children)) if children else "no child"
    parent = "no parent (it is the root)" if up == "-1" else f"parent {up}"
    return (
        f"tree of channel 0 seen from rank {me}: {kids}, {parent}; up to three children / me / "
        "parent, -1 = none; inside a node the tree is a chain"
    )


def _ring(message: str) -> str:
    head, order = message.split(":", 1)
    channel, total = head.split()[1].split("/")
    ranks = order.split()
    return (
        f"ring of channel {int(channel)} (of {total} channels): rank "
        + " -> ".join(ranks + ranks[:1])
        + " (each rank sends to the next, the last to the first)"
    )


def _connection(message: str) -> str:
    head, via = message.rsplit(" via ", 1)
    left, right = head.split(" : ", 1)
    channel = int(left.split()[1].split("/")[0])
    words = right.replace("[send]", "").replace("[receive]", "").split()
    sender, receiver = words[0], words[2]
    parts = via.split("/")
    if parts[0] == "P2P":
        how = {
            "CUMEM": "direct GPU access to the peer's buffer, imported with CUDA's cuMem API "
            "(the peer is another process)",
            "IPC": "direct GPU access, the peer's buffer imported with a CUDA IPC handle",
            "direct pointer": "direct GPU access; one process drives both GPUs",
        }.get(parts[1], parts[1])
        what = f"P2P (NVLink or PCIe): {how}" + (
            ", the receiver reads" if parts[-1] == "read" else ""
        )
    elif parts[0] == "SHM":
        sides = "; ".join(
            f"{side}: {'the copy engine' if mode == 'CE' else 'GPU threads'}"
            for side, mode in zip(("sender", "receiver"), parts[1:3])
        )
        what = f"SHM: staged through host shared memory (who copies, {sides})"
    elif parts[0] == "NET":
        gdr = "GDRDMA" in via
        what = f"NET: network plugin {parts[1]}, NIC {parts[2]}" + (
            ", GPUDirect RDMA (the NIC reads and writes GPU memory)"
            if gdr
            else ", no GPUDirect RDMA: staged through host memory"
        )
    else:
        what = via
    inside = sender.split("[")[1].rstrip("]") if "[" in sender else ""
    ids = (
        ""
        if not inside
        else " (rank[PCI bus id]: NCCL 2.18 or older)"
        if _bus_id(inside)
        else " (rank[GPU number]: NCCL 2.19 or later)"
    )
    return f"channel {channel}: {sender} -> {receiver}{ids} via {what}"


def _gdr(message: str) -> str:
    numbers = message.rsplit("(distance", 1)[1].strip(" )").split(">")
    distance, limit = int(numbers[0]), int(numbers[1])
    gpu = message.split("for GPU ", 1)[-1].split(" /")[0]
    bus_id = _bus_id(gpu)
    version = (2, 12) if bus_id else (2, 28)
    era = (
        "the GPU is named by its PCI bus id, as NCCL 2.23 and older print it: numbers of 2.12-2.25"
        if bus_id
        else "the GPU is named by its rank (2.24 and later): numbers of 2.27.5-2.29"
    )
    return (
        f"GPUDirect RDMA off for this GPU/NIC: their path type {distance} "
        f"({path_type_name(distance, version)}) is farther than NCCL_NET_GDR_LEVEL {limit} "
        f"({path_type_name(limit, version)}, the default); {era}"
    )


def _choice(message: str) -> str:
    choice = nccl_tuning.parse("NCCL INFO " + message)["choices"][
        0
    ]  # a message: its prefix put back
    channels = f", channels 0..{choice['channel_hi']}" if choice["channel_hi"] is not None else ""
    return (
        f"{choice['func'] or 'a call'} of {choice['bytes']:,} B: algorithm {choice['algo']}, "
        f"protocol {choice['proto']}{channels} (rank 0 only, NCCL_DEBUG_SUBSYS=TUNING, 2.20+)"
    )


def decode(message: str) -> str:
    """One NCCL INIT/GRAPH/TUNING message in words; "(not a line this reader knows)" otherwise."""
    words = message.split()
    if message.startswith("NCCL version"):
        return f"the NCCL this process loaded: {words[2]} (a framework may bring its own)"
    if message.startswith("comm ") and " nNodes " in message:
        field = dict(zip(words[2::2], words[3::2]))
        return (
            f"rank {field.get('rank')} of {field.get('nRanks')}, on {field.get('nNodes')} node(s), "
            f"{field.get('localRanks')} rank(s) on this node"
        )
    if message.startswith("Trees ["):
        return _trees(message)
    if message.startswith("Channel ") and " via " in message:
        return _connection(message)
    if message.startswith("Channel ") and "/" in words[1] and " -> " not in message:
        return _ring(message)
    if " coll channels," in message:
        return (
            f"{words[0]} channels (thread blocks) per collective; the ring graph's count, doubled "
            "after connecting, capped by NCCL_MAX_CTAS (src/graph/connect.cc lines 452, 490-491)"
        )
    if "GPU Direct RDMA Disabled" in message:
        return _gdr(message)
    if " Bytes -> " in message:
        return _choice(message)
    return "(not a line this reader knows)"


def log_tour(text=None):
    """[(what, where, message, decoded)]: for each kind of LOG_TOUR the first such line of `text`
    (a log of yours; where = "your log"), else of its recorded file (where = that file)."""
    yours = list(log_messages(text)) if text else []
    out = []
    for what, is_kind, path in LOG_TOUR:
        message = next((m for m in yours if is_kind(m)), None)
        where = "your log"
        if message is None:
            recorded = (reference.REFERENCE_DIR / path).read_text(encoding="utf-8")
            message, where = next(m for m in log_messages(recorded) if is_kind(m)), path
        out.append((what, where, message, decode(message)))
    return out


# NVLS on: published figures beside the course's NVLS-off 8-GPU run (the course never enables NVLS)
NVLS_PUBLISHED = (
    {
        "gpus": "8x H100",
        "nvls": "on (NCCL's default)",
        "busbw_gbps": 480.0,
        "source": "nccl-tests issue #212, NCCL's lead (2024-05-06): \"On 8 GPUs, you should "
        'reach a peak busBw of ~480GB/s (algbw ~275GB/s)"; about 370 with NCCL_ALGO=RING',
    },
    {
        "gpus": "8x H200",
        "nvls": "on (NCCL's default; not set by the user)",
        "busbw_gbps": 475.0,
        "source": "nccl-tests issue #272 (2024-11-27): all_reduce_perf -b 64k -e 4G -f 2 -g 1, "
        '8 ranks, NCCL 2.20.3, "peak bandwidth of 475 GB/s": above NVLink 4\'s 450 GB/s line rate, '
        "which only NVLS's busbw can exceed (nccl-tests issue #366)",
    },
)


def nvls_rows():
    """Rows (GPUs, NVLS, busbw GB/s, source) of the course's NVLS-off 8x H200 run (its largest
    size, read from the file) and the published NVLS-on figures."""
    name = "nccl-bench-all_reduce-g8.txt"
    last = reference.load("h200-nvswitch-8gpu", "nccl-tests", filename=name)["rows"][-1]
    rows = [
        (
            "8x H200",
            "off (course default)",
            f"{last['out_of_place']['busbw']:.1f}",
            f"recorded by the course: h200-nvswitch-8gpu/{name}, {format_bytes(last['size'])}",
        )
    ]
    return rows + [
        (p["gpus"], p["nvls"], f"{p['busbw_gbps']:.0f}", p["source"]) for p in NVLS_PUBLISHED
    ]


# Multi-node without a cluster: the what-if panel (alphabeta.whatif) over the recorded clusters

# The panel's defaults (alphabeta.whatif's names; "link" starts a link_options label): NVLS off, as
# everywhere.
WHATIF_DEFAULTS = {
    "gpus_per_node": 8,
    "link": "NVLink 4: H100 SXM5",
    "nics_per_node": 8,
    "nic_gbit": 400,
    "rails_aligned": True,
    "pxn": True,
    "gdr": True,
    "spine_oversubscription": 2.0,
    "nodes": 2,
    "algorithm": "ring",
    "nvls": False,
    "size_bytes": 2**30,
}
WHATIF_NODES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# NVLS needs an NVSwitch with SHARP: HGX H100/H200, B200, GB200 (notebook 4, "NVLS off (course
# default)").
_NVLS_LINKS = ("H100 SXM5", "H200 SXM", "B200 / GB200", "h200-nvswitch-8gpu")


def link_options(your_fit: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """The panel's in-node links {label, line_gbps, busbw_gbps, nvls}: your fit of two or more GPUs,
    two recorded 8-GPU nodes' busbw, gputopo.links' NVLink line rates per direction, and "none"."""
    rates = {
        r["link"]: float(r["per_direction_gbs"])
        for r in links.link_table()
        if str(r["link"]).startswith("NVLink")
    }
    options = []
    if your_fit and your_fit.get("n", 0) > 1 and your_fit.get("busbw_gbps", 0) > 0:
        options.append(
            (
                "your fit: {system}, busbw {busbw_gbps:.0f} GB/s on {n} GPUs".format(**your_fit),
                None,
                float(your_fit["busbw_gbps"]),
                False,
            )
        )
    for system, filename, key in (
        ("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g8.txt", "NVLink 4: H200 SXM"),
        ("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt", "NVLink 2: Tesla V100 SXM2"),
    ):
        busbw = reference.load(system, "nccl-tests", filename=filename)["rows"][-1]["out_of_place"][
            "busbw"
        ]
        options.append(
            (
                f"recorded {system}: busbw {busbw:.0f} GB/s on 8 GPUs",
                rates.get(key),
                busbw,
                system.startswith("h200"),
            )
        )
    options += [
        (
            f"{label} ({gbps:.0f} GB/s per direction)",
            gbps,
            None,
            any(k in label for k in _NVLS_LINKS),
        )
        for label, gbps in rates.items()
    ] + [("none (one GPU per node, or PCIe only)", None, None, False)]
    return [dict(zip(("label", "line_gbps", "busbw_gbps", "nvls"), option)) for option in options]


def recorded_clusters() -> List[Dict[str, Any]]:
    """Each system.json "cluster" entry plus recorded_gbps (its table's last busbw or the published
    figure), an untuned run's tuned_gbps (from its source), alphabeta.whatif's line-rate bound and
    estimate (with NVLS where the entry says "nvls": "likely": then no line-rate bound, nccl-tests
    #212), within (the tuned figure in alphabeta.tolerance_text's band) and the notebook's table
    row."""
    rates = {r["link"]: float(r["per_direction_gbs"]) for r in links.link_table()}
    out = []
    for system in reference.list_systems():
        c = reference.system_info(system).get("cluster")
        if not c:
            continue
        if c.get("file"):
            last = reference.load(system, "nccl-tests", filename=c["file"])["rows"][-1]
            size, recorded = last["size"], last["out_of_place"]["busbw"]
            what = f"{c.get('op', 'all_reduce')} table, {size / 2**20:.0f} MiB"
        else:
            size, recorded, what = None, float(c["recorded_busbw_gbps"]), "published figure"
        # nodes null (not stated): two nodes, from which a ring's bandwidth terms no longer depend
        # on the count
        result = alphabeta.whatif(
            c["gpus_per_node"],
            rates.get(c.get("in_node_link") or ""),
            c["nics_per_node"],
            c["nic_gbit"],
            c.get("nodes") or 2,
            2**30,
            nvls=c.get("nvls") == "likely",
            nvlink_domain_gpus=c.get("nvlink_domain_gpus"),
            nvls_generation="blackwell"
            if re.search(r"\bG?B\d{3}\b", c.get("gpu", ""))
            else "hopper",
        )
        bound, estimate = result["bound_gbps"], result["busbw_gbps"]
        low, high = (1 - alphabeta.TOLERANCE_BELOW) * estimate, bound * (1 + 1e-9)
        tuned = c.get("tuned_busbw_gbps")
        tested = recorded if tuned is None else float(tuned)
        c = {
            **c,
            "system": system,
            "what": what,
            "size": size,
            "nvls": c.get("nvls") == "likely",
            "provenance": c.get("provenance", "not stated"),
            "tuned": c.get("tuned", True),
            "recorded_gbps": recorded,
            "tuned_gbps": tuned,
            "bound_gbps": bound,
            "estimate_gbps": estimate,
            "ratio": recorded / estimate,
            "within": low <= tested <= high,
        }
        c["row"] = (
            system,
            f"{c['nodes'] or '?'} x {c['gpus_per_node']}",
            f"{c['nics_per_node']} x {c['nic_gbit']:g}G"
            + (
                f" (NVLink domain {c['nvlink_domain_gpus']})" if c.get("nvlink_domain_gpus") else ""
            ),
            what,
            c["provenance"],
            f"{recorded:.2f}" + (f" untuned; tuned {tuned:.2f}" if tuned else ""),
            f"{bound:.1f}" if math.isfinite(bound) else "none (NVLS)",
            f"{estimate:.1f}" + (" (NVLS)" if c["nvls"] else ""),
            f"{c['ratio']:.2f}" + (f"; tuned {tested / estimate:.2f}" if tuned else ""),
            ("yes" if low <= recorded <= high else "NO")
            + " untuned; "
            + ("yes" if c["within"] else "NO")
            + " tuned"
            if tuned
            else "yes"
            if c["within"]
            else "NO",
        )
        out.append(c)
    return out


def whatif(options=None, clusters=None, **changes) -> Dict[str, Any]:
    """alphabeta.whatif at WHATIF_DEFAULTS with `changes`, plus settings, nvls_used, matches (the
    recorded clusters with these NICs and GPUs per node) and text (the panel's lines)."""
    s = {**WHATIF_DEFAULTS, **changes}
    option = next((o for o in options or link_options() if o["label"].startswith(s["link"])), None)
    if option is None:
        raise ValueError(f"unknown in-node link {s['link']!r}")
    nvls = bool(s["nvls"]) and option["nvls"]
    r = alphabeta.whatif(
        **{k: v for k, v in s.items() if k not in ("link", "nvls")},
        nvls=nvls,
        in_node_link_gbps=option["line_gbps"],
        in_node_busbw_gbps=option["busbw_gbps"],
        nvls_generation="blackwell" if "B200" in option["label"] else "hopper",
    )
    if s["nvls"] and not option["nvls"]:
        r["notes"].append(
            "NVLS needs NVSwitch with SHARP (H100/H200/B200/GB200): ignored for this link"
        )
    matches = [
        c
        for c in (recorded_clusters() if clusters is None else clusters)
        if all(c[k] == s[k] for k in ("nics_per_node", "nic_gbit", "gpus_per_node"))
    ]
    bound = (
        f"line-rate bound {r['bound_gbps']:.1f} GB/s"
        if math.isfinite(r["bound_gbps"])
        else "no line-rate bound: NVLS busbw is not a wire bandwidth, nccl-tests #212"
    )
    lines = [
        f"{s['nodes']} node(s) x {s['gpus_per_node']} GPUs = {r['gpus']} GPUs, "
        f"{s['algorithm']}, NVLS {'on (opt-in)' if nvls else 'off (course default)'}, "
        f"all-reduce of {format_bytes(s['size_bytes'])}",
        f"predicted busbw {r['busbw_gbps']:.1f} GB/s ({bound}), bounded by: {r['bound_by']}",
        f"all-reduce time {r['time_us'] / 1e3:.3f} ms, algbw {r['algbw_gbps']:.1f} GB/s",
    ]
    lines += [f"note: {note}" for note in r["notes"]]
    lines += (
        ["recorded clusters with these NICs and GPUs per node:"]
        + [
            f"  {c['system']}: {c['recorded_gbps']:.2f} GB/s busbw ({c['what']}, "
            f"{str(c['nodes']) + ' nodes' if c['nodes'] else 'nodes not stated'}, "
            f"{c['provenance']})"
            for c in matches
        ]
        if matches
        else ["no recorded cluster has these NICs and GPUs per node"]
    )
    return {**r, "settings": s, "nvls_used": nvls, "matches": matches, "text": "\n".join(lines)}


# The static view (what nbval and an exported notebook keep): the defaults with these changes.
_STATIC = (
    {"nodes": 1},
    {"nodes": 2},
    {"nodes": 16},
    {"nodes": 1024},
    {"nodes": 16, "gdr": False},
    {"nodes": 16, "rails_aligned": False, "pxn": False},
    {"nodes": 2, "algorithm": "tree"},
    {"link": "NVLink 3: A100 SXM4", "nics_per_node": 4, "nic_gbit": 200, "nodes": 3},
)
_CURVES = {
    "8 x 400G, H100 NVLink": {},
    "8 x 400G, NIC behind CPU / no GDR": {"gdr": False},
    "4 x 200G, A100 NVLink": {"link": "NVLink 3: A100 SXM4", "nics_per_node": 4, "nic_gbit": 200},
}


def whatif_panel(your_fit: Optional[Dict[str, Any]] = None):
    """(figure, panel): prints the static table, draws the static plot, builds the ipywidgets panel
    (None, and a line saying so, without ipywidgets); your_fit (measured here) is its first link."""
    options, clusters, d = link_options(your_fit), recorded_clusters(), WHATIF_DEFAULTS
    print("defaults:", ", ".join(f"{key}={value}" for key, value in d.items()))
    rows = [
        (
            ", ".join(f"{key}={value}" for key, value in changes.items()),
            f"{r['busbw_gbps']:.1f}",
            r["bound_by"],
            f"{r['time_us'] / 1e3:.2f}",
        )
        for changes, r in ((c, whatif(options, clusters, **c)) for c in _STATIC)
    ]
    print(
        text_table(
            rows, header=("changed from the defaults", "busbw GB/s", "bounded by", "1 GiB ms")
        )
    )
    from matplotlib.figure import (
        Figure,
    )  # the static plot: predicted busbw against node count, recorded clusters

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.add_subplot()
    for label, changes in _CURVES.items():
        busbw = [
            whatif(options, clusters, **dict(changes, nodes=n))["busbw_gbps"] for n in WHATIF_NODES
        ]
        ax.plot(WHATIF_NODES, busbw, marker=".", label=f"model: {label}")
    for c in (
        clusters
    ):  # a node count not stated: at two nodes; a likely NVLS run is labelled so (no ring figure)
        at = (c["nodes"] or 2, c["recorded_gbps"])
        ax.scatter(*at, marker="x", color="black", zorder=3)
        ax.annotate(
            c["system"]
            + ("" if c["nodes"] else " (nodes ?)")
            + (" (NVLS likely)" if c["nvls"] else ""),
            at,
            fontsize=7,
            xytext=(4, 2),
            textcoords="offset points",
        )
    ax.set_xscale("log", base=2)
    ax.set(
        yscale="log",
        xlabel="nodes",
        ylabel="all-reduce busbw (GB/s)",
        title="What-if: ring all-reduce busbw, model and recorded clusters (x)",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    try:
        import ipywidgets as w
    except ImportError:
        print(
            "(ipywidgets is not installed: the interactive panel needs it; "
            "the table and plot are its static view)"
        )
        return figure, None
    labels = [o["label"] for o in options]
    controls = {
        "gpus_per_node": w.IntSlider(
            value=d["gpus_per_node"], min=1, max=8, description="GPUs/node"
        ),
        "link": w.Dropdown(
            options=labels,
            value=next(x for x in labels if x.startswith(d["link"])),
            description="in-node link",
            layout=w.Layout(width="520px"),
        ),
        "nics_per_node": w.IntSlider(
            value=d["nics_per_node"], min=1, max=8, description="NICs/node"
        ),
        "nic_gbit": w.Dropdown(
            options=[100, 200, 400, 800], value=d["nic_gbit"], description="NIC Gb/s"
        ),
        "rails_aligned": w.Checkbox(value=d["rails_aligned"], description="rails aligned"),
        "pxn": w.Checkbox(value=d["pxn"], description="PXN"),
        "spine_oversubscription": w.FloatSlider(
            value=d["spine_oversubscription"], min=1.0, max=4.0, step=0.5, description="spine x:1"
        ),
        "gdr": w.Checkbox(value=d["gdr"], description="GDR (off: NIC behind CPU)"),
        "nodes": w.SelectionSlider(options=WHATIF_NODES, value=d["nodes"], description="nodes"),
        "algorithm": w.ToggleButtons(
            options=["ring", "tree"], value=d["algorithm"], description="algorithm"
        ),
        "nvls": w.Checkbox(value=d["nvls"], description="NVLS (opt-in; NVSwitch with SHARP only)"),
        "size_bytes": w.SelectionSlider(
            options=[(format_bytes(2**k), 2**k) for k in range(10, 35, 2)],
            value=d["size_bytes"],
            description="message",
        ),
    }

    def show(**settings):  # every setting the controls allow is valid
        print(whatif(options, clusters, **settings)["text"])

    boxes = list(controls.values())
    return figure, w.VBox(
        [w.HBox([w.VBox(boxes[:6]), w.VBox(boxes[6:])]), w.interactive_output(show, controls)]
    )

"""What notebook 2 (system topology) needs that no tool prints: two 8x V100 wirings side by side,
the sockets and NUMA nodes in `lscpu`, and verdicts on the recorded figures it shows.

    from gputopo.lessons import topology
    topology.v100_wirings()                   # {name: topo dict}: the DGX-1 and the 2019 blog server
    topology.wiring_differences(a, b)         # the GPU pairs whose link differs
    topology.lscpu_summary(text)              # sockets, NUMA nodes, hypervisor from `lscpu`
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from gputopo import reference, verdicts
from gputopo.parsers import nvidia_smi

# Two 8x V100 SXM2 servers, same GPUs, different wiring. Both are hybrid cube meshes (two quads
# of four, six NVLink 2 links per GPU), but the pairs with two links, one or none differ:
# - NVIDIA's DGX-1 with V100: GPU0 has one NVLink to GPUs 1 and 2, two to 3 and 4, none to 5-7
#   (DGX-1 with Tesla V100 System Architecture whitepaper, 2017; the NCCL topology dump in
#   NVIDIA/nccl issue #671). Stored as data in reference_systems/dgx1-v100/system.json ("links").
# - The server of the 2019 blog post: its recorded `nvidia-smi topo -m`
#   (reference_systems/v100-sxm2-8gpu-server/) gives GPU0 NV2 to GPUs 3 and 6, no NVLink to 4.
DGX1_V100 = "DGX-1 (V100), NVIDIA's wiring"
BLOG_V100 = "8x V100 server of the 2019 blog (v100-sxm2-8gpu-server)"


def _pairs_topology(codes: Dict[Tuple[int, int], str], gpus: int = 8) -> Dict[str, Any]:
    """A topo-parser-shaped dict from {(i, j): link code}; pairs not listed are SYS."""
    names = [f"GPU{i}" for i in range(gpus)]
    table = {a: {f"GPU{j}": codes.get((min(i, j), max(i, j)), "SYS") for j in range(gpus) if j != i}
             for i, a in enumerate(names)}
    return {"gpus": names, "nics": {}, "links": table, "cpu_affinity": {}, "numa_affinity": {},
            "gpu_numa_id": {}, "legend": {}}


def v100_wirings() -> Dict[str, Dict[str, Any]]:
    """{name: topology dict} of the two 8x V100 servers, in the shape `plots.topology_graph` draws."""
    return {DGX1_V100: _pairs_topology(reference.known_links("dgx1-v100")["pairs"]),
            BLOG_V100: reference.load("v100-sxm2-8gpu-server", "topo")}


def wiring_differences(first: Dict[str, Any], second: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(pair "i-j", code in first, code in second) for every GPU pair whose link differs."""
    gpus = sorted(set(first["gpus"]) & set(second["gpus"]), key=lambda g: int(g[3:]))
    return [(f"{a[3:]}-{b[3:]}", first["links"][a][b], second["links"][a][b])
            for k, a in enumerate(gpus) for b in gpus[k + 1:] if first["links"][a][b] != second["links"][a][b]]


def lscpu_summary(text: str) -> Dict[str, Any]:
    """Sockets, NUMA nodes (with their CPUs) and the hypervisor `lscpu` prints; None where a line is
    missing (a container's or an old lscpu). More NUMA nodes than sockets: split sockets
    (AMD EPYC NPS2/NPS4, Intel SNC); a "Hypervisor vendor" line: a virtual machine."""
    fields = dict(re.findall(r"^\s*([^:\n]+?):\s*(.*?)\s*$", text, re.M))

    def count(key):
        value = fields.get(key, "")
        return int(value) if value.isdigit() else None

    return {"sockets": count("Socket(s)"), "numa_nodes": count("NUMA node(s)"),
            "node_cpus": {f"node {m}": cpus for m, cpus in re.findall(r"^NUMA node(\d+) CPU\(s\):\s*(\S+)", text, re.M)},
            "hypervisor": fields.get("Hypervisor vendor")}


def verdict_line(label: str, verdict: verdicts.Verdict) -> str:
    """The verdict's first line, and its reasons only when it is "low"."""
    lines = verdict.text().splitlines()
    reasons = [line for line in lines[1:] if line.startswith("  reason")] if verdict.status == "low" else []
    return "\n".join([f"verdict, {label}: {lines[0]}"] + reasons)


def allreduce_link(system: str, filename: str):
    """(verdicts.Link, facts) for an all-reduce over every GPU of a recorded system: all NVLinks of
    one GPU (the busbw ranges of `verdicts.EFFICIENCY` are set against that). The count: the fewest
    active links of a GPU in a recorded `nvlink -s`; else, without NVSwitch, the sum of the NV#
    codes of a GPU's `topo -m` row, the fewest over GPUs. (None, why) when a fact is missing."""
    try:
        text = reference.read_text(system, filename)
        names = re.findall(r"^#\s+Rank\s+\d+ .* device\s+\d+ \[[^\]]*\]\s+(.+?)\s*$", text, re.M)
        if not names:
            return None, f"{system}/{filename}: no 'Using devices' line names the GPU"
        if "nvidia-smi-nvlink-s.txt" in reference.files(system):
            active = nvidia_smi.nvlink_link_counts(reference.read_text(system, "nvidia-smi-nvlink-s.txt"))
            count = min(entry["active"] for entry in active.values())
            facts = f"nvidia-smi-nvlink-s.txt {count} links active per GPU"
        elif reference.system_info(system).get("nvswitch"):
            return None, f"{system}: NVSwitch board without a recorded nvlink -s: links per GPU not known"
        else:
            rows = reference.load(system, "topo")["links"]
            count = min(sum(int(code[2:]) for code in row.values() if re.fullmatch(r"NV\d+", code))
                        for gpu, row in rows.items() if gpu.startswith("GPU"))
            facts = f"nvidia-smi-topo-m.txt, NV# codes of each GPU's row summed: {count} NVLinks per GPU"
        if not count:
            return None, f"{system}: no NVLink recorded"
        return verdicts.Link("nvlink", names[0], count=count, gpu=names[0]), f"{system}: {facts}, {names[0]}"
    except Exception as error:   # a verdict is a side note: never stop the notebook
        return None, f"{system}: the link could not be read from its recorded files ({error})"


def allreduce_verdict(system: str, filename: str):
    """(facts, verdicts.Verdict) on the busbw of the largest message of a recorded all-reduce table."""
    link, facts = allreduce_link(system, filename)
    if link is None:
        return facts, verdicts.Verdict("allreduce_busbw", None, verdicts.NOT_COMPARABLE, facts)
    return facts, verdicts.judge_nccl_output(reference.read_text(system, filename), link)


def share_of_peak_verdicts(nvlink_gbs: float, staged_gbs: float, gpu: str, active_links: int) -> List[Tuple[str, Any]]:
    """(label, Verdict) for the GPU0 -> GPU1 copies of the H100 pair: the P2P write over its
    `active_links` NVLinks, and the copy with P2P disabled (staged through host memory: "not
    comparable" with the GPU-GPU link)."""
    link = verdicts.Link("nvlink", gpu, count=active_links, gpu=gpu)
    return [("P2P write over NV12", verdicts.judge("p2p_one_way", nvlink_gbs, link, method="ce")),
            ("P2P disabled (staged)", verdicts.judge("p2p_one_way", staged_gbs, link, method="staged"))]


def dgx1_row_verdicts(row0: List[float], wiring: Dict[str, Any], gpu: str = "Tesla V100-SXM2") -> List[Tuple[str, Any]]:
    """(label, Verdict) for each bidirectional P2P=Enabled figure of the DGX-1's row of GPU 0: an
    NV# pair is judged on its links both ways; a pair without NVLink or listed without peer access
    in the DGX-1's system.json (its copies are staged through host memory) is "not comparable"."""
    no_peer = (reference.no_peer_access("dgx1-v100") or (set(), ""))[0]
    out = []
    for j, value in enumerate(row0[1:], 1):
        code = wiring["links"]["GPU0"][f"GPU{j}"]
        count = int(code[2:]) if code.startswith("NV") else None
        link = verdicts.Link("nvlink", gpu, count=count, gpu=gpu) if count else verdicts.Link("pcie")
        method = "staged" if (0, j) in no_peer or not count else "ce"
        out.append((f"GPU0 <-> GPU{j} ({code})", verdicts.judge("p2p_both_ways", value, link, method=method)))
    return out

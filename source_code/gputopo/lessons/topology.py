"""What notebook 2 (system topology) needs that no tool prints: two 8x V100 wirings side by side,
the sockets and NUMA nodes in `lscpu`, and a verdict as one line (the verdicts themselves are in
the notebook's cells).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from gputopo import reference, verdicts

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
    table = {
        a: {f"GPU{j}": codes.get((min(i, j), max(i, j)), "SYS") for j in range(gpus) if j != i}
        for i, a in enumerate(names)
    }
    return {"gpus": names, "nics": {}, "links": table}


def v100_wirings() -> Dict[str, Dict[str, Any]]:
    """{name: topology dict} of the two 8x V100 servers, in the shape `plots.topology_graph`
    draws."""
    return {
        DGX1_V100: _pairs_topology(reference.known_links("dgx1-v100")["pairs"]),
        BLOG_V100: reference.load("v100-sxm2-8gpu-server", "topo"),
    }


def wiring_differences(first: Dict[str, Any], second: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(pair "i-j", code in first, code in second) for every GPU pair whose link differs."""
    gpus = sorted(set(first["gpus"]) & set(second["gpus"]), key=lambda g: int(g[3:]))
    return [
        (f"{a[3:]}-{b[3:]}", first["links"][a][b], second["links"][a][b])
        for k, a in enumerate(gpus)
        for b in gpus[k + 1 :]
        if first["links"][a][b] != second["links"][a][b]
    ]


def lscpu_summary(text: str) -> Dict[str, Any]:
    """Sockets, NUMA nodes (with their CPUs) and the hypervisor `lscpu` prints; None where a line is
    missing (a container's or an old lscpu). More NUMA nodes than sockets: split sockets
    (AMD EPYC NPS2/NPS4, Intel SNC); a "Hypervisor vendor" line: a virtual machine."""
    fields = dict(re.findall(r"^\s*([^:\n]+?):\s*(.*?)\s*$", text, re.M))

    def count(key):
        value = fields.get(key, "")
        return int(value) if value.isdigit() else None

    return {
        "sockets": count("Socket(s)"),
        "numa_nodes": count("NUMA node(s)"),
        "node_cpus": {
            f"node {m}": cpus
            for m, cpus in re.findall(r"^NUMA node(\d+) CPU\(s\):\s*(\S+)", text, re.M)
        },
        "hypervisor": fields.get("Hypervisor vendor"),
    }


def verdict_line(label: str, verdict: verdicts.Verdict) -> str:
    """The verdict's first line, and its reasons only when it is "low"."""
    lines = verdict.text().splitlines()
    reasons = (
        [line for line in lines[1:] if line.startswith("  reason")]
        if verdict.status == "low"
        else []
    )
    return "\n".join([f"verdict, {label}: {lines[0]}"] + reasons)

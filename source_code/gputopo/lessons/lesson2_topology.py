"""Glue for notebook 2 (system topology): two 8x V100 servers, same GPUs, two wirings.

    from gputopo.lessons import lesson2_topology as lessons
    lessons.v100_wirings()                     # the DGX-1 and the 2019 blog server
    lessons.wiring_differences(a, b)           # the GPU pairs whose link differs
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from gputopo import reference

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

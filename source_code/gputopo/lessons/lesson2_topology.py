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


# ---------------------------------------------------------------------------------------
# Verdicts on the recorded numbers notebook 2 shows (gputopo.verdicts; notebook 1 explains them)


def allreduce_link(system: str, filename: str):
    """(verdicts.Link, facts) for an all-reduce over every GPU of a recorded system: the NVLinks of
    one GPU, all together (a ring or tree step leaves a GPU through all its links; the busbw ranges of
    `verdicts.EFFICIENCY` are set against that peak). The count is the fewest active links of a GPU in
    `nvidia-smi nvlink -s` when it was recorded; else, on a board without NVSwitch, the sum of the
    `NV#` codes of the GPU's `topo -m` row (direct links, each to one peer), the fewest over GPUs.
    The GPU's name comes from the table's "Using devices" lines. (None, why) when a fact is missing
    (an NVSwitch board without `nvlink -s`: its row repeats the same links for every peer)."""
    import re

    from gputopo import verdicts
    from gputopo.parsers import nvidia_smi

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
            sums = [sum(int(code[2:]) for code in row.values() if re.fullmatch(r"NV\d+", code))
                    for gpu, row in rows.items() if gpu.startswith("GPU")]
            count = min(sums)
            facts = f"nvidia-smi-topo-m.txt, NV# codes of each GPU's row summed: {count} NVLinks per GPU"
        if not count:
            return None, f"{system}: no NVLink recorded"
        return verdicts.Link("nvlink", names[0], count=count, gpu=names[0]), f"{system}: {facts}, {names[0]}"
    except Exception as error:   # a verdict is a side note: never stop the notebook
        return None, f"{system}: the link could not be read from its recorded files ({error})"


def allreduce_verdict(system: str, filename: str):
    """(facts, verdicts.Verdict) on the busbw of the largest message of a recorded all-reduce table."""
    from gputopo import verdicts

    link, facts = allreduce_link(system, filename)
    if link is None:
        return facts, verdicts.Verdict("allreduce_busbw", None, verdicts.NOT_COMPARABLE, facts)
    return facts, verdicts.judge_nccl_output(reference.read_text(system, filename), link)


def share_of_peak_verdicts(nvlink_gbs: float, staged_gbs: float, link) -> List[Tuple[str, Any]]:
    """(label, Verdict) for the two GPU0 -> GPU1 copies of notebook 2's share-of-peak table: the
    P2P write over the recorded NVLink, and the copy with P2P disabled (staged through host memory:
    "not comparable" with the GPU-GPU link, verdicts.judge)."""
    from gputopo import verdicts

    return [("P2P write over NV12", verdicts.judge("p2p_one_way", nvlink_gbs, link, method="ce")),
            ("P2P disabled (staged)", verdicts.judge("p2p_one_way", staged_gbs, link, method="staged"))]


def dgx1_row_verdicts(row0: List[float], wiring: Dict[str, Any], gpu: str = "Tesla V100-SXM2") -> List[Tuple[str, Any]]:
    """(label, Verdict) for each bidirectional P2P=Enabled figure of the recorded DGX-1 row of GPU 0:
    an `NV#` pair is judged on its NVLinks both ways; a pair the DGX-1's system.json lists without
    peer access (its copies are staged through host memory) is "not comparable"."""
    from gputopo import verdicts

    no_peer = (reference.no_peer_access("dgx1-v100") or (set(), ""))[0]
    out = []
    for j, value in enumerate(row0):
        if not j:
            continue
        code = wiring["links"]["GPU0"][f"GPU{j}"]
        count = int(code[2:]) if code.startswith("NV") else None
        link = verdicts.Link("nvlink", gpu, count=count, gpu=gpu) if count else verdicts.Link("pcie")
        method = "staged" if (0, j) in no_peer or not count else "ce"
        out.append((f"GPU0 <-> GPU{j} ({code})", verdicts.judge("p2p_both_ways", value, link, method=method,
                                                                 direction="both", against="both")))
    return out

"""The latency-bandwidth (alpha-beta) model of a message and of ring collectives.

One message of n bytes over one link takes

    T(n) = alpha + n / beta

alpha (microseconds) is the fixed cost of a message: software, launch, synchronisation,
the wire's latency; beta (GB/s, GB = 10^9 bytes) is the link's bandwidth. Small messages
are latency-bound, large ones bandwidth-bound; the size where both terms are equal,
alpha * beta, is where a link reaches half its bandwidth.

A ring all-reduce of S bytes on n GPUs sends 2(n-1) messages of S/n bytes one after the
other (reduce-scatter, then all-gather), so

    T(S, n) = 2(n-1) * alpha + 2(n-1)/n * S / beta

This is why nccl-tests reports a "bus bandwidth": busbw = algbw x 2(n-1)/n, where
algbw = S / T. busbw is the rate at which each GPU moves data through its bottleneck
(its NVLink ports, its PCIe link, or across nodes the node's NICs together), so it is comparable
across GPU counts and with the GPU's *total* NVLink bandwidth per direction (or a node's total
NIC bandwidth), not with one link's (nccl-tests, doc/PERFORMANCE.md). An 8x V100 server reaches about 129 GB/s of busbw over
NVLinks of 25 GB/s each because every GPU drives several links at once. The same reasoning
gives the other factors (`busbw_factor`). In the model below, alpha is the cost of one ring
step and beta is that per-GPU bus bandwidth, not the rate of a single link.

numpy is imported inside the functions that need it (CONTRIBUTING.md).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

# bytes / (GB/s) -> microseconds: n / (beta * 1e9) seconds = n / (beta * 1e3) us.
_BYTES_PER_US_PER_GBPS = 1e3

_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
            "bcast": "broadcast", "alltoall": "alltoall"}


def _op_name(op: str) -> str:
    """'all_reduce' for 'all_reduce', 'allreduce', 'all-reduce', 'all_reduce_perf', ..."""
    if not isinstance(op, str):
        raise ValueError(f"operation must be a name such as 'all_reduce', not {op!r}")
    name = op.strip().lower().replace("-", "_")
    if name.endswith("_perf"):
        name = name[: -len("_perf")]
    return _ALIASES.get(name.replace("_", ""), name)


def _check_ranks(n: Any, what: str = "number of GPUs") -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what} must be a whole number >= 1, not {n!r}")
    return n


def _positive(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{what} must be a positive number, not {value!r}")
    return float(value)


def busbw_factor(op: str, n: int) -> float:
    """busbw / algbw for operation `op` on `n` ranks (the ring algorithm's traffic per link).

    all_reduce: 2(n-1)/n; all_gather, reduce_scatter (and alltoall): (n-1)/n;
    broadcast, reduce, sendrecv: 1. An unknown operation raises ValueError.
    """
    name = _op_name(op)
    n = _check_ranks(n)
    if name == "all_reduce":
        return 2.0 * (n - 1) / n
    if name in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if name in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    raise ValueError(
        f"unknown operation {op!r}: expected all_reduce, all_gather, reduce_scatter, "
        "broadcast, reduce, sendrecv or alltoall"
    )


def ring_steps(op: str, n: int) -> int:
    """Messages a ring operation sends one after the other, each paying alpha once.

    all_reduce: 2(n-1) (reduce-scatter then all-gather); all_gather, reduce_scatter,
    broadcast, reduce, alltoall: n-1; sendrecv: 1. Zero on one rank (nothing is sent).
    """
    name = _op_name(op)
    n = _check_ranks(n)
    busbw_factor(name, n)  # rejects unknown operations
    if n == 1:
        return 0
    if name == "all_reduce":
        return 2 * (n - 1)
    if name == "sendrecv":
        return 1
    return n - 1


def fit(sizes_bytes: Iterable[float], times_us: Iterable[float]) -> Tuple[float, float]:
    """(alpha_us, beta_gbps) of T = alpha + n / beta fitted to measured (size, time) pairs.

    Least squares on *relative* errors ((model - T) / T)^2: over sizes from 8 B to 1 GiB the
    times span five orders of magnitude, and plain least squares would let the few largest
    sizes decide everything and leave alpha as noise; relative errors give every size the
    same say, so alpha comes from the small sizes and beta from the large ones.

    Both parameters are kept physical: if the unconstrained fit gives alpha < 0, alpha is
    set to 0 and beta refitted; if it gives no positive bandwidth term (times do not grow
    with size), beta is infinite and alpha is the weighted mean time. At least two
    distinct sizes and positive times are needed, else ValueError.
    """
    import numpy as np

    n = np.asarray(list(sizes_bytes), dtype=float)
    t = np.asarray(list(times_us), dtype=float)
    if n.shape != t.shape or n.ndim != 1:
        raise ValueError("sizes and times must be two sequences of the same length")
    keep = np.isfinite(n) & np.isfinite(t)
    n, t = n[keep], t[keep]
    if len(np.unique(n)) < 2:
        raise ValueError("the fit needs at least two different sizes")
    if np.any(t <= 0) or np.any(n < 0):
        raise ValueError("times must be positive and sizes non-negative")

    w = 1.0 / t
    # Weighted least squares for T = a + b * n, with b = 1 / (beta in bytes per us).
    design = np.column_stack([np.ones_like(n), n]) * w[:, None]
    (a, b), *_ = np.linalg.lstsq(design, t * w, rcond=None)
    if a < 0:
        a = 0.0
        b = float(np.sum(w * w * n * t) / np.sum(w * w * n * n))
    if b <= 0:
        b = 0.0
        a = float(np.sum(w * w * t) / np.sum(w * w))
    beta_gbps = math.inf if b == 0 else 1.0 / (b * _BYTES_PER_US_PER_GBPS)
    return float(a), float(beta_gbps)


def ring_time_us(op: str, size_bytes: Any, n: int, alpha_us: float, beta_gbps: float):
    """Model time of a ring operation: ring_steps(op, n) * alpha + busbw_factor(op, n) * S / beta.

    size_bytes may be a number or an array (then an array comes back).
    """
    import numpy as np

    steps = ring_steps(op, n)
    factor = busbw_factor(op, n) if steps else 0.0
    size = np.asarray(size_bytes, dtype=float)
    per_byte = 0.0 if math.isinf(beta_gbps) else 1.0 / (beta_gbps * _BYTES_PER_US_PER_GBPS)
    return steps * alpha_us + factor * size * per_byte


def ring_allreduce_time_us(size_bytes: Any, n: int, alpha_us: float, beta_gbps: float):
    """T(S, n) = 2(n-1) * alpha + 2(n-1)/n * S / beta, in microseconds (S in bytes, beta in GB/s)."""
    return ring_time_us("all_reduce", size_bytes, n, alpha_us, beta_gbps)


def _measured(parsed: Dict[str, Any]) -> List[Tuple[int, float]]:
    """(size, out-of-place time in us) of every row of an nccl-tests table."""
    rows = parsed.get("rows") if isinstance(parsed, dict) else None
    if not rows:
        raise ValueError("the table has no rows (pass what gputopo.parsers.nccl_tests.parse returns)")
    pairs = [(int(row["size"]), float(row["out_of_place"]["time_us"])) for row in rows
             if row.get("size", 0) > 0 and ((row.get("out_of_place") or {}).get("time_us") or 0) > 0]
    if not pairs:
        raise ValueError("no out-of-place times in the table")
    return pairs


def fit_from_table(parsed: Dict[str, Any], op: str, n: int) -> Tuple[float, float]:
    """(alpha_step_us, busbw_gbps) from an nccl-tests table, consistent with the ring model.

    The table's out-of-place times are fitted as T(S) = A + S / B (see `fit`), then turned
    into the parameters of the ring, so that ring_time_us(op, S, n, alpha, beta) reproduces
    the fitted line:
        alpha = A / ring_steps(op, n)          (all_reduce: A / 2(n-1)): the cost of one step
        beta  = B * busbw_factor(op, n)        (all_reduce: B * 2(n-1)/n): the bus bandwidth
    beta is what each GPU moves through its bottleneck (all its NVLinks together, its PCIe
    link, or across nodes the node's NICs together), not the rate of one link. alpha also
    holds whatever the time includes besides the wire (kernel launch, synchronisation, the
    protocol): an effective cost per step, not a link latency. When one process launches the
    kernels of all n GPUs one after the other (nccl-tests with -g n), a small message's time
    is mostly that host launch cost, and A / 2(n-1) then falls as n grows; fit a run with CUDA
    graphs (-G) or one process per GPU for a per-step cost.
    """
    steps = ring_steps(op, n)
    if steps == 0:
        raise ValueError("one rank sends nothing: the ring model needs n >= 2")
    pairs = _measured(parsed)
    a_us, b_gbps = fit([p[0] for p in pairs], [p[1] for p in pairs])
    return a_us / steps, b_gbps * busbw_factor(op, n)


def total_nic_gbps(nics_per_node: int, gbit_per_nic: float) -> float:
    """A node's total network bandwidth per direction in GB/s: NICs x line rate (Gb/s) / 8.

    A DGX-1 with four 100 Gb/s EDR InfiniBand adapters: total_nic_gbps(4, 100) = 50 GB/s; an
    HGX H100/H200 with eight 400 Gb/s NICs: 400 GB/s. This is the line rate; what NCCL reaches
    per NIC is somewhat lower (`multinode_busbw_gbps`).
    """
    return _check_ranks(nics_per_node, "NICs per node") * _positive(gbit_per_nic, "a NIC's rate (Gb/s)") / 8


def multinode_busbw_gbps(busbw_in_node_gbps: float, node_nic_gbps: float, nodes: int) -> float:
    """Bus bandwidth of a ring all-reduce over `nodes` nodes: min(in-node busbw, the node's NICs).

    Inside one node the ring runs over NVLink (or PCIe) at busbw_in_node_gbps. Across nodes,
    NCCL builds every ring so that it passes through all GPUs of a node over NVLink and leaves
    the node once, through one NIC; its rings (channels) are spread over the node's K NICs.
    Each NIC then carries 2(n-1)/n x S / K bytes of an S-byte all-reduce, so
    T >= 2(n-1)/n x S / (K x B_nic) and busbw = algbw x 2(n-1)/n <= K x B_nic:
    node_nic_gbps, the node's *total* NIC bandwidth per direction (`total_nic_gbps`), not one
    GPU's share of it. (NVIDIA/nccl-tests issue #309: an NVIDIA engineer puts the peak of a
    node with eight 400 Gb/s NICs at 400 GB/s; issue #29: NCCL's lead, a DGX-1 reaches about
    48 GB/s because it has four IB adapters.) Pass the line rate for the bound, or
    a per-NIC rate NCCL reaches (about 46-48 GB/s per 400 Gb/s NIC, nccl-tests issue #290) for
    an estimate. The ring's bus bandwidth is that of its slowest hop. This ignores tree,
    NVLS/NVLSTree and CollNet algorithms, which can exceed this bound on few nodes.
    """
    _check_ranks(nodes, "number of nodes")
    _positive(busbw_in_node_gbps, "in-node busbw (GB/s)")
    _positive(node_nic_gbps, "the node's NIC bandwidth (GB/s)")
    return busbw_in_node_gbps if nodes == 1 else min(busbw_in_node_gbps, node_nic_gbps)


def multinode_allreduce_time_us(size_bytes: Any, gpus_per_node: int, nodes: int, alpha_in_node_us: float,
                                busbw_in_node_gbps: float, alpha_net_us: float, node_nic_gbps: float):
    """Ring all-reduce time over nodes x gpus_per_node GPUs, bounded by the node's total NIC bandwidth.

    One node: the in-node ring model. Several nodes: `ring_allreduce_latency_us` (the
    2(nodes-1) steps that cross the network at the network's alpha, the rest at the in-node
    alpha), plus the bandwidth term at `multinode_busbw_gbps(busbw_in_node_gbps, node_nic_gbps, nodes)`.
    """
    n = _check_ranks(gpus_per_node) * _check_ranks(nodes)
    busbw = multinode_busbw_gbps(busbw_in_node_gbps, node_nic_gbps, nodes)
    latency = ring_allreduce_latency_us(n, nodes, alpha_in_node_us, alpha_net_us)
    return latency + ring_allreduce_time_us(size_bytes, n, 0.0, busbw)


def ring_allreduce_latency_us(n: int, nodes: int, alpha_in_node_us: float, alpha_net_us: float) -> float:
    """The alpha term of a ring all-reduce over n GPUs on `nodes` nodes (one NVLink domain: nodes=1).

    NCCL's ring latency (src/graph/tuning.cc at v2.28.3-1): nInterSteps = 2*(nNodes-1) for an
    all-reduce, latency = (nsteps - nInterSteps) * intraLat + nInterSteps * interLat, with
    nsteps = 2(n-1). E.g. 1,024 nodes of 8 GPUs, 5 and 10 us: 2 x 1,023 x 10 + 14,336 x 5 us.
    """
    inter = 2 * (_check_ranks(nodes) - 1)
    return inter * alpha_net_us + (ring_steps("all_reduce", _check_ranks(n)) - inter) * alpha_in_node_us


# ---------------------------------------------------------------------------------------
# The what-if model of notebook 4: one place for every factor, each with its source.

# What NCCL reaches per NIC, over the line rate: 24 GB/s per 200 Gb/s NIC and 12 per 100 Gb/s
# (NCCL's lead, NVIDIA/nccl-tests issue #119), 46-48 GB/s per 400 Gb/s NIC (an NCCL maintainer,
# nccl-tests issue #290): 0.92-0.96 of the line rate; 24 / 25 = 0.96 is used. The same per-NIC
# rule of thumb is restated for 100 Gb/s EDR NICs (12 GB/s for one, about 48 GB/s for a DGX-1's
# four; NCCL's lead, nccl-tests issue #29) and for eight 200 Gb/s HDR NICs (192 GB/s, NVIDIA/nccl
# issue #812): notebook 4 counts those recorded figures as calibration, not as independent tests.
NIC_EFFICIENCY = 0.96
# A NIC reached through the CPU (no PCIe switch shared with a GPU, so NCCL stages through host
# memory): "If the NIC is attached to the CPU getting 16 GB/s is normal" for one 200 Gb/s NIC
# (NCCL's lead, NVIDIA/nccl issue #412): 16 / 25 = 0.64, one data point. Other platforms lose
# less: GH200 with four 200 Gb/s ports, GDR off by default, 79.72 GB/s all-reduce busbw (0.80 of
# the line rate; NVIDIA/nccl issue #1579); going through the CPU "is not required in many cases"
# to be slow (NCCL's lead, NVIDIA/nccl issue #465).
NIC_EFFICIENCY_NO_GDR = 0.64
# NCCL's ring over NVLink: "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can
# get an effective NVLink bandwidth of 370GB/s" (NCCL's lead, nccl-tests issue #212): 370 / 450.
NVLINK_RING_EFFICIENCY = 370.0 / 450.0
# NVLS on 8 H100s: peak all-reduce busbw about 480 GB/s against 370 GB/s for the ring (same
# comment, nccl-tests issue #212): 480 / 370.
NVLS_GAIN = 480.0 / 370.0
# 480/370 was measured on Hopper. For Blackwell `whatif(..., nvls_generation="blackwell")` scales it
# by 0.74 / 0.85, the nvlsEfficiency constants (Hopper 0.85, Blackwell 0.74) of NCCL's algorithm-
# selection tuner (src/graph/tuning.cc at v2.28.3-1, applied to bwIntra when it rates NVLS): a
# model constant, not a measured gain. The one public Blackwell NVLS on/off pair (8x B300,
# 695 -> 845 GB/s, NVIDIA/nccl issue #2140) gives 0.94 of Hopper's gain instead of 0.87, on a ring
# of 695/900 = 0.77 of the line rate instead of Hopper's 0.82: the Blackwell factors are uncertain,
# and the model's GB200 estimate matches partly because the two differences cancel (notebook 4
# shows the GB200 rack under each).
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
# NCCL's own tuning model takes 0.92 of the path bandwidth for a tree all-reduce
# (`busBw*.92`, src/graph/tuning.cc at v2.28.3-1). NCCL applies it to a link's bandwidth; here it
# is applied to an achieved figure (370 GB/s), so the tree's estimate may be a few per cent low.
TREE_EFFICIENCY = 0.92
# The band a tuned run's busbw must lie in to match the model: from (1 - TOLERANCE_BELOW) x the
# estimate up to the line rate of the links the ring crosses (NVLS runs: no line-rate limit, their
# busbw is not a wire bandwidth, nccl-tests #212). Its one justification: the spread of tuned
# figures NCCL's developers give for tuned runs (expected figures, not runs), at most about 4 % below
# the estimate (46 of 48 GB/s per
# 400 Gb/s NIC, nccl-tests #290; 380-400 GB/s on eight 400 Gb/s NICs, "above 380 only with extra
# tuning", nccl-tests #309; "around 48GB/s from each CX7 NIC", up to ~396 GB/s on eight, nccl-tests
# #319); 0.10 is about 2.5 times that spread (4.2 %), a margin chosen for run-to-run noise. An untuned run can sit
# further below (MTU, HCAs not named): it is shown beside its tuned figure, which is what is tested.
# Five recorded clusters are calibration sources of NIC_EFFICIENCY or inferred from their result
# (notebook 4 gives each one's provenance): they agree by construction, not as independent tests.
TOLERANCE_BELOW = 0.10


def tolerance_text() -> str:
    """The band, as notebook 4 prints it."""
    return (f"{1 - TOLERANCE_BELOW:.2f} x estimate <= busbw of a tuned run <= line-rate bound "
            "(NVLS runs: no line-rate bound)")


def whatif(gpus_per_node: int, in_node_link_gbps: Optional[float], nics_per_node: int, nic_gbit: float,
           nodes: int, size_bytes: float, algorithm: str = "ring", gdr: bool = True, pxn: bool = True,
           rails_aligned: bool = True, spine_oversubscription: float = 1.0, nvls: bool = False,
           nvlink_domain_gpus: Optional[int] = None, alpha_in_node_us: float = 5.0,
           alpha_net_us: float = 10.0, in_node_busbw_gbps: Optional[float] = None,
           nvls_generation: str = "hopper") -> Dict[str, Any]:
    """busbw, bound and time of an all-reduce over nodes x gpus_per_node GPUs, and what bounds it.

    in_node_link_gbps: one GPU's NVLink bandwidth per direction at line rate (`links.link_table`),
    or None for one GPU per node or a PCIe-only node (then the in-node term is not a limit).
    in_node_busbw_gbps: a recorded in-node busbw (e.g. the 8x H200 node's), used as the in-node
    estimate instead of the line rate x efficiency. The panel uses 5 and 10 us placeholders for
    the alphas; callers may pass fitted alphas.
    The terms, each an upper limit on busbw (GB/s):
      in-node    in_node_link_gbps x NVLINK_RING_EFFICIENCY (x NVLS_GAIN with NVLS on)
      NICs       nics_per_node x nic_gbit / 8 x NIC_EFFICIENCY (NIC_EFFICIENCY_NO_GDR for a NIC
                 behind the CPU, gdr=False): the node's total NIC bandwidth (`total_nic_gbps`)
      spine      the NIC term / spine_oversubscription, when rails are not aligned and PXN is
                 off: a ring hop from NIC i of one node to a NIC of another rail crosses the
                 spine (with PXN, on by default, NCCL moves the data over NVLink to the GPU beside
                 the NIC of the right rail first; NCCL_PXN_DISABLE in src/graph/paths.cc at v2.28.3-1)
    Ring: busbw = the smallest term; T = the alphas of `ring_allreduce_latency_us` (NCCL's ring
    latency) + 2(N-1)/N S / busbw. Tree on two nodes: each node's data crosses the network once
    per direction instead of 2(N-1)/N times, so the NIC term is multiplied by 2(N-1)/N
    (nccl-tests #196, NCCL's lead: on two nodes a tree can go beyond the network bottleneck,
    provided the intra-node bandwidth sustains it); on more nodes it is the ring's term. Either
    way x TREE_EFFICIENCY, and 2(g-1) in-node plus 2 floor(log2 nodes) network alphas (tuning.cc's
    tree latency at v2.28.3-1: 2 * ((nRanks/nNodes-1) * intraLat + log2i(nNodes) * interLat)).
    Inside one NVLink domain (GB200 NVL72: nvlink_domain_gpus=72) no NIC is used.
    Returns {busbw_gbps, bound_gbps, terms, bound_by, time_us, algbw_gbps, gpus, notes}.
    """
    g, k, nodes = _check_ranks(gpus_per_node), _check_ranks(nics_per_node), _check_ranks(nodes)
    nic_gbit = _positive(nic_gbit, "a NIC's rate (Gb/s)")
    size = _positive(size_bytes, "message size (bytes)")
    algorithm = str(algorithm).lower()
    if algorithm not in ("ring", "tree"):
        raise ValueError(f"algorithm must be 'ring' or 'tree' (NVLS is the nvls switch), not {algorithm!r}")
    n = g * nodes
    notes = []
    one_domain = nodes == 1 or (nvlink_domain_gpus is not None and n <= nvlink_domain_gpus)
    bounds, terms = {}, {}
    if (in_node_link_gbps is not None or in_node_busbw_gbps is not None) and (g > 1 or (one_domain and n > 1)):
        if nvls_generation not in NVLS_EFFICIENCY:
            raise ValueError(f"nvls_generation must be one of {', '.join(NVLS_EFFICIENCY)}, not {nvls_generation!r}")
        gain = NVLS_GAIN * NVLS_EFFICIENCY[nvls_generation] / NVLS_EFFICIENCY["hopper"] if nvls else 1.0
        if in_node_busbw_gbps is not None:
            est = _positive(in_node_busbw_gbps, "in-node busbw (GB/s)")
            link = _positive(in_node_link_gbps, "in-node link bandwidth (GB/s)") if in_node_link_gbps else est
        else:
            link = _positive(in_node_link_gbps, "in-node link bandwidth (GB/s)")
            est = link * NVLINK_RING_EFFICIENCY
        # NVLS busbw is not a wire bandwidth and can exceed every link's line rate (480 GB/s on
        # H100s with a 450 GB/s line rate, nccl-tests #212): with NVLS the in-node term is no bound.
        bounds["in-node NVLink"] = math.inf if nvls else link
        terms["in-node NVLink"] = est * gain
        if nvls:
            notes.append("NVLS on (opt-in): in-node busbw x 480/370 (nccl-tests #212)"
                         + (" x 0.74/0.85 (NCCL's nvlsEfficiency, Blackwell/Hopper)" if nvls_generation == "blackwell" else "")
                         + "; the course's default is NVLS off")
    if not one_domain:
        line = total_nic_gbps(k, nic_gbit)
        eff = NIC_EFFICIENCY if gdr else NIC_EFFICIENCY_NO_GDR
        net_line, net_est = line, line * eff
        if not gdr:
            notes.append("NIC behind the CPU / no GDR: 16 of 25 GB/s per 200 Gb/s NIC, one data point "
                         "(nccl #412); other platforms lose less (0.80 on GH200, nccl #1579)")
        if not rails_aligned and not pxn:
            over = _positive(spine_oversubscription, "spine oversubscription")
            net_line, net_est = net_line / over, net_est / over
            notes.append(f"rails not aligned, PXN off: ring hops cross the spine ({over:g}:1)")
        if algorithm == "tree" and nodes == 2:
            factor = busbw_factor("all_reduce", n)
            net_line, net_est = net_line * factor, net_est * factor
            notes.append("tree on two nodes: the network carries each byte once per direction")
        bounds["node's NICs"] = net_line
        terms["node's NICs"] = net_est
    if not terms:
        return {"busbw_gbps": math.inf, "bound_gbps": math.inf, "terms": {}, "bound_by": "nothing (one GPU)",
                "time_us": 0.0, "algbw_gbps": math.inf, "gpus": n, "notes": notes}
    bound_by = min(terms, key=terms.get)
    busbw = terms[bound_by] * (TREE_EFFICIENCY if algorithm == "tree" else 1.0)
    bound = min(bounds.values())
    if algorithm == "tree":
        alpha_steps = 2 * (g - 1) * alpha_in_node_us + 2 * (nodes.bit_length() - 1) * alpha_net_us
    else:
        alpha_steps = ring_allreduce_latency_us(n, 1 if one_domain else nodes, alpha_in_node_us, alpha_net_us)
    factor = busbw_factor("all_reduce", n)
    time_us = alpha_steps + factor * size / (busbw * _BYTES_PER_US_PER_GBPS)
    return {"busbw_gbps": busbw, "bound_gbps": bound, "terms": terms, "bound_by": bound_by, "time_us": time_us,
            "algbw_gbps": size / (time_us * _BYTES_PER_US_PER_GBPS), "gpus": n, "notes": notes}


def cluster_busbw(cluster: Dict[str, Any], link_gbps: Optional[float]) -> Tuple[float, float]:
    """(line-rate bound, estimate) of busbw for a recorded cluster (a system.json "cluster" entry).

    link_gbps: the in-node link's line rate per GPU per direction (None: not a limit). A cluster
    whose entry says "nvls": "likely" is estimated with NVLS (its bound is then not a line rate:
    NVLS busbw can exceed it, nccl-tests #212); any other as a ring. "nodes": null (not stated)
    is estimated on two nodes: from two nodes on a ring's bandwidth terms do not depend on the
    node count. A ring run matches the model when (1 - TOLERANCE_BELOW) x estimate <= value <= bound.
    """
    nodes = cluster.get("nodes") or 2
    result = whatif(cluster["gpus_per_node"], link_gbps, cluster["nics_per_node"], cluster["nic_gbit"],
                    nodes, 2**30, nvlink_domain_gpus=cluster.get("nvlink_domain_gpus"),
                    nvls=cluster.get("nvls") == "likely",
                    nvls_generation="blackwell" if re.search(r"\bG?B\d{3}\b", cluster.get("gpu", "")) else "hopper")
    return result["bound_gbps"], result["busbw_gbps"]


def half_bandwidth_size(alpha_us: float, beta_gbps: float) -> float:
    """Message size (bytes) at which T = alpha + n/beta reaches half of beta: alpha * beta."""
    if math.isinf(beta_gbps):
        return math.inf
    return alpha_us * beta_gbps * _BYTES_PER_US_PER_GBPS


# ---------------------------------------------------------------------------------------
# The ring all-reduce step by step (notebook 4 and images/draw_diagrams.py draw it)

def ring_schedule(n: int) -> List[Tuple[int, str, List[Tuple[int, int, int]]]]:
    """The ring all-reduce's 2(n-1) steps: (step, phase, [(sender, receiver, chunk), ...]).

    The buffer is cut into n chunks. In reduce-scatter step s (1 ... n-1) GPU i sends chunk
    (i - s + 1) mod n to GPU i+1, which adds it to its own copy; after n-1 steps GPU i holds
    the full sum of chunk (i + 1) mod n. All-gather then passes the finished chunks on for
    another n-1 steps. Every GPU sends one chunk (S/n bytes) per step.
    """
    steps = []
    for s in range(1, n):
        steps.append((s, "reduce-scatter", [(i, (i + 1) % n, (i - s + 1) % n) for i in range(n)]))
    for s in range(1, n):
        steps.append((n - 1 + s, "all-gather", [(i, (i + 1) % n, (i - s + 2) % n) for i in range(n)]))
    return steps


def simulate_ring_allreduce(values: Sequence[Sequence[float]]) -> Tuple[List[List[float]], int]:
    """Run ring_schedule on real numbers: values[i] is GPU i's buffer of n chunks.

    Returns (every GPU's buffer after the last step, chunks each GPU sent). All buffers end
    equal to the element-wise sum, which is what an all-reduce must produce.
    """
    n = len(values)
    buffers = [list(map(float, v)) for v in values]
    if any(len(b) != n for b in buffers):
        raise ValueError("give each of the n GPUs a buffer of n chunks")
    sent = 0
    for _, phase, moves in ring_schedule(n):
        outgoing = [(src, dst, chunk, buffers[src][chunk]) for src, dst, chunk in moves]
        for _src, dst, chunk, value in outgoing:
            if phase == "reduce-scatter":
                buffers[dst][chunk] += value
            else:
                buffers[dst][chunk] = value
        sent += 1
    return buffers, sent

"""The latency-bandwidth (alpha-beta) model of a message and of ring collectives.

One message of n bytes takes T(n) = alpha + n / beta: alpha (us) its fixed cost (software, launch,
synchronisation, the wire's latency), beta (GB/s, 10^9 bytes) the link's bandwidth. A ring
all-reduce of S bytes on n GPUs sends 2(n-1) messages of S/n bytes one after the other
(reduce-scatter, then all-gather): T(S, n) = 2(n-1) * alpha + 2(n-1)/n * S / beta. Hence
nccl-tests' busbw = algbw x 2(n-1)/n (algbw = S / T): the rate at which each GPU moves data through
its bottleneck (its NVLink ports, its PCIe link, across nodes the node's NICs together), comparable
with the GPU's *total* NVLink bandwidth per direction, not one link's (nccl-tests,
doc/PERFORMANCE.md): an 8x V100 server reaches about 129 GB/s of busbw over NVLinks of 25 GB/s
each. Below, alpha is the cost of one ring step and beta that per-GPU busbw. numpy is imported
inside the functions that need it.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Tuple

# bytes / (GB/s) -> microseconds: n / (beta * 1e9) seconds = n / (beta * 1e3) us.
_BYTES_PER_US_PER_GBPS = 1e3

# busbw / algbw of each operation (nccl-tests doc/PERFORMANCE.md), and the ring's steps on n ranks.
_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def _check_ranks(n: Any, what: str = "number of GPUs") -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what} must be a whole number >= 1, not {n!r}")
    return n


def busbw_factor(op: str, n: int) -> float:
    """busbw / algbw for operation `op` on `n` ranks (the ring algorithm's traffic per link):
    all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce,
    sendrecv 1."""
    if op not in _FACTORS:
        raise ValueError(f"unknown operation {op!r}: expected one of {', '.join(_FACTORS)}")
    return _FACTORS[op](_check_ranks(n))


def ring_steps(op: str, n: int) -> int:
    """Messages a ring operation sends one after the other, each paying alpha once: all_reduce
    2(n-1) (reduce-scatter then all-gather), sendrecv 1, the others n-1; 0 on one rank."""
    busbw_factor(op, n)  # rejects unknown operations
    return 0 if n == 1 else 2 * (n - 1) if op == "all_reduce" else 1 if op == "sendrecv" else n - 1


def fit(sizes_bytes: Iterable[float], times_us: Iterable[float]) -> Tuple[float, float]:
    """(alpha_us, beta_gbps) of T = alpha + n / beta fitted to measured (size, time) pairs.

    Least squares on *relative* errors ((model - T) / T)^2: from 8 B to 1 GiB the times span five
    orders of magnitude, and plain least squares would let the largest sizes decide everything and
    leave alpha as noise; relative errors give every size the same say (alpha from the small sizes,
    beta from the large ones). Kept physical: a negative alpha is set to 0 and beta refitted; no
    positive bandwidth term (times do not grow with size) gives beta = inf and alpha the weighted
    mean time. Needs two distinct sizes and positive times, else ValueError.
    """
    import numpy as np

    n, t = np.asarray(list(sizes_bytes), dtype=float), np.asarray(list(times_us), dtype=float)
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


def ring_allreduce_time_us(size_bytes: Any, n: int, alpha_us: float, beta_gbps: float):
    """T(S, n) = 2(n-1) * alpha + 2(n-1)/n * S / beta, in microseconds (S in bytes, beta in GB/s);
    size_bytes may be a number or an array (then an array comes back)."""
    import numpy as np

    per_byte = 0.0 if math.isinf(beta_gbps) else 1.0 / (beta_gbps * _BYTES_PER_US_PER_GBPS)
    return (
        ring_steps("all_reduce", n) * alpha_us
        + busbw_factor("all_reduce", n) * np.asarray(size_bytes, dtype=float) * per_byte
    )


def fit_from_table(parsed: Dict[str, Any], op: str, n: int) -> Tuple[float, float]:
    """(alpha_step_us, busbw_gbps) from an nccl-tests table, consistent with the ring model.

    The out-of-place times are fitted as T(S) = A + S / B (`fit`), then
    alpha = A / ring_steps(op, n) (all_reduce: A / 2(n-1)), the cost of one step, and
    beta = B * busbw_factor(op, n) (2(n-1)/n), the bus bandwidth: what each GPU moves through its
    bottleneck, not the rate of one link. alpha holds whatever the time includes besides the wire
    (launch, synchronisation, protocol): an effective cost per step. When one process launches the
    kernels of all n GPUs one after the other (nccl-tests -g n), a small message's time is mostly
    that launch cost and A / 2(n-1) falls as n grows; fit a run with CUDA graphs (-G) or one process
    per GPU for a per-step cost.
    """
    steps = ring_steps(op, n)
    if steps == 0:
        raise ValueError("one rank sends nothing: the ring model needs n >= 2")
    pairs = [
        (int(r["size"]), float(r["out_of_place"]["time_us"]))
        for r in parsed.get("rows") or []
        if r.get("size", 0) > 0 and ((r.get("out_of_place") or {}).get("time_us") or 0) > 0
    ]
    if not pairs:
        raise ValueError(
            "no out-of-place times in the table "
            "(pass what gputopo.parsers.nccl_tests.parse returns)"
        )
    a_us, b_gbps = fit([p[0] for p in pairs], [p[1] for p in pairs])
    return a_us / steps, b_gbps * busbw_factor(op, n)


def total_nic_gbps(nics_per_node: int, gbit_per_nic: float) -> float:
    """A node's total network bandwidth per direction in GB/s: NICs x line rate (Gb/s) / 8.
    NCCL spreads the rings that leave a node over all its NICs, so this, not one GPU's share,
    bounds busbw across nodes (nccl-tests #309: eight 400 Gb/s NICs, 400 GB/s; #29: a DGX-1's
    four 100 Gb/s EDR adapters, 50 GB/s, reach about 48). A line rate; what NCCL reaches per NIC:
    `NIC_EFFICIENCY`."""
    if not gbit_per_nic > 0:
        raise ValueError(f"a NIC's rate (Gb/s) must be positive, not {gbit_per_nic!r}")
    return _check_ranks(nics_per_node, "NICs per node") * gbit_per_nic / 8


# ---------------------------------------------------------------------------------------
# NCCL's own latency model: what the TUNING table NCCL prints at init holds as "latency".
# src/graph/tuning.cc at v2.28.3-1 (the same constants from v2.23.4-1 to v2.29.2-1): a base cost
# once per call (`baseLatencies`, lines 143-147) plus one hardware latency per hop, by the link
# the hop crosses (`hwLatencies`, lines 149-168), per algorithm and protocol; NCCL's time for a
# call of S bytes is then latency + S / (1000 x bandwidth) (`ncclTopoGetAlgoTime`, lines 584-601).
NCCL_TUNING_TAG = "v2.28.3-1"
PROTOCOLS = ("LL", "LL128", "Simple")
NCCL_BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
NCCL_HOP_LATENCY_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
# A ring across nodes posts one network send per step: at least 1 us (Intel CPU or other) or
# 2 us (AMD) per step, x 3 for Simple (`getNetOverhead`, lines 214-219; lines 371-377).
_NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
_STEPS = {
    "all_reduce": lambda n: 2 * (n - 1),
    "all_gather": lambda n: n - 1,
    "reduce_scatter": lambda n: n - 1,
    "broadcast": lambda n: n,
    "reduce": lambda n: n,
}


def nccl_latency_us(
    algorithm: str,
    protocol: str,
    n_ranks: int,
    n_nodes: int = 1,
    link: str = "nvlink",
    op: str = "all_reduce",
    cpu_vendor: str = "intel",
    latency_inter_us: float = 0.0,
    same_channels: bool = True,
) -> float:
    """The latency NCCL's tuner gives one call, in us (src/graph/tuning.cc at v2.28.3-1,
    lines 353-385).

    link: what a hop inside a node crosses ("nvlink" when the algorithm's graph is NVLink, else
    "pci"); hops between nodes cost the "net" figures. Ring (lines 361-380): base + (nsteps -
    nInterSteps) x the in-node hop + nInterSteps x the network hop, nsteps = 2(n-1) for all_reduce,
    nInterSteps = 2(nNodes-1); across nodes the in-node hop is at least the network post overhead.
    Broadcast and reduce on a ring with the same channels everywhere pay one hop (lines 363-369).
    Tree, all_reduce only (lines 381-385): base + 2 x ((n/nNodes - 1) x in-node hop + floor(log2
    nNodes) x network hop): inside one node the tree is a chain with as many hops as the ring; only
    the part between nodes grows with log2. With one rank per node a hop between nodes costs the
    tree's network figure (line 356); latency_inter_us (the NIC's own latency) is added once per
    network hop, twice for Simple (lines 357-359)."""
    _check_ranks(n_ranks)
    _check_ranks(n_nodes, "number of nodes")
    if (
        algorithm not in NCCL_BASE_LATENCY_US
        or protocol not in PROTOCOLS
        or link not in ("nvlink", "pci")
    ):
        raise ValueError(
            f"need algorithm ring or tree, protocol {'/'.join(PROTOCOLS)} and link nvlink or pci; "
            f"got {algorithm!r}, {protocol!r}, {link!r}"
        )
    if op not in _STEPS or (algorithm == "tree" and op != "all_reduce"):
        raise ValueError(
            f"NCCL's tree runs all_reduce only; ring runs {', '.join(_STEPS)}; "
            f"got {algorithm} {op!r}"
        )
    if n_ranks % n_nodes:
        raise ValueError(f"{n_ranks} ranks do not split evenly over {n_nodes} nodes")
    p = PROTOCOLS.index(protocol)
    base = NCCL_BASE_LATENCY_US[algorithm][p]
    intra = NCCL_HOP_LATENCY_US[link][algorithm][p]
    per_node = n_ranks // n_nodes
    inter = NCCL_HOP_LATENCY_US["net"]["tree" if per_node == 1 else algorithm][p]
    inter += latency_inter_us * (2 if protocol == "Simple" else 1)
    if algorithm == "tree":
        return base + 2 * ((per_node - 1) * intra + (n_nodes.bit_length() - 1) * inter)
    nsteps = _STEPS[op](n_ranks)
    hop = intra if n_nodes == 1 else NCCL_HOP_LATENCY_US["net"]["ring"][p]
    if op in ("broadcast", "reduce"):
        if same_channels:
            return base + hop
        if protocol == "Simple":
            hop = NCCL_HOP_LATENCY_US[link if n_nodes == 1 else "net"]["tree"][p]
        return base + nsteps * hop
    if n_nodes > 1:
        overhead = _NET_OVERHEAD_US.get(cpu_vendor, 1.0) * (3 if protocol == "Simple" else 1)
        intra = max(intra, overhead)
    inter_steps = 0 if n_nodes == 1 else 2 * (n_nodes - 1) if op == "all_reduce" else n_nodes - 1
    return base + (nsteps - inter_steps) * intra + inter_steps * inter


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
# figures NCCL's developers give for tuned runs (expected figures, not runs), at most about 4 %
# below the estimate (46 of 48 GB/s per 400 Gb/s NIC, nccl-tests #290; 380-400 GB/s on eight 400
# Gb/s NICs, "above 380 only with extra tuning", nccl-tests #309; "around 48GB/s from each CX7 NIC",
# up to ~396 GB/s on eight, nccl-tests #319); 0.10 is about 2.5 times that spread (4.2 %), a margin
# chosen for run-to-run noise. An untuned run can sit further below (MTU, HCAs not named): it is
# shown beside its tuned figure, which is what is tested. Five recorded clusters are calibration
# sources of NIC_EFFICIENCY or inferred from their result (notebook 4 gives each one's provenance):
# they agree by construction, not as independent tests.
TOLERANCE_BELOW = 0.10


def tolerance_text() -> str:
    """The band, as notebook 4 prints it."""
    return (
        f"{1 - TOLERANCE_BELOW:.2f} x estimate <= busbw of a tuned run <= line-rate bound "
        "(NVLS runs: no line-rate bound)"
    )


def whatif(
    gpus_per_node: int,
    in_node_link_gbps: Optional[float],
    nics_per_node: int,
    nic_gbit: float,
    nodes: int,
    size_bytes: float,
    algorithm: str = "ring",
    gdr: bool = True,
    pxn: bool = True,
    rails_aligned: bool = True,
    spine_oversubscription: float = 1.0,
    nvls: bool = False,
    nvlink_domain_gpus: Optional[int] = None,
    in_node_busbw_gbps: Optional[float] = None,
    nvls_generation: str = "hopper",
    cpu_vendor: str = "intel",
) -> Dict[str, Any]:
    """busbw, bound and time of an all-reduce over nodes x gpus_per_node GPUs, and what bounds it.

    in_node_link_gbps: one GPU's NVLink line rate per direction (`links.link_table`), None for one
    GPU per node or a PCIe-only node (no in-node limit); in_node_busbw_gbps: a recorded in-node
    busbw used as the in-node estimate instead. The terms (GB/s):
      in-node    in_node_link_gbps x NVLINK_RING_EFFICIENCY (x NVLS_GAIN with NVLS on)
      NICs       `total_nic_gbps` x NIC_EFFICIENCY (NIC_EFFICIENCY_NO_GDR for a NIC behind the CPU),
                 / spine_oversubscription when rails are not aligned and PXN is off: a hop from
                 NIC i to another rail's NIC crosses the spine (PXN, on by default, first moves
                 the data over NVLink to the GPU beside the right rail's NIC; NCCL_PXN_DISABLE,
                 src/graph/paths.cc at v2.28.3-1)
    Ring: busbw = the smallest term. Tree on two nodes: each node's data crosses the network once
    per direction instead of 2(N-1)/N times, so the NIC term is x 2(N-1)/N (nccl-tests #196, NCCL's
    lead: on two nodes a tree can go beyond the network bottleneck if the intra-node bandwidth
    sustains it); on more nodes the ring's term. Either way x TREE_EFFICIENCY. Time: NCCL's own
    latency for the algorithm with the Simple protocol (`nccl_latency_us`: the ring pays 2(N-1)
    hops, 2(nodes-1) of them on the network; the tree 2(g-1) in-node hops plus 2 floor(log2 nodes)
    network hops) + 2(N-1)/N S / busbw. Simple is NCCL's protocol for large messages; for small
    ones LL's lower latency would win, so small-message times here are upper bounds. NCCL's
    per-call plateau correction of a ring across nodes (x 1.4 on sm80+, tuning.cc lines 593-596) is
    left out.
    Inside one NVLink domain (GB200 NVL72: nvlink_domain_gpus=72) no NIC is used and every hop is
    an NVLink hop.
    Returns {busbw_gbps, bound_gbps, terms, bound_by, latency_us, time_us, algbw_gbps, gpus, notes}.
    """
    g, nodes = _check_ranks(gpus_per_node), _check_ranks(nodes)
    line = total_nic_gbps(nics_per_node, nic_gbit)
    if (
        algorithm not in ("ring", "tree")
        or nvls_generation not in NVLS_EFFICIENCY
        or not size_bytes > 0
    ):
        raise ValueError(
            f"need algorithm 'ring' or 'tree', nvls_generation in {list(NVLS_EFFICIENCY)} "
            f"and a positive size; got {algorithm!r}, {nvls_generation!r}, {size_bytes!r}"
        )
    n, notes, bounds, terms = g * nodes, [], {}, {}
    one_domain = nodes == 1 or (nvlink_domain_gpus is not None and n <= nvlink_domain_gpus)
    if (in_node_link_gbps or in_node_busbw_gbps) and (g > 1 or (one_domain and n > 1)):
        gain = (
            NVLS_GAIN * NVLS_EFFICIENCY[nvls_generation] / NVLS_EFFICIENCY["hopper"]
            if nvls
            else 1.0
        )
        est = in_node_busbw_gbps or in_node_link_gbps * NVLINK_RING_EFFICIENCY
        # NVLS busbw is not a wire bandwidth and can exceed every link's line rate (480 GB/s on
        # H100s with a 450 GB/s line rate, nccl-tests #212): with NVLS the in-node term is no bound.
        bounds["in-node NVLink"] = math.inf if nvls else in_node_link_gbps or est
        terms["in-node NVLink"] = est * gain
        if nvls:
            notes.append(
                "NVLS on (opt-in): in-node busbw x 480/370 (nccl-tests #212)"
                + (
                    " x 0.74/0.85 (NCCL's nvlsEfficiency, Blackwell/Hopper)"
                    if nvls_generation == "blackwell"
                    else ""
                )
                + "; the course's default is NVLS off"
            )
    if not one_domain:
        scale = 1.0
        if not gdr:
            notes.append(
                "NIC behind the CPU / no GDR: 16 of 25 GB/s per 200 Gb/s NIC, one data point "
                "(nccl #412); other platforms lose less (0.80 on GH200, nccl #1579)"
            )
        if not rails_aligned and not pxn:
            scale /= spine_oversubscription
            notes.append(
                "rails not aligned, PXN off: ring hops cross the spine "
                f"({spine_oversubscription:g}:1)"
            )
        if algorithm == "tree" and nodes == 2:
            scale *= busbw_factor("all_reduce", n)
            notes.append("tree on two nodes: the network carries each byte once per direction")
        bounds["node's NICs"] = line * scale
        terms["node's NICs"] = line * scale * (NIC_EFFICIENCY if gdr else NIC_EFFICIENCY_NO_GDR)
    if not terms:
        return {
            "busbw_gbps": math.inf,
            "bound_gbps": math.inf,
            "terms": {},
            "bound_by": "nothing (one GPU)",
            "latency_us": 0.0,
            "time_us": 0.0,
            "algbw_gbps": math.inf,
            "gpus": n,
            "notes": notes,
        }
    bound_by = min(terms, key=terms.get)
    busbw = terms[bound_by] * (TREE_EFFICIENCY if algorithm == "tree" else 1.0)
    link = "nvlink" if (in_node_link_gbps or in_node_busbw_gbps) else "pci"
    latency = nccl_latency_us(
        algorithm, "Simple", n, 1 if one_domain else nodes, link=link, cpu_vendor=cpu_vendor
    )
    time_us = latency + busbw_factor("all_reduce", n) * size_bytes / (
        busbw * _BYTES_PER_US_PER_GBPS
    )
    return {
        "busbw_gbps": busbw,
        "bound_gbps": min(bounds.values()),
        "terms": terms,
        "bound_by": bound_by,
        "latency_us": latency,
        "time_us": time_us,
        "algbw_gbps": size_bytes / (time_us * _BYTES_PER_US_PER_GBPS),
        "gpus": n,
        "notes": notes,
    }


# The ring all-reduce step by step (notebook 4 runs it on numbers; images/draw_diagrams.py draws it)
def ring_schedule(n: int) -> List[Tuple[int, str, List[Tuple[int, int, int]]]]:
    """The ring all-reduce's 2(n-1) steps: (step, phase, [(sender, receiver, chunk), ...]).
    The buffer is cut into n chunks; in reduce-scatter step s (1 ... n-1) GPU i sends chunk
    (i - s + 1) mod n to GPU i+1, which adds it to its copy, so after n-1 steps GPU i holds the sum
    of chunk (i + 1) mod n; all-gather passes the finished chunks on for n-1 more steps. Each step
    every GPU sends S/n bytes."""
    return [
        (s, "reduce-scatter", [(i, (i + 1) % n, (i - s + 1) % n) for i in range(n)])
        for s in range(1, n)
    ] + [
        (n - 1 + s, "all-gather", [(i, (i + 1) % n, (i - s + 2) % n) for i in range(n)])
        for s in range(1, n)
    ]

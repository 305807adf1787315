"""The P2P ladder of `make check`: four rungs a learner climbs on any machine, one Finding each.

    1 peer capability    `nvidia-smi topo -p2p r` and `w` for the chosen pair (Machine.best_pair,
                         inside CUDA_VISIBLE_DEVICES), and CUDA's own answer when rung 2 runs
    2 checked copy       the bundled P2P test on the pair, 64 MiB copies, its data check
    3 checked all-reduce the bundled nccl_bench on the pair, 8 B to 128 MiB, its #wrong column
    4 bandwidth          gputopo.verdicts on rung 2's one-way copy and rung 3's busbw

Rung 1 costs nothing; rungs 2-4 build (if missing) and run the CUDA programs, only when asked:
`make check LADDER=1` (`python -m coursetools.check --ladder`). A rung above a failed one says
"not reached"; no GPU, one GPU or no nvcc is said per rung, never a FAIL. FAIL only when a data
check or NCCL's #wrong column finds wrong results. Tests pass the runners recorded outputs.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from coursetools import ncclbench, p2ptest
from coursetools.findings import FAIL, NONE_NEEDED, PASS, WARN, Finding, peer_status
from gputopo import linkcodes, links, verdicts

OPT_IN = "make check LADDER=1 (python -m coursetools.check --ladder)"
P2P_ELEMENTS = 16 << 20  # 4-byte elements: 64 MiB per copy, above verdicts.PLATEAU_BYTES
NCCL_MAX_BYTES = 128 << 20
RUNG_NAMES = {1: "peer capability", 2: "checked copy", 3: "checked all-reduce", 4: "bandwidth"}


def _item(n: int) -> str:
    return f"P2P ladder {n}/4 ({RUNG_NAMES[n]})"


def default_p2p_runner(pair):
    return p2ptest.run(
        devices=list(pair),
        extra=[f"--numElems={P2P_ELEMENTS}", "--iters=2", "--reps=3", "--lat_iters=20"],
        timeout=180,
        reference=False,
        record=False,
    )


def default_nccl_runner(pair):
    return ncclbench.run(
        "all_reduce",
        gpus=list(pair),
        min_bytes=8,
        max_bytes=NCCL_MAX_BYTES,
        factor=4,
        iters=5,
        warmup=2,
        timeout=180,
        reference=False,
        record=False,
    )


def machine_link(machine, pair) -> verdicts.Link:
    """The pair's link as verdicts.Link: NVLink generation and active links, or the PCIe generation
    and width the slower GPU reported."""
    code = machine.link_between(*pair) or ""
    gpus = [g for g in machine.gpus if g.index in pair]
    name = gpus[0].name if gpus else (machine.gpu_names or [None])[0]
    spec, bonded = links.spec_for(name), linkcodes.nvlink_count(code)
    if bonded:
        active = [(machine.nvlink_active_links or {}).get(f"GPU{i}") for i in pair]
        count = min([a for a in active if isinstance(a, int)] + [bonded])
        return verdicts.Link(
            "nvlink", spec.nvlink if spec and spec.nvlink else name, count=count, gpu=name
        )

    def slowest(values):
        return min(values) if values and all(values) else None

    # An idle GPU drops its link to gen1 and trains up under load: verdicts judges against the
    # maximum and names a trained-down link only as a reason when the number is low.
    gen = slowest([g.pcie_gen_current or g.pcie_gen_max for g in gpus]) or (spec and spec.pcie)
    top = slowest([g.pcie_gen_max for g in gpus])
    return verdicts.Link(
        "pcie",
        f"gen{gen}" if isinstance(gen, int) else gen,
        width=slowest([g.pcie_width_current or g.pcie_width_max for g in gpus]),
        gen_max=f"gen{top}" if top else None,
        width_max=slowest([g.pcie_width_max for g in gpus]),
        gpu=name,
    )


def _rest(first: int, why: str, status: str = WARN, fix: str = "climb the rung below first"):
    """The rungs from `first` on, one line each."""
    return [Finding(status, _item(n), why, fix) for n in range(first, 5)]


def climb(
    machine,
    run_gpu: bool = False,
    p2p_runner: Optional[Callable] = None,
    nccl_runner: Optional[Callable] = None,
) -> List[Finding]:
    """The four rungs as Findings, in order (see the module docstring)."""
    if machine.mode == "reference" or not machine.gpu_count:
        return _rest(1, "not applicable: no GPU here (reference mode)", PASS, NONE_NEEDED)
    if machine.mode != "multi-gpu":
        return _rest(1, "not applicable: one GPU visible, P2P needs a pair", PASS, NONE_NEEDED)
    pair = machine.best_pair
    if pair is None:
        return _rest(
            1,
            "not applicable: no GPU pair chosen (topology unreadable)",
            WARN,
            "see the topology line",
        )
    name, code = f"GPU{pair[0]},GPU{pair[1]}", machine.link_between(*pair) or "?"
    cell = peer_status(machine.p2p_matrix, *pair)
    if cell is None:
        rung1 = Finding(
            WARN,
            _item(1),
            f"{name} ({code}): `nvidia-smi topo -p2p r`/`w` gave no answer",
            "update the driver; rung 2 shows CUDA's own answer (make check LADDER=1)",
        )
    elif cell.upper() != "OK":
        fix = (
            "none on this hardware: these GPUs do not do P2P, NCCL uses SHM"
            if cell.upper() == "GNS"
            else "run on bare metal or a VM with GPU peer-to-peer "
            "enabled (IOMMU passthrough, PCIe ACS off)"
        )
        return [
            Finding(
                WARN, _item(1), f"{name} ({code}): no peer access, topo -p2p r/w says {cell}", fix
            )
        ] + _rest(2, "not reached (rung 1: no peer access)")
    else:
        rung1 = Finding(PASS, _item(1), f"{name} ({code}): topo -p2p read and write OK both ways")
    if not run_gpu:
        return [rung1] + _rest(
            2,
            f"skipped: opt in with {OPT_IN}; it builds and runs the CUDA "
            "programs on the pair, building them first if missing",
            PASS,
            NONE_NEEDED,
        )
    if not machine.nvcc_path:
        return [rung1] + _rest(
            2,
            "not run: no nvcc to build the P2P test and nccl_bench",
            WARN,
            "put nvcc on PATH, e.g. export PATH=/usr/local/cuda/bin:$PATH",
        )
    try:  # rung 2, which also gives CUDA's own peer answer for rung 1
        p2p = (p2p_runner or default_p2p_runner)(pair)
    except Exception as error:  # P2PTestError or anything the run raised: one line
        lines = str(error).splitlines()
        said = [line for line in lines if "error:" in line]  # the program's own line
        text = (said or lines or [type(error).__name__])[-1 if said else 0]
        wrong = "mismatch" in str(error).lower() or "wrong" in str(error).lower()
        return [
            rung1,
            Finding(
                FAIL if wrong else WARN,
                _item(2),
                f"{name}: the P2P test failed: {text}",
                "run source_code/p2pBandwidthLatencyTest/"
                "p2pBandwidthLatencyTest by hand; a data mismatch means a broken "
                "link or driver: reseat, update the driver",
            ),
        ] + _rest(3, "not reached (rung 2 failed)")
    peers = (p2p.get("parsed") or {}).get("peer_access") or []
    denied = [p for p in peers if not p.get("can_access")]
    if denied:
        return [
            Finding(
                WARN,
                _item(1),
                f"{name}: topo -p2p says OK but CUDA says Device="
                f"{denied[0]['from']} CANNOT Access Peer Device={denied[0]['to']}",
                "a VM or container hides peer access: check the IOMMU and ACS lines",
            )
        ] + _rest(2, "not reached (rung 1: CUDA gives no peer access)")
    rung1 = rung1._replace(finding=rung1.finding + "; CUDA: peer access both ways")
    verification = (p2p.get("json") or {}).get("verification") or {}
    text = p2p.get("text") or ""
    if p2p.get("mode") == "reference" or not (
        verification.get("ok") is True or ("Data check:" in text and "PASSED" in text)
    ):
        why = (
            "ran the recorded reference instead"
            if p2p.get("mode") == "reference"
            else "no data check in its output"
        )
        return [
            rung1,
            Finding(WARN, _item(2), f"{name}: {why}", "run the P2P test by hand"),
        ] + _rest(3, "not reached (rung 2 not checked)")
    copies = verification.get("copies_checked")
    found = [
        rung1,
        Finding(
            PASS,
            _item(2),
            f"{name}: P2P copies checked, 0 elements wrong"
            + (f" ({copies} copies)" if copies else ""),
        ),
    ]
    try:  # rung 3
        nccl = (nccl_runner or default_nccl_runner)(pair)
    except Exception as error:
        said = str(error).splitlines()[0] if str(error) else type(error).__name__
        return (
            found
            + [
                Finding(
                    FAIL if "wrong" in said.lower() else WARN,
                    _item(3),
                    f"{name}: nccl_bench all_reduce failed: {said}",
                    "rerun with NCCL_DEBUG=INFO and read the last WARN lines",
                )
            ]
            + _rest(4, "not reached (rung 3 failed)")
        )
    rows = (nccl.get("parsed") or {}).get("rows") or []
    if nccl.get("mode") == "reference" or not rows:
        return (
            found
            + [
                Finding(
                    WARN, _item(3), f"{name}: no live all-reduce table", "run nccl_bench by hand"
                )
            ]
            + _rest(4, "not reached (rung 3 not checked)")
        )
    wrong = sum(
        int(g["wrong"])
        for r in rows
        for g in (r["out_of_place"], r.get("in_place"))
        if g and isinstance(g.get("wrong"), int)
    )
    if wrong:
        return (
            found
            + [
                Finding(
                    FAIL,
                    _item(3),
                    f"{name}: all-reduce gave {wrong} wrong elements",
                    "a broken link or driver: rerun with NCCL_DEBUG=INFO; update the driver",
                )
            ]
            + _rest(4, "not reached (rung 3 failed)")
        )
    found.append(
        Finding(PASS, _item(3), f"{name}: all-reduce of {len(rows)} sizes checked, 0 wrong")
    )
    link = machine_link(machine, pair)  # rung 4: the numbers against the expected range
    return found + [
        rung4(
            name,
            [
                verdicts.judge_p2p_output(text, link, 0, 1),
                verdicts.judge_nccl_output(nccl.get("text") or "", link),
            ],
        )
    ]


def rung4(name: str, judged: List[verdicts.Verdict]) -> Finding:
    words, status, fix = [], PASS, NONE_NEEDED
    for v in judged:
        value = "?" if v.value is None else f"{v.value:.1f} GB/s"
        expected = f" (expected {v.expected[0]:.0f}-{v.expected[1]:.0f})" if v.expected else ""
        words.append(
            f"{v.kind} {value}{expected}: {v.status}"
            + ("" if v.status == verdicts.AS_EXPECTED else f", {v.why}")
        )
        if v.status == verdicts.LOW and status == PASS:
            status, fix = WARN, "likely {}: {}".format(*v.reasons[0])
        elif v.status == verdicts.INCOMPLETE and status == PASS:
            status, fix = WARN, "rerun: the output was cut off"
    return Finding(status, _item(4), f"{name}: " + "; ".join(words), fix)

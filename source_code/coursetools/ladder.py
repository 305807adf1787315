"""The P2P ladder of `make check`: four rungs a learner climbs on any machine.

    rung 1  peer capability: `nvidia-smi topo -p2p r` and `w` for the chosen pair, and CUDA's
            own answer (cudaDeviceCanAccessPeer, as the P2P test prints it) when rung 2 runs
    rung 2  a copy whose data is checked: the bundled P2P test on the pair (`--devices`), 64 MiB
            copies, its data check
    rung 3  an NCCL all-reduce whose result is checked: the bundled nccl_bench on the pair,
            8 B to 128 MiB, its #wrong column
    rung 4  bandwidth against the expected range: gputopo.verdicts on rung 2's one-way copy and
            rung 3's busbw at 128 MiB

Rung 1 reads what `make check` already knows and costs nothing. Rungs 2-4 build and run the
CUDA programs (building them first when they are missing), so they run only when asked:
`make check LADDER=1` or `python -m coursetools.check --ladder`. Each rung is one Finding (PASS,
WARN or FAIL, with its fix); a rung above a failed one says "not reached". The pair is
`Machine.best_pair`, which honours CUDA_VISIBLE_DEVICES. Without GPUs, with one GPU or
without nvcc each rung says so in one line and nothing fails. FAIL only when a program's data
check or NCCL's #wrong column finds wrong results: the live notebooks would stop there.

The runners are arguments, so tests feed recorded outputs without a GPU. Standard library only.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from coursetools import ncclbench, p2ptest
from coursetools.findings import FAIL, NONE_NEEDED, PASS, WARN, Finding, peer_status
from gputopo import linkcodes, links, verdicts

OPT_IN = "make check LADDER=1 (python -m coursetools.check --ladder)"
P2P_ELEMENTS = 16 << 20  # 4-byte elements: 64 MiB per copy, above the plateau of verdicts.PLATEAU_BYTES
NCCL_MAX_BYTES = 128 << 20  # where verdicts judges all-reduce busbw
RUNG_NAMES = {1: "peer capability", 2: "checked copy", 3: "checked all-reduce", 4: "bandwidth"}


def _item(n: int) -> str:
    return f"P2P ladder {n}/4 ({RUNG_NAMES[n]})"


def default_p2p_runner(pair):
    return p2ptest.run(devices=list(pair), extra=[f"--numElems={P2P_ELEMENTS}", "--iters=2", "--reps=3",
                                                  "--lat_iters=20"],
                       timeout=180, reference=False, record=False)


def default_nccl_runner(pair):
    return ncclbench.run("all_reduce", gpus=list(pair), min_bytes=8, max_bytes=NCCL_MAX_BYTES, factor=4,
                         iters=5, warmup=2, timeout=180, reference=False, record=False)


def machine_link(machine, pair) -> verdicts.Link:
    """The link between the pair as verdicts.Link: NVLink generation and active links, or the PCIe
    generation and width the link reported (the slower GPU counts)."""
    code = machine.link_between(*pair) or ""
    gpus = [g for g in (machine.gpus or []) if g.index in pair]
    name = gpus[0].name if gpus else ((machine.gpu_names or [None])[0])
    if linkcodes.nvlink_count(code):
        spec = links.spec_for(name)
        active = [(machine.nvlink_active_links or {}).get(f"GPU{i}") for i in pair]
        count = min([a for a in active if isinstance(a, int)] or [linkcodes.nvlink_count(code)])
        count = min(count, linkcodes.nvlink_count(code))
        return verdicts.Link("nvlink", spec.nvlink if spec and spec.nvlink else name, count=count, gpu=name)
    gens = [g.pcie_gen_current or g.pcie_gen_max for g in gpus]
    tops = [g.pcie_gen_max for g in gpus]
    widths = [g.pcie_width_current or g.pcie_width_max for g in gpus]
    wmax = [g.pcie_width_max for g in gpus]
    gen = min(gens) if gens and all(gens) else None
    top = min(tops) if tops and all(tops) else None
    # An idle GPU drops its link to gen1 to save power and trains up under load, so a generation
    # below the maximum read before the run is not yet a fault: verdicts judges against the
    # maximum and names the trained-down link only as a reason when the number is low.
    if gen is None:
        spec = links.spec_for(name)
        gen = spec.pcie if spec else None
    return verdicts.Link("pcie", f"gen{gen}" if isinstance(gen, int) else gen,
                         width=min(widths) if widths and all(widths) else None,
                         gen_max=f"gen{top}" if top else None,
                         width_max=min(wmax) if wmax and all(wmax) else None, gpu=name)


def _not_reached(first: int, why: str) -> List[Finding]:
    return [Finding(WARN, _item(n), f"not reached ({why})", "climb the rung below first")
            for n in range(first, 5)]


def _skipped(first: int, why: str, status: str = PASS, fix: str = NONE_NEEDED) -> List[Finding]:
    return [Finding(status, _item(n), why, fix) for n in range(first, 5)]


def climb(machine, run_gpu: bool = False, p2p_runner: Optional[Callable] = None,
          nccl_runner: Optional[Callable] = None) -> List[Finding]:
    """The four rungs as Findings, in order (see the module docstring)."""
    mode = machine.mode
    if mode == "reference" or not machine.gpu_count:
        return _skipped(1, "not applicable: no GPU here (reference mode)")
    if mode != "multi-gpu":
        return _skipped(1, "not applicable: one GPU visible, P2P needs a pair")
    pair = machine.best_pair
    if pair is None:
        return _skipped(1, "not applicable: no GPU pair chosen (topology unreadable)", WARN,
                        "see the topology line")
    name = f"GPU{pair[0]},GPU{pair[1]}"
    code = machine.link_between(*pair) or "?"
    cell = peer_status(machine.p2p_matrix, *pair)
    findings = []
    if cell is None:
        rung1 = Finding(WARN, _item(1), f"{name} ({code}): `nvidia-smi topo -p2p r`/`w` gave no answer",
                        "update the driver; rung 2 shows CUDA's own answer (make check LADDER=1)")
    elif cell.upper() != "OK":
        fix = ("none on this hardware: these GPUs do not do P2P, NCCL uses SHM" if cell.upper() == "GNS" else
               "run on bare metal or a VM with GPU peer-to-peer enabled (IOMMU passthrough, PCIe ACS off)")
        findings.append(Finding(WARN, _item(1), f"{name} ({code}): no peer access, topo -p2p r/w says {cell}",
                                fix))
        return findings + _not_reached(2, "rung 1: no peer access")
    else:
        rung1 = Finding(PASS, _item(1), f"{name} ({code}): topo -p2p read and write OK both ways", NONE_NEEDED)
    if not run_gpu:
        return [rung1] + _skipped(2, f"skipped: opt in with {OPT_IN}; it builds and runs the CUDA programs "
                                     "on the pair, building them first if missing")
    if not machine.nvcc_path:
        return [rung1] + _skipped(2, "not run: no nvcc to build the P2P test and nccl_bench", WARN,
                                  "put nvcc on PATH, e.g. export PATH=/usr/local/cuda/bin:$PATH")
    # Rung 2: the checked copy; it also gives CUDA's own peer answer for rung 1.
    try:
        p2p = (p2p_runner or default_p2p_runner)(pair)
    except Exception as error:  # P2PTestError or anything the run raised: one line
        lines = str(error).splitlines()
        said = [line for line in lines if "error:" in line]  # the program's own line, e.g. its data mismatch
        text = (said[-1] if said else lines[0]) if lines else type(error).__name__
        wrong = "mismatch" in str(error).lower() or "wrong" in str(error).lower()
        return [rung1, Finding(FAIL if wrong else WARN, _item(2), f"{name}: the P2P test failed: {text}",
                               "run source_code/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest by hand; "
                               "a data mismatch means a broken link or driver: reseat, update the driver")] + \
            _not_reached(3, "rung 2 failed")
    parsed = p2p.get("parsed") or {}
    denied = [p for p in parsed.get("peer_access") or [] if not p.get("can_access")]
    if denied:
        findings.append(Finding(WARN, _item(1), f"{name}: topo -p2p says OK but CUDA says Device={denied[0]['from']} "
                                f"CANNOT Access Peer Device={denied[0]['to']}",
                                "a VM or container hides peer access: check the IOMMU and ACS lines"))
        return findings + _not_reached(2, "rung 1: CUDA gives no peer access")
    rung1 = rung1._replace(finding=rung1.finding + "; CUDA: peer access both ways")
    verification = (p2p.get("json") or {}).get("verification") or {}
    text = p2p.get("text") or ""
    checked = verification.get("ok") is True or ("Data check:" in text and "PASSED" in text)
    if p2p.get("mode") == "reference" or not checked:
        why = "ran the recorded reference instead" if p2p.get("mode") == "reference" else "no data check in its output"
        return [rung1, Finding(WARN, _item(2), f"{name}: {why}", "run the P2P test by hand")] + \
            _not_reached(3, "rung 2 not checked")
    copies = verification.get("copies_checked")
    findings = [rung1, Finding(PASS, _item(2), f"{name}: P2P copies checked, 0 elements wrong"
                               + (f" ({copies} copies)" if copies else ""), NONE_NEEDED)]
    # Rung 3: the checked all-reduce.
    try:
        nccl = (nccl_runner or default_nccl_runner)(pair)
    except Exception as error:
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        wrong = "wrong" in text.lower()
        return findings + [Finding(FAIL if wrong else WARN, _item(3), f"{name}: nccl_bench all_reduce failed: {text}",
                                   "rerun with NCCL_DEBUG=INFO and read the last WARN lines")] + \
            _not_reached(4, "rung 3 failed")
    rows = (nccl.get("parsed") or {}).get("rows") or []
    if nccl.get("mode") == "reference" or not rows:
        return findings + [Finding(WARN, _item(3), f"{name}: no live all-reduce table", "run nccl_bench by hand")] + \
            _not_reached(4, "rung 3 not checked")
    wrong = sum(int(g["wrong"]) for r in rows for g in (r["out_of_place"], r.get("in_place"))
                if g and isinstance(g.get("wrong"), int))
    if wrong:
        return findings + [Finding(FAIL, _item(3), f"{name}: all-reduce gave {wrong} wrong elements",
                                   "a broken link or driver: rerun with NCCL_DEBUG=INFO; update the driver")] + \
            _not_reached(4, "rung 3 failed")
    findings.append(Finding(PASS, _item(3), f"{name}: all-reduce of {len(rows)} sizes checked, 0 wrong",
                            NONE_NEEDED))
    # Rung 4: the numbers against the expected range.
    link = machine_link(machine, pair)
    judged = [verdicts.judge_p2p_output(text, link, 0, 1), verdicts.judge_nccl_output(nccl.get("text") or "", link)]
    findings.append(rung4(name, judged))
    return findings


def rung4(name: str, judged: List[verdicts.Verdict]) -> Finding:
    words = []
    status, fix = PASS, NONE_NEEDED
    for v in judged:
        value = "?" if v.value is None else f"{v.value:.1f} GB/s"
        rng = f" (expected {v.expected[0]:.0f}-{v.expected[1]:.0f})" if v.expected else ""
        words.append(f"{v.kind} {value}{rng}: {v.status}" + ("" if v.status == verdicts.AS_EXPECTED else f", {v.why}"))
        if v.status == verdicts.LOW and status == PASS:
            status = WARN
            reason, check = v.reasons[0]
            fix = f"likely {reason}: {check}"
        elif v.status == verdicts.INCOMPLETE and status == PASS:
            status, fix = WARN, "rerun: the output was cut off"
    return Finding(status, _item(4), f"{name}: " + "; ".join(words), fix)

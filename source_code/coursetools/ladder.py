"""The P2P ladder of `make check`: four rungs a learner climbs on any machine, one Finding each.

    1 peer capability    `nvidia-smi topo -p2p r` and `w` for the chosen pair (Machine.best_pair,
                         inside CUDA_VISIBLE_DEVICES), and CUDA's own answer when rung 2 runs
    2 checked copy       the bundled P2P test on the pair, 64 MiB copies, its data check
    3 checked all-reduce the bundled nccl_bench on the pair, 8 B to 128 MiB, its #wrong column
    4 bandwidth          gputopo.verdicts on rung 2's one-way copy and rung 3's busbw

Rung 1 costs nothing; rungs 2-4 run the CUDA programs, only when asked: `make check LADDER=1`
(`python -m coursetools.check --ladder`). Each runs as a learner would type it (P2P_ARGS,
NCCL_ARGS) with CUDA_VISIBLE_DEVICES naming the pair, after `make -C` its folder if the program
is missing; gputopo's parsers read the output. A rung above a failed one says "not reached";
no GPU, one GPU or no nvcc is said per rung, never a FAIL. FAIL only when the P2P test's data
check or nccl_bench's #wrong column finds wrong results. Tests pass the runners
(f(command, env) -> CompletedProcess) recorded outputs.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Callable, List, Optional

from coursetools import gpus, proctree
from coursetools.findings import FAIL, NONE_NEEDED, PASS, WARN, Finding, peer_status
from gputopo import linkcodes, links, verdicts
from gputopo.parsers import nccl_tests, p2p

OPT_IN = "make check LADDER=1 (python -m coursetools.check --ladder)"
SOURCE = Path(__file__).resolve().parent.parent
P2P_TEST = SOURCE / "p2pBandwidthLatencyTest" / "p2pBandwidthLatencyTest"
NCCL_BENCH = SOURCE / "nccl_bench" / "nccl_bench"
# 64 MiB per copy (4-byte elements), above verdicts.PLATEAU_BYTES; nccl-tests' flags, up to
# 1 GiB: all-reduce busbw is judged only from 1 GiB on (verdicts.PLATEAU_BYTES), and a pair's
# 1 GiB all-reduce takes well under a second even over PCIe.
P2P_ARGS = ["--numElems=16777216", "--iters=2", "--reps=3", "--lat_iters=20"]
NCCL_ARGS = ["all_reduce", "-b", "8", "-e", "1G", "-f", "2", "-n", "5", "-w", "2", "-g", "2"]
RUN_TIMEOUT_S = 180
# "Data check: 5280 copies (515.40 GB) compared with their pattern, 0 elements wrong: PASSED"
DATA_CHECK = re.compile(r"Data check: (\d+) copies .*?, (\d+) elements wrong: (PASSED|FAILED)")
RUNG_NAMES = {1: "peer capability", 2: "checked copy", 3: "checked all-reduce", 4: "bandwidth"}


def build(program: Path, timeout: float = 900) -> Path:
    """`make -C` the program's folder (its Makefile picks the architectures nvcc lists and takes
    turns with other builds of the folder); the program, or RuntimeError: make's last line, then
    its last 15."""
    done = proctree.run(
        ["make", "-C", str(program.parent)], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0 or not program.exists():
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:] or ["no output"]
        raise RuntimeError(
            f"building {program.name} failed (make exit {done.returncode}): {tail[-1]}\n"
            + "\n".join(tail)
        )
    return program


def run_program(command: List[str], env: dict) -> subprocess.CompletedProcess:
    """Build command[0] if it is missing, then run the command (RUN_TIMEOUT_S at most)."""
    if not Path(command[0]).exists():
        build(Path(command[0]))
    return proctree.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)


def _item(n: int) -> str:
    return f"P2P ladder {n}/4 ({RUNG_NAMES[n]})"


def _said(done) -> str:
    """The program's own `...: error: ...` line, else its last line of stderr or stdout."""
    lines = (done.stderr or "").strip().splitlines() or (done.stdout or "").strip().splitlines()
    said = [line for line in lines if "error:" in line]
    return (said or lines or [f"exit status {done.returncode}"])[-1].strip()


def machine_link(machine, pair) -> verdicts.Link:
    """The pair's link as verdicts.Link: NVLink generation and active links, or the PCIe generation
    and width the slower GPU reported."""
    code = machine.link_between(*pair) or ""
    found = [g for g in machine.gpus if g.index in pair]
    name = found[0].name if found else (machine.gpu_names or [None])[0]
    spec, bonded = links.spec_for(name), linkcodes.nvlink_count(code)
    if bonded:
        active = [(machine.nvlink or {}).get(f"GPU{i}", {}).get("active") for i in pair]
        count = min([a for a in active if isinstance(a, int)] + [bonded])
        return verdicts.Link(
            "nvlink", spec.nvlink if spec and spec.nvlink else name, count=count, gpu=name
        )

    def slowest(values):
        return min(values) if values and all(values) else None

    # An idle GPU drops its link to gen1 and trains up under load: verdicts judges against the
    # maximum and names a trained-down link only as a reason when the number is low.
    gen = slowest([g.pcie_gen_current or g.pcie_gen_max for g in found]) or (spec and spec.pcie)
    top = slowest([g.pcie_gen_max for g in found])
    return verdicts.Link(
        "pcie",
        f"gen{gen}" if isinstance(gen, int) else gen,
        width=slowest([g.pcie_width_current or g.pcie_width_max for g in found]),
        gen_max=f"gen{top}" if top else None,
        width_max=slowest([g.pcie_width_max for g in found]),
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
        why = "not applicable: no GPU pair chosen (topology unreadable)"
        return _rest(1, why, WARN, "see the topology line")
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
        said = f"{name} ({code}): no peer access, topo -p2p r/w says {cell}"
        return [Finding(WARN, _item(1), said, fix)] + _rest(
            2, "not reached (rung 1: no peer access)"
        )
    else:
        rung1 = Finding(PASS, _item(1), f"{name} ({code}): topo -p2p read and write OK both ways")
    if not run_gpu:
        why = (
            f"skipped: opt in with {OPT_IN}; it builds and runs the CUDA "
            "programs on the pair, building them first if missing"
        )
        return [rung1] + _rest(2, why, PASS, NONE_NEEDED)
    if not machine.nvcc_path:
        why = "not run: no nvcc to build the P2P test and nccl_bench"
        fix = "put nvcc on PATH, e.g. export PATH=/usr/local/cuda/bin:$PATH"
        return [rung1] + _rest(2, why, WARN, fix)
    try:  # the pair, named as the job names it, becomes CUDA devices 0 and 1 of each program
        visible = gpus.child_visible_devices(list(pair), *gpus.from_machine(machine))
    except gpus.GpuSelectionError as error:
        return [rung1] + _rest(2, f"not run: {error}", WARN, "see the GPUs line")
    env = gpus.child_environment(visible=visible)
    # The course's default everywhere (an exported value passes through). For a pair it changes
    # nothing: NCCL v2.28.3-1 src/transport/nvls.cc skips NVLS when gpuCount <= 2.
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    # Rung 1 passed: rungs 2-4 run, and rung 1 becomes a WARN when CUDA contradicts it.

    def stop(found, n, status, said, fix, why="failed"):
        finding = Finding(status, _item(n), f"{name}: {said}", fix)
        return found + [finding] + _rest(n + 1, f"not reached (rung {n} {why})")

    def first_line(error):
        return (str(error).splitlines() or [type(error).__name__])[0]

    p2p_fix = (
        "run source_code/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest by hand; a data "
        "mismatch means a broken link or driver: reseat, update the driver"
    )
    try:  # rung 2, which also gives CUDA's own peer answer for rung 1
        done = (p2p_runner or run_program)([str(P2P_TEST)] + P2P_ARGS, env)
        text, check = done.stdout or "", DATA_CHECK.search(done.stdout or "")
        wrong = (check and check[3] == "FAILED") or "mismatch" in (done.stderr or "")
        parsed = p2p.parse(text) if done.returncode == 0 and not wrong else None
    except Exception as error:  # no build, a timeout, an output cut off: one line
        return stop([rung1], 2, WARN, f"the P2P test failed: {first_line(error)}", p2p_fix)
    if parsed is None:
        said = f"the P2P test failed: {_said(done)}"
        return stop([rung1], 2, FAIL if wrong else WARN, said, p2p_fix)
    denied = [p for p in parsed["peer_access"] if not p.get("can_access")]
    if denied:
        said = (
            f"topo -p2p says OK but CUDA says Device={denied[0]['from']} "
            f"CANNOT Access Peer Device={denied[0]['to']}"
        )
        fix = "a VM or container hides peer access: check the IOMMU and ACS lines"
        why = "not reached (rung 1: CUDA gives no peer access)"
        return [Finding(WARN, _item(1), f"{name}: {said}", fix)] + _rest(2, why)
    found = [rung1._replace(finding=rung1.finding + "; CUDA: peer access both ways")]
    if not check:
        fix = "run the P2P test by hand"
        return stop(found, 2, WARN, "no data check in its output", fix, "not checked")
    said = f"{name}: P2P copies checked, 0 elements wrong ({check[1]} copies)"
    found.append(Finding(PASS, _item(2), said))
    nccl_fix = "rerun with NCCL_DEBUG=INFO and read the last WARN lines"
    try:  # rung 3
        done = (nccl_runner or run_program)([str(NCCL_BENCH)] + NCCL_ARGS, env)
    except Exception as error:
        said = f"nccl_bench all_reduce failed: {first_line(error)}"
        return stop(found, 3, WARN, said, nccl_fix)
    table = done.stdout or ""
    try:
        rows, unread = nccl_tests.parse(table, strict=False)["rows"], None
    except ValueError as error:  # gputopo.parsers.ParseError: cut off, or no table at all
        rows, unread = [], f"its table could not be read: {first_line(error)}"
    wrong = sum(
        group["wrong"]
        for row in rows
        for group in (row["out_of_place"], row.get("in_place"))
        if group and isinstance(group.get("wrong"), int)
    )
    if wrong:
        fix = "a broken link or driver: rerun with NCCL_DEBUG=INFO; update the driver"
        return stop(found, 3, FAIL, f"all-reduce gave {wrong} wrong elements", fix)
    if done.returncode != 0 or not rows:
        said = _said(done) if done.returncode != 0 else unread or "no all-reduce table"
        status = FAIL if "wrong" in said.lower() else WARN
        return stop(found, 3, status, f"nccl_bench all_reduce failed: {said}", nccl_fix)
    said = f"{name}: all-reduce of {len(rows)} sizes checked, 0 wrong"
    found.append(Finding(PASS, _item(3), said))
    link = machine_link(machine, pair)  # rung 4: the numbers against the expected range
    judged = [verdicts.judge_p2p_output(text, link, 0, 1), verdicts.judge_nccl_output(table, link)]
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
    return found + [Finding(status, _item(4), f"{name}: " + "; ".join(words), fix)]

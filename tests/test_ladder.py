"""The P2P ladder of make check (coursetools.ladder) on the stand-in machines and on the programs'
outputs recorded on h200-nvswitch-pair (its P2P test and nccl_bench all-reduce), fed to the ladder
through its runners (f(command, env) -> CompletedProcess) as the programs would print them."""

import re
import shutil
import subprocess

import pytest

from coursetools import check, ladder
from coursetools.detect import detect
from coursetools.machine import Machine
from gpus import visible_gpu_count
from test_check_machines import CASES, HOST, IDS, TENSORFLOW_IN_USE, detect_standin
from test_machines import install_machine

REF = check._ROOT / "source_code" / "reference_systems" / "h200-nvswitch-pair"
# The programs' --inject-fault runs on the H200 pair (stdout and stderr together, 2>&1)
FAULTS = check._ROOT / "evidence" / "2026-11-23-h200-nvswitch-pair" / "verification"
GiB = 2**30


def recorded(name):
    return (REF / name).read_text()


def printed(stdout, returncode=0, stderr="", seen=None):
    """A runner that answers as a program that printed this and exited so."""

    def runner(command, env):
        if seen is not None:
            seen.append((command, env))
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)

    return runner


def fault_run(name):
    """(stdout, stderr) of a recorded --inject-fault run: the program's own lines (its name first)
    were its stderr; the recorder's "# date:", "# command:" and "# ... exit status" lines go."""
    recorder = ("# date:", "# command:", "# expected exit status:", "# exit status:")
    lines = (FAULTS / name).read_text().splitlines(keepends=True)
    said = [line for line in lines if line.startswith(("nccl_bench:", "p2pBandwidthLatencyTest:"))]
    printed = [line for line in lines if line not in said and not line.startswith(recorder)]
    return "".join(printed), "".join(said)


@pytest.fixture
def machine_of(fake_nvidia_smi, monkeypatch):
    def make(name=None, visible=None, system=None):
        if system:  # its recorded topo -p2p rw matrix answers both r and w
            rw = recorded("nvidia-smi-topo-p2p-rw.txt")
            fake_nvidia_smi(system=system, outputs={"topo -p2p r": rw, "topo -p2p w": rw})
        else:
            install_machine(fake_nvidia_smi, name)
        return detect_standin(monkeypatch, visible)

    return make


def rungs(findings):
    return [f for f in findings if f.item.startswith("P2P ladder")]


@pytest.mark.parametrize("name,visible", CASES, ids=IDS)
def test_every_stand_in_climbs_without_fail_and_check_still_passes(machine_of, name, visible):
    machine = machine_of(name, visible)
    machine.horovod = {"version": "0.28.1", "tensorflow": True, "nccl": True, "gloo": True}
    _, found = check.run_checks(
        machine, skip_smoke=True, shm_size=32 * GiB, flavour=TENSORFLOW_IN_USE, host=HOST
    )
    assert check.exit_code(found) == 0, [f for f in found if f.status == "FAIL"]
    got = rungs(found)
    assert [f.item.split(" (")[0] for f in got] == [f"P2P ladder {n}/4" for n in range(1, 5)]


def test_a_visible_subset_uses_its_own_pair(machine_of):
    machine = machine_of("h20-8gpu-hgx", "2,3")
    got = ladder.climb(machine)
    assert "GPU2,GPU3 (NV18)" in got[0].finding and got[0].status == "PASS"
    assert all("opt in with make check LADDER=1" in f.finding for f in got[1:])
    seen = []
    ladder.climb(
        machine,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt"), seen=seen),
        nccl_runner=printed(recorded("nccl-bench-all_reduce.txt"), seen=seen),
    )
    (p2p_command, p2p_env), (nccl_command, nccl_env) = seen
    # the commands a learner types (notebook 3, nccl_bench --help): 64 MiB copies; 8 B to 1 GiB
    assert p2p_command[0].endswith("/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest")
    assert p2p_command[1:] == ["--numElems=16777216", "--iters=2", "--reps=3", "--lat_iters=20"]
    assert nccl_command[0].endswith("/nccl_bench/nccl_bench")
    assert nccl_command[1:] == "all_reduce -b 8 -e 1G -f 2 -n 5 -w 2 -g 2".split()
    for env in (p2p_env, nccl_env):  # the pair as the job named it, nvidia-smi's numbering
        assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert env["NCCL_NVLS_ENABLE"] == "0"


def test_rtx4090_pair_without_peer_access_stops_at_rung_1(machine_of):
    got = ladder.climb(
        machine_of("rtx4090-pair-no-p2p"),
        run_gpu=True,
        p2p_runner=lambda command, env: pytest.fail("rung 2 must not run"),
    )
    assert got[0].status == "WARN" and "GNS" in got[0].finding and "SHM" in got[0].fix
    assert [f.finding.startswith("not reached") for f in got[1:]] == [True, True, True]


def test_no_gpu_and_one_gpu_say_so_per_rung(machine_of):
    got = ladder.climb(Machine(mode="reference", reason="no nvidia-smi"), run_gpu=True)
    assert len(got) == 4 and all(f.status == "PASS" and "no GPU" in f.finding for f in got)
    got = ladder.climb(machine_of("l4-single"), run_gpu=True)
    assert len(got) == 4 and all("one GPU" in f.finding for f in got)


def test_no_nvcc_says_so_and_does_not_fail(machine_of):
    machine = machine_of(system="h200-nvswitch-pair")
    machine.nvcc_path = None
    got = ladder.climb(machine, run_gpu=True)
    assert got[0].status == "PASS" and all(
        f.status == "WARN" and "no nvcc" in f.finding for f in got[1:]
    )


def up_to(table, largest):
    """A recorded nccl_bench table as `-e <largest>` prints the same run: its header's maxBytes
    says so (else the parser rightly calls the table cut off) and the larger rows are gone."""
    kept = []
    for line in table.splitlines(keepends=True):
        words = line.split()
        if words and words[0].isdigit() and int(words[0]) > largest:
            continue
        kept.append(re.sub(r"maxBytes \d+", f"maxBytes {largest}", line))
    return "".join(kept)


def test_h200_pair_recorded_outputs_climb_all_four_rungs(h200):
    table = up_to(recorded("nccl-bench-all_reduce.txt"), 1 << 30)
    got = ladder.climb(
        h200,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt")),
        nccl_runner=printed(table),
    )
    assert [f.status for f in got] == ["PASS"] * 4, [f.finding for f in got]
    assert "CUDA: peer access both ways" in got[0].finding
    # by hand: its line 50, "Data check: 5280 copies (515.40 GB) ... 0 elements wrong: PASSED"
    assert got[1].finding == "GPU0,GPU1: P2P copies checked, 0 elements wrong (5280 copies)"
    assert "0 wrong" in got[2].finding
    # by hand: 396.5 one way; busbw 323.55 at 1 GiB (nccl-bench-all_reduce.txt, out of place)
    # on NV18 (450 GB/s): both as expected
    assert (
        "p2p_one_way 396.5 GB/s" in got[3].finding
        and "allreduce_busbw 323.6 GB/s" in got[3].finding
    )
    assert got[3].finding.count("as expected") == 2


def _unforced(text):
    """The recorded sockets run as if nothing had forced it: the ladder's own run sets no NCCL
    variable, so NET there is NCCL's choice (a broken P2P/SHM path), which is 'low'."""
    for forced in (
        "NCCL_P2P_DISABLE=1 ",
        "NCCL_SHM_DISABLE=1",
        "NCCL_P2P_DISABLE set by environment to 1",
        "NCCL_SHM_DISABLE set by environment to 1.",
    ):
        text = text.replace(forced, "")
    return text


def test_a_sockets_all_reduce_is_low_at_rung_4(machine_of):
    machine = machine_of(system="h200-nvswitch-pair")
    machine.nvcc_path = "/usr/local/cuda/bin/nvcc"
    got = ladder.climb(
        machine,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt")),
        nccl_runner=printed(_unforced(recorded("nccl-bench-all_reduce-sockets.txt"))),
    )
    assert got[3].status == "WARN" and "low" in got[3].finding and "NET" in got[3].fix


def test_a_sockets_run_forced_by_its_settings_is_not_judged_low(machine_of):
    # the recorded file's own header says NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: its data never
    # crossed NVLink, so it says nothing about the link (verdicts: "not comparable")
    machine = machine_of(system="h200-nvswitch-pair")
    machine.nvcc_path = "/usr/local/cuda/bin/nvcc"
    got = ladder.climb(
        machine,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt")),
        nccl_runner=printed(recorded("nccl-bench-all_reduce-sockets.txt")),
    )
    assert "not comparable" in got[3].finding and "low" not in got[3].finding


@pytest.fixture
def h200(machine_of):
    machine = machine_of(system="h200-nvswitch-pair")
    machine.nvcc_path = "/usr/local/cuda/bin/nvcc"
    return machine


@pytest.mark.parametrize("exit_status", [1, 0])
def test_the_wrong_column_fails_rung_3_and_rung_4_is_not_reached(h200, exit_status):
    # nccl_bench --inject-fault on the H200 pair: 1 in the first row's out-of-place #wrong, exit 1
    # and "nccl_bench: error: 1 wrong elements"; with exit 0 and nothing on stderr (a hand-made
    # case) the column alone must still fail the rung.
    stdout, stderr = fault_run("nccl-all_reduce-inject-fault.txt")
    got = ladder.climb(
        h200,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt")),
        nccl_runner=printed(stdout, exit_status, stderr if exit_status else ""),
    )
    assert got[2].status == "FAIL"
    assert got[2].finding == "GPU0,GPU1: all-reduce gave 1 wrong elements"
    assert got[3].finding.startswith("not reached")
    # a count edited into the recorded clean run's 128 MiB row, exit 0
    text = recorded("nccl-bench-all_reduce.txt")
    bad = text.replace("  332.29      0  ", "  332.29      7  ")
    assert bad != text
    got = ladder.climb(
        h200,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt")),
        nccl_runner=printed(bad),
    )
    assert got[2].status == "FAIL" and "gave 7 wrong elements" in got[2].finding


@pytest.mark.parametrize("exit_status", [1, 0])
def test_a_failed_data_check_fails_rung_2(h200, exit_status):
    # the P2P test's --inject-fault run on the H200 pair: its data check says 1 element wrong
    stdout, stderr = fault_run("p2p-inject-fault.txt")
    got = ladder.climb(
        h200,
        run_gpu=True,
        p2p_runner=printed(stdout, exit_status, stderr if exit_status else ""),
        nccl_runner=lambda command, env: pytest.fail("rung 3 must not run"),
    )
    assert got[1].status == "FAIL" and "the P2P test failed" in got[1].finding
    said = "data mismatch in" if exit_status else "1 elements wrong: FAILED"
    assert said in got[1].finding
    assert all(f.finding.startswith("not reached") for f in got[2:])


def test_a_program_that_cannot_run_warns_with_its_own_line(h200):
    # the P2P test's line where CUDA finds no GPU (main.cpp), exit 2: not a FAIL
    line = (
        "p2pBandwidthLatencyTest: error: no CUDA GPU is visible, nothing to measure "
        "(cudaGetDeviceCount: no CUDA-capable device is detected)"
    )
    got = ladder.climb(h200, run_gpu=True, p2p_runner=printed("", 2, line + "\n"))
    assert got[1].status == "WARN" and got[1].finding.endswith(line)
    assert all(f.status == "WARN" and "not reached" in f.finding for f in got[2:])

    def unbuildable(command, env):
        raise RuntimeError("building nccl_bench failed (make exit 2): NCCL not found\n...")

    got = ladder.climb(
        h200,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt")),
        nccl_runner=unbuildable,
    )
    assert [f.status for f in got] == ["PASS", "PASS", "WARN", "WARN"]
    assert got[2].finding.endswith(
        "failed: building nccl_bench failed (make exit 2): NCCL not found"
    )
    # an NCCL failure that is not about wrong results: WARN with nccl_bench's own line
    said = "nccl_bench: error: ncclCommInitAll failed: unhandled cuda error (main.cpp:120)"
    got = ladder.climb(
        h200,
        run_gpu=True,
        p2p_runner=printed(recorded("p2pBandwidthLatencyTest.txt")),
        nccl_runner=printed("", 1, "NCCL WARN Cuda failure\n" + said + "\n"),
    )
    assert got[2].status == "WARN" and got[2].finding.endswith(said)


def test_json_page_holds_the_rungs(machine_of):
    machine = machine_of("rtx4090-pair-no-p2p")
    machine.horovod = {"version": "0.28.1", "tensorflow": True, "nccl": True, "gloo": True}
    _, found = check.run_checks(
        machine, skip_smoke=True, shm_size=32 * GiB, flavour=TENSORFLOW_IN_USE, host=HOST
    )
    data = check.as_json(machine, found, TENSORFLOW_IN_USE)
    assert sum(f["item"].startswith("P2P ladder") for f in data["findings"]) == 4
    assert data["exit_code"] == 0


def test_cuda_denying_peer_access_stops_at_rung_1(machine_of):
    machine = machine_of(system="h200-nvswitch-pair")
    machine.nvcc_path = "/usr/local/cuda/bin/nvcc"
    text = recorded("p2pBandwidthLatencyTest.txt").replace(
        "Device=0 CAN Access", "Device=0 CANNOT Access"
    )
    got = ladder.climb(
        machine,
        run_gpu=True,
        p2p_runner=printed(text),
        nccl_runner=lambda command, env: pytest.fail("rung 3 must not run"),
    )
    assert got[0].status == "WARN" and "CANNOT Access Peer" in got[0].finding
    assert all(f.finding.startswith("not reached") for f in got[1:])


def test_an_output_without_its_data_check_does_not_pass_rung_2(machine_of):
    # NVIDIA's sample (recorded on h100-pcie-nvlink-pair) checks no data: rung 2 cannot pass on it
    machine = machine_of(system="h200-nvswitch-pair")
    machine.nvcc_path = "/usr/local/cuda/bin/nvcc"
    sample = (REF.parent / "h100-pcie-nvlink-pair" / "p2pBandwidthLatencyTest.txt").read_text()
    got = ladder.climb(machine, run_gpu=True, p2p_runner=printed(sample))
    assert got[1].status == "WARN" and "no data check" in got[1].finding
    assert all(f.finding.startswith("not reached") for f in got[2:])


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_failed_build_says_makes_last_line(tmp_path):
    # the line nccl_bench's Makefile stops with when NCCL is missing (its line 27)
    (tmp_path / "Makefile").write_text("$(error NCCL not found: set NCCL_HOME)\nall:\n")
    with pytest.raises(RuntimeError) as failed:
        ladder.build(tmp_path / "nccl_bench")
    first = str(failed.value).splitlines()[0]
    assert first.startswith("building nccl_bench failed (make exit 2): Makefile:1: *** NCCL not")
    (tmp_path / "Makefile").write_text("all:\n\ttouch prog\n")
    assert ladder.build(tmp_path / "prog") == tmp_path / "prog" and (tmp_path / "prog").exists()


def test_cli_ladder_without_gpus_exits_0_with_one_line_per_rung(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(
        os.environ,
        PATH=os.path.dirname(sys.executable),
        GPUTOPO_RESULTS_DIR=str(tmp_path / "results"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "coursetools.check", "--skip-smoke", "--ladder"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if "P2P ladder" in ln]
    assert len(lines) == 4 and all(
        ln.startswith("PASS") and "no GPU here" in ln and " — fix: " in ln for ln in lines
    )


def test_make_check_passes_ladder_on():
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = check._ROOT
    on = subprocess.run(
        ["make", "-n", "check", "LADDER=1"], capture_output=True, text=True, cwd=root, timeout=60
    )
    off = subprocess.run(
        ["make", "-n", "check"], capture_output=True, text=True, cwd=root, timeout=60
    )
    assert "-m coursetools.check --venv .venv --ladder" in on.stdout
    assert "--ladder" not in off.stdout


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 2, reason="needs two GPUs")
def test_the_ladder_climbs_on_real_gpus(monkeypatch):
    # the real programs, built if missing, on this machine's best pair: checked, never FAIL
    monkeypatch.setenv("GPUTOPO_CUDA_PROBE", "1")
    machine = detect(check_horovod=False)
    got = ladder.climb(machine, run_gpu=True)
    assert [f.status for f in got[1:3]] == ["PASS", "PASS"], got
    assert "elements wrong" in got[1].finding and "0 wrong" in got[2].finding
    assert got[3].status in ("PASS", "WARN") and "GB/s" in got[3].finding

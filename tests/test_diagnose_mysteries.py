"""Notebook 7's mysteries (gputopo.lessons.diagnose): the scoring of a diagnosis, the evidence
line in each recorded stand-in, which mysteries run live on which machine, and that a run hands
its planted setting to the command while the learner's line does not show it.

Evidence line numbers were read by hand (`grep -n`) from the recorded files named in
MYSTERIES[n].recorded; the diagnoses are sentences a learner might write.
"""
import sys
from pathlib import Path

import pytest

from gputopo import live
from gputopo.lessons import diagnose as mysteries
from gputopo.reference import REFERENCE_DIR

Machine = mysteries.Machine


@pytest.mark.parametrize("number, diagnosis, verdict", [
    (1, None, "unanswered"),
    (1, "   ", "unanswered"),
    (1, "NCCL_P2P_LEVEL=LOC forces SHM", "right"),
    (1, "someone set the p2p level to LOC", "right"),
    (1, "NCCL_P2P_LEVEL=LOC, or NCCL_P2P_DISABLE, or pageable memory", "too many"),
    (1, "the GPUs have no NVLink", "wrong"),
    (2, "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1: sockets inside the node", "right"),
    (2, "NCCL_P2P_DISABLE=1", "partly"),
    (3, "nothing wrong: P2P_LEVEL=NVL keeps P2P on NVLink", "right"),
    (3, "NCCL_P2P_LEVEL=NVL breaks it", "wrong"),
    (4, "the buffers are pageable, not pinned", "right"),
    (4, "pageable memory on the far NUMA node", "too many"),
    (5, "host memory bound to the other NUMA node", "right"),
    (5, "the PCIe link is narrow", "wrong"),
    (6, "CUDA_VISIBLE_DEVICES points at another GPU", "right"),
    (6, "CUDA_DEVICE_ORDER is FASTEST_FIRST, not PCI_BUS_ID", "right"),
])
def test_score(number, diagnosis, verdict):
    assert mysteries.score(number, diagnosis) == verdict


@pytest.mark.parametrize("number, line, starts", [
    (1, 52, "# Transports NCCL reported"),                     # SHM/direct/direct: 8;
    (2, 38, "[0]<stdout>:vm:8004:8077 [0] NCCL INFO NCCL_P2P_DISABLE"),
    (3, 39, "[0]<stdout>:vm:7260:7340 [0] NCCL INFO NCCL_P2P_LEVEL"),
    (4, 107, "268435456        h2d  pageable"),                # 7.86 GB/s
    (5, 4, "GPU0     X      SOC     0-5"),
    (6, 6, "Device 0: NVIDIA GeForce RTX 3090"),
])
def test_the_evidence_line_of_each_recorded_stand_in(number, line, starts):
    text = (REFERENCE_DIR / mysteries.MYSTERIES[number].recorded).read_text()
    found = mysteries.evidence(number, text)
    assert found[0] == line and found[1].startswith(starts)


def test_the_jobs_rows_hide_the_memory_kind_and_keep_its_numbers():
    text = (REFERENCE_DIR / "h100-single-gpu" / "host-device-copy-run1.txt").read_text()
    rows = [line for line in mysteries._job_rows(text, "pageable").splitlines()
            if line.strip().startswith("268435456")]
    # the recorded pageable rows at 256 MiB: h2d 7.86 GB/s, d2h 12.48 GB/s
    assert [line.split() for line in rows] == [["268435456", "h2d", "?", "34171.90", "7.86", "ok"],
                                               ["268435456", "d2h", "?", "21513.10", "12.48", "ok"]]


@pytest.mark.parametrize("here, live_ones", [
    (Machine(0, [0], None, None), []),
    (Machine(1, [0], 0, None), [4, 6]),
    (Machine(1, [0, 1], 0, None), [4, 5, 6]),
    (Machine(2, [0], 0, "NVL"), [1, 4, 6]),   # 2 and 3 train: switched off below
])
def test_which_mysteries_run_live(monkeypatch, here, live_ones):
    monkeypatch.setenv("GPUTOPO_LIVE_CNN", "0")
    monkeypatch.setattr(mysteries.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(mysteries.os, "access", lambda path, mode: True)   # nccl_bench built
    assert [n for n in mysteries.MYSTERIES if mysteries.why_not_live(n, here) is None] == live_ones


@pytest.mark.parametrize("path, level", [("NVL", "NVL"), ("PIX", "PIX"), ("PXB", "PXB"),
                                         ("PHB", "NVL"), ("SYS", "NVL"), (None, "NVL")])
def test_the_red_herring_keeps_the_pairs_default(path, level):
    # NVL, PIX and PXB pairs are P2P by default (cut-off PXB, NCCL 2.23+) and stay P2P at their own
    # level; PHB and SYS pairs are SHM by default and stay SHM at NVL.
    assert mysteries.red_herring_level(path) == level


@pytest.mark.parametrize("here, node", [(Machine(1, [0, 1], 0, None), 1),
                                        (Machine(1, [0, 1], 1, None), 0),
                                        (Machine(1, [0, 2, 3], None, None), 2)])
def test_the_far_node_is_never_the_gpus_own(here, node):
    assert mysteries.far_node(here) == node


def test_no_planted_setting_turns_nvls_on_or_forces_ll128():
    for here in (Machine(1, [0], 0, None), Machine(8, [0, 1], 1, "NVL"), Machine(2, [0], 0, "SYS")):
        for number in mysteries.MYSTERIES:
            env = mysteries._planted(number, here).get("env", {})
            assert env.get("NCCL_NVLS_ENABLE", "0") != "1"
            assert "LL128" not in env.get("NCCL_PROTO", "").replace("^LL128", "")


def test_a_live_run_hands_the_hidden_setting_to_the_command_only(tmp_path, monkeypatch, capsys):
    # A stand-in command prints the variables it received; the learner's line shows none of them.
    here = Machine(2, [0], 0, "NVL")
    monkeypatch.setattr(mysteries, "machine", lambda run_dir=None: here)
    monkeypatch.setattr(mysteries.os, "access", lambda path, mode: True)   # nccl_bench built
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    printer = ("import os; print(*(f'{k}={os.environ.get(k)}' for k in ('NCCL_P2P_LEVEL', "
               "'CUDA_VISIBLE_DEVICES', 'NCCL_NVLS_ENABLE', 'CUDA_DEVICE_ORDER')))")
    monkeypatch.setattr(mysteries, "_argv",
                        lambda number, framework: [sys.executable, "-c", printer])
    out = mysteries.run(1, tmp_path)
    assert out == tmp_path / "mystery-1.txt"
    assert out.read_text().split() == ["NCCL_P2P_LEVEL=LOC", "CUDA_VISIBLE_DEVICES=0,1",
                                       "NCCL_NVLS_ENABLE=0", "CUDA_DEVICE_ORDER=PCI_BUS_ID"]
    shown = capsys.readouterr().out.splitlines()[0]
    assert shown.startswith("Mystery 1: ../source_code/nccl_bench/nccl_bench")
    assert "LOC" not in shown


def test_an_exported_nvls_value_passes_through(tmp_path, monkeypatch):
    monkeypatch.setattr(mysteries, "machine", lambda run_dir=None: Machine(2, [0], 0, "NVL"))
    monkeypatch.setattr(mysteries.os, "access", lambda path, mode: True)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")   # an instructor's opt-in: never changed by us
    monkeypatch.setattr(mysteries, "_argv", lambda number, framework: [
        sys.executable, "-c", "import os; print(os.environ['NCCL_NVLS_ENABLE'])"])
    assert mysteries.run(1, tmp_path).read_text().strip() == "1"


def test_without_the_benchmark_built_its_mysteries_do_not_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mysteries, "machine", lambda run_dir=None: Machine(2, [0], 0, "NVL"))
    monkeypatch.setattr(mysteries, "BENCH", tmp_path / "nccl_bench")   # not there
    assert mysteries.run(6, tmp_path) is None
    assert "not built here" in capsys.readouterr().out


def test_a_machine_without_the_hardware_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mysteries, "machine", lambda run_dir=None: Machine(0, [0], None, None))
    assert mysteries.run(4, tmp_path) is None
    assert not (tmp_path / "mystery-4.txt").exists()
    assert "needs a GPU" in capsys.readouterr().out


def test_check_prints_the_evidence_and_never_raises(capsys):
    text = (REFERENCE_DIR / mysteries.MYSTERIES[1].recorded).read_text()
    out = live.Output(text, None, False, "x")
    assert mysteries.check(1, None, out) is None
    assert mysteries.check(1, "NCCL_P2P_LEVEL=LOC", out) is True
    assert mysteries.check(1, "no NVLink", out) is False
    printed = capsys.readouterr().out
    assert "line 52 of the recorded run" in printed and "Not this one." in printed


def test_the_recorded_stand_ins_exist_and_diagnose_reads_the_nccl_ones():
    from gputopo import diagnose

    for number, mystery in mysteries.MYSTERIES.items():
        assert (REFERENCE_DIR / mystery.recorded).is_file(), number
    topo = (REFERENCE_DIR / "h200-nvswitch-pair" / "nvidia-smi-topo-m.txt").read_text()
    verdicts = [diagnose.diagnose((REFERENCE_DIR / mysteries.MYSTERIES[n].recorded).read_text(),
                                  topo=topo)["clean"] for n in (1, 2, 3)]
    assert verdicts == [False, False, True]   # LOC: SHM; sockets: NET; NVL: P2P, clean
    args = mysteries.diagnose_args(1, live.Output("", None, False, ""), Path("unused"))
    assert args == ("../source_code/reference_systems/h200-nvswitch-pair/"
                    "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt --topo ../source_code/"
                    "reference_systems/h200-nvswitch-pair/nvidia-smi-topo-m.txt")

"""The stand-in nvidia-smi (conftest.py) answers the commands the notebooks type: `-L` in
nvidia-smi's own format and `topo -p2p r` from a recorded matrix. Expected lines are typed from
the recorded files of the reference systems (nvidia-smi.txt's GPU table, nvlink -s's UUIDs)."""

import subprocess

from gputopo.parsers import PARSERS


def test_dash_L_lists_every_gpu_with_its_uuid(fake_nvidia_smi):
    script = fake_nvidia_smi("h100-pcie-nvlink-pair")
    done = subprocess.run([str(script), "-L"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert done.stdout == (
        "GPU 0: NVIDIA H100 PCIe (UUID: GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9)\n"
        "GPU 1: NVIDIA H100 PCIe (UUID: GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3)\n"
    )


def test_dash_L_is_unanswered_without_uuids(fake_nvidia_smi):
    # gpu_names alone give no UUID: the stand-in does not make one up
    script = fake_nvidia_smi(gpu_names=["Tesla V100-SXM2-16GB"] * 2)
    done = subprocess.run([str(script), "-L"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == "" and "nothing recorded for '-L'" in done.stderr


def test_topo_p2p_r_replays_the_recorded_matrix(fake_nvidia_smi):
    script = fake_nvidia_smi("h200-nvswitch-pair")  # recorded `topo -p2p rw`: GPU0-GPU1 OK
    done = subprocess.run(
        [str(script), "topo", "-p2p", "r"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    # the notebooks' parser reads it: the pair's status as recorded
    assert PARSERS["p2p-status"](done.stdout)["status"] == {
        "GPU0": {"GPU1": "OK"},
        "GPU1": {"GPU0": "OK"},
    }
    # a system with no recorded p2p matrix: unanswered, as a tool that cannot answer
    script = fake_nvidia_smi("h100-pcie-nvlink-pair")
    done = subprocess.run(
        [str(script), "topo", "-p2p", "r"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2

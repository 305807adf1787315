"""make check under CUDA_VISIBLE_DEVICES: every pair and link it reports is one the job may use.

Found on a 4-GPU machine: with CUDA_VISIBLE_DEVICES=2,3 the notebooks use GPU2 and GPU3, but the
check reported GPU0,GPU1 from `topo -m`'s whole-machine pairs. The stand-in is
tests/fixtures/machines/l40s-4gpu-2numa-nics (its topo -m: GPU2-GPU3 NODE, GPU0-GPU1 NODE,
GPU0-GPU2 SYS; its topo -p2p r/w: OK within a NUMA node, CNS across), read by hand.
"""

import pytest

from coursetools import gpus
from coursetools import check
from coursetools.detect import detect
from test_machines import install_machine


@pytest.fixture
def l40s(fake_nvidia_smi, monkeypatch):
    def make(visible):
        install_machine(fake_nvidia_smi, "l40s-4gpu-2numa-nics")
        monkeypatch.setattr(
            gpus, "cuda_device_count", lambda environ=None, timeout=30: (None, None)
        )
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        return detect(check_horovod=False, environ={"CUDA_VISIBLE_DEVICES": visible})

    return make


def finding(findings, item):
    return next(f for f in findings if f.item == item)


def test_a_subset_names_only_its_own_gpus(l40s):
    machine = l40s("2,3")
    topology = finding(check.check_topology(machine), "topology")
    assert topology.status == "PASS"
    assert "best pair GPU2,GPU3 (NODE)" in topology.finding
    assert "GPU0" not in topology.finding and "GPU1" not in topology.finding
    peer = check.check_peer_access(machine)
    assert [f.status for f in peer] == ["PASS"]
    assert "chosen pair GPU2,GPU3" in peer[0].finding
    nvlink = finding(check.check_nvlink(machine), "NVLink")
    assert "GPU0" not in nvlink.finding
    assert check.smoke_command(machine)[1]["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_a_subset_across_sockets_reports_its_sys_pair(l40s):
    machine = l40s("1,2")
    topology = finding(check.check_topology(machine), "topology")
    assert "best pair GPU1,GPU2 (SYS)" in topology.finding
    peer = check.check_peer_access(machine)[0]
    # GPU1-GPU2 is CNS in the stand-in's topo -p2p: across the two sockets, no peer access
    assert peer.status == "FAIL" and "GPU1,GPU2" in peer.finding and "CNS" in peer.finding


def test_the_whole_machine_still_reports_its_own_extremes(l40s, monkeypatch):
    machine = l40s("0,1,2,3")
    topology = finding(check.check_topology(machine), "topology")
    assert "best pair GPU0,GPU1 (NODE)" in topology.finding
    assert "worst pair GPU0,GPU2 (SYS)" in topology.finding

"""Notebook 2's verdicts on recorded data (its cells call gputopo.verdicts; gputopo.lessons.topology
prints them with verdict_line), every verdict decided by hand:

- v100-sxm2-8gpu-server all_reduce_perf-g8.txt: its topo -m row of GPU0 reads NV1, NV1, NV2, SYS,
  SYS, NV2, SYS: 6 NVLinks (every GPU's row sums to 6, a V100 SXM2 has six NVLink 2 links, V100
  whitepaper), 6 x 25 = 150 GB/s per direction. Its last row is 128 MiB, below the 1 GiB plateau.
- h200-nvswitch-8gpu nccl-bench-all_reduce-g8.txt: nvlink -s shows 18 active links on every GPU,
  18 x 25 = 450 GB/s; its 4 GiB row prints busbw 365.2: 0.81 of 450, above 315: as expected.
- h100-pcie-nvlink-pair: 256.62 GB/s one way over NV12 (300 GB/s): 0.86 >= 0.75, as expected;
  26.10 GB/s with P2P disabled is a staged copy: not comparable.
- dgx1-v100 row of GPU 0 (bidirectional P2P=Enabled): 48.49 to GPU 1 (NV1: 50 both ways, 0.97):
  as expected; 24 would be low; 14.25 to GPU 5 (SYS, no peer access): not comparable.
- A busbw of 80 GB/s on the same V100 link is below 105: low, with its reasons.
"""

import pytest

from gputopo import reference, verdicts
from gputopo.lessons import topology as lessons

V100_LINK = verdicts.Link("nvlink", "Tesla V100-SXM2-16GB", count=6)
H200_LINK = verdicts.Link("nvlink", "NVIDIA H200", count=18)


def test_recorded_allreduce_verdicts_decided_by_hand():
    # V100's table ends at 128 MiB, below the 1 GiB plateau (nccl-tests #149: still rising at
    # 512 MiB): not judged. H200 -g 8 at 4 GiB: 365.2 of 450, range 0.70-1.0 (#149 0.77, #212 0.82).
    assert verdicts.link_peak(V100_LINK).value == pytest.approx(150.0)
    v100 = verdicts.judge_nccl_output(
        reference.read_text("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt"), V100_LINK
    )
    assert (v100.status, v100.value) == ("not comparable", pytest.approx(129.14))
    assert "plateau" in v100.why
    h200 = verdicts.judge_nccl_output(
        reference.read_text("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g8.txt"), H200_LINK
    )
    assert h200.status == "as expected" and h200.value == pytest.approx(365.2, abs=0.05)
    assert h200.expected == pytest.approx((315.0, 450.0))


def test_a_low_busbw_on_the_v100_link_is_low_with_reasons():
    low = verdicts.judge("allreduce_busbw", 80.0, V100_LINK, size=1 << 30)
    assert low.status == "low" and low.reasons
    line = lessons.verdict_line("v100", low)
    assert "reason 1:" in line and "check:" in line


def test_h100_share_of_peak_verdicts_decided_by_hand():
    link = verdicts.Link("nvlink", "NVIDIA H100 PCIe", count=12)
    p2p = verdicts.judge("p2p_one_way", 256.62, link)
    assert p2p.status == "as expected" and p2p.expected == pytest.approx((225.0, 300.0))
    assert verdicts.judge("p2p_one_way", 26.10, link, method="staged").status == "not comparable"


def test_dgx1_pairs_decided_by_hand():
    nv1 = verdicts.Link("nvlink", "Tesla V100-SXM2", count=1)
    assert verdicts.judge("p2p_both_ways", 48.49, nv1).expected == pytest.approx((37.5, 50.0))
    assert verdicts.judge("p2p_both_ways", 48.49, nv1).status == "as expected"
    assert verdicts.judge("p2p_both_ways", 24.0, nv1).status == "low"  # 24 of 50, under 37.5
    assert (
        verdicts.judge("p2p_both_ways", 14.25, verdicts.Link("pcie"), method="staged").status
        == "not comparable"
    )


def test_verdict_line_keeps_reasons_only_when_low():
    fine = verdicts.judge("allreduce_busbw", 365.2, H200_LINK, size=4 << 30)
    assert fine.status == "as expected" and "\n" not in lessons.verdict_line("h200", fine)


# lscpu as recorded on h100-single-gpu (lscpu.txt, read by hand): "Socket(s): 1", "NUMA node(s): 1",
# "NUMA node0 CPU(s): 0-15", "Hypervisor vendor: KVM" (a VM, its system.json says so).
def test_lscpu_summary_of_the_recorded_vm():
    got = lessons.lscpu_summary(reference.read_text("h100-single-gpu", "lscpu.txt"))
    assert got == {
        "sockets": 1,
        "numa_nodes": 1,
        "node_cpus": {"node 0": "0-15"},
        "hypervisor": "KVM",
    }


def test_lscpu_summary_of_a_split_socket_host_and_of_nothing():
    # An EPYC host in NPS2 mode as lscpu prints it: one socket, two NUMA nodes; no hypervisor line.
    text = (
        "Socket(s):             1\nNUMA node(s):          2\n"
        "NUMA node0 CPU(s):     0-31,64-95\nNUMA node1 CPU(s):     32-63,96-127\n"
    )
    got = lessons.lscpu_summary(text)
    assert (got["sockets"], got["numa_nodes"], got["hypervisor"]) == (1, 2, None)
    assert got["node_cpus"] == {"node 0": "0-31,64-95", "node 1": "32-63,96-127"}
    assert lessons.lscpu_summary("bash: lscpu: command not found") == {
        "sockets": None,
        "numa_nodes": None,
        "node_cpus": {},
        "hypervisor": None,
    }


# Notebook 2's command cells on a machine where the tool did not run: what live.read stands in.
def test_topo_p2p_r_that_did_not_run_falls_back_to_the_recorded_h200_pair(tmp_path, capsys):
    from gputopo import live

    saved = tmp_path / "nvidia-smi-topo-p2p-r.txt"
    saved.write_text(
        "fake nvidia-smi: nothing recorded for 'topo -p2p r'\n"
    )  # the stand-in machines' line
    out = live.read(
        saved, kind="p2p-status", recorded="h200-nvswitch-pair/nvidia-smi-topo-p2p-rw.txt"
    )
    # read by hand from the recorded file: GPU0-GPU1 "OK" both ways,
    # legend "CNS = Chipset not supported"
    assert not out.live and out.parsed["status"] == {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
    assert out.parsed["legend"]["CNS"] == "Chipset not supported"
    assert "[recorded]" in capsys.readouterr().out


def test_lscpu_and_numactl_missing_fall_back_to_the_recorded_vm(tmp_path):
    from gputopo import live

    for name in ("lscpu.txt", "numactl-H.txt"):
        (tmp_path / name).write_text(
            f"/bin/bash: line 1: {name.split('.')[0].split('-')[0]}: command not found\n"
        )
    cpu = live.read(tmp_path / "lscpu.txt", recorded="h100-single-gpu/lscpu.txt")
    numa = live.read(tmp_path / "numactl-H.txt", recorded="h100-single-gpu/numactl-H.txt")
    assert not cpu.live and lessons.lscpu_summary(cpu.text)["hypervisor"] == "KVM"
    assert not numa.live and numa.text.startswith("available: 1 nodes (0)")

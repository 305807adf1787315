"""Notebook 2's lesson module, gputopo.lessons.topology: its verdict lines (allreduce_link / allreduce_verdict,
share_of_peak_verdicts, dgx1_row_verdicts) on recorded data, every verdict decided by hand:

- v100-sxm2-8gpu-server all_reduce_perf-g8.txt: its topo -m row of GPU0 reads NV1, NV1, NV2, SYS,
  SYS, NV2, SYS: 6 NVLinks (every GPU's row sums to 6, a V100 SXM2 has six NVLink 2 links, V100
  whitepaper), 6 x 25 = 150 GB/s per direction. The last row (134217728 B = 128 MiB, the plateau
  size) prints busbw 129.14 out of place: 0.86 of 150, above the 0.60 floor (90 GB/s): as expected.
- h200-nvswitch-8gpu nccl-bench-all_reduce-g8.txt: nvlink -s shows 18 active links on every GPU,
  18 x 25 = 450 GB/s; its 4 GiB row prints busbw 365.2 (the table of notebook 2 prints 365):
  0.81 of 450, above 270: as expected.
- h100-pcie-nvlink-pair: 256.62 GB/s one way over NV12 (300 GB/s): 0.86 >= 0.75, as expected;
  26.10 GB/s with P2P disabled is a staged copy: not comparable.
- dgx1-v100 row of GPU 0 (p2pBandwidthLatencyTest-row0-excerpt.txt, bidirectional P2P=Enabled):
  48.49 to GPUs 1 and 2 (NV1: 50 both ways, 0.97), 96.85 and 96.90 to GPUs 3 and 4 (NV2: 100,
  0.97): as expected; 14.25, 14.54, 14.49 to GPUs 5-7 (SYS, listed without peer access in its
  system.json): not comparable.
- A busbw of 80 GB/s on the same V100 link is below 90: low, with its reasons.
"""
import pytest

from gputopo import reference, verdicts
from gputopo.lessons import topology as lessons

V100, H200 = ("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt"), ("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g8.txt")


def test_v100_ring_link_is_six_nvlinks_from_its_topo_row():
    link, facts = lessons.allreduce_link(*V100)
    assert (link.type, link.count, link.gpu) == ("nvlink", 6, "Tesla V100-SXM2-16GB")
    assert verdicts.link_peak(link).value == pytest.approx(150.0)
    assert "summed: 6 NVLinks per GPU" in facts


def test_h200_node_link_is_its_active_nvlinks_not_a_sum_of_its_row():
    link, facts = lessons.allreduce_link(*H200)
    assert (link.count, link.gpu) == (18, "NVIDIA H200")     # not 7 x 18 from the NV18 row
    assert verdicts.link_peak(link).value == pytest.approx(450.0)
    assert "18 links active" in facts


def test_recorded_allreduce_verdicts_decided_by_hand():
    # V100's table ends at 128 MiB, below the 1 GiB plateau (nccl-tests #149: still rising at
    # 512 MiB): not judged. H200 -g 8 at 4 GiB: 365.2 of 450, range 0.70-1.0 (#149 0.77, #212 0.82).
    facts, v100 = lessons.allreduce_verdict(*V100)
    assert (v100.status, v100.value) == ("not comparable", pytest.approx(129.14))
    assert "plateau" in v100.why
    facts, h200 = lessons.allreduce_verdict(*H200)
    assert h200.status == "as expected" and h200.value == pytest.approx(365.2, abs=0.05)
    assert h200.expected == pytest.approx((315.0, 450.0))


def test_a_low_busbw_on_the_v100_link_is_low_with_reasons():
    link, _ = lessons.allreduce_link(*V100)
    low = verdicts.judge("allreduce_busbw", 80.0, link, size=1 << 30)
    assert low.status == "low" and low.reasons
    line = lessons.verdict_line("v100", low)
    assert "reason 1:" in line and "check:" in line


def test_nvswitch_board_without_nvlink_s_gets_no_invented_count(monkeypatch):
    real = reference.files
    monkeypatch.setattr(reference, "files", lambda s: [f for f in real(s) if f != "nvidia-smi-nvlink-s.txt"])
    link, why = lessons.allreduce_link(*H200)
    assert link is None and "NVSwitch" in why
    _, verdict = lessons.allreduce_verdict(*H200)
    assert verdict.status == "not comparable"


def test_missing_file_is_one_line_not_a_traceback():
    link, why = lessons.allreduce_link("h200-nvswitch-8gpu", "no-such-file.txt")
    assert link is None and "could not be read" in why


def test_h100_share_of_peak_verdicts_decided_by_hand():
    # NV12 in its topo -m, 12 active links per GPU in its nvlink -s, "NVIDIA H100 PCIe" in its P2P output
    got = lessons.share_of_peak_verdicts(256.62, 26.10, "NVIDIA H100 PCIe", 12)
    assert [(label, v.status) for label, v in got] == [("P2P write over NV12", "as expected"),
                                                       ("P2P disabled (staged)", "not comparable")]
    assert got[0][1].expected == pytest.approx((225.0, 300.0))


def test_dgx1_row_verdicts_decided_by_hand():
    row0 = [784.87, 48.49, 48.49, 96.85, 96.90, 14.25, 14.54, 14.49]   # read from the excerpt
    assert reference.load("dgx1-v100", "p2p")["bandwidth_gbs"]["bidirectional_enabled"][0] == row0
    dgx1 = lessons.v100_wirings()[lessons.DGX1_V100]
    got = lessons.dgx1_row_verdicts(row0, dgx1)
    assert [(label, v.status) for label, v in got] == [
        ("GPU0 <-> GPU1 (NV1)", "as expected"), ("GPU0 <-> GPU2 (NV1)", "as expected"),
        ("GPU0 <-> GPU3 (NV2)", "as expected"), ("GPU0 <-> GPU4 (NV2)", "as expected"),
        ("GPU0 <-> GPU5 (SYS)", "not comparable"), ("GPU0 <-> GPU6 (SYS)", "not comparable"),
        ("GPU0 <-> GPU7 (SYS)", "not comparable")]
    assert got[0][1].expected == pytest.approx((37.5, 50.0))
    assert got[2][1].expected == pytest.approx((75.0, 100.0))


def test_dgx1_nvlink_pair_at_half_its_rate_is_low():
    dgx1 = lessons.v100_wirings()[lessons.DGX1_V100]
    got = dict(lessons.dgx1_row_verdicts([0.0, 24.0, 48.49], dgx1))
    assert got["GPU0 <-> GPU1 (NV1)"].status == "low"     # 24 of 50, under 37.5
    assert got["GPU0 <-> GPU2 (NV1)"].status == "as expected"


def test_verdict_line_keeps_reasons_only_when_low():
    link, _ = lessons.allreduce_link(*H200)
    fine = verdicts.judge("allreduce_busbw", 365.2, link, size=4 << 30)
    assert fine.status == "as expected" and "\n" not in lessons.verdict_line("h200", fine)


# lscpu as recorded on h100-single-gpu (lscpu.txt, read by hand): "Socket(s): 1", "NUMA node(s): 1",
# "NUMA node0 CPU(s): 0-15", "Hypervisor vendor: KVM" (a VM, its system.json says so).
def test_lscpu_summary_of_the_recorded_vm():
    got = lessons.lscpu_summary(reference.read_text("h100-single-gpu", "lscpu.txt"))
    assert got == {"sockets": 1, "numa_nodes": 1, "node_cpus": {"node 0": "0-15"}, "hypervisor": "KVM"}


def test_lscpu_summary_of_a_split_socket_host_and_of_nothing():
    # An EPYC host in NPS2 mode as lscpu prints it: one socket, two NUMA nodes; no hypervisor line.
    text = ("Socket(s):             1\nNUMA node(s):          2\n"
            "NUMA node0 CPU(s):     0-31,64-95\nNUMA node1 CPU(s):     32-63,96-127\n")
    got = lessons.lscpu_summary(text)
    assert (got["sockets"], got["numa_nodes"], got["hypervisor"]) == (1, 2, None)
    assert got["node_cpus"] == {"node 0": "0-31,64-95", "node 1": "32-63,96-127"}
    assert lessons.lscpu_summary("bash: lscpu: command not found") == {
        "sockets": None, "numa_nodes": None, "node_cpus": {}, "hypervisor": None}


# Notebook 2's command cells on a machine where the tool did not run: what live.read stands in.
def test_topo_p2p_r_that_did_not_run_falls_back_to_the_recorded_h200_pair(tmp_path, capsys):
    from gputopo import live

    saved = tmp_path / "nvidia-smi-topo-p2p-r.txt"
    saved.write_text("fake nvidia-smi: nothing recorded for 'topo -p2p r'\n")   # the stand-in machines' line
    out = live.read(saved, kind="p2p-status", recorded="h200-nvswitch-pair/nvidia-smi-topo-p2p-rw.txt")
    # read by hand from the recorded file: GPU0-GPU1 "OK" both ways, legend "CNS = Chipset not supported"
    assert not out.live and out.parsed["status"] == {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
    assert out.parsed["legend"]["CNS"] == "Chipset not supported"
    assert "[recorded]" in capsys.readouterr().out


def test_lscpu_and_numactl_missing_fall_back_to_the_recorded_vm(tmp_path):
    from gputopo import live

    for name in ("lscpu.txt", "numactl-H.txt"):
        (tmp_path / name).write_text(f"/bin/bash: line 1: {name.split('.')[0].split('-')[0]}: command not found\n")
    cpu = live.read(tmp_path / "lscpu.txt", recorded="h100-single-gpu/lscpu.txt")
    numa = live.read(tmp_path / "numactl-H.txt", recorded="h100-single-gpu/numactl-H.txt")
    assert not cpu.live and lessons.lscpu_summary(cpu.text)["hypervisor"] == "KVM"
    assert not numa.live and numa.text.startswith("available: 1 nodes (0)")

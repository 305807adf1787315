"""Notebook 1's verdict lines (hostbench.recorded_link, path_verdicts, gpu_path_verdicts,
verdict_line) on recorded data, every verdict decided by hand:

- h100-pcie-nvlink-pair: its topo -m prints NV12 and its nvlink -s 12 active links per GPU
  (6 <inactive>); NVLink 4 carries 25 GB/s per link per direction (H100 datasheet: 600 GB/s
  both ways over 12 links), so 300 GB/s. Its p2pBandwidthLatencyTest prints 256.62 GB/s one way
  with P2P (0.86 of 300, above the 0.75 floor: as expected) and 2.56 us latency (under 5 us: as
  expected); the staged path (26.10 GB/s, 16.59 us) never crosses the NVLink: not comparable.
- h200-nvswitch-pair: NV18, 18 active links, 450 GB/s; the course's P2P program printed
  396.51 GB/s and 2.27 us: as expected.
- A PCIe gen4 x16 pair: 16 GT/s x 16 x 128/130 / 8 = 31.51 GB/s, x 256/280 (TLP) = 28.81 GB/s;
  the floor is 0.70 x 28.81 = 20.17 GB/s: 20.0 is low, 25.0 as expected.
- h100-single-gpu host-device-copy-run1.txt: 1 GiB h2d pinned 55.16 GB/s on gen5 x16 (57.61
  GB/s after TLP overhead, 0.96): as expected.
"""
import pytest

from gputopo import hostbench, verdicts
from gputopo.gpus import Gpu
from gputopo.machine import Machine

H100_PAIR = {"P2P enabled (NVLink)": (2.56, 256.62), "P2P disabled (host staging)": (16.59, 26.10)}
H200_PAIR = {"P2P enabled (GPU0 -> GPU1)": (2.27, 396.51), "P2P disabled, staged (GPU0 -> GPU1)": (14.76, 38.17)}


def statuses(pairs):
    return {label: v.status for label, v in pairs}


def test_h100_pair_link_is_read_from_its_recorded_files():
    link, facts = hostbench.recorded_link("h100-pcie-nvlink-pair")
    assert (link.type, link.count, link.gpu) == ("nvlink", 12, "NVIDIA H100 PCIe")
    assert verdicts.link_peak(link).value == pytest.approx(300.0)
    assert "NV12" in facts and "12 links active" in facts


def test_h100_pair_verdicts_decided_by_hand():
    link, _ = hostbench.recorded_link("h100-pcie-nvlink-pair")
    got = statuses(hostbench.path_verdicts(H100_PAIR, link))
    assert got == {"P2P enabled (NVLink), alpha": "as expected", "P2P enabled (NVLink), beta": "as expected",
                   "P2P disabled (host staging), alpha": "not comparable",
                   "P2P disabled (host staging), beta": "not comparable"}


def test_recorded_h200_run_is_judged_on_the_h200_pairs_link():
    gpu = hostbench.gpu_paths(None)       # no GPU here: the recorded run
    assert gpu["mode"] == "reference" and gpu["system"] == "h200-nvswitch-pair"
    assert gpu["paths"] == H200_PAIR       # the numbers the statuses below were decided on
    pairs, where = hostbench.gpu_path_verdicts(gpu, None)
    assert "h200-nvswitch-pair" in where and "NV18" in where and "18 links active" in where
    assert [v.status for _, v in pairs] == ["as expected", "as expected", "not comparable", "not comparable"]
    assert pairs[1][1].expected == pytest.approx((337.5, 450.0))


def _pcie_machine(code="SYS"):
    gpus = [Gpu(index=i, name="NVIDIA RTX 4090", pcie_gen_current=4, pcie_gen_max=4,
                pcie_width_current=16, pcie_width_max=16) for i in (0, 1)]
    topology = {"gpus": ["GPU0", "GPU1"], "links": {"GPU0": {"GPU1": code}, "GPU1": {"GPU0": code}}}
    return Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=2, gpus=gpus, topology=topology)


def test_live_run_uses_the_link_this_machine_reports():
    live = {"mode": "live", "system": None,
            "paths": {"P2P enabled (GPU0 -> GPU1)": (8.0, 20.0), "P2P disabled, staged (GPU0 -> GPU1)": (15.0, 25.0)}}
    pairs, where = hostbench.gpu_path_verdicts(live, _pcie_machine())
    assert "PCIe gen4 x16" in where
    beta = pairs[1][1]
    assert beta.status == "low" and beta.expected[0] == pytest.approx(20.17, abs=0.01)
    assert pairs[0][1].status == "low"          # 8 us, above the 5 us P2P bound
    line = hostbench.verdict_line(*pairs[1])
    assert line.count("\n") == len(beta.reasons) >= 1 and "reason 1:" in line
    live["paths"]["P2P enabled (GPU0 -> GPU1)"] = (3.0, 25.0)
    pairs, _ = hostbench.gpu_path_verdicts(live, _pcie_machine())
    assert [v.status for _, v in pairs][:2] == ["as expected", "as expected"]


def test_live_run_with_an_unknown_link_is_not_comparable_not_judged_on_a_guess():
    live = {"mode": "live", "paths": {"P2P enabled (GPU0 -> GPU1)": (2.0, 100.0)}}
    pairs, where = hostbench.gpu_path_verdicts(live, Machine())
    assert "not known" in where
    assert pairs[1][1].status == "not comparable"


def test_verdict_line_is_one_line_unless_low():
    host = verdicts.judge("host_copy", 49.39)
    line = hostbench.verdict_line("host copy", host)
    assert "\n" not in line and "not comparable" in line and "no published peak" in line
    pinned = verdicts.judge("h2d", 55.16, verdicts.Link("pcie", "gen5", 16), memory="pinned", size=1 << 30)
    line = hostbench.verdict_line("h2d pinned 1 GiB", pinned)
    assert pinned.status == "as expected" and "\n" not in line and "figure" not in line


def test_a_system_without_recorded_link_files_gives_none_and_why():
    link, why = hostbench.recorded_link("no-such-system")
    assert link is None and "no-such-system" in why


def test_a_pair_without_peer_access_is_not_judged_as_a_p2p_copy():
    # Without peer access the P2P test's "enabled" copy is staged too: no P2P verdict on it.
    live = {"mode": "live", "peer_access": False,
            "paths": {"P2P enabled (GPU0 -> GPU1)": (15.0, 20.0), "P2P disabled, staged (GPU0 -> GPU1)": (15.0, 20.0)}}
    pairs, _ = hostbench.gpu_path_verdicts(live, _pcie_machine())
    assert {v.status for _, v in pairs} == {"not comparable"}


def test_the_recorded_runs_show_peer_access():
    assert hostbench.gpu_paths(None)["peer_access"] is True

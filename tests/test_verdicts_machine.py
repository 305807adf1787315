"""verdicts.link_from_machine: the link a live measurement crossed, from a detected Machine.

Expected values from the recorded machines: the H200 pair's `topo -m` prints NV18 and its
`nvlink -s` 18 active links per GPU; h100-single-gpu's `nvidia-smi --query-gpu` CSV prints PCIe
generation 5, width 16 (current and max).
"""
from gputopo import verdicts
from gputopo.gpus import Gpu
from gputopo.machine import Machine


def _machine(code="NV18", active=None, gens=(5, 5), widths=(16, 16)):
    gpus = [Gpu(index=i, name="NVIDIA H200", pcie_gen_current=g, pcie_gen_max=5,
                pcie_width_current=w, pcie_width_max=16) for i, (g, w) in enumerate(zip(gens, widths))]
    topology = {"gpus": ["GPU0", "GPU1"], "links": {"GPU0": {"GPU1": code}, "GPU1": {"GPU0": code}}}
    return Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=2, gpus=gpus, topology=topology,
                   nvlink_active_links=active or {"GPU0": 18, "GPU1": 18})


def test_an_nvlink_pair_takes_the_code_and_the_active_links():
    link = verdicts.link_from_machine(_machine(), 0, 1)
    assert (link.type, link.count, link.generation) == ("nvlink", 18, "NVIDIA H200")
    assert verdicts.link_peak(link).value == 450.0          # 18 x 25 GB/s, the data rate


def test_an_inactive_link_lowers_the_count():
    link = verdicts.link_from_machine(_machine(active={"GPU0": 17, "GPU1": 18}), 0, 1)
    assert link.count == 17


def test_a_pcie_pair_takes_the_slower_end_and_the_host_link_its_own():
    pair = verdicts.link_from_machine(_machine(code="SYS", gens=(5, 4), widths=(16, 8)), 0, 1)
    assert (pair.type, pair.generation, pair.width, pair.gen_max) == ("pcie", "gen4", 8, "gen5")
    host = verdicts.link_from_machine(_machine(gens=(5, 5)), 0)
    assert (host.type, host.generation, host.width) == ("pcie", "gen5", 16)
    assert host.trained_down() is None


def test_unknown_gpus_or_links_give_none():
    assert verdicts.link_from_machine(Machine(), 0, 1) is None
    assert verdicts.link_from_machine(_machine(), 0, 5) is None


def test_a_one_gpu_p2p_output_has_no_pair_to_judge():
    # the recorded --devices=1 run on the H200 pair: one 1 x 1 matrix per section
    from gputopo import reference
    text = reference.read_text("h200-nvswitch-pair", "p2pBandwidthLatencyTest-devices1.txt")
    (only,) = verdicts.judge_p2p_output(text, verdicts.Link("nvlink", "NVIDIA H200", count=18))
    assert only.status == verdicts.NOT_COMPARABLE and "1 GPU(s)" in only.why

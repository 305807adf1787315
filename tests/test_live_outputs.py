"""Notebook 2's live cells say one true sentence on 0, 1 and many GPUs, never "None".

The case that was seen: on one H200 the notebook printed "No live NVLink status here: None",
because `nvidia-smi nvlink -s` ran, exited 0 and printed nothing, so there was neither a text
nor a note nor (outside reference mode) a reason. Each machine below is detected through the
fake nvidia-smi of conftest.py, replaying recorded files, except where a field is set by hand.
"""

import pytest

from gputopo import reference
from coursetools.detect import detect
from coursetools.machine import Machine
from coursetools.banner import affinity_lines, live_tool_output, pair_sentence, why_not_live

ITEMS = ("topology", "nvlink", "p2p")


def quick_detect():
    return detect(check_horovod=False, environ={}, use_nvml=False)


def test_reference_mode_gives_the_reason(fake_nvidia_smi, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    machine = quick_detect()
    assert machine.mode == "reference"
    for item in ITEMS:
        text, source = live_tool_output(machine, item)
        assert source == "reference" and text.endswith(": nvidia-smi not found"), text
    assert affinity_lines(machine) == "No live topology here: nvidia-smi not found"
    assert pair_sentence(machine).startswith("No GPU here (reference): no pair to rank")


def test_one_h200_whose_nvlink_status_is_empty(fake_nvidia_smi):
    fake_nvidia_smi(gpu_names=["NVIDIA H200"], outputs={"nvlink -s": "", "": "", "topo -m": ""})
    machine = quick_detect()
    assert machine.mode == "single-gpu" and machine.reason is None
    text, source = live_tool_output(machine, "nvlink")
    assert source == "live"
    assert text.startswith("nvidia-smi nvlink -s ran here and listed no NVLink for the one GPU")
    assert "None" not in text
    assert pair_sentence(machine).startswith("One GPU here (single-gpu): no pair to rank")


def test_a_failing_nvlink_query_quotes_its_error(fake_nvidia_smi):
    fake_nvidia_smi("h100-pcie-nvlink-pair")  # no topo -p2p recorded: the stand-in cannot answer it
    machine = quick_detect()
    text, source = live_tool_output(machine, "p2p")
    assert source == "reference" and "fake nvidia-smi: nothing recorded for 'topo -p2p r'" in text


def test_two_h200_show_the_text_and_count_the_links(fake_nvidia_smi):
    fake_nvidia_smi("h200-nvswitch-pair")
    machine = quick_detect()
    assert machine.mode == "multi-gpu"
    text, source = live_tool_output(machine, "nvlink")
    assert source == "live" and text.startswith(reference.read_text("h200-nvswitch-pair", "nvidia-smi-nvlink-s.txt").rstrip("\n"))
    # the recorded file lists 18 links per GPU, every one at 26.562 GB/s
    assert text.endswith("GPU0: 18 active links, 0 inactive\nGPU1: 18 active links, 0 inactive")
    topo, source = live_tool_output(machine, "topology")
    assert source == "live" and "NV18" in topo
    assert affinity_lines(machine) == "GPU0: CPUs 0-31, NUMA node 0\nGPU1: CPUs 0-31, NUMA node 0"
    assert pair_sentence(machine) == "best: GPU0-GPU1 over NV18 | worst: GPU0-GPU1 over NV18"


def test_h100_pair_counts_its_inactive_slots(fake_nvidia_smi):
    fake_nvidia_smi("h100-pcie-nvlink-pair")
    text, _ = live_tool_output(quick_detect(), "nvlink")
    assert text.endswith("GPU0: 12 active links, 6 inactive\nGPU1: 12 active links, 6 inactive")


def test_many_gpus_whose_topology_is_not_understood(fake_nvidia_smi):
    fake_nvidia_smi("h100-pcie-nvlink-pair", outputs={"topo -m": "GPU0\tGPU1\nGPU0\t X \tBOGUS\n"})
    machine = quick_detect()
    assert machine.mode == "multi-gpu" and machine.topology is None
    sentence = pair_sentence(machine)
    assert sentence.startswith("2 GPUs here, but no topology to rank their pairs: nvidia-smi topo -m not understood")
    assert affinity_lines(machine).startswith("No live topology here: nvidia-smi topo -m not understood")
    assert "not understood" in why_not_live(machine, "topology")


def test_peer_access_from_nvml_when_the_text_is_missing():
    machine = Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=2,
                      p2p_matrix={"read": {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}})
    text, source = live_tool_output(machine, "p2p")
    assert source == "live" and "read: GPU0 -> GPU1 OK" in text


def test_no_sentence_ever_says_none():
    machines = [Machine(), Machine(mode="single-gpu", gpu_count=1, visible_gpu_count=1),
                Machine(mode="multi-gpu", gpu_count=8, visible_gpu_count=8)]
    for machine in machines:
        for item in ITEMS:
            text, _ = live_tool_output(machine, item)
            assert "None" not in text, (machine.mode, item, text)
        assert "None" not in pair_sentence(machine) and "None" not in affinity_lines(machine)


def test_unknown_item_is_refused():
    with pytest.raises(ValueError, match="item must be one of"):
        live_tool_output(Machine(), "nics")

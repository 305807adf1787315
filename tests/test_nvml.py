"""NVML where it is exact, text where it teaches: one result either way (issue 14, point 2).

A fake `pynvml` module answers from the same recorded machine the stand-in nvidia-smi
replays; detection through NVML and through nvidia-smi's text must then agree.
"""

import sys
import types

import pytest

from coursetools import nvml
from gputopo import reference
from coursetools.detect import detect
from gputopo.parsers import p2p_status
from gputopo.parsers.nvidia_smi import nvlink_link_counts
from gputopo.parsers.topo import parse as parse_topo

H200 = "h200-nvswitch-8gpu"
NAMES = ["NVIDIA H200"] * 8
BUS_IDS = [f"00000000:{bus}:00.0" for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")]


class NVMLError(Exception):
    pass


def fake_pynvml(names, bus_ids, nvlink_text=None, p2p=None, ancestors=None, init_error=None):
    """A module with the pynvml calls coursetools.nvml makes, answering from recorded text."""
    module = types.ModuleType("pynvml")
    counts = nvlink_link_counts(nvlink_text or "")

    def init():
        if init_error:
            raise NVMLError(init_error)

    def nvlink_state(handle, link):
        gpu = counts.get(f"GPU{handle}")
        if gpu is None or link >= gpu["active"] + gpu["inactive"]:
            raise NVMLError("Not Supported")
        return 1 if link < gpu["active"] else 0

    def p2p_status(first, second, index):
        code = (p2p or {}).get(f"GPU{first}", {}).get(f"GPU{second}", "U")
        return {v: k for k, v in nvml.P2P_CODES.items()}[code]

    def ancestor(first, second):
        code = (ancestors or {}).get(f"GPU{first}", {}).get(f"GPU{second}")
        if code is None:
            raise NVMLError("Not Supported")
        return {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}[code]

    module.nvmlInit = init
    module.nvmlDeviceGetCount = lambda: len(names)
    module.nvmlDeviceGetHandleByIndex = lambda i: i
    module.nvmlSystemGetDriverVersion = lambda: "570.86.15"
    module.nvmlSystemGetCudaDriverVersion = lambda: 12080
    module.nvmlDeviceGetName = lambda h: names[h]
    module.nvmlDeviceGetUUID = lambda h: f"GPU-{h:08d}-0000-0000-0000-000000000000"
    module.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=bus_ids[h].encode())
    module.nvmlDeviceGetMigMode = lambda h: [0, 0]
    module.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    module.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 16
    module.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 1
    module.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 16
    module.nvmlDeviceGetNvLinkState = nvlink_state

    module.nvmlDeviceGetP2PStatus = p2p_status
    module.nvmlDeviceGetTopologyCommonAncestor = ancestor
    return module


def use_nvml(monkeypatch, module):
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setenv("GPUTOPO_NVML", "1")


def test_nvml_and_text_give_one_result(fake_nvidia_smi, monkeypatch):
    p2p_text = reference.read_text(H200, "nvidia-smi-topo-p2p-rw.txt")
    script = fake_nvidia_smi(
        H200, gpu_names=NAMES, outputs={"topo -p2p r": p2p_text, "topo -p2p w": p2p_text}
    )
    import json

    answers = json.loads((script.parent / "answers.json").read_text())
    for gpu, bus in zip(answers["gpus"], BUS_IDS):
        gpu["pci.bus_id"] = bus
        gpu["uuid"] = f"GPU-{int(gpu['index']):08d}-0000-0000-0000-000000000000"
    (script.parent / "answers.json").write_text(json.dumps(answers))
    by_text = detect(check_horovod=False, environ={})
    assert by_text.facts_from == "nvidia-smi"

    use_nvml(
        monkeypatch,
        fake_pynvml(
            NAMES,
            BUS_IDS,
            reference.read_text(H200, "nvidia-smi-nvlink-s.txt"),
            p2p_status.parse(p2p_text)["status"],
        ),
    )
    by_nvml = detect(check_horovod=False, environ={})
    assert by_nvml.facts_from == "NVML"
    for field in (
        "mode",
        "gpu_count",
        "visible_gpu_count",
        "gpu_names",
        "gpu_bus_ids",
        "nvlink",
        "p2p_matrix",
        "best_pair",
        "worst_pair",
    ):
        assert getattr(by_nvml, field) == getattr(by_text, field), field
    assert [g.uuid for g in by_nvml.gpus] == [g.uuid for g in by_text.gpus]
    assert by_nvml.nvlink["GPU3"]["active"] == 18
    assert by_nvml.gpus[0].pcie_gen_max == 5 and by_nvml.gpus[0].pcie_width_max == 16
    assert by_nvml.banner() == by_text.banner()
    # nvml.h: the CUDA driver version is 1000 * major + 10 * minor (CUDA 9.2 is 9020)
    assert by_nvml.cuda_version == "12.8"


def test_nvml_common_ancestors_stand_in_for_a_missing_topo_matrix(fake_nvidia_smi, monkeypatch):
    # A PCIe box: the text of topo -m is the reference the NVML answer must match.
    from pathlib import Path

    text = (
        Path(__file__).parent
        / "fixtures"
        / "machines"
        / "l40s-4gpu-2numa-nics"
        / "nvidia-smi-topo-m.txt"
    ).read_text()
    links = parse_topo(text)["links"]
    links = {
        gpu: {peer: code for peer, code in row.items() if peer.startswith("GPU")}
        for gpu, row in links.items()
        if gpu.startswith("GPU")
    }
    names = ["NVIDIA L40S"] * len(links)
    fake_nvidia_smi(gpu_names=names, outputs={"topo -m": "Failed to run topology: Not Supported\n"})
    use_nvml(
        monkeypatch,
        fake_pynvml(
            names, [f"00000000:{i + 4:02X}:00.0" for i in range(len(names))], ancestors=links
        ),
    )
    machine = detect(check_horovod=False, environ={})
    assert machine.topology["source"] == "NVML"
    assert machine.topology["links"] == links
    assert (
        machine.best_pair == parse_topo(text)["best_pair"]
        and machine.worst_pair == parse_topo(text)["worst_pair"]
    )


def test_nvml_that_does_not_start_falls_back_to_text(fake_nvidia_smi, monkeypatch):
    fake_nvidia_smi("h100-pcie-nvlink-pair")
    use_nvml(monkeypatch, fake_pynvml([], [], init_error="NVML Shared Library Not Found"))
    machine = detect(check_horovod=False, environ={})
    assert machine.facts_from == "nvidia-smi" and machine.gpu_count == 2
    assert (
        "NVML did not start" in machine.notes["nvml"]
        and "Library Not Found" in machine.notes["nvml"]
    )


def test_nvml_status_codes_are_the_ones_nvidia_smi_prints():
    lib = fake_pynvml(
        ["A", "B", "C"],
        ["0:1:0.0", "0:2:0.0", "0:3:0.0"],
        p2p={
            "GPU0": {"GPU1": "CNS", "GPU2": "DR"},
            "GPU1": {"GPU0": "TNS", "GPU2": "GNS"},
            "GPU2": {"GPU0": "OK", "GPU1": "NS"},
        },
    )
    assert nvml.p2p_status(lib, "read") == {
        "GPU0": {"GPU1": "CNS", "GPU2": "DR"},
        "GPU1": {"GPU0": "TNS", "GPU2": "GNS"},
        "GPU2": {"GPU0": "OK", "GPU1": "NS"},
    }
    assert nvml.nvlink_counts(lib) == {}  # no NVLink slots at all


@pytest.mark.parametrize("value", ["0"])
def test_gputopo_nvml_0_keeps_the_text_path(monkeypatch, value):
    monkeypatch.setenv("GPUTOPO_NVML", value)
    lib, why = nvml.load()
    assert lib is None and "GPUTOPO_NVML=0" in why

"""NVML's answers reach the Machine typed: no "[N/A]" or "5" strings made and parsed back.

The fake pynvml of test_nvml.py answers PCIe gen 5 x16 max, gen 1 x16 now and MIG off; one
GPU here also refuses its UUID and PCIe generation (NotSupported), which must become None.
"""

from test_nvml import BUS_IDS, NAMES, NVMLError, fake_pynvml

from coursetools import nvml
from coursetools.gpus import Gpu


def _refusing(module):
    def refuse(*args):
        raise NVMLError("Not Supported")

    module.nvmlDeviceGetUUID = lambda h: refuse() if h == 1 else f"GPU-{h:08d}"
    module.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: refuse() if h == 1 else 5
    return module


def test_inventory_is_typed_and_unknown_is_none():
    first, second = nvml.inventory(_refusing(fake_pynvml(NAMES[:2], BUS_IDS[:2])))
    assert first == Gpu(
        index=0,
        name="NVIDIA H200",
        bus_id="00000000:18:00.0",
        uuid="GPU-00000000",
        pcie_gen_max=5,
        pcie_width_max=16,
        pcie_gen_current=1,
        pcie_width_current=16,
        mig_mode="Disabled",
    )
    assert second.uuid is None and second.pcie_gen_max is None
    assert second.pcie_width_max == 16


def test_detect_takes_nvml_facts_without_asking_the_text_query(monkeypatch, tmp_path):
    # nvidia-smi here answers only the plain and topo calls; a --query-gpu call would be logged.
    calls = tmp_path / "calls"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexit 2\n')
    smi.chmod(0o755)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake_pynvml(NAMES[:2], BUS_IDS[:2]))
    monkeypatch.setenv("GPUTOPO_NVML", "1")
    from coursetools.detect import detect

    found = detect(nvidia_smi=str(smi), check_horovod=False, environ={})
    assert [g.pcie_gen_max for g in found.gpus] == [5, 5]
    assert [g.mig_mode for g in found.gpus] == ["Disabled", "Disabled"]
    assert found.driver_version == "570.86.15"
    # the text path only where NVML is absent: `topo -m` (NV# bonds, affinity) is the one text read
    assert calls.read_text().splitlines() == ["topo -m"]


def test_mig_instances_come_from_nvml():
    # an A100 in MIG mode with two of its seven instance slots in use (NVML_ERROR_NOT_FOUND on the
    # others, as nvmlDeviceGetMigDeviceHandleByIndex answers an empty slot)
    module = fake_pynvml(["NVIDIA A100-SXM4-40GB"], ["00000000:07:00.0"])
    module.nvmlDeviceGetMigMode = lambda h: [1, 1]
    module.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7
    module.nvmlDeviceGetMigDeviceHandleByIndex = lambda h, i: (
        ("mig", i) if i < 2 else (_ for _ in ()).throw(NVMLError("Not Found"))
    )
    uuids = {("mig", 0): "MIG-aaa", ("mig", 1): "MIG-bbb"}
    module.nvmlDeviceGetUUID = lambda h: uuids[h] if isinstance(h, tuple) else "GPU-aaa"
    (gpu,) = nvml.inventory(module)
    assert gpu.mig_mode == "Enabled" and gpu.mig_uuids == ["MIG-aaa", "MIG-bbb"]

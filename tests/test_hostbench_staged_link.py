"""Notebook 1's staged-copy ceiling: the link the machine trained, and 24 bytes per TLP (review J2, n4).

Expected values worked out by hand from the PCI Express Base Specification's numbers, not
from links.py: a gen3-5 memory write carries, besides its payload, a 4-byte STP framing token
(with the sequence number), a 16-byte header (4 DW: a GPU's DMA to host memory above 4 GiB
needs 64-bit addresses) and a 4-byte LCRC: 24 bytes.
- gen5 x16: 32 GT/s x 16 x 128/130 / 8 = 63.0154 GB/s; x 256/280 = 57.61; x 128/152 = 53.07.
- gen4 x8 (what a live machine's driver might report): 16 x 8 x 128/130 / 8 = 15.7538 GB/s;
  x 256/280 = 14.40; x 128/152 = 13.27.
"""

import types

import pytest

from gputopo import hostbench
from gputopo.gpus import Gpu


def machine_with(gen, width, name="NVIDIA H100 PCIe"):
    gpus = [Gpu(0, name, pcie_gen_max=gen, pcie_width_max=16), Gpu(1, name, pcie_gen_max=gen, pcie_width_max=width)]
    return types.SimpleNamespace(gpus=gpus, gpu_names=[name, name], link_between=lambda a, b: "NV12")


def test_recorded_h200_run_uses_gen5_x16_with_24_byte_tlp_overhead():
    peak, tlp = hostbench.staged_copy_link({"mode": "reference", "gpu": "NVIDIA H200"})
    assert peak.gbs == pytest.approx(63.0154, abs=0.001)
    assert tlp[256] == pytest.approx(57.61, abs=0.01)
    assert tlp[128] == pytest.approx(53.07, abs=0.01)


def test_live_run_uses_the_link_the_driver_reports_not_the_gpu_name():
    # An H100's name says gen5 x16; this machine's second GPU trained at gen4 x8.
    peak, tlp = hostbench.staged_copy_link({"mode": "live", "gpu": "NVIDIA H100 PCIe"}, machine_with(4, 8))
    assert peak.gbs == pytest.approx(15.7538, abs=0.001)
    assert "this machine" in peak.source
    assert tlp[256] == pytest.approx(14.40, abs=0.01)
    assert tlp[128] == pytest.approx(13.27, abs=0.01)


def test_live_run_without_driver_facts_falls_back_to_the_gpu_table():
    peak, tlp = hostbench.staged_copy_link({"mode": "live", "gpu": "NVIDIA H100 PCIe"}, machine_with(None, None))
    assert peak.gbs == pytest.approx(63.0154, abs=0.001)
    assert tlp[256] == pytest.approx(57.61, abs=0.01)


def test_gen6_link_and_unknown_gpu_give_no_tlp_ceiling():
    peak, tlp = hostbench.staged_copy_link({"mode": "live", "gpu": "NVIDIA B200"}, machine_with(6, 16, "NVIDIA B200"))
    assert peak.gbs == pytest.approx(118.0, abs=0.01) and tlp == {}
    peak, tlp = hostbench.staged_copy_link({"mode": "reference", "gpu": "Mystery GPU 9000"})
    assert peak.gbs is None and peak.why and tlp == {}

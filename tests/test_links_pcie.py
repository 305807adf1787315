"""The PCIe rows of the peak table: gen6 on a stated basis, and the packet overhead on top.

Expected values, worked out by hand from the specification's numbers (not from links.py):
- gen6 x16 (PCI Express Base Specification 6.0, Flit Mode: a 256-byte flit holds 236 bytes
  of TLPs, 6 of DLLP payload, 8 of CRC, 6 of FEC; 1b/1b, no line code):
  64 GT/s x 16 lanes / 8 = 128 GB/s raw, x 236/256 = 118.0 GB/s for TLPs.
- gen5 x16 after each memory-write TLP's 4-byte STP token, 16-byte (4 DW) header and 4-byte
  LCRC (PCI Express Base Specification 5.0): 63.0154 GB/s x 256/280 = 57.61 GB/s with
  256-byte payloads, x 128/152 = 53.07 GB/s with 128-byte payloads.
"""

import pytest

from gputopo import links


def test_gen6_deducts_the_flit_bytes_that_carry_no_tlps():
    assert links.pcie_gbs("gen6") == pytest.approx(118.0, abs=0.005)
    assert links.pcie_gbs("gen6", 4) == pytest.approx(29.5, abs=0.005)  # an x4 NVMe drive


def test_gen6_row_says_its_basis():
    row = next(r for r in links.link_table() if r["link"] == "PCIe gen6 x16")
    assert row["per_direction_gbs"] == 118.0 and row["both_directions_gbs"] == 236.0
    assert "236/256" in row["how_computed"] and "flit" in row["how_computed"].lower()
    assert "236 TLP bytes per 256-byte flit" in row["source"]
    found = links.peak("PIX", "gen6")
    assert "236/256" in found.how and found.gbs == pytest.approx(118.0)


def test_gen3_to_gen5_rows_keep_128b130b():
    for generation, expected in (("gen3", 15.75), ("gen4", 31.51), ("gen5", 63.02)):
        row = next(r for r in links.link_table() if r["link"] == f"PCIe {generation} x16")
        assert row["per_direction_gbs"] == expected and "128/130" in row["how_computed"]


@pytest.mark.parametrize("payload, expected", [(256, 57.61), (128, 53.07)])
def test_gen5_after_tlp_overhead(payload, expected):
    assert links.pcie_tlp_gbs("gen5", payload) == pytest.approx(expected, abs=0.01)


def test_tlp_overhead_covers_only_128b130b_generations():
    assert links.pcie_tlp_gbs("gen3") == pytest.approx(15.754 * 256 / 280, abs=0.01)
    for bad in ("gen6", "gen2"):
        with pytest.raises(ValueError, match="gen3 to gen5"):
            links.pcie_tlp_gbs(bad)

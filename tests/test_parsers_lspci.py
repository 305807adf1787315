"""gputopo.parsers.lspci: `lspci -vvv` read into devices, bridges and ACS control bits.

Fixtures and their sources: tests/fixtures/doctor/README.md. Expected bridges, buses and flags
below were read by hand from those files. Which ACSCtl bits redirect peer-to-peer traffic
(ReqRedir, CmpltRedir): NCCL's troubleshooting guide, "PCI Access Control Services (ACS)".
"""

from pathlib import Path

import pytest

from gputopo.parsers import lspci

FIXTURES = Path(__file__).parent / "fixtures" / "doctor"


def text(name):
    return (FIXTURES / name).read_text()


def test_bridges_ports_and_acs_bits():
    parsed = lspci.parse(text("lspci-plx-switch-acs-redirect.txt"))
    by_bdf = {d["bdf"]: d for d in parsed["devices"]}
    assert list(by_bdf) == ["0000:01:00.0", "0000:02:08.0", "0000:82:00.0"]
    downstream = by_bdf["0000:02:08.0"]
    assert downstream["bridge"] == (0x02, 0x82, 0x82) and downstream["port"] == "Downstream Port"
    assert downstream["acs_ctl"] == {
        "SrcValid": True,
        "TransBlk": False,
        "ReqRedir": True,
        "CmpltRedir": True,
        "UpstreamFwd": True,
        "EgressCtrl": False,
        "DirectTrans": False,
    }
    assert by_bdf["0000:01:00.0"]["acs_ctl"] is None and by_bdf["0000:82:00.0"]["bridge"] is None
    assert parsed["access_denied"] is False


def test_the_bridge_above_the_gpu_by_nvidia_smi_bus_id():
    parsed = lspci.parse(text("lspci-plx-switch-acs-redirect.txt"))
    found = lspci.acs_above_gpus(parsed, ["00000000:82:00.0"])
    assert found["gpus"] == ["0000:82"]
    assert [(b["bdf"], b["gpus"], b["redirect"]) for b in found["bridges"]] == [
        ("0000:01:00.0", ["0000:82"], False),  # the upstream port: no ACS lines, unreadable
        ("0000:02:08.0", ["0000:82"], True),
    ]
    assert found["unreadable"] == ["0000:01:00.0"]


@pytest.mark.parametrize(
    "bits, redirect",
    [
        ("ReqRedir+ CmpltRedir+", True),  # as posted
        ("ReqRedir+ CmpltRedir-", True),
        ("ReqRedir- CmpltRedir+", True),
        ("ReqRedir- CmpltRedir-", False),
    ],
)
def test_either_redirect_bit_redirects(bits, redirect):
    # The AMD GPP root ports of NVIDIA/nccl#2079 with one, both or neither bit set.
    posted = text("lspci-amd-gpp-root-ports-acs-redirect.txt")
    changed = posted.replace("ReqRedir+ CmpltRedir+", bits)
    found = lspci.acs_above_gpus(lspci.parse(changed))
    assert found["gpus"] == ["0000:41", "0000:61"]
    assert [b["redirect"] for b in found["bridges"]] == [redirect, redirect]


def test_access_denied_and_lines_it_does_not_know():
    parsed = lspci.parse(text("lspci-not-root-access-denied.txt"))
    assert parsed["access_denied"] is True
    assert all(d["acs_ctl"] is None for d in parsed["devices"])
    assert lspci.parse("garbage\n\tmore garbage\n") == {"devices": [], "access_denied": False}


def test_a_vmd_domain_is_not_domain_zero():
    """Hand-made, in lspci's format: a bridge in domain 0000 whose secondary bus is 0x01, and a
    GPU on bus 0x01 of domain 10000 (Intel VMD; nvidia-smi writes it 00010000:01:00.0). The
    bridge is not above that GPU: the domains differ once they are read at full width."""
    sample = (
        "0000:00:01.0 PCI bridge: Intel Corporation Device 1234 (rev 04) (prog-if 00 [Normal "
        "decode])\n"
        "\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- "
        "DirectTrans-\n"
        "10000:01:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
    )
    parsed = lspci.parse(sample)
    assert [d["bdf"] for d in parsed["devices"]] == ["0000:00:01.0", "10000:01:00.0"]
    found = lspci.acs_above_gpus(parsed, ["00010000:01:00.0"])
    assert found["gpus"] == ["10000:01"] and found["bridges"] == []
    assert lspci.acs_above_gpus(parsed, ["00000000:01:00.0"])["bridges"][0]["redirect"] is True

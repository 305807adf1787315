"""An NVLink's peak is its data rate per link, live or recorded, never the signalling rate.

`nvidia-smi nvlink -s` prints 26.562 GB/s per NVLink 4 link: the signalling rate. The data
rate is 25 GB/s per direction per link (NVIDIA H100 Tensor Core GPU Architecture whitepaper:
18 links, 900 GB/s in both directions; H200 datasheet: 900 GB/s). A live run on the course's
H200 pair once printed a peak of 478.12 GB/s (18 x 26.562, 83 %) while the recorded row of the
same machine said 450 (88 %). Peaks come from the data-rate table (links.peak) only.

Every expected figure was read by hand from the recorded files named in each test.
"""

import json
from pathlib import Path

import pytest

from gputopo import links
from coursetools.detect import detect
from gputopo.lessons import p2p_test
from gputopo.parsers import p2p as p2p_parser

H100 = "h100-pcie-nvlink-pair"
H200 = "h200-nvswitch-pair"
# The H200 pair's executed course run: verification evidence, outside the lesson data.
EVIDENCE = Path(__file__).resolve().parents[1] / "evidence" / "2026-11-23-h200-nvswitch-pair"


def machine_from(fake_nvidia_smi, system, nvlink_text=None):
    outputs = {} if nvlink_text is None else {"nvlink -s": nvlink_text}
    fake_nvidia_smi(system, outputs=outputs)
    return detect(check_horovod=False, environ={})


def test_h100_bridge_pair_peak_is_12_links_at_the_data_rate():
    # topo -m: NV12; nvlink -s prints 26.562 per link (signalling); the peak is 12 x 25.
    found = links.peak("NV12", "NVIDIA H100 PCIe")
    assert found.gbs == pytest.approx(300.0) and "12 links x 25 GB/s" in found.how


def test_h200_pair_peak_is_450_like_its_recorded_row(fake_nvidia_smi):
    machine = machine_from(fake_nvidia_smi, H200)
    assert links.peak_gbs(machine.link_between(0, 1), machine.gpu_names[0]) == pytest.approx(450.0)
    # The live run of the course on that machine (its notebook 4 then, cell 5) printed 396.45 GB/s
    # for GPU0 -> GPU1; held against the machine it is 396.45 / 450 = 88 %, as the recorded row.
    course_run = (
        EVIDENCE / "course-run" / "4.P2P-Bandwidth-Latency-Test.ipynb"
    )  # numbered as it was then
    notebook = json.loads(course_run.read_text(encoding="utf-8"))
    text = "".join(notebook["cells"][5]["outputs"][0]["data"]["text/plain"])
    live = p2p_parser.parse(text)
    rows = p2p_test.efficiency_rows(live, p2p_test.link_lookup(topology=machine.topology))
    first = next(r for r in rows if r["matrix"] == "unidirectional_write" and r["pair"] == "0->1")
    assert first["gbs"] == pytest.approx(396.45)
    assert first["peak"] == pytest.approx(450.0) and f"{first['share']:.0%}" == "88%"
    entry = p2p_test.recorded([H200])[H200]
    recorded_row = next(
        r
        for r in p2p_test.efficiency_rows(
            entry["parsed"], p2p_test.link_lookup(H200), entry["gpu"], H200
        )
        if r["matrix"] == "unidirectional_write" and r["pair"] == "0->1"
    )
    assert f"{recorded_row['share']:.0%}" == "88%"

"""An NVLink's peak is its data rate per link, live or recorded, never the signalling rate.

`nvidia-smi nvlink -s` prints 26.562 GB/s per NVLink 4 link: the signalling rate. The data
rate is 25 GB/s per direction per link (NVIDIA H100 Tensor Core GPU Architecture whitepaper:
18 links, 900 GB/s in both directions; H200 datasheet: 900 GB/s). A live run on the course's
H200 pair once printed a peak of 478.12 GB/s (18 x 26.562, 83 %) while the recorded row of the
same machine said 450 (88 %). The machine's `nvlink -s` now only counts active links and
flags slower ones.

Every expected figure was read by hand from the recorded files named in each test.
"""

import json
from pathlib import Path

import pytest

from gputopo import links, reference
from coursetools.detect import detect
from gputopo.lessons import p2p_test
from gputopo.parsers import p2p as p2p_parser
from gputopo.parsers.nvidia_smi import nvlink_link_speeds

H100 = "h100-pcie-nvlink-pair"
H200 = "h200-nvswitch-pair"
# The H200 pair's executed course run: verification evidence, outside the lesson data.
EVIDENCE = Path(__file__).resolve().parents[1] / "evidence" / "2026-11-23-h200-nvswitch-pair"


def recorded_nvlink(system):
    return reference.read_text(system, "nvidia-smi-nvlink-s.txt")


def machine_from(fake_nvidia_smi, system, nvlink_text=None):
    outputs = {} if nvlink_text is None else {"nvlink -s": nvlink_text}
    fake_nvidia_smi(system, outputs=outputs)
    return detect(check_horovod=False, environ={})


def test_the_parser_lists_every_active_link_speed():
    # h100-pcie-nvlink-pair/nvidia-smi-nvlink-s.txt: links 0-3, 6-9, 12-15 at 26.562 GB/s,
    # links 4, 5, 10, 11, 16, 17 <inactive>, on both GPUs.
    speeds = nvlink_link_speeds(recorded_nvlink(H100))
    assert speeds == {"GPU0": [26.562] * 12, "GPU1": [26.562] * 12}
    assert nvlink_link_speeds("") == {}


def test_h100_bridge_pair_peak_is_12_links_at_the_data_rate(fake_nvidia_smi):
    # topo -m: NV12; nvlink -s: 12 active links per GPU at 26.562 (signalling) -> 12 x 25.
    machine = machine_from(fake_nvidia_smi, H100)
    found = links.machine_peak(machine, 0, 1)
    assert found.gbs == pytest.approx(300.0)
    assert "12 links x 25 GB/s" in found.how and "26.562" in found.how and "signalling" in found.how
    assert found.note is None


def test_h200_pair_peak_is_450_like_its_recorded_row(fake_nvidia_smi):
    # topo -m: NV18; nvlink -s: 18 active links per GPU, each 26.562 GB/s.
    machine = machine_from(fake_nvidia_smi, H200)
    found = links.machine_peak(machine, 0, 1)
    assert found.gbs == pytest.approx(450.0) and found.note is None
    assert "active links: this machine" in found.source

    # The live run of the course on that machine (its notebook 4 then, cell 5) printed 396.45 GB/s
    # for GPU0 -> GPU1; held against the machine it is 396.45 / 450 = 88 %, as the recorded row.
    course_run = EVIDENCE / "course-run" / "4.P2P-Bandwidth-Latency-Test.ipynb"   # numbered as it was then
    notebook = json.loads(course_run.read_text(encoding="utf-8"))
    text = "".join(notebook["cells"][5]["outputs"][0]["data"]["text/plain"])
    live = p2p_parser.parse(text)
    rows = p2p_test.efficiency_rows(live, p2p_test.link_lookup(topology=machine.topology))
    first = next(r for r in rows if r["matrix"] == "unidirectional_write" and r["pair"] == "0->1")
    assert first["gbs"] == pytest.approx(396.45)
    assert first["peak"] == pytest.approx(450.0) and f"{first['share']:.0%}" == "88%"
    entry = p2p_test.recorded([H200])[H200]
    recorded_row = next(r for r in p2p_test.efficiency_rows(entry["parsed"], p2p_test.link_lookup(H200), entry["gpu"], H200)
                        if r["matrix"] == "unidirectional_write" and r["pair"] == "0->1")
    assert f"{recorded_row['share']:.0%}" == "88%"


def test_a_missing_link_lowers_the_peak_and_says_so(fake_nvidia_smi):
    text = recorded_nvlink(H200)
    head, gpu1 = text.split("GPU 1:")
    gpu1 = gpu1.replace("Link 17: 26.562 GB/s", "Link 17: <inactive>")
    machine = machine_from(fake_nvidia_smi, H200, head + "GPU 1:" + gpu1)
    found = links.machine_peak(machine, 0, 1)
    assert found.gbs == pytest.approx(17 * 25.0)
    assert "GPU1 has only 17 active NVLinks" in found.note and "NV18" in found.note


def test_a_slower_link_is_flagged_and_the_data_rate_stays(fake_nvidia_smi):
    text = recorded_nvlink(H200).replace("Link 3: 26.562 GB/s", "Link 3: 13.281 GB/s", 1)  # GPU 0's link 3
    machine = machine_from(fake_nvidia_smi, H200, text)
    found = links.machine_peak(machine, 0, 1)
    assert found.gbs == pytest.approx(450.0)
    assert "1 of GPU0's 18 active NVLinks run slower" in found.note and "trained down" in found.note


def test_no_active_link_gives_no_peak_and_one_sentence(fake_nvidia_smi):
    text = recorded_nvlink(H200)
    head, gpu1 = text.split("GPU 1:")
    gpu1 = "\n".join(line.split(":")[0] + ": <inactive>" if "Link" in line else line for line in gpu1.splitlines())
    machine = machine_from(fake_nvidia_smi, H200, head + "GPU 1:" + gpu1 + "\n")
    found = links.machine_peak(machine, 0, 1)
    assert found.gbs is None and "no active NVLink on GPU1" in found.why and "\n" not in found.why


def test_an_unknown_gpu_never_gets_the_signalling_rate_as_its_peak(fake_nvidia_smi):
    fake_nvidia_smi(H200, gpu_names=["Future Accelerator X", "Future Accelerator X"],
                    outputs={"nvlink -s": recorded_nvlink(H200)})
    machine = detect(check_horovod=False, environ={})
    found = links.machine_peak(machine, 0, 1, "NV18")
    assert found.gbs is None
    assert "26.562 GB/s per link, which can be a signalling rate" in found.why

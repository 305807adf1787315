"""gputopo.lessons.latency, notebook 1's few lines around the host<->GPU copy runs (the course's
program host_copy_bench, recorded on one H200 on 2026-12-04, or the PyTorch lab's recorded H100
runs).

Expected values: the PCIe link of the recorded H100 read by hand from its
nvidia-smi-query-pcie.csv (gen 5 of 5, x16 of x16); the 1 GiB pinned copies of
host-device-copy-run1.txt (55.16 and 55.15 GB/s) against gen5 x16 after TLP overhead, 57.61 GB/s
(tests/test_notebook1_verdicts.py: as expected); a synthetic series built from alpha = 5 us and
beta = 50 GB/s, which the fit must give back. The H200's rows, read by hand from
h200-single-gpu/host-device-copy-bench-run1.txt: 8 B h2d pinned 2.32 us on the GPU and 5.67 us
alone (lines 16, 18: pageable has no time on the GPU); 1 GiB pinned on the GPU 55.48 and 55.33
GB/s, pageable alone 7.58 and 16.79 GB/s (lines 124-127).
"""

import pytest

from gputopo.lessons import latency
from gputopo.parsers import PARSERS
from gputopo.reference import REFERENCE_DIR

H100 = REFERENCE_DIR / "h100-single-gpu"
H200 = REFERENCE_DIR / "h200-single-gpu"


def _run(n):
    return PARSERS["host-device-copy"]((H100 / f"host-device-copy-run{n}.txt").read_text())


def test_pcie_link_is_read_from_the_recorded_query():
    link = latency.pcie_link((H100 / "nvidia-smi-query-pcie.csv").read_text())
    assert (link.type, link.generation, link.width, link.gen_max, link.width_max) == (
        "pcie",
        "gen5",
        16,
        "gen5",
        16,
    )
    assert link.gpu == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "No devices were found\n",
        "name,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
        "pcie.link.width.max\nNVIDIA H200,[N/A],[N/A],[N/A],[N/A],[N/A]\n",
    ],
)
def test_pcie_link_unknown_is_none_not_a_guess(text):
    assert latency.pcie_link(text) is None


def test_fit_gives_back_the_model_a_series_was_built_from():
    rows = [
        {
            "bytes": n,
            "direction": "h2d",
            "memory": "pinned",
            "time_us": 5.0 + n / 50e3,
            "gbs": 0.0,
            "check": "ok",
        }
        for n in (2**k for k in range(3, 26))
    ]
    alpha, beta = latency.fits({"rows": rows})[("h2d", "pinned")]
    assert alpha == pytest.approx(5.0, rel=1e-6) and beta == pytest.approx(50.0, rel=1e-6)


def test_fit_uses_only_the_sizes_up_to_32_mib():
    rows = [
        {
            "bytes": n,
            "direction": "d2h",
            "memory": "pageable",
            "time_us": 10.0 + n / 10e3,
            "gbs": 0.0,
            "check": "ok",
        }
        for n in (2**k for k in range(3, 26))
    ]
    rows += [
        {
            "bytes": 2**30,
            "direction": "d2h",
            "memory": "pageable",
            "time_us": 1e9,
            "gbs": 0.0,
            "check": "ok",
        }
    ]
    alpha, beta = latency.fits({"rows": rows})[("d2h", "pageable")]
    assert beta == pytest.approx(10.0, rel=1e-6)  # the absurd 1 GiB row is outside the fit


def test_time_of_one_size_is_the_row_the_lab_printed():
    assert latency.time_us(_run(2), 256 * 2**20, "h2d", "pinned") == 4859.55
    assert latency.time_us(_run(2), 256 * 2**20, "d2h", "pageable") == 18912.62
    assert latency.time_us(_run(2), 3, "h2d", "pinned") is None


def test_verdicts_on_the_largest_pinned_copies_and_a_cut_off_run():
    link = latency.pcie_link((H100 / "nvidia-smi-query-pcie.csv").read_text())
    got = {label.split(" (")[0]: v for label, v in latency.largest_verdicts(_run(1), link)}
    assert set(got) == {"h2d pinned, 1 GiB", "d2h pinned, 1 GiB"}  # pageable: no verdict
    assert (
        got["h2d pinned, 1 GiB"].status == "as expected" and got["h2d pinned, 1 GiB"].value == 55.16
    )
    assert (
        got["d2h pinned, 1 GiB"].status == "as expected" and got["d2h pinned, 1 GiB"].value == 55.15
    )
    cut = PARSERS["host-device-copy"](
        "\n".join((H100 / "host-device-copy-run1.txt").read_text().splitlines()[:30])
    )
    assert {v.status for _, v in latency.largest_verdicts(cut, link)} == {"incomplete"}


def test_pageable_copies_get_a_description_not_a_verdict():
    link = latency.pcie_link((H100 / "nvidia-smi-query-pcie.csv").read_text())
    h2d, d2h = latency.pageable_descriptions(_run(1), link)
    # run 1's 1 GiB pageable rows, read by hand: 7.69 and 12.43 GB/s; the gen5 x16 peak after
    # TLP overhead is 256/280 of 63.02 = 57.6 GB/s (PCIe 5.0 arithmetic), so 0.13 and 0.22 of it
    assert h2d.startswith("h2d pageable, 1 GiB") and "7.69 GB/s, 0.13 of the 57.6 GB/s peak" in h2d
    assert "12.43 GB/s, 0.22 of the 57.6 GB/s peak" in d2h
    assert all(line.endswith("a description, not a verdict") for line in (h2d, d2h))


def test_the_labs_runs_hold_one_measure_named_for_what_it_is():
    assert latency.measures(_run(1)) == ["queued"]
    assert "queued back to back" in latency.MEASURES["queued"][2]
    # the program's rows carry both times; a pageable row has no time on the GPU
    rows = [
        {
            "bytes": 8,
            "direction": "h2d",
            "memory": m,
            "copies": 20,
            "gpu_us": g,
            "gpu_gbs": None,
            "latency_us": 5.0,
            "latency_gbs": 0.0,
            "wrong": 0,
            "check": "ok",
        }
        for m, g in (("pinned", 1.5), ("pageable", None))
    ]
    program = {"rows": rows}
    assert latency.measures(program) == ["latency", "gpu"]
    assert latency.series(program, "h2d", "pinned", "gpu") == [(8, 1.5, None)]
    assert latency.series(program, "h2d", "pageable", "gpu") == []
    assert latency.time_us(program, 8, "h2d", "pageable") == 5.0  # the first measure: latency
    assert latency.bandwidth_measure(program, "pinned") == "gpu"
    assert latency.bandwidth_measure(program, "pageable") == "latency"
    assert latency.largest_gbs(_run(2), "d2h", "pageable") == 12.43  # run 2's 1 GiB row
    assert latency.largest_gbs(program, "d2h", "pinned") is None


def test_a_recording_of_the_program_stands_in_once_there_is_one(tmp_path, monkeypatch):
    monkeypatch.setattr(latency, "REFERENCE_DIR", tmp_path)
    assert latency.recorded_copies() == "h100-single-gpu/host-device-copy-run1.txt"
    assert latency.recorded_copies(2) == "h100-single-gpu/host-device-copy-run2.txt"
    for name in (
        "h200-single-gpu/host-device-copy-bench-run2.txt",
        "h200-single-gpu/host-device-copy-bench-run1.txt",
        "_published/host-device-copy-bench.txt",  # not a system: ignored
        "h200-single-gpu/host-device-copy-run1.txt",
    ):  # the lab's: not the program's
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    assert latency.recorded_copies() == "h200-single-gpu/host-device-copy-bench-run1.txt"
    assert latency.recorded_copies(2) == "h200-single-gpu/host-device-copy-bench-run2.txt"
    assert latency.recorded_copies(3) == "h200-single-gpu/host-device-copy-bench-run2.txt"


def test_the_h200_recordings_of_the_program_stand_in_and_are_read_as_the_program_s():
    assert latency.recorded_copies() == "h200-single-gpu/host-device-copy-bench-run1.txt"
    assert latency.recorded_copies(2) == "h200-single-gpu/host-device-copy-bench-run2.txt"
    run1 = PARSERS["host-device-copy"]((H200 / "host-device-copy-bench-run1.txt").read_text())
    assert latency.measures(run1) == ["latency", "gpu"]
    assert latency.time_us(run1, 8, "h2d", "pinned") == 5.67  # the first measure
    assert latency.time_us(run1, 8, "h2d", "pinned", "gpu") == 2.32
    assert latency.time_us(run1, 8, "h2d", "pageable", "gpu") is None  # N/A: no gate
    link = latency.pcie_link((H100 / "nvidia-smi-query-pcie.csv").read_text())  # gen5 x16
    got = {label: v for label, v in latency.largest_verdicts(run1, link)}
    assert {k: (v.status, v.value) for k, v in got.items()} == {
        "h2d pinned, 1 GiB (per-copy time on the GPU)": ("as expected", 55.48),
        "d2h pinned, 1 GiB (per-copy time on the GPU)": ("as expected", 55.33),
    }
    h2d, d2h = latency.pageable_descriptions(run1, link)
    assert "(latency of one copy): 7.58 GB/s, 0.13 of the 57.6 GB/s peak" in h2d
    assert "(latency of one copy): 16.79 GB/s, 0.29 of the 57.6 GB/s peak" in d2h

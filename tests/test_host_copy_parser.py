"""The host<->GPU copy lab's output (kind "host-device-copy"): gputopo.parsers.host_copy and the
CLI.
(The course's CUDA program's output, the same kind, is read back in tests/test_host_copy_bench.py.)

Golden values read by hand from source_code/reference_systems/h100-single-gpu/:
host-device-copy-run1.txt has 28 sizes (8 B to 1 GiB) x 4 rows = 112 measurement lines; its
first row is `8 h2d pinned 7.20 0.00 ok`, its 1 GiB h2d pinned row 19467.34 us, 55.16 GB/s; it
ends with '# data check: all copies correct'. run2's 256 MiB h2d pinned row is 4859.55 us.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.parsers import PARSERS, ParseError

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "source_code" / "reference_systems" / "h100-single-gpu"


def test_recorded_run_parses_with_hand_read_values():
    parsed = PARSERS["host-device-copy"]((H100 / "host-device-copy-run1.txt").read_text())
    assert (parsed["device"], parsed["gpu"]) == (0, "NVIDIA H100 80GB HBM3")
    assert len(parsed["rows"]) == 112
    assert parsed["rows"][0] == {
        "bytes": 8,
        "direction": "h2d",
        "memory": "pinned",
        "time_us": 7.20,
        "gbs": 0.0,
        "check": "ok",
    }
    last_h2d_pinned = [
        r for r in parsed["rows"] if r["direction"] == "h2d" and r["memory"] == "pinned"
    ][-1]
    assert (last_h2d_pinned["bytes"], last_h2d_pinned["time_us"], last_h2d_pinned["gbs"]) == (
        2**30,
        19467.34,
        55.16,
    )
    assert parsed["complete"] is True and parsed["all_correct"] is True


def test_output_cut_off_before_its_footer_is_incomplete_never_all_correct():
    lines = (H100 / "host-device-copy-run1.txt").read_text().splitlines()
    cut = "\n".join(lines[:30])  # the header and 26 rows, no '# data check' line
    parsed = PARSERS["host-device-copy"](cut)
    assert parsed["complete"] is False and len(parsed["rows"]) == 26
    # every row read says ok, but without the footer the run is not known to be all correct
    assert all(r["check"] == "ok" for r in parsed["rows"]) and parsed["all_correct"] is False
    assert parsed["truncated"] is True and parsed["truncated_line"] == 30
    assert parsed["data_check"].startswith("incomplete")
    # line 30 of run 1, read by hand: "512 d2h pinned 6.68 0.08 ok"
    assert parsed["last_complete_section"] == "the row for 512 bytes d2h pinned"


def test_cli_prints_what_a_cut_off_run_holds_says_so_in_one_line_and_exits_2(tmp_path):
    cut = tmp_path / "cut.txt"
    lines = (H100 / "host-device-copy-run1.txt").read_text().splitlines()
    cut.write_text("\n".join(lines[:30]) + "\n")
    done = _cli(str(cut), "--json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "truncated input" in done.stderr
    assert done.stderr.rstrip().endswith(f"({cut}:30)")
    data = json.loads(done.stdout)
    assert data["truncated"] is True and data["all_correct"] is False and len(data["rows"]) == 26


def test_a_stray_line_and_a_wrong_copy_are_kept_apart():
    text = (
        "# host_device_copy: device 1 (NVIDIA L4), torch 2.4.0, CUDA 12.1\n"
        "UserWarning: something a library printed\n"
        "           8        h2d    pinned       9.00     0.00 ok\n"
        "        1024        d2h  pageable      20.00     0.05 WRONG\n"
        "# data check: 1 WRONG\n"
    )
    parsed = PARSERS["host-device-copy"](text)
    assert parsed["device"] == 1 and len(parsed["rows"]) == 2
    assert parsed["complete"] is True and parsed["all_correct"] is False


@pytest.mark.parametrize(
    "text",
    [
        "",
        "host_device_copy: error: no CUDA device 0 here (torch sees 0)\n",
        "/bin/bash: line 1: python: command not found\n",
    ],
)
def test_no_measurement_line_is_a_parse_error(text):
    with pytest.raises(ParseError, match="no measurement line"):
        PARSERS["host-device-copy"](text)


def _cli(*args, stdin=None):
    env = {"PYTHONPATH": str(ROOT / "source_code"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "gputopo", "host-device-copy", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_cli_prints_json_and_rejects_an_error_output_in_one_line():
    done = _cli(str(H100 / "host-device-copy-run2.txt"), "--json")
    assert done.returncode == 0
    rows = json.loads(done.stdout)["rows"]
    assert [
        r["time_us"]
        for r in rows
        if r["bytes"] == 256 * 2**20 and r["direction"] == "h2d" and r["memory"] == "pinned"
    ] == [4859.55]
    bad = _cli("-", stdin="host_device_copy: error: PyTorch is not installed\n")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1 and "no measurement line" in bad.stderr

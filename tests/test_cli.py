"""`python -m gputopo <kind> FILE|- [--json]`: one JSON object, or one error line and exit 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo import reference
from gputopo.parsers import PARSERS

SOURCE_DIR = Path(__file__).resolve().parents[1] / "source_code"
V100_TOPO = reference.REFERENCE_DIR / "v100-sxm2-8gpu-server" / "nvidia-smi-topo-m.txt"
DRIVER_ERROR = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def run_cli(*args, stdin=""):
    env = dict(os.environ, PYTHONPATH=str(SOURCE_DIR))
    return subprocess.run(
        [sys.executable, "-m", "gputopo", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def assert_one_error_line(result, starts_with):
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n")
    assert result.stderr.startswith(starts_with)


# Each kind with one value read off the recorded file by eye (the numbers are in the file).
@pytest.mark.parametrize(
    "kind,system,name,recorded",
    [
        (
            "topo",
            "v100-sxm2-8gpu-server",
            "nvidia-smi-topo-m.txt",
            lambda out: out["links"]["GPU0"]["GPU3"] == "NV2" and out["best_pair"] == [0, 3],
        ),
        (
            "p2p",
            "rtx2080-nvlink-pair",
            "p2pBandwidthLatencyTest.txt",
            lambda out: (
                out["bandwidth_gbs"]["unidirectional_write"] == [[386.63, 24.23], [24.23, 389.76]]
            ),
        ),
        (
            "nccl-log",
            "dgx-a100",
            "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt",
            lambda out: out["transports"] == ["P2P"] and out["p2p_level"] == "PIX",
        ),
        (
            "nccl-tests",
            "v100-sxm2-8gpu-server",
            "all_reduce_perf-g8.txt",
            lambda out: (
                len(out["rows"]) == 25 and out["rows"][-1]["out_of_place"]["busbw"] == 129.14
            ),
        ),
        (
            "horovod",
            "dgx1-v100",
            "horovod-cnn-gpus-1-7-default.txt",
            lambda out: (
                [e["images_per_sec"] for e in out["epochs"]]
                == [98996.51, 98135.64, 97798.09, 96672.95, 95782.78]
            ),
        ),
    ],
)
def test_each_kind_prints_one_json_object(kind, system, name, recorded):
    result = run_cli(kind, str(reference.REFERENCE_DIR / system / name), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.count("\n") == 1  # exactly one line
    parsed = json.loads(result.stdout)
    assert recorded(parsed), parsed
    # The CLI prints what the library's parser returns, nothing dropped or added.
    assert parsed == json.loads(json.dumps(PARSERS[kind](reference.read_text(system, name))))


def test_topo_values_and_stdin():
    from_file = json.loads(run_cli("topo", str(V100_TOPO), "--json").stdout)
    from_stdin = run_cli("topo", "-", stdin=V100_TOPO.read_text(encoding="utf-8"))
    assert from_stdin.returncode == 0
    assert json.loads(from_stdin.stdout) == from_file  # without --json: same object, pretty
    assert from_file["best_pair"] == [0, 3] and from_file["worst_pair"] == [0, 4]


def test_driver_error_on_stdin():
    result = run_cli("topo", "-", "--json", stdin=DRIVER_ERROR)
    assert_one_error_line(result, "gputopo topo: error: nvidia-smi printed an error")
    assert result.stderr.rstrip().endswith("(<stdin>:1)")


def test_truncated_file_names_file_and_line(tmp_path):
    lines = (
        (reference.REFERENCE_DIR / "v100-sxm2-8gpu-server" / "all_reduce_perf-g8.txt")
        .read_text()
        .splitlines()
    )
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(lines[:20] + [lines[20][:30]]) + "\n")
    result = run_cli("nccl-tests", str(cut), "--json")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("gputopo nccl-tests: error: truncated input: row has")
    assert "; last complete section: the row for 128 bytes" in result.stderr
    assert result.stderr.rstrip().endswith(f"({cut}:21)")
    # the JSON holds what was read, marked truncated where the text stops: the rows read whole
    # (8 to 128 bytes in the recorded file), never passed off as a whole table
    read = json.loads(result.stdout)
    assert (read["truncated"], read["truncated_line"]) == (True, 21)
    assert read["last_complete_section"] == "the row for 128 bytes"
    assert [row["size"] for row in read["rows"]] == [8, 16, 32, 64, 128]


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.txt"
    result = run_cli("p2p", str(missing), "--json")
    assert_one_error_line(result, f"gputopo p2p: error: cannot read {missing}")


@pytest.mark.parametrize("args", [(), ("nvlink", "x.txt"), ("topo",), ("topo", "a", "b")])
def test_bad_usage_is_one_line(args):
    assert_one_error_line(run_cli(*args), "gputopo")


def test_help():
    result = run_cli("--help")
    assert result.returncode == 0
    for kind in ("topo", "p2p", "nccl-log", "nccl-tests", "horovod"):
        assert kind in result.stdout
    assert run_cli("topo", "--help").returncode == 0


def test_cli_imports_no_heavy_modules():
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['gputopo', 'topo', {str(V100_TOPO)!r}, '--json']\n"
        "try:\n"
        "    runpy.run_module('gputopo', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [name for name in ('numpy', 'matplotlib', 'tensorflow') if name in sys.modules]\n"
        "sys.stderr.write('heavy=' + ','.join(heavy))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(SOURCE_DIR))
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert json.loads(result.stdout)["best_pair"] == [0, 3]  # the CLI really ran
    assert result.stderr == "heavy="

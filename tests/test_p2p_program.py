"""The P2P bandwidth and latency test (source_code/p2pBandwidthLatencyTest).

CI has nvcc but no GPU: the program is compiled with the plain `make` (every data-center and
workstation architecture that nvcc supports) in a copy of its folder (with the shared
source_code/cuda_common beside it), and its --help, its answer to bad arguments (getopt_long
read strictly: no abbreviations, --name=N for numbers) and its clean no-GPU exit are checked,
as are the Makefile's architecture list, its SMS override and its one-line message without
nvcc. Tests marked gpu run the
program on real GPUs (P2P ones need two).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from coursetools import ladder
from gputopo.parsers import p2p as p2p_parser
from gpus import visible_gpu_count

SOURCE_DIR = ladder.P2P_TEST.parent
RECORDED = SOURCE_DIR.parent / "reference_systems"
PLAIN = "p2pBandwidthLatencyTest.txt"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)
OPTIONS = [
    "--help",
    "--p2p_read",
    "--sm_copy",
    "--numElems",
    "--devices",
    "--iters",
    "--reps",
    "--warmup",
    "--lat_iters",
    "--ce_streams",
    "--sm_blocks",
    "--sm_threads",
    "--timeout_s",
    "--json",
]
SMALL = ["--numElems=16777216", "--iters=4", "--reps=3"]  # 64 MiB copies: quick on any GPU

needs_toolchain = pytest.mark.skipif(
    NVCC is None or shutil.which("make") is None, reason="needs make and nvcc to build the P2P test"
)


GPUS = visible_gpu_count()
needs_gpu = pytest.mark.skipif(GPUS < 1, reason="no NVIDIA GPU visible (nvidia-smi -L lists none)")
needs_two_gpus = pytest.mark.skipif(GPUS < 2, reason=f"P2P needs two GPUs; {GPUS} visible")


# The data-center and workstation GPUs that `make` builds for when nvcc lists them.
KNOWN_SMS = [70, 75, 80, 86, 89, 90, 100, 120]


def _supported_archs():
    done = subprocess.run([NVCC, "--list-gpu-arch"], capture_output=True, text=True)
    numbers = {
        int(word[8:])
        for word in done.stdout.split()
        if word.startswith("compute_") and word[8:].isdigit()
    }
    return sorted(n for n in numbers if n in KNOWN_SMS)


def _copy_sources(destination):
    """The program's folder and the shared cuda_common beside it, as in source_code/."""
    shutil.copytree(SOURCE_DIR.parent / "cuda_common", destination / "cuda_common")
    shutil.copytree(
        SOURCE_DIR,
        destination / SOURCE_DIR.name,
        ignore=shutil.ignore_patterns("*.o", ".build-flags", "p2pBandwidthLatencyTest"),
    )
    return destination / SOURCE_DIR.name


def _make(folder, *args, env=None, timeout=900):
    # cwd rather than -C: -C makes make print "Entering directory" lines
    return subprocess.run(
        ["make", *args], cwd=str(folder), capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def binary(p2p_program):
    """Built with the plain `make` (every architecture nvcc lists) in source_code/, once a
    session."""
    if NVCC is None:
        pytest.skip("needs nvcc to build the P2P test")
    return p2p_program


def _run(binary, *args):
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=600, env=env
    )


def _one_line(text):
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {text!r}"
    return lines[0]


# ------------------------------------------------------------------ build and CLI (CI)


@needs_toolchain
def test_help_lists_every_option(binary):
    done = _run(binary, "--help")
    assert done.returncode == 0 and done.stderr == ""
    for option in OPTIONS:
        assert option in done.stdout, f"{option} missing from --help"


@needs_toolchain
@pytest.mark.skipif(GPUS > 0, reason="this machine has a GPU; the no-GPU exit cannot be seen")
def test_no_gpu_exits_2_with_one_line(binary):
    done = _run(binary)
    assert done.returncode == 2
    assert done.stdout == ""
    line = _one_line(done.stderr)
    assert line.startswith("p2pBandwidthLatencyTest: error: no CUDA GPU is visible")


@needs_toolchain
@pytest.mark.parametrize(
    "args, words",
    [
        (["--bogus"], "unknown option '--bogus'"),
        (["--numElems=abc"], "--numElems needs an integer"),
        (["--numElems"], "--numElems needs a value"),
        (["--numElems", "5"], "--numElems needs a value, as in --numElems=N"),  # numbers: =N only
        (["--num=5"], "unknown option '--num=5'"),  # getopt_long's abbreviations are refused
        (["--p2p"], "unknown option '--p2p'"),
        (["--", "--p2p_read"], "unknown option '--'"),
        (["-x"], "unexpected argument '-x'"),
        (["--iters=0"], "--iters needs an integer"),
        (["--devices=0,0"], "lists device 0 twice"),
        (["--devices=a"], "--devices needs an integer"),
        (["--sm_threads=100"], "multiple of 32"),
        (["--json"], "--json needs a file name"),
        (["--json="], "--json needs a file name"),
        (["--p2p_read=1"], "takes no value"),
        (["--inject-fault=1"], "takes no value"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(binary, args, words):
    done = _run(binary, *args)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert line.startswith("p2pBandwidthLatencyTest: error: ") and words in line
    assert "(argument" in line or "--json" in line


@needs_toolchain
def test_plain_make_builds_every_supported_data_center_and_workstation_architecture(tmp_path):
    folder = _copy_sources(tmp_path / "src")
    done = _make(folder, "-n", "p2pBandwidthLatencyTest")
    assert done.returncode == 0, done.stderr
    archs = _supported_archs()
    assert archs, f"nvcc lists none of {KNOWN_SMS}"
    kernel_line = next(line for line in done.stdout.splitlines() if "kernels.cu" in line)
    for sm in archs:
        assert f"arch=compute_{sm},code=sm_{sm}" in kernel_line
    assert f"arch=compute_{archs[-1]},code=compute_{archs[-1]}" in kernel_line  # PTX for the newest
    for jetson in (87, 88, 110):  # Jetson/DRIVE chips: never, even where nvcc lists them
        assert f"sm_{jetson}" not in kernel_line


@needs_toolchain
def test_make_sms_override_builds_only_those(tmp_path):
    folder = _copy_sources(tmp_path / "src")
    done = _make(folder, "SMS=80 90")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    kernel_line = next(line for line in done.stdout.splitlines() if "kernels.cu" in line)
    codes = sorted(part.split("code=")[1] for part in kernel_line.split() if "code=" in part)
    assert codes == ["compute_90", "sm_80", "sm_90"], kernel_line
    cuobjdump = shutil.which("cuobjdump") or (
        str(Path(NVCC).parent / "cuobjdump") if (Path(NVCC).parent / "cuobjdump").exists() else None
    )
    if cuobjdump:
        listed = subprocess.run(
            [cuobjdump, "--list-elf", str(folder / "p2pBandwidthLatencyTest")],
            capture_output=True,
            text=True,
        )
        assert listed.returncode == 0, listed.stderr
        arches = sorted(
            {word for word in listed.stdout.replace(".", " ").split() if word.startswith("sm_")}
        )
        assert arches == ["sm_80", "sm_90"], listed.stdout
    # changing SMS rebuilds; clean removes the outputs
    again = _make(folder, "SMS=90")
    assert (
        again.returncode == 0 and "code=sm_80" not in again.stdout and "kernels.cu" in again.stdout
    )
    cleaned = _make(folder, "clean")
    assert cleaned.returncode == 0
    assert not (folder / "p2pBandwidthLatencyTest").exists() and not list(folder.glob("*.o"))


def _path_without_nvcc():
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "nvcc").exists()
    ]
    return os.pathsep.join(keep)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_without_nvcc_says_so_in_one_line(tmp_path):
    folder = _copy_sources(tmp_path / "src")
    env = dict(os.environ, PATH=_path_without_nvcc(), CUDA_HOME=str(tmp_path / "no-cuda"))
    done = _make(folder, env=env)
    assert done.returncode != 0
    assert done.stdout.strip() == ""
    line = _one_line(done.stderr)
    assert "nvcc not found" in line
    # clean needs no compiler
    assert _make(folder, "clean", env=env).returncode == 0
    # a named compiler that is not there is not replaced by another one
    named = _make(folder, f"NVCC={tmp_path / 'no-nvcc'}")
    assert named.returncode != 0 and named.stdout.strip() == ""
    assert "nvcc not found" in _one_line(named.stderr) and "no-nvcc" in named.stderr


# ------------------------------------------------------------------ recorded runs


def test_recorded_runs_parse():
    # by hand: NVIDIA's sample on the H100 pair, its first P2P=Enabled row "0 ... 256.62"
    h100 = p2p_parser.parse((RECORDED / "h100-pcie-nvlink-pair" / PLAIN).read_text())
    assert h100["bandwidth_gbs"]["unidirectional_write"][0][1] == pytest.approx(256.62)


H200 = RECORDED / "h200-nvswitch-pair"


def test_recorded_h200_runs_agree_with_their_json():
    texts = sorted(H200.glob("p2pBandwidthLatencyTest*.txt"))
    assert len(texts) >= 8  # the sweep's runs (its README): none may go missing quietly
    for text_file in texts:
        parsed = p2p_parser.parse(text_file.read_text())
        assert parsed["connectivity"] is not None and parsed["devices"]
        # Every recorded run was made with --json beside its text (sweep.sh): compare them all.
        sidecar = text_file.with_suffix(".json")
        assert sidecar.exists(), f"{text_file.name} has no .json recorded beside it"
        data = json.loads(sidecar.read_text())
        _assert_text_matches_json(parsed, data)
        assert data["verification"]["ok"] is True


def _assert_text_matches_json(parsed, data):
    for group in ("bandwidth_gbs", "latency_us"):
        assert set(parsed[group]) == set(data[group]), group
        for key, rows in parsed[group].items():
            for text_row, json_row in zip(rows, data[group][key]):
                assert text_row == pytest.approx(json_row, abs=0.006), key
    assert parsed["connectivity"] == data["connectivity"]
    assert [d["index"] for d in parsed["devices"]] == [d["index"] for d in data["devices"]]


# ------------------------------------------------------------------ on GPUs


@pytest.mark.gpu
@needs_gpu
@needs_toolchain
def test_gpu_run_parses_and_passes_its_data_check(binary, tmp_path):
    json_path = tmp_path / "p2p.json"
    done = _run(binary, *SMALL, "--json", str(json_path))
    assert done.returncode == 0, done.stderr
    assert "Data check:" in done.stdout and "PASSED" in done.stdout
    parsed = p2p_parser.parse(done.stdout)
    data = json.loads(json_path.read_text())
    assert data["verification"]["ok"] is True and data["verification"]["mismatched_elements"] == 0
    _assert_text_matches_json(parsed, data)
    for key in (
        "unidirectional_disabled",
        "unidirectional_write",
        "bidirectional_disabled",
        "bidirectional_enabled",
    ):
        assert all(value > 0 for row in parsed["bandwidth_gbs"][key] for value in row)


@pytest.mark.gpu
@needs_two_gpus
@needs_toolchain
@pytest.mark.parametrize("mode", [[], ["--p2p_read"], ["--sm_copy"]])
def test_p2p_enabled_beats_disabled(binary, tmp_path, mode):
    json_path = tmp_path / "p2p.json"
    done = _run(binary, *SMALL, "--devices=0,1", *mode, "--json", str(json_path))
    assert done.returncode == 0, done.stderr
    data = json.loads(json_path.read_text())
    if data["connectivity"][0][1] != 1:
        pytest.skip("GPUs 0 and 1 have no peer access")
    key = "unidirectional_read" if mode == ["--p2p_read"] else "unidirectional_write"
    bandwidth, latency = data["bandwidth_gbs"], data["latency_us"]
    lat_key = key.split("_")[1] + "_gpu"
    for i, j in ((0, 1), (1, 0)):
        assert bandwidth[key][i][j] > bandwidth["unidirectional_disabled"][i][j]
        assert bandwidth["bidirectional_enabled"][i][j] > bandwidth["bidirectional_disabled"][i][j]
        assert latency[lat_key][i][j] < latency["disabled_gpu"][i][j]
    assert data["verification"]["ok"] is True


@pytest.mark.gpu
@needs_gpu
@needs_toolchain
def test_devices_option_selects_gpus(binary):
    done = _run(binary, *SMALL, "--devices=0")
    assert done.returncode == 0, done.stderr
    parsed = p2p_parser.parse(done.stdout)
    assert [d["index"] for d in parsed["devices"]] == [0]
    assert "P2P needs two GPUs" in done.stdout
    assert len(parsed["bandwidth_gbs"]["unidirectional_write"]) == 1
    if GPUS >= 2:
        done = _run(binary, *SMALL, "--devices=1,0")
        assert done.returncode == 0, done.stderr
        assert p2p_parser.parse(done.stdout)["row_indices"]["unidirectional_write"] == [1, 0]
    missing = _run(binary, f"--devices={GPUS}")
    assert missing.returncode == 2 and "only" in _one_line(missing.stderr)

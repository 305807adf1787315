"""Discovery: reference mode whenever nvidia-smi cannot help, live modes from recorded outputs."""

import importlib
import importlib.util
import os
import subprocess
import sys
import time

import pytest

from conftest import DRIVER_ERROR

detect_module = importlib.import_module("coursetools.detect")
from coursetools.detect import detect  # noqa: E402
from coursetools.machine import Machine  # noqa: E402
from gputopo import reference  # noqa: E402
from gputopo.parsers.toolchain import horovod_check_build, nccl_version  # noqa: E402
from gputopo.parsers.topo import parse as parse_topo  # noqa: E402

H100 = "h100-pcie-nvlink-pair"
V100 = "v100-sxm2-8gpu-server"

from test_parsers_nvidia_smi import P2P_READ_TWO_GPUS  # noqa: E402  (the `topo -p2p r` layout)

CHECK_BUILD = """\
Horovod v0.28.1:

Available Frameworks:
    [X] TensorFlow
    [ ] PyTorch
    [ ] MXNet

Available Controllers:
    [ ] MPI
    [X] Gloo

Available Tensor Operations:
    [X] NCCL
    [ ] DDL
    [ ] CCL
    [ ] MPI
    [X] Gloo
"""


def quick_detect(**options):
    # Horovod's check runs TensorFlow's import: only the test that needs it asks.
    options.setdefault("check_horovod", False)
    options.setdefault("environ", {})
    return detect(**options)


# ---------------------------------------------------------------- no usable nvidia-smi


def test_missing_nvidia_smi_gives_reference_mode_with_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvidia-smi anywhere
    machine = quick_detect()
    assert machine.mode == "reference"
    assert machine.reason == "nvidia-smi not found"
    assert machine.gpu_count == 0 and machine.topology is None
    assert "(nvidia-smi not found)" in machine.banner()
    assert "reference mode" in machine.banner()


def test_explicit_path_that_does_not_exist(tmp_path):
    machine = quick_detect(nvidia_smi=str(tmp_path / "nvidia-smi"))
    assert machine.mode == "reference"
    assert "not found" in machine.reason


def test_driver_error_exit_9_is_quoted_as_the_reason(fake_nvidia_smi):
    fake_nvidia_smi(fail=DRIVER_ERROR, exit_code=9)
    machine = quick_detect()
    assert machine.mode == "reference"
    assert "exit status 9" in machine.reason
    assert "couldn't communicate with the NVIDIA driver" in machine.reason
    assert "\n" not in machine.banner()


def test_hanging_nvidia_smi_times_out_into_reference_mode(fake_nvidia_smi):
    fake_nvidia_smi(hang=True)
    started = time.monotonic()
    machine = quick_detect(timeout=1)
    assert time.monotonic() - started < 15
    assert machine.mode == "reference"
    assert "did not answer within 1 s" in machine.reason


def test_garbage_output_gives_reference_mode_not_an_exception(fake_nvidia_smi):
    fake_nvidia_smi(fail="\x00\x01 this is not CSV; at all\n", exit_code=0)
    machine = quick_detect()
    assert machine.mode == "reference"
    assert "unexpected" in machine.reason


def test_no_devices_found(fake_nvidia_smi):
    fake_nvidia_smi()  # no system: the query answers "No devices were found", exit 6
    machine = quick_detect()
    assert machine.mode == "reference"
    assert machine.reason == "nvidia-smi found no GPUs"


def test_not_executable_nvidia_smi(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    machine = quick_detect(nvidia_smi=str(script))
    assert machine.mode == "reference"
    assert "not executable" in machine.reason


# ---------------------------------------------------------------- recorded real systems


def test_h100_pair_replayed_is_multi_gpu(fake_nvidia_smi):
    fake_nvidia_smi(H100)
    machine = quick_detect()
    assert machine.mode == "multi-gpu" and machine.reason is None
    assert machine.gpu_count == 2 and machine.visible_gpu_count == 2
    assert machine.gpu_names == ["NVIDIA H100 PCIe", "NVIDIA H100 PCIe"]
    assert machine.gpu_bus_ids == ["00000000:C2:00.0", "00000000:D5:00.0"]
    assert (machine.driver_version, machine.cuda_version) == ("555.42.02", "12.5")
    recorded = reference.read_text(H100, "nvidia-smi-topo-m.txt")
    assert machine.topology == parse_topo(recorded)
    assert machine.best_pair == [0, 1] and machine.link_between(0, 1) == "NV12"
    # nvlink -s lists 18 link slots per GPU; the active ones are the 12 that NV12 bonds.
    assert {gpu: links["active"] for gpu, links in machine.nvlink.items()} == {
        "GPU0": 12,
        "GPU1": 12,
    }
    # Nothing recorded for topo -p2p: a note, not a failure.
    assert machine.p2p_matrix is None and "p2p_read" in machine.notes
    banner = machine.banner()
    assert banner.startswith("2 GPUs are visible here (2 x NVIDIA H100 PCIe")
    assert "GPU0-GPU1 over NV12" in banner


def test_v100_server_replayed_finds_its_best_and_worst_pair(fake_nvidia_smi):
    fake_nvidia_smi(V100, gpu_names=["Tesla V100-SXM2-16GB"] * 8)
    machine = quick_detect()
    assert machine.mode == "multi-gpu" and machine.gpu_count == 8
    assert set(machine.gpu_names) == {"Tesla V100-SXM2-16GB"}
    # Row GPU0 reads "X NV1 NV1 NV2 SYS ...": the first NV2 pair and the first SYS pair.
    assert machine.best_pair == [0, 3] and machine.link_between(0, 3) == "NV2"
    assert machine.worst_pair == [0, 4] and machine.link_between(0, 4) == "SYS"
    # No plain nvidia-smi output was recorded for this server: driver and CUDA stay unknown.
    assert machine.driver_version is None and machine.cuda_version is None
    assert "cuda_version" in machine.notes


def test_p2p_status_is_read_from_topo_p2p(fake_nvidia_smi):
    denied = P2P_READ_TWO_GPUS.replace("\tOK\tX", "\tCNS\tX")
    fake_nvidia_smi(H100, outputs={"topo -p2p r": P2P_READ_TWO_GPUS, "topo -p2p w": denied})
    machine = quick_detect()
    assert machine.p2p_matrix == {
        "read": {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}},
        "write": {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "CNS"}},
    }


def test_unreadable_topology_is_a_note_not_an_exception(fake_nvidia_smi):
    fake_nvidia_smi(H100, outputs={"topo -m": "GPU0\tGPU1\nGPU0\t X \tBOGUS\n"})
    machine = quick_detect()
    assert machine.mode == "multi-gpu"
    assert machine.topology is None
    assert "not understood" in machine.notes["topology"]
    assert "best-connected" not in machine.banner()


@pytest.mark.parametrize(
    "visible, mode, count",
    [("", "reference", 0), ("-1", "reference", 0), ("1", "single-gpu", 1), ("0,1", "multi-gpu", 2)],
)
def test_cuda_visible_devices_decides_the_mode(fake_nvidia_smi, visible, mode, count):
    fake_nvidia_smi(H100)
    machine = quick_detect(environ={"CUDA_VISIBLE_DEVICES": visible})
    assert machine.gpu_count == 2
    assert (machine.mode, machine.visible_gpu_count) == (mode, count)
    if mode == "reference":
        assert "CUDA_VISIBLE_DEVICES" in machine.reason
    if mode == "single-gpu":
        assert machine.banner().startswith("One GPU is visible here")
        assert (
            "what needs two (GPU-to-GPU copies, NCCL, training on GPUs) shows recorded"
            in machine.banner()
        )
        assert "the course may use 1 of 2: CUDA_VISIBLE_DEVICES=1 allows GPU1" in machine.banner()


# ---------------------------------------------------------------- Horovod and NCCL probes


def test_parse_horovod_check_build():
    build = horovod_check_build(CHECK_BUILD)
    assert build["version"] == "0.28.1"
    assert (build["tensorflow"], build["nccl"], build["gloo"], build["mpi"]) == (
        True,
        True,
        True,
        False,
    )
    assert build["sections"]["Available Controllers"] == {"MPI": False, "Gloo": True}
    with pytest.raises(ValueError):
        horovod_check_build("Traceback (most recent call last):\n  ImportError: horovod\n")


def test_horovod_build_is_asked_and_a_broken_one_is_a_note(tmp_path, fake_nvidia_smi, monkeypatch):
    """No horovod package for this Python: the horovodrun on PATH is asked."""
    fake_nvidia_smi(H100)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "horovod" else find_spec(name, *a),
    )
    scripts = {
        "good": f"#!{sys.executable}\nprint({CHECK_BUILD!r})\n",
        "broken": "#!/bin/sh\necho 'ImportError: libtensorflow_framework.so.2' >&2\nexit 1\n",
    }
    found = {}
    for name, script in scripts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "horovodrun").write_text(script)
        (tmp_path / name / "horovodrun").chmod(0o755)
        with monkeypatch.context() as patch:
            patch.setenv("PATH", f"{tmp_path / name}:{os.environ['PATH']}")
            found[name] = quick_detect(check_horovod=True)
    assert found["good"].horovod["version"] == "0.28.1" and found["good"].horovod["nccl"] is True
    assert found["broken"].horovod is None
    assert "ImportError: libtensorflow_framework.so.2" in found["broken"].notes["horovod"]


def test_decode_nccl_version_both_encodings():
    assert nccl_version(22809) == "2.28.9"  # 2.9 and later: major*10000 + minor*100 + patch
    assert nccl_version(2708) == "2.7.8"  # before 2.9: major*1000 + minor*100 + patch


# ---------------------------------------------------------------- words and caching


def test_detect_once_detects_once(monkeypatch):
    calls = []

    def counting_detect(**options):
        calls.append(options)
        return Machine(mode="reference", reason="counted")

    monkeypatch.setattr(detect_module, "_cached", None)
    monkeypatch.setattr(detect_module, "detect", counting_detect)
    first, second = detect_module.detect_once(), detect_module.detect_once()
    assert first is second and "(counted)" in first.banner()
    assert len(calls) == 1


def test_importing_the_package_loads_no_heavy_library():
    # The CLI must start on a bare node: nothing outside the standard library at import.
    code = (
        "import sys, gputopo, coursetools.detect, coursetools.results, gputopo.links\n"
        "import gputopo.plots\n"
        "heavy = {'numpy', 'matplotlib', 'tensorflow', 'horovod'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"

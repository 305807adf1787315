"""The CNN's two frameworks: the --framework option, which framework Horovod is built for, and
what the runner passes on (the shared learning-rate rule and the PyTorch network:
test_cnn_model.py). No GPU, no real Horovod.
"""
import json
import sys
import textwrap

import pytest

import cnn_fmnist
from coursetools import horovod_cnn
from coursetools.machine import Machine


@pytest.fixture(autouse=True)
def results_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path / "results"))


def test_framework_option_and_its_error():
    assert cnn_fmnist.parse_args([]).framework == "tensorflow"
    assert cnn_fmnist.parse_args(["--framework", "pytorch"]).framework == "pytorch"
    assert cnn_fmnist.main(["--framework", "jax"]) == 2


def fake_site(root, frameworks):
    """A folder to put on PYTHONPATH: a horovod package built for `frameworks`, and stand-ins
    for the frameworks themselves (only their presence is probed)."""
    hvd = root / "horovod"
    (hvd / "runner").mkdir(parents=True)
    (hvd / "__init__.py").write_text("")
    (hvd / "runner" / "__init__.py").write_text("")
    (hvd / "runner" / "launch.py").write_text("")
    libs = {"tensorflow": ("tensorflow", "mpi_lib.cpython-311-x86_64-linux-gnu.so"),
            "pytorch": ("torch", "mpi_lib_v2.cpython-311-x86_64-linux-gnu.so")}
    for name, (sub, lib) in libs.items():
        (hvd / sub).mkdir()
        (hvd / sub / "__init__.py").write_text("")
        if name in frameworks:
            (hvd / sub / lib).write_bytes(b"")
    # PyTorch itself: only its presence is probed (TensorFlow is the venv's own, if any)
    (root / "torch").mkdir()
    (root / "torch" / "__init__.py").write_text("")
    return str(root)


@pytest.mark.parametrize("built,expected", [
    (["pytorch"], ["pytorch"]),
    (["tensorflow", "pytorch"], ["tensorflow", "pytorch"]),
    ([], []),
])
def test_probe_reads_horovods_compiled_extensions(tmp_path, built, expected):
    env = {"PYTHONPATH": fake_site(tmp_path, built), "PATH": "/usr/bin:/bin"}
    found, why = horovod_cnn.horovod_frameworks(sys.executable, env)
    if "tensorflow" in built and not _has_tensorflow():
        expected = [f for f in expected if f != "tensorflow"]
    assert found == expected
    assert (why is None) == bool(expected)
    if not expected:
        assert "environment/install.sh" in why


def _has_tensorflow():
    import importlib.util
    return importlib.util.find_spec("tensorflow") is not None


def test_pick_prefers_tensorflow_and_honours_a_wish(tmp_path):
    if not _has_tensorflow():
        pytest.skip("needs TensorFlow importable to stand for a both-frameworks Horovod")
    env = {"PYTHONPATH": fake_site(tmp_path, ["tensorflow", "pytorch"])}
    assert horovod_cnn.pick_framework(sys.executable, None, env) == ("tensorflow", None)
    assert horovod_cnn.pick_framework(sys.executable, "pytorch", env) == ("pytorch", None)
    name, why = horovod_cnn.pick_framework(sys.executable, "mxnet", env)
    assert name is None and "unknown framework 'mxnet'" in why


def test_a_missing_framework_is_named(tmp_path):
    env = {"PYTHONPATH": fake_site(tmp_path, ["pytorch"])}
    name, why = horovod_cnn.pick_framework(sys.executable, "tensorflow", env)
    assert name is None
    assert "not built for tensorflow" in why and "found: pytorch" in why


def test_the_runner_passes_the_framework_and_keeps_it(tmp_path):
    seen = tmp_path / "seen.json"
    launcher = tmp_path / "launch.py"
    launcher.write_text(textwrap.dedent(f"""\
        import json, sys
        json.dump(sys.argv[1:], open({str(seen)!r}, "w"))
        print("[0]<stdout>:EPOCH 1/1 images_per_sec=10.0 seconds=1.000 loss=1.0000 accuracy=0.5000 workers=2 batch_per_worker=8")
        print("[0]<stdout>:SUMMARY images_per_sec_median=10.0 images_per_sec_min=10.0 images_per_sec_max=10.0 epochs_timed=1 test_accuracy=0.5000 workers=2 batch_per_worker=8")
        """))
    machine = Machine(mode="reference", reason="none", gpu_count=0)
    result = horovod_cnn.run_experiment(gpus=None, machine=machine, launcher=[sys.executable, str(launcher)],
                                   framework="pytorch", timeout=60)
    assert result.ok, result.reason
    argv = json.loads(seen.read_text())
    assert argv[argv.index("--framework") + 1] == "pytorch"
    assert result.framework == "pytorch"


def test_nvls_state_labels(monkeypatch):
    from gputopo.lessons.collectives import table

    def nvls(text):
        return table("this machine", "t.txt", text, {})["nvls"]
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    assert nvls("NCCL_NVLS_ENABLE=0") == "NVLS off (course default)"
    assert nvls("NCCL_NVLS_ENABLE set by environment to 1") == "NVLS on (NCCL_NVLS_ENABLE=1, opted in)"
    # a run the course did not launch: never called "NCCL's default"
    assert nvls("") == "NCCL_NVLS_ENABLE unset (NCCL decided)"


@pytest.mark.parametrize("inherited,expected", [(None, "0"), ("1", "1"), ("0", "0")])
def test_nvls_is_the_learners_choice_and_off_when_unset(tmp_path, monkeypatch, inherited, expected):
    """Issue: the runner used to force NCCL_NVLS_ENABLE=0 over the learner's own setting."""
    if inherited is None:
        monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    else:
        monkeypatch.setenv("NCCL_NVLS_ENABLE", inherited)
    seen = tmp_path / "env.json"
    launcher = tmp_path / "launch.py"
    launcher.write_text(f"import json, os\njson.dump(dict(os.environ), open({str(seen)!r}, 'w'))\n")
    machine = Machine(mode="reference", reason="none", gpu_count=0)
    horovod_cnn.run_experiment(gpus=None, machine=machine, launcher=[sys.executable, str(launcher)], timeout=60)
    assert json.loads(seen.read_text())["NCCL_NVLS_ENABLE"] == expected


def test_no_usable_gpu_means_a_cpu_run_never_a_wider_one(tmp_path):
    """nvidia-smi lists GPUs, but CUDA_VISIBLE_DEVICES leaves none (or the driver gives none):
    the runner must run on the CPU, not put the job on GPUs it was not given."""
    seen = tmp_path / "env.json"
    launcher = tmp_path / "launch.py"
    launcher.write_text(f"import json, os\njson.dump(dict(os.environ), open({str(seen)!r}, 'w'))\n")
    from coursetools import gpus as gpu_model
    listed = [gpu_model.Gpu(index=i, bus_id=f"00000000:0{i}:00.0", uuid=f"GPU-{i}", name="H200")
              for i in range(2)]
    hidden = Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=0, gpus=listed)
    result = horovod_cnn.run_experiment(gpus=(0, 1), machine=hidden, launcher=[sys.executable, str(launcher)],
                                   timeout=60)
    assert result.mode == horovod_cnn.MODE_CPU and "CUDA_VISIBLE_DEVICES leaves none" in result.note
    assert json.loads(seen.read_text())["CUDA_VISIBLE_DEVICES"] == ""
    no_driver = Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=2, gpus=listed, cuda_devices=0,
                        notes={"cuda": "the CUDA driver reports no device"})
    result = horovod_cnn.run_experiment(gpus=(0, 1), machine=no_driver, launcher=[sys.executable, str(launcher)],
                                   timeout=60)
    assert result.mode == horovod_cnn.MODE_CPU and "no device" in result.note


def test_a_workers_own_error_line_is_the_reason():
    log = ("[1]<stdout>:WORKER rank=1 size=2\n"
           "[0]<stderr>:cnn_fmnist.py: error: Fashion-MNIST: not found (details: python -m gputopo.fmnist --check)\n"
           "Process 0 exit with status code 2.\nExit code: 2\n")
    category, reason = horovod_cnn.classify_failure(log, 1)
    assert category == horovod_cnn.OTHER and "Fashion-MNIST: not found" in reason

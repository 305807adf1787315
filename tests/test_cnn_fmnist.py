"""source_code/cnn_fmnist.py: bad input, --json-out, and a real 2-worker run (the network and the
printed lines: test_cnn_model.py).

The end-to-end test (marked slow) launches `horovodrun -np 2` on the CPU with Gloo, the command
a learner types on a machine without GPUs.
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cnn_fmnist
from gputopo.parsers.horovod_log import parse as parse_horovod

SCRIPT = Path(cnn_fmnist.__file__)


def test_importing_starts_neither_tensorflow_nor_horovod():
    code = (
        "import sys; sys.path.insert(0, %r); import cnn_fmnist; cnn_fmnist.parse_args([]); "
        "print('tensorflow' in sys.modules, 'horovod' in sys.modules)" % str(SCRIPT.parent)
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--epochs", "0"], "--epochs"),
        (["--batch-size", "-3"], "--batch-size"),
        (["--lr", "nan"], "--lr"),
        (["--steps-per-epoch", "x"], "--steps-per-epoch"),
        (["--bogus"], "unrecognized arguments"),
        (["--weights-out", "w.npy"], "needs --check-maths"),
        (["--check-maths", "--framework", "pytorch"], "--framework tensorflow"),
    ],
)
def test_bad_arguments_one_line_exit_2(args, words):
    done = subprocess.run([sys.executable, str(SCRIPT)] + args, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("cnn_fmnist.py: error: ")
    assert words in done.stderr


def test_json_out_never_overwrites(tmp_path):
    existing = tmp_path / "run.json"
    existing.write_text("keep me\n")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json-out", str(existing)], capture_output=True, text=True
    )
    assert done.returncode == 2 and "refusing to overwrite" in done.stderr
    assert existing.read_text() == "keep me\n"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--json-out", str(tmp_path / "no" / "dir.json")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "directory does not exist" in done.stderr


def test_help():
    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for option in ("--batch-size", "--epochs", "--steps-per-epoch", "--lr", "--seed", "--json-out"):
        assert option in done.stdout


@pytest.mark.slow
def test_two_workers_on_cpu_with_gloo(tmp_path, monkeypatch, record_property):
    if (
        importlib.util.find_spec("horovod") is None
        or importlib.util.find_spec("tensorflow") is None
    ):
        pytest.skip("needs TensorFlow and Horovod (environment/install.sh)")
    record_file = tmp_path / "record.json"
    command = [
        sys.executable,
        "-m",
        "horovod.runner.launch",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--gloo",
        sys.executable,
        str(SCRIPT),
        "--epochs",
        "2",
        "--steps-per-epoch",
        "20",
        "--batch-size",
        "64",
        "--json-out",
        str(record_file),
    ]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # on the CPU even where GPUs exist
    began = time.monotonic()
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    wall = time.monotonic() - began
    record_property("cpu_quick_run_seconds", round(wall, 1))
    print(f"\nCPU quick run (2 workers, Gloo, 2 epochs x 20 steps x 64): {wall:.1f} s wall")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]

    # Both workers ran: each rank printed its WORKER line.
    assert "[0]<stdout>:WORKER rank=0 size=2" in log
    assert "[1]<stdout>:WORKER rank=1 size=2" in log
    parsed = parse_horovod(log)
    assert [e["epoch"] for e in parsed["epochs"]] == [1, 2]
    assert all(e["workers"] == 2 and e["batch_per_worker"] == 64 for e in parsed["epochs"])
    assert parsed["epochs"][1]["loss"] < parsed["epochs"][0]["loss"]  # it learned
    assert parsed["summary"]["epochs_timed"] == 1
    assert parsed["summary"]["images_per_sec_median"] > 0
    assert parsed["summary"]["test_accuracy"] > 0.3  # 10 classes: chance is 0.1

    record = json.loads(record_file.read_text())
    assert record["workers"] == 2 and record["device"] == "CPU"
    assert record["steps_per_epoch"] == 20
    assert record["test_images"] == 10000
    assert record["epochs_detail"][1]["images"] == 20 * 64 * 2
    assert record["parameters"] == 1199882  # Keras' model.summary(), see test_cnn_model.py
    assert record["gradient_bytes"] == 4 * 1199882
    assert record["summary"]["images_per_sec_median"] == pytest.approx(
        parsed["summary"]["images_per_sec_median"], abs=0.05
    )


@pytest.mark.slow
def test_corrupt_dataset_is_one_line_exit_2(tmp_path):
    if (
        importlib.util.find_spec("horovod") is None
        or importlib.util.find_spec("tensorflow") is None
    ):
        pytest.skip("needs TensorFlow and Horovod (environment/install.sh)")
    from gputopo import fmnist

    for name in fmnist.FILES:
        (tmp_path / name).write_bytes(b"not gzip")
    # One process without a launcher: Horovod runs with size 1.
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--epochs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "FASHION_MNIST_DIR": str(tmp_path)},
    )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "cnn_fmnist.py: error:" in line]
    assert len(errors) == 1 and "Fashion-MNIST" in errors[0] and "gzip" in errors[0]
    assert "Traceback" not in done.stderr


def check_maths_run(tmp_path, workers, batch, name):
    """cnn_fmnist.py --check-maths under horovodrun with `workers` Gloo processes; (stdout, npy)."""
    npy = tmp_path / f"{name}.npy"
    command = [
        sys.executable,
        "-m",
        "horovod.runner.launch",
        "-np",
        str(workers),
        "-H",
        f"localhost:{workers}",
        "--gloo",
        sys.executable,
        str(SCRIPT),
        "--check-maths",
        "--steps-per-epoch",
        "6",
        "--batch-size",
        str(batch),
        "--lr",
        "0.05",
        "--weights-out",
        str(npy),
    ]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout, npy


@pytest.mark.slow
def test_horovod_averages_two_half_batches_into_the_whole_batchs_step(tmp_path):
    """Two workers on 16-image slices against one process on the same 32-image batches, 6 SGD
    steps: Horovod's averaged gradient is the whole batch's, so both land on the same weights,
    and both workers on the same ones. DistributedOptimizer(op=hvd.Sum) or an unwrapped optimizer
    lands elsewhere (each tried: this test failed)."""
    if (
        importlib.util.find_spec("horovod") is None
        or importlib.util.find_spec("tensorflow") is None
    ):
        pytest.skip("needs TensorFlow and Horovod (environment/install.sh)")
    import numpy

    two_out, two_npy = check_maths_run(tmp_path, 2, 16, "two")
    _, one_npy = check_maths_run(tmp_path, 1, 32, "one")
    (line,) = [x for x in two_out.splitlines() if "WEIGHTS " in x]
    fields = dict(pair.split("=") for pair in line.split("WEIGHTS ")[1].split())
    assert int(fields["n"]) == 1199882 and float(fields["ranks_max_abs_diff"]) == 0.0
    two, one = numpy.load(two_npy), numpy.load(one_npy)
    assert (two[0] == one[0]).all()  # the same seeded start
    moved = one[1] - one[0]
    assert numpy.abs(moved).max() > 1e-3  # SGD did move the weights
    # float32 sums in another order: ~1e-6 of what moved; a sum or a local step: 0.5 to 1
    error = numpy.linalg.norm((two[1] - two[0]) - moved) / numpy.linalg.norm(moved)
    assert error < 1e-3, error

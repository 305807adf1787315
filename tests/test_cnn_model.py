"""source_code/cnn_model.py: the network both lab scripts train, its size; cnn_run.py: the
learning-rate rule and the printed lines.

The expected sizes are not computed by cnn_model: they are the figures Keras printed for
build_model() (TensorFlow 2.15.1, `cnn_model.build_model(seed=1).summary()`, 2026-11-25):

    conv2d (Conv2D)             (None, 26, 26, 32)        320
    conv2d_1 (Conv2D)           (None, 24, 24, 64)        18496
    max_pooling2d (MaxPooling2D)(None, 12, 12, 64)        0
    dropout (Dropout)           (None, 12, 12, 64)        0
    flatten (Flatten)           (None, 9216)              0
    dense (Dense)               (None, 128)               1179776
    dropout_1 (Dropout)         (None, 128)               0
    dense_1 (Dense)             (None, 10)                1290
    Total params: 1199882 (4.58 MB)
"""

import platform
import subprocess
import sys
from pathlib import Path

import pytest

import cnn_model
import cnn_run
from gputopo.parsers.horovod_log import parse as parse_horovod

# Read from Keras' model.summary() above.
KERAS_SUMMARY = [
    ("conv", (26, 26, 32), 320),
    ("conv", (24, 24, 64), 18496),
    ("maxpool", (12, 12, 64), 0),
    ("dropout", (12, 12, 64), 0),
    ("flatten", (9216,), 0),
    ("dense", (128,), 1179776),
    ("dropout", (128,), 0),
    ("dense", (10,), 1290),
]
KERAS_TOTAL = 1199882


def test_the_table_is_what_keras_printed():
    assert list(cnn_model.LAYERS) == KERAS_SUMMARY
    assert cnn_model.parameter_count() == KERAS_TOTAL
    assert cnn_model.gradient_bytes() == 4 * KERAS_TOTAL == 4_799_528  # float32


def test_keras_model_has_the_tables_layers():
    pytest.importorskip("tensorflow")
    model = cnn_model.build_model(seed=1)
    assert model.count_params() == KERAS_TOTAL
    kinds = {
        "Conv2D": "conv",
        "MaxPooling2D": "maxpool",
        "Dropout": "dropout",
        "Flatten": "flatten",
        "Dense": "dense",
    }
    built = [
        (kinds[type(layer).__name__], tuple(layer.output_shape[1:]), layer.count_params())
        for layer in model.layers
    ]
    assert built == KERAS_SUMMARY
    assert model.layers[-1].get_config()["activation"] == "linear"  # logits, no softmax


def test_torch_model_has_the_same_parameters():
    torch = pytest.importorskip("torch")
    model = cnn_model.build_torch_model(seed=1)
    assert sum(p.numel() for p in model.parameters()) == KERAS_TOTAL
    trained = [sum(p.numel() for p in m.parameters()) for m in model if list(m.parameters())]
    assert trained == [params for _, _, params in KERAS_SUMMARY if params]
    assert model(torch.zeros(3, 1, 28, 28)).shape == (3, 10)


def test_importing_starts_no_framework():
    code = (
        "import sys; sys.path.insert(0, %r); import cnn_model; cnn_model.gradient_bytes(); "
        "print(*(m in sys.modules for m in ('tensorflow', 'torch', 'horovod')))"
        % str(Path(cnn_model.__file__).parent)
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


def test_warmup_goes_linearly_from_base_to_workers_times_base():
    # Goyal et al. 2017: lr(e) = base * (1 + (n - 1) * e / warmup) during the warm-up, then
    # n * base.
    assert cnn_run.warmup_lr(0.001, 2, 0.0, 1.0) == pytest.approx(0.001)
    assert cnn_run.warmup_lr(0.001, 2, 0.5, 1.0) == pytest.approx(0.0015)
    assert cnn_run.warmup_lr(0.001, 4, 1.0, 2.0) == pytest.approx(0.0025)
    assert cnn_run.warmup_lr(0.001, 4, 2.0, 2.0) == pytest.approx(0.004)
    assert cnn_run.warmup_lr(0.001, 4, 3.7, 2.0) == pytest.approx(0.004)
    assert cnn_run.warmup_lr(0.001, 4, 0.0, 0.0) == pytest.approx(0.004)  # no warm-up
    assert cnn_run.warmup_lr(0.001, 1, 0.3, 1.0) == pytest.approx(0.001)  # one worker


def test_worker_line_as_a_recorded_run_printed_it():
    # The line of rank 0 in a 2-worker CPU run of cnn_fmnist.py (before cnn_model existed),
    # with this machine's host name in place of the recorded one.
    line = cnn_run.worker_line(0, 2, 0, "CPU", 30000, "tensorflow")
    assert line == (
        f"WORKER rank=0 size=2 local_rank=0 device=CPU shard_images=30000 "
        f"host={platform.node()} framework=tensorflow"
    )


def test_output_lines_match_the_contract_and_the_parser():
    line = cnn_run.epoch_line(2, 5, 12345.64, 1.2344, 0.43214, 0.87654, 2, 64)
    assert line == (
        "EPOCH 2/5 images_per_sec=12345.6 seconds=1.234 loss=0.4321 "
        "accuracy=0.8765 workers=2 batch_per_worker=64"
    )
    rows = [{"images_per_sec": v, "timed": i > 0} for i, v in enumerate([10.0, 30.0, 20.0, 40.0])]
    summary = cnn_run.summarize(rows, 0.87654)
    assert (
        summary["images_per_sec_median"],
        summary["images_per_sec_min"],
        summary["images_per_sec_max"],
        summary["epochs_timed"],
    ) == (30.0, 20.0, 40.0, 3)
    assert summary["first_epoch_included"] is False
    text = line + "\n" + cnn_run.summary_line(summary, 2, 64)
    parsed = parse_horovod(text)
    assert parsed["epochs"][0]["images_per_sec"] == 12345.6
    assert parsed["summary"]["epochs_timed"] == 3
    assert parsed["summary"]["test_accuracy"] == 0.8765


def test_single_epoch_is_timed_when_it_is_the_only_one():
    summary = cnn_run.summarize([{"images_per_sec": 5.0, "timed": True}], 0.5)
    assert summary["epochs_timed"] == 1 and summary["first_epoch_included"] is True

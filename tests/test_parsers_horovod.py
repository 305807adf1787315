"""The Horovod throughput parser: the CNN script's EPOCH/SUMMARY lines and the old lab's logs."""

import pytest

from gputopo import reference
from gputopo.parsers import ParseError
from gputopo.parsers.horovod_log import parse as parse_horovod_log

# The old lab's published Horovod logs (the DDP lab's recorded outputs are of kind horovod too,
# in the CNN script's format: test_reference_golden.py holds their facts).
HOROVOD_LOGS = [
    (system, name)
    for system in reference.list_systems()
    for name in reference.find(system, "horovod")
    if name.startswith("horovod-cnn-")
]


def test_reference_logs_exist():
    assert len(HOROVOD_LOGS) >= 6


@pytest.mark.parametrize("system,name", HOROVOD_LOGS)
def test_every_reference_log_gives_numbered_epochs(system, name):
    log = parse_horovod_log(reference.read_text(system, name))
    assert log["format"] == "old-lab" and log["summary"] is None
    epochs = [epoch["epoch"] for epoch in log["epochs"]]
    assert epochs == sorted(epochs) and None not in epochs
    assert all(90000 < epoch["images_per_sec"] < 110000 for epoch in log["epochs"])


def test_dgx1_default_run():
    log = parse_horovod_log(reference.read_text("dgx1-v100", "horovod-cnn-gpus-0-3-default.txt"))
    assert [epoch["epoch"] for epoch in log["epochs"]] == [4, 5, 6, 7, 8]
    assert log["epochs"][0] == {"epoch": 4, "epochs_total": 8, "images_per_sec": 100702.49}
    assert log["epochs"][-1]["images_per_sec"] == 101215.77


# A backslash at the end of a line joins the next one to it: each line is as the script prints it.
CNN_SCRIPT = """Horovod size 2, rank 0
EPOCH 1/3 images_per_sec=11000.5 seconds=5.455 loss=0.9120 accuracy=0.6701 workers=2 \
batch_per_worker=64
[1,0]<stdout>:EPOCH 2/3 images_per_sec=12345.6 seconds=1.234 loss=0.4321 accuracy=0.8765 \
workers=2 batch_per_worker=64
EPOCH 3/3 images_per_sec=12400 seconds=1.230 loss=0.4000 accuracy=0.8800 workers=2 \
batch_per_worker=64
SUMMARY images_per_sec_median=12372.8 images_per_sec_min=12345.6 images_per_sec_max=12400 \
epochs_timed=2 test_accuracy=0.8765 workers=2 batch_per_worker=64
"""


def test_cnn_script_lines():
    log = parse_horovod_log(CNN_SCRIPT)
    assert log["format"] == "cnn-script"
    assert [epoch["epoch"] for epoch in log["epochs"]] == [1, 2, 3]  # rank tag on line 3 stripped
    second = log["epochs"][1]
    assert second == {
        "epoch": 2,
        "epochs_total": 3,
        "images_per_sec": 12345.6,
        "seconds": 1.234,
        "loss": 0.4321,
        "accuracy": 0.8765,
        "workers": 2,
        "batch_per_worker": 64,
    }
    assert isinstance(second["workers"], int)
    assert log["summary"]["images_per_sec_median"] == 12372.8
    assert log["summary"]["epochs_timed"] == 2
    assert log["summary"]["test_accuracy"] == 0.8765


def test_summary_alone_is_enough():
    log = parse_horovod_log("SUMMARY images_per_sec_median=500.0 workers=1\n")
    assert log["epochs"] == [] and log["summary"] == {"images_per_sec_median": 500.0, "workers": 1}


def test_keras_epoch_lines_only_label_the_next_throughput_line():
    log = parse_horovod_log(
        "Epoch 1/8\nEpoch 2/8\n469/469 - 5s\nImages/sec: 5.5e4\nImages/sec: 60000\n"
    )
    assert log["epochs"] == [
        {"epoch": 2, "epochs_total": 8, "images_per_sec": 55000.0},
        {"epoch": None, "epochs_total": None, "images_per_sec": 60000.0},
    ]


@pytest.mark.parametrize(
    "text,expected,lineno",
    [
        ("", "empty input", None),
        ("NCCL INFO Connected all rings\n", "no throughput lines", None),
        ("EPOCH 2/5 images_per_sec\n", "cannot read epoch line", 1),
        ("EPOCH 2/5 seconds=1.0 loss=0.5\n", "no numeric images_per_sec", 1),
        ("EPOCH 2/5 images_per_sec=fast\n", "no numeric images_per_sec", 1),
        ("EPOCH 2/5 images_per_sec=1 images_per_sec=2\n", "appears twice", 1),
        ("SUMMARY epochs_timed=4\n", "no numeric images_per_sec_median", 1),
        ("SUMMARY images_per_sec_median=1\nSUMMARY images_per_sec_median=2\n", "second SUMMARY", 2),
        ("Epoch 4/8\nImages/sec: lots\n", "cannot read throughput line", 2),
        ("EPOCH 1/2 images_per_sec=1.0\nImages/sec: 2.0\n", "mixes", None),
    ],
)
def test_malformed_logs_raise(text, expected, lineno):
    with pytest.raises(ParseError) as error:
        parse_horovod_log(text)
    assert expected in error.value.what
    assert error.value.lineno == lineno

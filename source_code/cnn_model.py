"""The course's Fashion-MNIST CNN: the network, its gradient size, the learning-rate rule and the
lines both training scripts print (`cnn_fmnist.py` under Horovod, `labs/ddp_fmnist.py` under
torchrun), so their runs compare. `build_model()` and `build_torch_model()` import their framework
only when called: a notebook reads the network's size without either installed.
"""

import platform
import statistics

IMAGE_SHAPE = (28, 28, 1)  # height, width, channels: one grey-scale Fashion-MNIST image
BYTES_PER_PARAMETER = 4  # float32 gradients

# The network layer by layer: its output for one image (height, width, channels) and the
# parameters it trains (weights + biases). The 3x3 convolutions have stride 1 and no padding
# (28 -> 26 -> 24 pixels), the max-pooling halves (24 -> 12). build_model() and
# build_torch_model() below write the same layers out in each framework's own words;
# tests/test_cnn_model.py checks both against this table.
LAYERS = (
    ("conv", (26, 26, 32), 3 * 3 * 1 * 32 + 32),  # 32 filters of 3x3 over 1 channel, + biases
    ("conv", (24, 24, 64), 3 * 3 * 32 * 64 + 64),  # 64 filters of 3x3 over 32 channels
    ("maxpool", (12, 12, 64), 0),
    ("dropout", (12, 12, 64), 0),  # zeroes 25 % of the values while training
    ("flatten", (12 * 12 * 64,), 0),
    ("dense", (128,), 12 * 12 * 64 * 128 + 128),  # 98 % of all the parameters
    ("dropout", (128,), 0),  # 50 %
    ("dense", (10,), 128 * 10 + 10),  # one logit per class; the softmax lives in the loss
)


def parameter_count():
    """Trainable parameters of the CNN: 1,199,882."""
    return sum(params for _, _, params in LAYERS)


def gradient_bytes():
    """Bytes each worker all-reduces per training step: one float32 gradient per parameter."""
    return parameter_count() * BYTES_PER_PARAMETER


def build_model(seed=None):
    """The CNN as an (uncompiled) Keras model; images are channels-last (N, 28, 28, 1)."""
    import tensorflow as tf

    if seed is not None:
        tf.keras.utils.set_random_seed(seed)
    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input(shape=IMAGE_SHAPE),
        layers.Conv2D(32, 3, activation="relu"),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Dropout(0.25),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(10),  # logits
    ], name="fmnist_cnn")


def build_torch_model(seed=None):
    """The same CNN as a torch.nn.Sequential; PyTorch keeps images channels-first (N, 1, 28, 28),
    which changes no layer's parameter count."""
    import torch
    from torch import nn

    if seed is not None:
        torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(12 * 12 * 64, 128), nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(128, 10),  # logits
    )


def warmup_lr(base_lr, workers, epoch, warmup_epochs):
    """Learning rate at a fractional `epoch` (0.5 = half-way through the first one).

    The global batch grows with the workers, so the rate does too: linear from base_lr at epoch 0
    to base_lr x workers at `warmup_epochs`, then constant. This is the rule of Goyal et al.,
    "Accurate, Large Minibatch SGD" (2017), which Horovod's Keras LearningRateWarmupCallback also
    applies; the PyTorch loops call this function once per step.
    """
    target = base_lr * workers
    if warmup_epochs <= 0 or workers <= 1 or epoch >= warmup_epochs:
        return target
    return base_lr * (1 + (workers - 1) * epoch / warmup_epochs)


# The printed lines (format fixed by CONTRIBUTING.md; gputopo.parsers.horovod_log reads them).

def worker_line(rank, size, local_rank, device, shard_images, framework):
    return (f"WORKER rank={rank} size={size} local_rank={local_rank} device={device} "
            f"shard_images={shard_images} host={platform.node()} framework={framework}")


def epoch_line(epoch, epochs, images_per_sec, seconds, loss, accuracy, workers, batch):
    return (f"EPOCH {epoch}/{epochs} images_per_sec={images_per_sec:.1f} seconds={seconds:.3f} "
            f"loss={loss:.4f} accuracy={accuracy:.4f} workers={workers} "
            f"batch_per_worker={batch}")


def summary_line(summary, workers, batch):
    return (f"SUMMARY images_per_sec_median={summary['images_per_sec_median']:.1f} "
            f"images_per_sec_min={summary['images_per_sec_min']:.1f} "
            f"images_per_sec_max={summary['images_per_sec_max']:.1f} "
            f"epochs_timed={summary['epochs_timed']} "
            f"test_accuracy={summary['test_accuracy']:.4f} "
            f"workers={workers} batch_per_worker={batch}")


def summarize(epoch_rows, test_accuracy):
    """Median/min/max images/s over the timed epochs: all but the first, unless only one."""
    rates = [r["images_per_sec"] for r in epoch_rows if r["timed"]]
    return {
        "images_per_sec_median": statistics.median(rates),
        "images_per_sec_min": min(rates),
        "images_per_sec_max": max(rates),
        "epochs_timed": len(rates),
        "first_epoch_included": bool(epoch_rows) and epoch_rows[0]["timed"],
        "test_accuracy": test_accuracy,
    }

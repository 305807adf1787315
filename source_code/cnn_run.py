"""What both CNN training scripts share besides the network (`cnn_model.py`): the learning-rate rule
and the lines they print (`cnn_fmnist.py` under Horovod, `labs/ddp_fmnist.py` under torchrun), so
their runs compare.
"""

import platform
import statistics


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
    return (
        f"WORKER rank={rank} size={size} local_rank={local_rank} device={device} "
        f"shard_images={shard_images} host={platform.node()} framework={framework}"
    )


def epoch_line(epoch, epochs, images_per_sec, seconds, loss, accuracy, workers, batch):
    return (
        f"EPOCH {epoch}/{epochs} images_per_sec={images_per_sec:.1f} seconds={seconds:.3f} "
        f"loss={loss:.4f} accuracy={accuracy:.4f} workers={workers} "
        f"batch_per_worker={batch}"
    )


def summary_line(summary, workers, batch):
    return (
        f"SUMMARY images_per_sec_median={summary['images_per_sec_median']:.1f} "
        f"images_per_sec_min={summary['images_per_sec_min']:.1f} "
        f"images_per_sec_max={summary['images_per_sec_max']:.1f} "
        f"epochs_timed={summary['epochs_timed']} "
        f"test_accuracy={summary['test_accuracy']:.4f} "
        f"workers={workers} batch_per_worker={batch}"
    )


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

#!/usr/bin/env python3
"""Data-parallel Fashion-MNIST CNN trained with Horovod, in TensorFlow/Keras or in PyTorch.

Run it through Horovod's launcher, one process per GPU (or per CPU slot when there is no GPU):

    python -m horovod.runner.launch -np 2 -H localhost:2 python cnn_fmnist.py --epochs 5
    python -m horovod.runner.launch -np 2 -H localhost:2 python cnn_fmnist.py --framework pytorch
    python -m horovod.runner.launch -np 2 -H localhost:2 --gloo python cnn_fmnist.py \
        --epochs 2 --steps-per-epoch 20            # quick run on CPU

Pick the GPU pair with CUDA_VISIBLE_DEVICES and the NCCL settings on the same command line
(`CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO NCCL_P2P_LEVEL=LOC horovodrun -np 2 ...`);
gputopo.parsers.horovod_log reads the lines this script prints.

One network, two frameworks
- `--framework tensorflow` (default) uses horovod.tensorflow.keras; `--framework pytorch` uses
  horovod.torch. Both build the network from the one LAYERS table below (1,199,882 parameters),
  read the same shards, apply the same learning-rate rule and print the same lines. Only the
  start-up, the training loop and the scoring differ: classes _KerasJob and _TorchJob, side by
  side at the end of this file. Either way Horovod sends the gradients through NCCL on GPUs and
  through Gloo on the CPU.

What one run does
- Every process pins one GPU (its local rank) or, with no GPU, runs on the CPU.
- Each worker reads its own shard of the Fashion-MNIST training set (`gputopo.fmnist`).
- The learning rate is the base rate times the number of workers, reached after a short linear
  warm-up (warmup_lr(); the Keras path uses Horovod's LearningRateWarmupCallback, which applies
  the same rule), because the global batch grows with workers. Optimizer: Adam.
- Initial weights are broadcast from rank 0; the loss/accuracy printed are averaged over workers.
- Each epoch is timed between two barriers that every worker passes, so the time covers the
  slowest worker. images/s = images processed by all workers in the epoch / that wall time.
  The first epoch (graph tracing, warm-up) is left out of the summary unless it is the only one.
- Test accuracy is measured on the whole test set: each worker scores its shard and the counts
  are summed across workers.

Rank 0 prints one line per epoch and one summary line (format fixed by CONTRIBUTING.md):

    EPOCH 2/5 images_per_sec=12345.6 seconds=1.234 loss=0.4321 accuracy=0.8765 workers=2 batch_per_worker=64
    SUMMARY images_per_sec_median=... images_per_sec_min=... images_per_sec_max=... epochs_timed=4 test_accuracy=0.8765 workers=2 batch_per_worker=64

Every rank also prints one `WORKER rank=R size=N ... framework=F` line at start-up, so a log
shows which workers ran.

--json-out FILE: rank 0 writes one JSON record of the run to FILE (with a `framework` field).
The file must not exist yet: this script never overwrites or appends to an existing file (it
refuses with exit status 2 before training starts). Use a new name per run.

Importing this module starts neither TensorFlow, PyTorch nor Horovod: `parameter_count()` and
`gradient_bytes()` are computed from the layer table below, and `build_model()` /
`build_torch_model()` import their framework only when called.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

# Keep TensorFlow's C++ start-up chatter out of the log (NCCL prints its own INFO lines
# independently when NCCL_DEBUG=INFO is set, so those stay).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PROG = "cnn_fmnist.py"
IMAGE_SHAPE = (28, 28, 1)
NUM_CLASSES = 10
BYTES_PER_PARAMETER = 4  # float32 gradients

# The network, as data: build_model() and parameter_count() both read this table, so the
# gradient size a notebook quotes cannot drift from the model that is trained.
LAYERS = (
    ("conv", {"filters": 32, "kernel": 3, "activation": "relu"}),
    ("conv", {"filters": 64, "kernel": 3, "activation": "relu"}),
    ("maxpool", {"pool": 2}),
    ("dropout", {"rate": 0.25}),
    ("flatten", {}),
    ("dense", {"units": 128, "activation": "relu"}),
    ("dropout", {"rate": 0.5}),
    ("dense", {"units": NUM_CLASSES, "activation": None}),  # logits; softmax lives in the loss
)

# The two implementations of the training loop (train() below); the first is the default.
FRAMEWORKS = ("tensorflow", "pytorch")

DEFAULTS = {
    "batch_size": 64,
    "epochs": 5,
    "lr": 0.001,
    "warmup_epochs": 1.0,
    "seed": 42,
}


# --------------------------------------------------------------------------------------------
# Model description (no TensorFlow needed)
# --------------------------------------------------------------------------------------------

def layer_shapes(layers=LAYERS, input_shape=IMAGE_SHAPE):
    """Return [(kind, output_shape, n_params)] for each layer, computed by hand.

    Convolutions are 'valid' (no padding) with stride 1; max-pooling uses stride = pool size.
    """
    shape = tuple(input_shape)
    rows = []
    for kind, cfg in layers:
        params = 0
        if kind == "conv":
            h, w, c = shape
            k = cfg["kernel"]
            f = cfg["filters"]
            params = k * k * c * f + f
            shape = (h - k + 1, w - k + 1, f)
        elif kind == "maxpool":
            h, w, c = shape
            p = cfg["pool"]
            shape = (h // p, w // p, c)
        elif kind == "flatten":
            n = 1
            for d in shape:
                n *= d
            shape = (n,)
        elif kind == "dense":
            (n,) = shape
            params = n * cfg["units"] + cfg["units"]
            shape = (cfg["units"],)
        elif kind == "dropout":
            pass
        else:
            raise ValueError(f"unknown layer kind {kind!r}")
        rows.append((kind, shape, params))
    return rows


def parameter_count():
    """Number of trainable parameters of the CNN (1,199,882 for the table above)."""
    return sum(params for _, _, params in layer_shapes())


def gradient_bytes():
    """Bytes all-reduced per training step per worker: one float32 gradient per parameter."""
    return parameter_count() * BYTES_PER_PARAMETER


def build_model(seed=None):
    """Build the (uncompiled) Keras model from LAYERS. Imports TensorFlow lazily."""
    import tensorflow as tf

    if seed is not None:
        tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential(name="fmnist_cnn")
    model.add(tf.keras.Input(shape=IMAGE_SHAPE))
    for kind, cfg in LAYERS:
        if kind == "conv":
            model.add(tf.keras.layers.Conv2D(cfg["filters"], cfg["kernel"],
                                             activation=cfg["activation"]))
        elif kind == "maxpool":
            model.add(tf.keras.layers.MaxPooling2D(cfg["pool"]))
        elif kind == "dropout":
            model.add(tf.keras.layers.Dropout(cfg["rate"]))
        elif kind == "flatten":
            model.add(tf.keras.layers.Flatten())
        elif kind == "dense":
            model.add(tf.keras.layers.Dense(cfg["units"], activation=cfg["activation"]))
    return model


def build_torch_model(seed=None):
    """The same network as build_model(), from the same LAYERS table, as a torch.nn.Sequential.

    PyTorch keeps images channels-first (N, 1, 28, 28); the parameter count is the same because
    a layer's weights do not depend on the memory layout. Imports PyTorch lazily.
    """
    import torch
    from torch import nn

    if seed is not None:
        torch.manual_seed(seed)
    activations = {"relu": nn.ReLU, None: None}
    modules = []
    shape = IMAGE_SHAPE  # (height, width, channels), as layer_shapes() counts them
    for (kind, cfg), (_, out_shape, _) in zip(LAYERS, layer_shapes()):
        if kind == "conv":
            modules.append(nn.Conv2d(shape[-1], cfg["filters"], cfg["kernel"]))
        elif kind == "maxpool":
            modules.append(nn.MaxPool2d(cfg["pool"]))
        elif kind == "dropout":
            modules.append(nn.Dropout(cfg["rate"]))
        elif kind == "flatten":
            modules.append(nn.Flatten())
        elif kind == "dense":
            modules.append(nn.Linear(shape[0], cfg["units"]))
        activation = activations[cfg.get("activation")]
        if activation is not None:
            modules.append(activation())
        shape = out_shape
    return nn.Sequential(*modules)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

class UsageError(Exception):
    """Bad input; main() prints it as one line and exits 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def _number_type(convert, accept, expected):
    """An argparse type: convert the text, then keep it only if accept(value) holds."""
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


# NaN fails every comparison, so `value > 0` / `value >= 0` reject it along with infinity.
_positive_int = _number_type(int, lambda v: v >= 1, "a positive integer")
_positive_float = _number_type(float, lambda v: 0 < v < float("inf"), "a positive number")
_non_negative_float = _number_type(float, lambda v: 0 <= v < float("inf"), "a number >= 0")


def make_parser():
    p = _Parser(
        prog=PROG,
        description="Train a small CNN on Fashion-MNIST with Horovod data parallelism "
                    "(TensorFlow/Keras or PyTorch) and "
                    "report whole-job throughput (images/s). Launch with "
                    "`python -m horovod.runner.launch -np N ...`.",
        epilog="--json-out never overwrites: if FILE exists the script stops before training "
               "(exit status 2). Rank 0 prints EPOCH/SUMMARY lines in the format of "
               "CONTRIBUTING.md.",
    )
    p.add_argument("--batch-size", type=_positive_int, default=DEFAULTS["batch_size"],
                   help="images per worker per step (default %(default)s); "
                        "the global batch is this times the number of workers")
    p.add_argument("--epochs", type=_positive_int, default=DEFAULTS["epochs"],
                   help="number of epochs (default %(default)s); the first is not timed "
                        "in the summary unless it is the only one")
    p.add_argument("--steps-per-epoch", type=_positive_int, default=None,
                   help="steps per epoch on every worker (default: one pass over the "
                        "smallest shard); small values make quick runs")
    p.add_argument("--lr", type=_positive_float, default=DEFAULTS["lr"],
                   help="base learning rate for one worker (default %(default)s); "
                        "Adam runs at lr x workers after the warm-up")
    p.add_argument("--warmup-epochs", type=_non_negative_float,
                   default=DEFAULTS["warmup_epochs"],
                   help="epochs of linear warm-up from lr to lr x workers "
                        "(default %(default)s; 0 = none)")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"],
                   help="random seed for weights and shuffling (default %(default)s)")
    p.add_argument("--test-images", type=_positive_int, default=None,
                   help="score only the first N test images (default: all 10000)")
    p.add_argument("--framework", choices=FRAMEWORKS, default=FRAMEWORKS[0],
                   help="tensorflow (horovod.tensorflow.keras) or pytorch (horovod.torch); "
                        "same network, data, optimizer rule and output (default %(default)s)")
    p.add_argument("--json-out", metavar="FILE", default=None,
                   help="rank 0 writes the run's JSON record to FILE, which must not exist")
    return p


def parse_args(argv):
    args = make_parser().parse_args(argv)
    if args.json_out is not None:
        path = os.path.abspath(args.json_out)
        if os.path.exists(path):
            raise UsageError(f"--json-out file already exists, refusing to overwrite "
                             f"({args.json_out})")
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            raise UsageError(f"--json-out directory does not exist ({parent})")
    return args


# --------------------------------------------------------------------------------------------
# Output lines (pure functions; the tests and the horovod parser rely on this format)
# --------------------------------------------------------------------------------------------

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
    timed = [r for r in epoch_rows if r["timed"]]
    rates = [r["images_per_sec"] for r in timed]
    return {
        "images_per_sec_median": statistics.median(rates),
        "images_per_sec_min": min(rates),
        "images_per_sec_max": max(rates),
        "epochs_timed": len(rates),
        "first_epoch_included": bool(epoch_rows) and epoch_rows[0]["timed"],
        "test_accuracy": test_accuracy,
    }


def _die(message):
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return 2


# --------------------------------------------------------------------------------------------
# Training: what both frameworks share
# --------------------------------------------------------------------------------------------

def warmup_lr(base_lr, workers, epoch, warmup_epochs):
    """Learning rate at a fractional `epoch` (epoch 0.5 = half-way through the first one).

    Linear from base_lr at epoch 0 to base_lr x workers at `warmup_epochs`, then constant: the
    rule of Goyal et al., "Accurate, Large Minibatch SGD" (2017), which Horovod's Keras
    LearningRateWarmupCallback also applies. The PyTorch path calls this once per step.
    """
    target = base_lr * workers
    if warmup_epochs <= 0 or workers <= 1 or epoch >= warmup_epochs:
        return target
    return base_lr * (1 + (workers - 1) * epoch / warmup_epochs)


def _as_images(x):
    """Images of shape (N, 28, 28) or (N, 28, 28, 1) -> an array (N, 28, 28, 1), same dtype."""
    import numpy as np

    x = np.asarray(x)
    if x.ndim == 3:
        x = x[..., None]
    if x.shape[1:] != IMAGE_SHAPE:
        raise ValueError(f"unexpected image shape {x.shape}")
    return x


class _Abort(Exception):
    """A worker cannot go on; train() prints the message as one line and exits 2."""


def train(args):
    """Run the training on this process; returns an exit status.

    The steps are the same for both frameworks; what differs (start-up, the training loop,
    scoring) is in the two small classes below, _KerasJob and _TorchJob.
    """
    job_class = {"tensorflow": _KerasJob, "pytorch": _TorchJob}[args.framework]
    try:
        job = job_class()
    except ImportError as exc:  # message keeps the module name, e.g. "No module named 'horovod'"
        return _die(f"cannot import {job_class.needs}: {exc}")
    try:
        from gputopo import fmnist
    except ImportError as exc:
        return _die(f"cannot import gputopo.fmnist: {exc} (run from source_code/ or "
                    f"put it on PYTHONPATH)")
    import numpy as np

    try:
        rank, size, local_rank = job.start()
    except _Abort as exc:
        return _die(str(exc))

    try:
        (x_train, y_train), (x_test, y_test) = fmnist.load(shard=rank, num_shards=size)
        x_train, x_test = _as_images(x_train), _as_images(x_test)
    except (fmnist.DatasetError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return _die(f"Fashion-MNIST: {first} (details: python -m gputopo.fmnist --check)")
    y_train = np.asarray(y_train).astype("int64")
    y_test = np.asarray(y_test).astype("int64")
    # The test set comes whole; every worker scores its own contiguous part of it.
    if args.test_images is not None:
        x_test, y_test = x_test[:args.test_images], y_test[:args.test_images]
    x_test = np.array_split(x_test, size)[rank]
    y_test = np.array_split(y_test, size)[rank]

    print(f"WORKER rank={rank} size={size} local_rank={local_rank} device={job.device} "
          f"shard_images={len(x_train)} host={platform.node()} framework={args.framework}",
          flush=True)

    # Every worker must run the same number of steps, or the allreduces would not pair up.
    smallest = int(min(job.allgather_int(len(x_train), "shard_sizes")))
    steps = args.steps_per_epoch or smallest // args.batch_size
    if steps < 1:
        return _die(f"--batch-size {args.batch_size} is larger than the smallest shard "
                    f"({smallest} images)")

    images_per_epoch = steps * args.batch_size * size
    epoch_rows = []
    timer = {}

    def epoch_begins(epoch):
        job.allreduce_sum([1.0], f"barrier_begin_{epoch}")  # returns once every worker is here
        timer["start"] = time.perf_counter()

    def epoch_ends(epoch):
        job.allreduce_sum([1.0], f"barrier_end_{epoch}")
        seconds = time.perf_counter() - timer["start"]
        epoch_rows.append({"epoch": epoch + 1, "seconds": seconds, "images": images_per_epoch,
                           "images_per_sec": images_per_epoch / seconds})

    def report(epoch, loss, accuracy, lr):
        # loss and accuracy are already averaged over the workers
        row = epoch_rows[-1]
        row.update(loss=float(loss), accuracy=float(accuracy), lr=float(lr),
                   timed=epoch > 0 or args.epochs == 1)
        if rank == 0:
            print(epoch_line(epoch + 1, args.epochs, row["images_per_sec"], row["seconds"],
                             row["loss"], row["accuracy"], size, args.batch_size), flush=True)

    started = time.perf_counter()
    job.fit(args, x_train, y_train, steps, size, rank, epoch_begins, epoch_ends, report)
    train_seconds = time.perf_counter() - started

    # Test accuracy over the whole test set: each worker scores its part, counts are summed.
    correct = job.count_correct(x_test, y_test)
    totals = job.allreduce_sum([float(correct), float(len(x_test))], "test_counts")
    test_accuracy = float(totals[0] / totals[1]) if totals[1] else float("nan")

    if rank != 0:
        return 0

    summary = summarize(epoch_rows, test_accuracy)
    print(summary_line(summary, size, args.batch_size), flush=True)

    if args.json_out is not None:
        record = {
            "script": PROG,
            "framework": args.framework,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "workers": size,
            "batch_per_worker": args.batch_size,
            "global_batch": args.batch_size * size,
            "epochs": args.epochs,
            "steps_per_epoch": steps,
            "lr_base": args.lr,
            "lr_scaled": args.lr * size,
            "warmup_epochs": args.warmup_epochs,
            "seed": args.seed,
            "device": "CPU" if job.device == "CPU" else "GPU",
            "epochs_detail": epoch_rows,
            "summary": summary,
            "test_images": int(totals[1]),
            "train_seconds": train_seconds,
            "parameters": parameter_count(),
            "gradient_bytes": gradient_bytes(),
            "versions": dict(job.versions(), horovod=_horovod_version(),
                             python=platform.python_version()),
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "argv": sys.argv[1:],
        }
        try:
            with open(args.json_out, "x") as fh:  # "x": fail rather than overwrite
                json.dump(record, fh, indent=1, sort_keys=True)
                fh.write("\n")
        except FileExistsError:
            return _die(f"--json-out file appeared during the run, not overwritten "
                        f"({args.json_out})")
        except OSError as exc:
            return _die(f"cannot write --json-out: {exc.strerror} ({args.json_out})")
    return 0


# --------------------------------------------------------------------------------------------
# Training: TensorFlow / Keras (horovod.tensorflow.keras)
# --------------------------------------------------------------------------------------------

class _KerasJob:
    needs = "TensorFlow/Horovod"

    def __init__(self):
        import tensorflow as tf
        import horovod.tensorflow as hvd_tf
        import horovod.tensorflow.keras as hvd
        self.tf, self.hvd_tf, self.hvd = tf, hvd_tf, hvd
        self.device = None
        self.model = None

    def versions(self):
        return {"tensorflow": self.tf.__version__}

    def start(self):
        tf, hvd = self.tf, self.hvd
        hvd.init()
        local_rank = hvd.local_rank()
        # One GPU per process, chosen by local rank; CPU when there is none.
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            if local_rank >= len(gpus):
                raise _Abort(f"local rank {local_rank} has no GPU: only {len(gpus)} visible "
                             f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
            mine = gpus[local_rank]
            tf.config.experimental.set_memory_growth(mine, True)
            tf.config.set_visible_devices(mine, "GPU")
            self.device = f"GPU:{local_rank}"
        else:
            # Share the cores between the workers on this host instead of oversubscribing them.
            cores = os.cpu_count() or 1
            tf.config.threading.set_intra_op_parallelism_threads(max(1, cores // hvd.local_size()))
            tf.config.threading.set_inter_op_parallelism_threads(1)
            self.device = "CPU"
        return hvd.rank(), hvd.size(), local_rank

    def allgather_int(self, value, name):
        tf = self.tf
        return self.hvd_tf.allgather(tf.constant([value], dtype=tf.int64), name=name).numpy()

    def allreduce_sum(self, values, name):
        tf = self.tf
        return self.hvd_tf.allreduce(tf.constant(values, dtype=tf.float64),
                                     op=self.hvd_tf.Sum, name=name).numpy()

    def fit(self, args, x_train, y_train, steps, size, rank, epoch_begins, epoch_ends, report):
        tf, hvd = self.tf, self.hvd
        tf.keras.utils.set_random_seed(args.seed)  # same initial weights everywhere (rank 0 wins)
        data = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
                .shuffle(len(x_train), seed=args.seed + rank, reshuffle_each_iteration=True)
                .repeat()
                .batch(args.batch_size, drop_remainder=True)
                .map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y),
                     num_parallel_calls=tf.data.AUTOTUNE)
                .prefetch(tf.data.AUTOTUNE))
        scaled_lr = args.lr * size
        model = self.model = build_model()
        optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.Adam(learning_rate=scaled_lr))
        model.compile(optimizer=optimizer,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])

        class EpochTimer(tf.keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                epoch_begins(epoch)

            def on_epoch_end(self, epoch, logs=None):
                epoch_ends(epoch)

        class Reporter(tf.keras.callbacks.Callback):
            # Runs after MetricAverageCallback, so the logs hold worker-averaged values.
            def on_epoch_end(self, epoch, logs=None):
                report(epoch, logs["loss"], logs["accuracy"],
                       tf.keras.backend.get_value(model.optimizer.lr))

        callbacks = [
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            EpochTimer(),
            hvd.callbacks.MetricAverageCallback(),
        ]
        if args.warmup_epochs > 0 and size > 1:
            # Horovod's callback applies the same rule as warmup_lr() above.
            callbacks.append(hvd.callbacks.LearningRateWarmupCallback(
                initial_lr=scaled_lr, warmup_epochs=args.warmup_epochs, steps_per_epoch=steps,
                verbose=0))
        callbacks.append(Reporter())
        model.fit(data, epochs=args.epochs, steps_per_epoch=steps, callbacks=callbacks,
                  verbose=0)

    def count_correct(self, x_test, y_test):
        import numpy as np
        tf = self.tf
        correct = 0
        for i in range(0, len(x_test), 1000):
            logits = self.model(tf.cast(x_test[i:i + 1000], tf.float32) / 255.0, training=False)
            correct += int(np.sum(np.argmax(logits.numpy(), axis=1) == y_test[i:i + 1000]))
        return correct


# --------------------------------------------------------------------------------------------
# Training: PyTorch (horovod.torch)
# --------------------------------------------------------------------------------------------

class _TorchJob:
    needs = "PyTorch/Horovod"

    def __init__(self):
        import torch
        import horovod.torch as hvd
        self.torch, self.hvd = torch, hvd
        self.device = None
        self.model = None

    def versions(self):
        return {"pytorch": self.torch.__version__}

    def start(self):
        torch, hvd = self.torch, self.hvd
        hvd.init()
        local_rank = hvd.local_rank()
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            if local_rank >= count:
                raise _Abort(f"local rank {local_rank} has no GPU: only {count} visible "
                             f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
            torch.cuda.set_device(local_rank)
            self.where = torch.device("cuda", local_rank)
            self.device = f"GPU:{local_rank}"
        else:
            cores = os.cpu_count() or 1
            torch.set_num_threads(max(1, cores // hvd.local_size()))
            self.where = torch.device("cpu")
            self.device = "CPU"
        return hvd.rank(), hvd.size(), local_rank

    def allgather_int(self, value, name):
        torch = self.torch
        return self.hvd.allgather(torch.tensor([value], dtype=torch.int64), name=name).tolist()

    def allreduce_sum(self, values, name):
        torch = self.torch
        return self.hvd.allreduce(torch.tensor(values, dtype=torch.float64),
                                  op=self.hvd.Sum, name=name).tolist()

    def _images(self, x):
        """uint8 (N, 28, 28, 1) numpy -> uint8 (N, 1, 28, 28) tensor on this worker's device."""
        return self.torch.from_numpy(x).permute(0, 3, 1, 2).contiguous().to(self.where)

    def fit(self, args, x_train, y_train, steps, size, rank, epoch_begins, epoch_ends, report):
        torch, hvd = self.torch, self.hvd
        import torch.nn.functional as F

        model = self.model = build_torch_model(seed=args.seed).to(self.where)
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * size)
        # Same initial weights and optimizer state everywhere (rank 0 wins), then wrap the
        # optimizer so that step() waits for the gradients averaged over all workers.
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

        # The whole shard lives on the device (a few tens of MB); batches are index gathers.
        images, labels = self._images(x_train), torch.from_numpy(y_train).to(self.where)
        shuffle = torch.Generator().manual_seed(args.seed + rank)
        order, position = torch.randperm(len(labels), generator=shuffle), 0

        for epoch in range(args.epochs):
            model.train()
            loss_sum = torch.zeros((), device=self.where)
            hits = torch.zeros((), device=self.where, dtype=torch.int64)
            epoch_begins(epoch)
            for step in range(steps):
                lr = warmup_lr(args.lr, size, epoch + step / steps, args.warmup_epochs)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                if position + args.batch_size > len(order):  # next pass over the shard
                    order, position = torch.randperm(len(labels), generator=shuffle), 0
                pick = order[position:position + args.batch_size].to(self.where)
                position += args.batch_size
                x = images[pick].float().div_(255.0)
                y = labels[pick]
                optimizer.zero_grad()
                logits = model(x)
                loss = F.cross_entropy(logits, y)
                loss.backward()
                optimizer.step()
                loss_sum += loss.detach()
                hits += (logits.argmax(dim=1) == y).sum()
            if self.where.type == "cuda":
                torch.cuda.synchronize()  # the epoch ends when its last kernel has finished
            epoch_ends(epoch)
            # Averaged over workers, as Keras' MetricAverageCallback does for the other path.
            loss_total, hits_total = self.allreduce_sum(
                [loss_sum.item() / steps, hits.item() / (steps * args.batch_size)],
                f"metrics_{epoch}")
            report(epoch, loss_total / size, hits_total / size,
                   warmup_lr(args.lr, size, epoch + 1, args.warmup_epochs))

    def count_correct(self, x_test, y_test):
        torch = self.torch
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(x_test), 1000):
                x = self._images(x_test[i:i + 1000]).float().div_(255.0)
                y = torch.from_numpy(y_test[i:i + 1000]).to(self.where)
                correct += int((self.model(x).argmax(dim=1) == y).sum().item())
        return correct


def _horovod_version():
    try:
        import horovod
        return horovod.__version__
    except Exception:  # pragma: no cover - version is informative only
        return None


def main(argv=None):
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        return _die(str(exc))
    return train(args)


if __name__ == "__main__":
    sys.exit(main())

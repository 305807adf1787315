"""The course's Fashion-MNIST CNN: the network and its gradient size, the same for both training
scripts (`cnn_fmnist.py` under Horovod, `labs/ddp_fmnist.py` under torchrun; the learning-rate rule
and the lines they print: `cnn_run.py`). `build_model()` and `build_torch_model()` import their
framework only when called: a notebook reads the network's size without either installed.
"""

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
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=IMAGE_SHAPE),
            layers.Conv2D(32, 3, activation="relu"),
            layers.Conv2D(64, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Dropout(0.25),
            layers.Flatten(),
            layers.Dense(128, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(10),  # logits
        ],
        name="fmnist_cnn",
    )


def build_torch_model(seed=None):
    """The same CNN as a torch.nn.Sequential; PyTorch keeps images channels-first (N, 1, 28, 28),
    which changes no layer's parameter count."""
    import torch
    from torch import nn

    if seed is not None:
        torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(12 * 12 * 64, 128),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(128, 10),  # logits
    )

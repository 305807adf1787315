"""The CNN's two frameworks: the --framework option and its error (the shared learning-rate rule
and the PyTorch network: test_cnn_model.py), and how notebook 4 labels a run's NVLS setting."""

import cnn_fmnist


def test_framework_option_and_its_error():
    assert cnn_fmnist.parse_args([]).framework == "tensorflow"
    assert cnn_fmnist.parse_args(["--framework", "pytorch"]).framework == "pytorch"
    assert cnn_fmnist.main(["--framework", "jax"]) == 2


def test_nvls_state_labels(monkeypatch):
    from gputopo.lessons.collectives import HERE, table

    def nvls(text):
        return table(HERE, "t.txt", text, {})["nvls"]

    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    assert nvls("NCCL_NVLS_ENABLE=0") == "NVLS off (course default)"
    assert (
        nvls("NCCL_NVLS_ENABLE set by environment to 1") == "NVLS on (NCCL_NVLS_ENABLE=1, opted in)"
    )
    # a run the course did not launch: never called "NCCL's default"
    assert nvls("") == "NCCL_NVLS_ENABLE unset (NCCL decided)"

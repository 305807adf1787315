"""gputopo.lessons.training's published runs (notebook 5, "When the link decides") and its CPU-run
reader, against the figures as their sources print them:
- Puget Systems, "NVLINK on RTX 2080 TensorFlow and Peer-to-Peer Performance with Linux"
  (2018-10-16, pugetsystems.com/guides/1262): 2x RTX 2080 without / with the bridge, ResNet-50
  FP32 364 / 373 images/s (one GPU 207), big-LSTM 8,882 / 9,711 words/s (one GPU 5,071);
- Hugging Face Transformers docs, perf_hardware.md (commit 5ea83b0): GPT-2 train_runtime
  131.4367 s with NCCL_P2P_DISABLE=1, 101.9003 s with NVLink;
- GitHub issue scottclowe/pytorch-experiment-template#11: 5.72 s per step over sockets, 2.51 s
  over RoCE.
The expected percentages are those figures' ratios, worked out by hand in the comments."""

import pytest

from gputopo import reference
from gputopo.lessons import training

H200_DEFAULT = "h200-nvswitch-pair/horovod-cnn/horovod-cnn-pytorch-b64-gpus-0-1-default-r1.txt"


def _row(model, precision="fp32"):
    return next(
        r for r in training.published_runs() if r["model"] == model and r["precision"] == precision
    )


def test_puget_rows_as_published():
    resnet, lstm = _row("resnet50"), _row("big-lstm")
    assert (resnet["slower"], resnet["faster"], resnet["one_gpu"]) == (364, 373, 207)
    assert (lstm["slower"], lstm["faster"], lstm["one_gpu"]) == (8882, 9711, 5071)
    assert "no bridge" in resnet["slower_link"] and "NVLink bridge" in resnet["faster_link"]
    assert "pugetsystems.com/guides/1262" in resnet["source"]
    # a rate: 373 / 364 = 1.0247; 9711 / 8882 = 1.0933
    assert resnet["gain_percent"] == pytest.approx(2.47, abs=0.01)
    assert lstm["gain_percent"] == pytest.approx(9.33, abs=0.01)


def test_a_time_per_step_gains_slower_over_faster():
    # seconds, not a rate: 131.4367 / 101.9003 = 1.2899; 5.72 / 2.51 = 2.2789
    gpt2, llama = _row("gpt2"), _row("llama-3.2-3b-instruct", "fp16")
    assert not gpt2["rate"] and gpt2["gain_percent"] == pytest.approx(28.99, abs=0.01)
    assert llama["gain_percent"] == pytest.approx(127.89, abs=0.01)
    assert llama["one_gpu"] is None and "NCCL_IB_DISABLE=1" in llama["slower_link"]
    # the source sentence runs on over the following comment lines
    assert gpt2["source"].endswith("huggingface.co/docs/transformers/v4.49.0/perf_hardware)")


def test_smallest_gain_first():
    models = [r["model"] for r in training.published_runs()]
    assert models == ["resnet50", "resnet50", "big-lstm", "gpt2", "llama-3.2-3b-instruct"]


def test_added_share_of_the_one_gpu_step():
    # 2 x 207 / 364 - 1 = 13.74 %; 2 x 207 / 373 - 1 = 10.99 %
    assert training.added_share(_row("resnet50")) == pytest.approx((13.74, 10.99), abs=0.01)
    # 2 x 5071 / 8882 - 1 = 14.19 %; 2 x 5071 / 9711 - 1 = 4.44 %
    assert training.added_share(_row("big-lstm")) == pytest.approx((14.19, 4.44), abs=0.01)
    with pytest.raises(ValueError, match="no one-GPU rate"):
        training.added_share(_row("gpt2"))


def test_model_sizes_as_their_sources_give_them():
    # Keras Applications table: ResNet50 25,636,712; the gpt2 model card: 124M
    assert training.model_parameters() == {"resnet50": 25_636_712, "gpt2": 124_000_000}


def test_a_study_file_of_another_folder(tmp_path):
    (tmp_path / "model-sizes.csv").write_text("model,parameters,source\nx,1,y\n")
    (tmp_path / "two-nodes.csv").write_text(
        "# a made-up study\n# Source: someone,\n# somewhere\n"
        "model,precision,unit,1x A,sockets,IB\nnet,fp32,s per step,,3.0,1.5\n"
    )
    [row] = training.published_runs(tmp_path)  # model-sizes.csv is not a study
    assert (row["study"], row["slower_link"], row["faster_link"]) == ("two-nodes", "sockets", "IB")
    assert row["source"] == "someone, somewhere"
    assert row["gain_percent"] == pytest.approx(100.0)  # 3.0 s against 1.5 s per step
    (tmp_path / "two-nodes.csv").write_text("model,precision,unit,slow,fast\nnet,fp32,s,n/a,1\n")
    with pytest.raises(ValueError, match="two-nodes.csv"):
        training.published_runs(tmp_path)


def test_ran_on_cpu_reads_the_worker_lines(tmp_path):
    cpu = tmp_path / "horovod-pair-0-1.txt"
    # as horovodrun tags rank 1's line on the CPU (the WORKER line of source_code/cnn_run.py)
    cpu.write_text(
        "[1]<stdout>:WORKER rank=1 size=2 local_rank=1 device=CPU shard_images=30000 "
        "host=vm framework=tensorflow\n"
    )
    assert training.ran_on_cpu(cpu)
    assert not training.ran_on_cpu(reference.REFERENCE_DIR / H200_DEFAULT)  # device=GPU:0
    assert not training.ran_on_cpu(tmp_path / "not-written.txt")


def test_recorded_instead_says_why_then_prints_the_recorded_log(capsys):
    out = training.recorded_instead("CPU run: no NCCL", H200_DEFAULT)
    printed = capsys.readouterr().out
    assert printed.startswith("[recorded] CPU run: no NCCL.\nBelow, a recorded run on 2x NVIDIA")
    assert "Channel 00/24 : 0 1" in printed  # the whole log follows
    assert not out.live and out.parsed["nccl_version"] == "2.28.3"
    assert out.text == (reference.REFERENCE_DIR / H200_DEFAULT).read_text()

"""gputopo.lessons.training (notebook 5) against values read by hand from the recorded files:
the SUMMARY lines of reference_systems/h200-nvswitch-pair/horovod-cnn/, the rows of the NCCL
benchmark tables beside them, the STEPTIME lines of reference_systems/h100-single-gpu/, and NCCL's
documented P2P rule (NCCL User Guide, Environment Variables, NCCL_P2P_LEVEL)."""
import pytest

from gputopo import reference
from gputopo.lessons import training



def rows_by_label(rows):
    return {row[0]: row[1:] for row in rows}


def test_nvlink_is_p2p_at_every_level_but_loc_and_disable():
    # NCCL docs: NVL is the closest path type after LOC; only LOC or NCCL_P2P_DISABLE take it away.
    rows = rows_by_label(training.level_rows("GenuineIntel", "2.28.3"))
    nvl = training.PATH_COLUMNS.index("NVL")
    off = {"NCCL_P2P_LEVEL=LOC": "SHM", "NCCL_P2P_DISABLE=1": "SHM", "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1": "NET"}
    for label, cells in rows.items():
        assert cells[nvl] == off.get(label, "P2P"), label


def test_default_row_follows_the_release_and_cpu():
    # src/graph/paths.cc at v2.28.3-1: PXB on Intel; SYS on x86 AMD for a job of at most two GPUs in the node.
    assert rows_by_label(training.level_rows("GenuineIntel", "2.28.3"))["default"] == ["P2P", "P2P", "P2P", "SHM", "SHM"]
    assert rows_by_label(training.level_rows("AuthenticAMD", "2.28.3", 2))["default"] == ["P2P"] * 5
    assert rows_by_label(training.level_rows("AuthenticAMD", "2.28.3", 8))["default"] == ["P2P", "P2P", "P2P", "SHM", "SHM"]
    # 2.9 to 2.22: SYS on AMD whatever the job
    assert rows_by_label(training.level_rows("AuthenticAMD", "2.22.3", 8))["default"] == ["P2P"] * 5


@pytest.mark.parametrize("part, setting", [
    ("default", "default"), ("NCCL_P2P_LEVEL-LOC", "NCCL_P2P_LEVEL=LOC"),
    ("NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1", "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1")])
def test_setting_from_a_recorded_file_name(part, setting):
    assert training.setting_of(part) == setting


def test_recorded_runs_median_and_range_of_the_three_runs():
    rows = {(r["batch_per_worker"], r["pair"], r["setting"]): r for r in training.recorded_runs()}
    default = rows[(64, "0,1", "default")]
    assert default["runs"] == 3
    assert default["images_per_sec_median"] == pytest.approx(33452.9)
    assert (default["images_per_sec_min"], default["images_per_sec_max"]) == pytest.approx((29971.4, 33612.9))
    assert default["transport"] == "P2P" and default["system"] == "2x H200 NVSwitch"
    # the transports the logs name (Channel ... via P2P/CUMEM, SHM/direct/direct, NET/Socket)
    assert rows[(64, "0,1", "NCCL_P2P_LEVEL=LOC")]["transport"] == "SHM"
    assert rows[(512, "0,1", "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1")]["transport"] == "NET"
    assert rows[(64, "0", "default")]["transport"] == "-"          # one GPU: no NCCL connection
    assert len(rows) == 12                                          # 2 batches x (1 one-GPU + 5 settings)


def test_noise_figure_from_the_recorded_repeats():
    noise = training.run_to_run_noise()
    by = {(row[1], row[2]): row[4] for row in noise["rows"]}
    assert len(noise["rows"]) == 10
    # NCCL_P2P_LEVEL=NVL, batch 512: runs 246389.2, 292297.5, 278704.0 -> 45908.3 / 278704.0
    assert by[(512, "NCCL_P2P_LEVEL=NVL")] == pytest.approx(16.472, abs=0.001)
    assert by[(64, "default")] == pytest.approx(3641.5 / 33452.9 * 100, abs=0.001)
    assert noise["figure_pct"] == pytest.approx(16.472, abs=0.001)


def test_cnn_steps_of_one_and_two_gpus():
    steps = training.cnn_steps(training.recorded_runs(), 64)
    assert steps["one_gpu_ms"] == pytest.approx(64 / 27404.6 * 1e3)          # 2.335 ms
    assert steps["two_gpu_ms"] == pytest.approx(2 * 64 / 33452.9 * 1e3)      # 3.826 ms
    assert steps["added_ms"] == pytest.approx(3.826 - 2.335, abs=2e-3)
    assert steps["efficiency"] == pytest.approx(33452.9 / (2 * 27404.6))
    assert steps["two_gpu_ms_range"] == pytest.approx((128 / 33612.9 * 1e3, 128 / 29971.4 * 1e3))
    with pytest.raises(ValueError, match="batch 128"):
        training.cnn_steps(training.recorded_runs(), 128)


def test_the_fitted_model_meets_the_recorded_benchmark():
    # out-of-place time read by hand from nccl-bench-all_reduce*.txt at 4 MiB and 8 MiB (us)
    recorded = {"P2P": {4194304: 33.31, 8388608: 47.39}, "SHM": {4194304: 175.12, 8388608: 326.21}}
    fits = {f["transport"]: f for f in training.transport_fits()}
    for transport, points in recorded.items():
        for size, us in points.items():
            assert training.allreduce_ms(size, fits[transport]) * 1e3 == pytest.approx(us, rel=0.15), (transport, size)
    assert fits["NET (sockets)"]["runs"] == 5
    # more bytes, more time; and the sockets are the slowest path by far
    assert training.allreduce_ms(107_199_528, fits["NET (sockets)"]) > 5 * training.allreduce_ms(107_199_528, fits["SHM"])


def test_steptime_line_of_the_ddp_script():
    text = (reference.REFERENCE_DIR / "h100-single-gpu" / "ddp-fmnist-gpu1-x25.6M-r1.txt").read_text()
    split = training.steptime(text)
    assert split["step_ms"] == 3.696 and split["allreduce_wait_ms"] == 0.679 and split["allreduce_bytes"] == 107199528
    assert training.steptime("EPOCH 1/2 images_per_sec=1.0\n") is None


def test_read_runs_says_when_a_run_is_incomplete(tmp_path):
    (tmp_path / "horovod-pair-0-1.txt").write_text(
        "[0]<stdout>:EPOCH 1/2 images_per_sec=789.7 seconds=8.104 loss=0.9944 accuracy=0.6509 workers=2 batch_per_worker=64\n")
    (tmp_path / "horovod-pair-0-1-x.txt").write_text("/bin/bash: line 1: horovodrun: command not found\n")
    rows = dict((name, rate) for name, _, rate in training.read_runs(tmp_path, "horovod-pair-*.txt"))
    assert rows == {"horovod-pair-0-1.txt": "no SUMMARY line (incomplete)",
                    "horovod-pair-0-1-x.txt": "no SUMMARY line (incomplete)"}


def test_live_step_rows_from_runs_saved_like_the_learners(tmp_path):
    # the recorded H200 runs, saved under the names the notebook's commands write
    folder = reference.REFERENCE_DIR / "h200-nvswitch-pair" / "horovod-cnn"
    (tmp_path / "horovod-one-gpu-0.txt").write_text((folder / "horovod-cnn-pytorch-b64-gpus-0-default-r1.txt").read_text())
    (tmp_path / "horovod-pair-0-1.txt").write_text((folder / "horovod-cnn-pytorch-b64-gpus-0-1-default-r1.txt").read_text())
    (tmp_path / "horovod-pair-0-1-NCCL_P2P_LEVEL-LOC.txt").write_text(
        (folder / "horovod-cnn-pytorch-b64-gpus-0-1-NCCL_P2P_LEVEL-LOC-r1.txt").read_text())
    (tmp_path / "horovod-pair-0-1-cut.txt").write_text("[0]<stdout>:EPOCH 1/2 images_per_sec=10.0 seconds=1.0 "
                                                       "loss=1.0 accuracy=0.1 workers=2 batch_per_worker=64\n")
    fits = training.transport_fits()
    rows = {row[0]: row for row in training.live_step_rows(tmp_path, 4_799_528, fits)}
    assert set(rows) == {"horovod-pair-0-1.txt", "horovod-pair-0-1-NCCL_P2P_LEVEL-LOC.txt"}   # the cut-off run is left out
    # SUMMARY medians read by hand: one GPU 27404.6, the default pair's r1 29971.4 images/s
    p2p = rows["horovod-pair-0-1.txt"]
    assert p2p[1] == "P2P" and p2p[2] == f"{64 / 27404.6 * 1e3:.2f}" and p2p[3] == f"{128 / 29971.4 * 1e3:.2f}"
    assert rows["horovod-pair-0-1-NCCL_P2P_LEVEL-LOC.txt"][1] == "SHM"
    (tmp_path / "horovod-one-gpu-0.txt").unlink()
    assert training.live_step_rows(tmp_path, 4_799_528, fits) == []

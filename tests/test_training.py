"""gputopo.lessons.training (notebook 5) against values read by hand from the recorded files:
the SUMMARY lines of reference_systems/h200-nvswitch-pair/horovod-cnn/, the rows of the NCCL
benchmark tables beside them, the STEPTIME lines of reference_systems/h100-single-gpu/, and NCCL's
documented P2P rule (NCCL User Guide, Environment Variables, NCCL_P2P_LEVEL)."""

import pytest

from gputopo import alphabeta, ncclpaths, reference
from gputopo.lessons import training


def rows_by_label(cpu_vendor, nccl_version, local_gpus=2):
    """Notebook 5's table of the rule: per setting, the transport for each path type (no NIC)."""
    return {
        setting: [
            ncclpaths.expected_transport(
                dict(item.split("=") for item in setting.split() if "=" in item),
                path,
                cpu_vendor,
                nccl_version=nccl_version,
                local_gpus=local_gpus,
                nics=(),
            )
            or "?"
            for path in training.PATH_COLUMNS
        ]
        for setting in training.SETTINGS
    }


def test_nvlink_is_p2p_at_every_level_but_loc_and_disable():
    # NCCL docs: NVL is the closest path type after LOC; only LOC or NCCL_P2P_DISABLE take it away.
    rows = rows_by_label("GenuineIntel", "2.28.3")
    nvl = training.PATH_COLUMNS.index("NVL")
    off = {
        "NCCL_P2P_LEVEL=LOC": "SHM",
        "NCCL_P2P_DISABLE=1": "SHM",
        "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1": "NET",
    }
    for label, cells in rows.items():
        assert cells[nvl] == off.get(label, "P2P"), label


def test_default_row_follows_the_release_and_cpu():
    # src/graph/paths.cc at v2.28.3-1: PXB on Intel; SYS on x86 AMD for a job of at most two GPUs
    # in the node.
    assert rows_by_label("GenuineIntel", "2.28.3")["default"] == ["P2P", "P2P", "P2P", "SHM", "SHM"]
    assert rows_by_label("AuthenticAMD", "2.28.3", 2)["default"] == ["P2P"] * 5
    assert rows_by_label("AuthenticAMD", "2.28.3", 8)["default"] == [
        "P2P",
        "P2P",
        "P2P",
        "SHM",
        "SHM",
    ]
    # 2.9 to 2.22: SYS on AMD whatever the job
    assert rows_by_label("AuthenticAMD", "2.22.3", 8)["default"] == ["P2P"] * 5


@pytest.mark.parametrize(
    "part, setting",
    [
        ("default", "default"),
        ("NCCL_P2P_LEVEL-LOC", "NCCL_P2P_LEVEL=LOC"),
        ("NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1", "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"),
    ],
)
def test_setting_from_a_recorded_file_name(part, setting):
    assert training.setting_of(part) == setting


def test_read_runs_median_and_range_of_the_three_runs():
    rows = {(r["batch_per_worker"], r["pair"], r["setting"]): r for r in training.read_runs()}
    default = rows[(64, "0,1", "default")]
    assert default["runs"] == 3
    assert default["images_per_sec_median"] == pytest.approx(33452.9)
    assert (default["images_per_sec_min"], default["images_per_sec_max"]) == pytest.approx(
        (29971.4, 33612.9)
    )
    assert default["transport"] == "P2P" and default["workers"] == 2
    # the transports the logs name (Channel ... via P2P/CUMEM, SHM/direct/direct, NET/Socket)
    assert rows[(64, "0,1", "NCCL_P2P_LEVEL=LOC")]["transport"] == "SHM"
    assert rows[(512, "0,1", "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1")]["transport"] == "NET"
    assert rows[(64, "0", "default")]["transport"] == "-"  # one GPU: no NCCL connection
    assert len(rows) == 12  # 2 batches x (1 one-GPU + 5 settings)


def test_noise_figure_from_the_recorded_repeats():
    # docs/instructor.md's noise figure: per setting with repeated runs, (max - min) / median in %
    by = {
        (r["batch_per_worker"], r["setting"]): (r["images_per_sec_max"] - r["images_per_sec_min"])
        / r["images_per_sec_median"]
        * 100
        for r in training.read_runs()
        if r["runs"] >= 2
    }
    assert len(by) == 10
    # NCCL_P2P_LEVEL=NVL, batch 512: runs 246389.2, 292297.5, 278704.0 -> 45908.3 / 278704.0
    assert by[(512, "NCCL_P2P_LEVEL=NVL")] == pytest.approx(16.472, abs=0.001)
    assert by[(64, "default")] == pytest.approx(3641.5 / 33452.9 * 100, abs=0.001)
    assert max(by.values()) == pytest.approx(16.472, abs=0.001)


def test_step_rows_of_one_and_two_gpus():
    steps = {
        r["setting"]: r
        for r in training.step_rows(training.read_runs(), 4_799_528, 64, training.transport_fits())
    }
    default = steps["default"]
    assert default["one"][1] == pytest.approx(64 / 27404.6 * 1e3)  # 2.335 ms
    assert default["two"][1] == pytest.approx(2 * 64 / 33452.9 * 1e3)  # 3.826 ms
    assert default["added"][1] == pytest.approx(3.826 - 2.335, abs=2e-3)
    assert (default["two"][0], default["two"][2]) == pytest.approx(
        (128 / 33612.9 * 1e3, 128 / 29971.4 * 1e3)
    )
    # every two-GPU setting whose log names a fitted transport: NVL and PIX are P2P too
    assert [(s, r["transport"]) for s, r in steps.items()] == [
        ("default", "P2P"),
        ("NCCL_P2P_LEVEL=LOC", "SHM"),
        ("NCCL_P2P_LEVEL=NVL", "P2P"),
        ("NCCL_P2P_LEVEL=PIX", "P2P"),
        ("NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1", "NET"),
    ]
    assert training.step_rows(training.read_runs(), 4_799_528, 128, training.transport_fits()) == []


def test_the_fitted_model_meets_the_recorded_benchmark():
    # out-of-place time read by hand from nccl-bench-all_reduce*.txt at 4 MiB and 8 MiB (us)
    recorded = {"P2P": {4194304: 33.31, 8388608: 47.39}, "SHM": {4194304: 175.12, 8388608: 326.21}}
    fits = {f["transport"]: f for f in training.transport_fits()}

    def model_us(size, fit):
        return alphabeta.ring_allreduce_time_us(size, 2, fit["alpha_us"], fit["busbw_gbps"])

    for transport, points in recorded.items():
        for size, us in points.items():
            assert model_us(size, fits[transport]) == pytest.approx(us, rel=0.15), (transport, size)
    assert (
        fits["NET (sockets)"]["runs"] == 5
    )  # nccl-bench-all_reduce-sockets*.txt: 5 recorded tables
    # more bytes, more time; and the sockets are the slowest path by far
    assert model_us(107_199_528, fits["NET (sockets)"]) > 5 * model_us(107_199_528, fits["SHM"])


def test_steptime_line_of_the_ddp_script():
    text = (
        reference.REFERENCE_DIR / "h100-single-gpu" / "ddp-fmnist-gpu1-x25.6M-r1.txt"
    ).read_text()
    split = training.steptime(text)
    assert (
        split["step_ms"] == 3.696
        and split["allreduce_wait_ms"] == 0.679
        and split["allreduce_bytes"] == 107199528
    )
    assert training.steptime("EPOCH 1/2 images_per_sec=1.0\n") is None


def test_read_runs_keeps_an_incomplete_run_as_its_own_row(tmp_path):
    (tmp_path / "horovod-pair-0-1.txt").write_text(
        "[0]<stdout>:EPOCH 1/2 images_per_sec=789.7 seconds=8.104 loss=0.9944 accuracy=0.6509 "
        "workers=2 batch_per_worker=64\n"
    )
    (tmp_path / "horovod-pair-0-1-x.txt").write_text(
        "/bin/bash: line 1: horovodrun: command not found\n"
    )
    rows = training.read_runs(tmp_path, "horovod-pair-*.txt")
    assert [(r["setting"], r["runs"], r["images_per_sec_median"]) for r in rows] == [
        ("horovod-pair-0-1.txt", 0, None),
        ("horovod-pair-0-1-x.txt", 0, None),
    ]


def test_step_rows_from_runs_saved_like_the_learners(tmp_path):
    # the recorded H200 runs, saved under the names the notebook's commands write
    folder = reference.REFERENCE_DIR / "h200-nvswitch-pair" / "horovod-cnn"
    (tmp_path / "horovod-one-gpu-0.txt").write_text(
        (folder / "horovod-cnn-pytorch-b64-gpus-0-default-r1.txt").read_text()
    )
    (tmp_path / "horovod-pair-0-1.txt").write_text(
        (folder / "horovod-cnn-pytorch-b64-gpus-0-1-default-r1.txt").read_text()
    )
    (tmp_path / "horovod-pair-0-1-NCCL_P2P_LEVEL-LOC.txt").write_text(
        (folder / "horovod-cnn-pytorch-b64-gpus-0-1-NCCL_P2P_LEVEL-LOC-r1.txt").read_text()
    )
    (tmp_path / "horovod-pair-0-1-cut.txt").write_text(
        "[0]<stdout>:EPOCH 1/2 images_per_sec=10.0 seconds=1.0 "
        "loss=1.0 accuracy=0.1 workers=2 batch_per_worker=64\n"
    )
    fits = training.transport_fits()
    runs = training.read_runs(tmp_path, "horovod-*.txt")
    assert [(r["pair"], r["setting"], r["runs"]) for r in runs] == [
        ("horovod-pair-0-1-cut", "horovod-pair-0-1-cut.txt", 0),
        ("0", "default", 1),
        ("0,1", "default", 1),
        ("0,1", "NCCL_P2P_LEVEL=LOC", 1),
    ]
    rows = {row["setting"]: row for row in training.step_rows(runs, 4_799_528, 64, fits)}
    assert set(rows) == {"default", "NCCL_P2P_LEVEL=LOC"}  # the cut-off run is left out
    # a second pair (the learner's worst) is a row of its own, named by its GPUs
    (tmp_path / "horovod-pair-0-3.txt").write_text(
        (folder / "horovod-cnn-pytorch-b64-gpus-0-1-default-r2.txt").read_text()
    )
    pairs = [
        (r["pair"], r["setting"])
        for r in training.step_rows(training.read_runs(tmp_path, "horovod-*.txt"), 1, 64, fits)
    ]
    assert pairs == [("0,1", "default"), ("0,1", "NCCL_P2P_LEVEL=LOC"), ("0,3", "default")]
    (tmp_path / "horovod-pair-0-3.txt").unlink()
    # SUMMARY medians read by hand: one GPU 27404.6, the default pair's r1 29971.4 images/s
    p2p = rows["default"]
    assert p2p["transport"] == "P2P" and p2p["one"][1] == pytest.approx(64 / 27404.6 * 1e3)
    assert p2p["two"][1] == pytest.approx(128 / 29971.4 * 1e3)
    # one run: its range is its timed epochs 2-5 (28,368.3 to 31,495.0 images/s, read by hand)
    assert (p2p["two"][0], p2p["two"][2]) == pytest.approx(
        (128 / 31495.0 * 1e3, 128 / 28368.3 * 1e3)
    )
    assert rows["NCCL_P2P_LEVEL=LOC"]["transport"] == "SHM"
    (tmp_path / "horovod-one-gpu-0.txt").unlink()
    assert (
        training.step_rows(training.read_runs(tmp_path, "horovod-*.txt"), 4_799_528, 64, fits) == []
    )


def test_steptime_reads_numbers_and_the_default_bucket_word():
    # rank 0's line from evidence/2026-11-25-h100-course-after-shrink/ddp-gpu-0.txt (one H100), as
    # printed with an explicit cap, then as ddp_fmnist.py prints it without one
    line = (
        "STEPTIME forward_backward_ms=2.349 allreduce_wait_ms=0.566 optimizer_ms=0.514 "
        "step_ms=3.159 n_steps=50 n_compute_steps=50 allreduce_bytes=4799528 buckets=1 "
        "bucket_cap_mb=25 workers=1 batch_per_worker=64"
    )
    split = training.steptime("WORKER rank=0\n" + line + "\nSUMMARY ...\n")
    assert (
        split["step_ms"],
        split["allreduce_wait_ms"],
        split["allreduce_bytes"],
        split["bucket_cap_mb"],
    ) == (3.159, 0.566, 4799528.0, 25.0)
    split = training.steptime(line.replace("bucket_cap_mb=25", "bucket_cap_mb=default"))
    assert split["bucket_cap_mb"] == "default" and split["buckets"] == 1.0
    assert training.steptime("EPOCH 1/2 ...\n") is None


def test_read_runs_marks_a_cpu_pair(tmp_path):
    # a two-worker Gloo run on CPUs (its WORKER lines say device=CPU), saved under notebook 5's
    # pair name: the row must not claim GPUs 0,1; a recorded H200 GPU run keeps its plain pair
    cpu = (
        reference.REFERENCE_DIR
        / "cpu-gloo-pair/step_breakdown/runs"
        / "20261125T024309-r1-w2-cycle5-fusion134217728/output.txt"
    )
    (tmp_path / "horovod-pair-0-1.txt").write_text(cpu.read_text())
    gpu = (
        reference.REFERENCE_DIR
        / "h200-nvswitch-pair/horovod-cnn"
        / "horovod-cnn-pytorch-b512-gpus-0-1-NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1-r1.txt"
    )
    (tmp_path / "horovod-pair-0-1-NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1.txt").write_text(
        gpu.read_text()
    )
    rows = training.read_runs(tmp_path)
    assert sorted((r["pair"], r["workers"], r["runs"]) for r in rows) == [
        ("0,1", 2, 1),
        ("0,1 (CPU)", 2, 1),
    ]

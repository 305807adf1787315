"""gputopo.nccl_lesson: the tables notebook 5 prints, checked against the recorded DGX logs.

No Horovod, TensorFlow or GPU needed: the live paths run fake launchers.
"""
import stat
import statistics
import sys
import textwrap

import pytest

import cnn_fmnist
from gputopo.lessons import lesson3_nccl as nl
from gputopo import experiment, reference, runner, sweep
from gputopo.machine import Machine


@pytest.fixture(autouse=True)
def results_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path / "results"))
    for name in experiment.CONTROLLED_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def by_label(rows):
    return {row[0]: row[1:] for row in rows}


def test_level_rows_nvlink_uses_p2p_at_every_level_but_loc():
    rows = by_label(nl.level_rows("GenuineIntel"))
    nvl = nl.PATH_COLUMNS.index("NVL")
    for label, cells in rows.items():
        if label.startswith("NCCL_P2P_LEVEL="):
            assert cells[nvl] == ("SHM" if "LOC" in label else "P2P"), label
    assert rows["NCCL_P2P_LEVEL=PIX (or 1)"] == ["P2P", "P2P", "SHM", "SHM", "SHM"]
    assert rows["NCCL_P2P_LEVEL=SYS (or 4 or 5)"] == ["P2P"] * 5
    assert rows["NCCL_P2P_LEVEL=LOC (or 0)"] == ["SHM"] * 5
    assert rows["NCCL_P2P_DISABLE=1"] == ["SHM"] * 5
    assert rows["NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"] == ["NET"] * 5


def test_level_rows_default_is_pxb_on_intel_and_sys_on_amd():
    assert by_label(nl.level_rows("GenuineIntel"))["no variable set (default)"] == ["P2P", "P2P", "P2P", "SHM", "SHM"]
    assert by_label(nl.level_rows("AuthenticAMD"))["no variable set (default)"] == ["P2P"] * 5
    labels = [label for label, _ in nl.level_settings()]
    assert labels[1:7] == ["NCCL_P2P_LEVEL=LOC (or 0)", "NCCL_P2P_LEVEL=NVL", "NCCL_P2P_LEVEL=PIX (or 1)",
                           "NCCL_P2P_LEVEL=PXB (or 2)", "NCCL_P2P_LEVEL=PHB (or 3)", "NCCL_P2P_LEVEL=SYS (or 4 or 5)"]
    assert "PHB" in nl.level_table().splitlines()[0]


def test_channel_rows_of_recorded_logs():
    shm = reference.load("dgx1-v100", "nccl-log", filename="horovod-cnn-gpus-1-7-default.txt")
    assert nl.channel_rows(shm) == [("SHM", "direct shared memory", 4, "0->1 1->0")]
    p2p = reference.load("dgx1-v100", "nccl-log", filename="horovod-cnn-gpus-0-3-default.txt")
    assert nl.channel_rows(p2p) == [("P2P", "P2P/IPC", 8, "0->1 1->0")]
    a100 = reference.load("dgx-a100", "nccl-log", filename="horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt")
    assert [row[:2] for row in nl.channel_rows(a100)] == [("P2P", "P2P/IPC/read")]
    assert nl.channel_table({"channels": []}) == "no NCCL connection lines in this log"


def test_recorded_runs_carry_epoch_ranges():
    rows = nl.recorded_runs()
    v100 = {(r["pair"], r["setting"]): r for r in rows if r["system"] == "DGX-1 V100"}
    default = v100[("0,3", "default")]
    assert default["images_per_sec_median"] == pytest.approx(101215.77)
    assert default["images_per_sec_min"] == pytest.approx(99128.98)
    assert default["images_per_sec_max"] == pytest.approx(101490.28)
    assert v100[("1,7", "default")]["transports"] == "SHM"
    assert v100[("0,3", "NCCL_P2P_LEVEL=LOC (0)")]["images_per_sec_min"] == pytest.approx(94289.97)
    a100_default = next(r for r in rows if r["system"] == "DGX A100" and r["setting"] == "default")
    assert a100_default["batch_per_worker"] == 8192 and a100_default["images_per_sec_min"] is None


def test_batches_are_never_mixed():
    rows = nl.recorded_runs()
    groups = nl.comparable_groups(rows)
    assert set(groups) == {("2x H200 NVSwitch", 64), ("2x H200 NVSwitch", 512), ("DGX-1 V100", 512), ("DGX A100", 512),
                           ("DGX A100", 8192)}
    assert len(groups[("2x H200 NVSwitch", 64)]) == 6  # one GPU, then 5 settings (3 runs each)
    assert len(groups[("DGX-1 V100", 512)]) == 4
    with pytest.raises(ValueError, match="different batch sizes"):
        nl.runs_table([r for r in rows if r["system"] == "DGX A100"])
    text = nl.runs_table(groups[("DGX-1 V100", 512)])
    assert "101,216" in text and "99,129-101,490" in text


def test_relative_change_against_default():
    v100 = nl.comparable_groups(nl.recorded_runs())[("DGX-1 V100", 512)]
    changes = {(pair, setting): change for pair, setting, change in nl.relative_change(v100, "default")}
    assert changes[("0,3", "default")] == "+0.0 %"
    # Medians of the epochs each recorded log prints (Images/sec lines of dgx1-v100/*.txt).
    default = statistics.median([100702.49, 101486.84, 101490.28, 99128.98, 101215.77])
    loc = statistics.median([95033.4, 94848.44, 94289.97])
    far_pair = statistics.median([98996.51, 98135.64, 97798.09, 96672.95, 95782.78])
    assert changes[("0,3", "NCCL_P2P_LEVEL=LOC (0)")] == f"{100 * (loc / default - 1):+.1f} %" == "-6.3 %"
    assert changes[("1,7", "default")] == f"{100 * (far_pair / default - 1):+.1f} %" == "-3.4 %"


def test_allreduce_share_of_the_cnn_on_the_v100_nvlink_pair():
    share = nl.allreduce_share(cnn_fmnist.parameter_count(), 50.0, 101215.77, 512)
    assert share["gradient_mb"] == pytest.approx(4.799528)
    # ring all-reduce on 2 GPUs sends 2(n-1)/n = 1 x the gradient bytes per GPU
    assert share["allreduce_ms"] == pytest.approx(4.799528e6 / 50e9 * 1e3)
    assert share["step_ms"] == pytest.approx(1024 / 101215.77 * 1e3)
    assert share["share"] == pytest.approx((4.799528e6 / 50e9) / (1024 / 101215.77), rel=1e-4)
    four = nl.allreduce_share(1_000_000, 10.0, 1000, 100, workers=4)
    assert four["allreduce_ms"] == pytest.approx(1.5 * 4e6 / 10e9 * 1e3)


def fake_launcher(tmp_path, body):
    path = tmp_path / "launch.py"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return [sys.executable, str(path)]


GOOD = """
import sys
print("[0]<stderr>:h:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")
print("[0]<stdout>:EPOCH 1/2 images_per_sec=900.0 seconds=2.000 loss=1.5000 accuracy=0.5000 workers=2 batch_per_worker=64")
print("[0]<stdout>:EPOCH 2/2 images_per_sec=1800.0 seconds=1.000 loss=0.9000 accuracy=0.7000 workers=2 batch_per_worker=64")
print("[0]<stdout>:SUMMARY images_per_sec_median=1800.0 images_per_sec_min=1800.0 images_per_sec_max=1800.0 epochs_timed=1 test_accuracy=0.7500 workers=2 batch_per_worker=64")
"""


def two_gpus():
    return Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=2,
                   topology={"best_pair": [0, 1], "worst_pair": [0, 1],
                             "links": {"GPU0": {"GPU1": "NV4"}, "GPU1": {"GPU0": "NV4"}}})


def test_run_live_cpu_when_no_gpu(tmp_path):
    machine = Machine(mode="reference", reason="nvidia-smi not found", gpu_count=0)
    live = nl.run_live(machine, launcher=fake_launcher(tmp_path, GOOD), cpu_timeout=60)
    assert live.result is not None and live.result.ok and live.result.mode == experiment.MODE_CPU
    assert live.message.startswith("One live run on the CPU (no GPU is visible)")
    assert live.rows[0]["images_per_sec_median"] == 1800.0 and live.rows[0]["transports"] == "Gloo, no NCCL"
    assert live.log_path and live.command[-1].endswith("record.json")
    assert "1,800" in nl.runs_table(live.rows)


def test_run_live_sweeps_every_setting_on_two_gpus(tmp_path):
    live = nl.run_live(two_gpus(), launcher=fake_launcher(tmp_path, GOOD))
    assert [r["setting"] for r in live.rows] == [name for name, _ in sweep.SETTINGS]
    assert all(r["ok"] and r["transports"] == "P2P" for r in live.rows)
    assert all((r["runs"], r["runs_ok"]) == (3, 3) for r in live.rows)  # three per setting
    assert [r["repeat"] for r in live.runs] == [1] * 5 + [2] * 5 + [3] * 5  # spread, not bunched
    assert live.message == "Live sweep on this machine: 15 of 15 runs succeeded (3 per setting)."
    assert live.source == "live"
    assert live.log_path and live.command and live.result is None


def test_run_live_stops_when_horovod_is_missing():
    live = nl.run_live(two_gpus(), python="/nonexistent/python")
    assert len(live.rows) == 1 and live.rows[0]["setting"] == "default"
    assert live.rows[0]["reason"].startswith(experiment.HOROVOD_MISSING)
    assert live.message.startswith("The live GPU sweep did not run: Horovod missing")
    assert live.source == "reference"  # the course report counts the notebook as recorded data


def test_live_log_table_shows_connections_or_the_script_lines(tmp_path):
    live = nl.run_live(two_gpus(), launcher=fake_launcher(tmp_path, GOOD))
    assert nl.live_log_table(live).splitlines()[2].split() == ["P2P", "P2P/IPC", "1", "0->1"]
    cpu = nl.run_live(Machine(mode="reference", gpu_count=0),
                      launcher=fake_launcher(tmp_path, GOOD.replace('print("[0]<stderr>', '# ')))
    text = nl.live_log_table(cpu)
    assert text.startswith("No NCCL connection lines") and "SUMMARY images_per_sec_median=1800.0" in text
    assert nl.live_log_table(nl.LiveRuns("x", [], [], None)) == "No log: the run did not start."


def test_time_at_size_interpolates_between_measured_sizes():
    rows = [{"size": 4, "out_of_place": {"time_us": 10.0}}, {"size": 8, "out_of_place": {"time_us": 30.0}}]
    assert nl.time_at_size(rows, 6) == pytest.approx(20.0)
    assert nl.time_at_size(rows, 4) == pytest.approx(10.0)
    with pytest.raises(ValueError, match="outside the measured sizes"):
        nl.time_at_size(rows, 9)


def test_gradient_allreduce_rows_from_the_recorded_h200_benchmark():
    # P2P table: 33.31 us at 4 MiB, 47.39 us at 8 MiB (nccl-bench-all_reduce.txt); the CNN's
    # 4,799,528 bytes lie 14.43 % of the way: 33.31 + 0.1443 * 14.08 = 35.34 us.
    rows = nl.gradient_allreduce_rows(4_799_528, step_ms=3.534)
    assert [r[0].split()[0] for r in rows] == ["P2P", "SHM", "NET/Socket"]
    assert rows[0][3] == "0.035 ms" and rows[0][4] == "1.0 %"
    assert float(rows[2][3].split()[0]) > 1.5  # sockets: milliseconds, not microseconds


def test_reading_nccls_log():
    log = ("[1]<stdout>:host:2:3 [1] NCCL INFO NCCL version 9.9.9+cuda13.0\n"
           "[0]<stdout>:host:1:3 [0] NCCL INFO NCCL version 2.28.3+cuda13.0\n"
           "[0]<stdout>:host:1:3 [0] NCCL INFO Channel 00/24 :    0   1\n"
           "[0]<stdout>:host:1:3 [0] NCCL INFO Channel 23/24 :    0   1\n"
           "[0]<stdout>:host:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n")
    lines = [line for line, _ in nl.annotated_log(log)]
    assert lines == ["NCCL INFO NCCL version 2.28.3+cuda13.0", "NCCL INFO Channel 00/24 :    0   1",
                     "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"]
    assert nl.ring_channels(log) == 24
    assert nl.ring_channels("NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM") is None


def test_channel_counts_of_the_recorded_logs():
    # read off the logs by hand: "Channel 00/24" (P2P), "Channel 00/04" (LOC: SHM), "Channel 00/02" (sockets)
    counts = {(system, setting): n for system, _, setting, _, n in nl.channel_count_rows()}
    assert counts[("2x H200 NVSwitch", "default")] == "24"
    assert counts[("2x H200 NVSwitch", "NCCL_P2P_LEVEL=LOC")] == "4"
    assert counts[("2x H200 NVSwitch", "P2P and SHM disabled")] == "2"
    assert counts[("DGX A100", "NCCL_P2P_LEVEL=PIX (1)")] == "24"


def test_run_live_does_one_cpu_run_when_the_listed_gpus_cannot_be_used(tmp_path):
    """nvidia-smi lists two GPUs, the CUDA driver gives this job none (a container, a stand-in):
    one short CPU run, not a sweep of fifteen CPU runs under GPU settings."""
    machine = two_gpus()
    machine.cuda_devices = 0
    live = nl.run_live(machine, launcher=fake_launcher(tmp_path, GOOD))
    assert len(live.rows) == 1 and live.rows[0]["pair"] == "CPU x2"
    assert "this job may use 0 of them" in live.message


def test_live_cnn_switched_off_runs_nothing_and_says_so(monkeypatch):
    """GPUTOPO_LIVE_CNN=0 (a dry run of the course, the stand-in machines): no training job is
    started, whatever the machine has, and the notebook counts as recorded data."""
    started = []
    monkeypatch.setattr(runner, "run_experiment", lambda *a, **k: started.append("run"))
    monkeypatch.setattr(runner, "sweep", lambda *a, **k: started.append("sweep") or [])
    monkeypatch.setenv("GPUTOPO_LIVE_CNN", "0")
    for machine in (two_gpus(), Machine(mode="reference", reason="nvidia-smi not found", gpu_count=0)):
        live = nl.run_live(machine)
        assert live.source == "reference" and live.rows == [] and live.log_path is None
        assert "GPUTOPO_LIVE_CNN=0" in live.message
        assert nl.runs_table(live.rows) == "No live runs."
    assert started == []
    monkeypatch.setenv("GPUTOPO_LIVE_CNN", "1")  # any other value: the usual live path
    try:
        nl.run_live(two_gpus())
    except Exception:
        pass
    assert started == ["sweep"]

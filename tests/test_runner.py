"""gputopo.runner: failure paths with fake launchers, the reference sweep, NCCL_P2P_LEVEL facts.

No Horovod, TensorFlow or GPU needed: every launch here runs a small fake launcher script.
"""
import json
import os
import stat
import sys
import textwrap
import time

import pytest

from gputopo import experiment, ncclpaths, plots, sweep
from gputopo.machine import Machine


@pytest.fixture(autouse=True)
def results_in_tmp(tmp_path, monkeypatch):
    """Keep the results store of these tests out of the repository's results/."""
    store = tmp_path / "results"
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(store))
    for name in experiment.CONTROLLED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return store


def two_gpu_machine(link="NV2"):
    return Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=2,
                   topology={"best_pair": [0, 1], "worst_pair": [0, 1],
                             "links": {"GPU0": {"GPU1": link}, "GPU1": {"GPU0": link}}})


def no_gpu_machine():
    return Machine(mode="reference", reason="nvidia-smi not found", gpu_count=0)


def write_script(path, body):
    """An executable Python script; `body` sees ARGV (its arguments) and OUT (a folder)."""
    path.write_text(f"#!{sys.executable}\nimport os, sys, json, time, subprocess\n"
                    f"ARGV = sys.argv[1:]\nOUT = {str(path.parent)!r}\n"
                    + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return [sys.executable, str(path)]


def stored_records(store):
    path = store / f"{experiment.RESULT_KIND}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# A launcher that records what it was given, then prints what a good 2-GPU run prints
# (NCCL 2.18 connection lines over P2P, the script's EPOCH/SUMMARY lines) and writes the JSON.
GOOD_RUN = """
with open(os.path.join(OUT, "seen.json"), "w") as fh:
    json.dump({"argv": ARGV, "env": {k: v for k, v in os.environ.items()
                                      if k.startswith(("NCCL_", "CUDA_"))}}, fh)
print("[0]<stderr>:host:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2")
print("[0]<stderr>:host:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")
print("[1]<stderr>:host:2:9 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC")
print("[0]<stdout>:EPOCH 1/2 images_per_sec=900.0 seconds=2.000 loss=1.5000 accuracy=0.5000 workers=2 batch_per_worker=64")
print("[0]<stdout>:EPOCH 2/2 images_per_sec=1800.0 seconds=1.000 loss=0.9000 accuracy=0.7000 workers=2 batch_per_worker=64")
print("[0]<stdout>:SUMMARY images_per_sec_median=1800.0 images_per_sec_min=1800.0 images_per_sec_max=1800.0 epochs_timed=1 test_accuracy=0.7500 workers=2 batch_per_worker=64")
"""


def test_good_run_parses_log_and_sets_environment(tmp_path, results_in_tmp, monkeypatch):
    monkeypatch.setenv("NCCL_P2P_LEVEL", "SYS")  # inherited: must not leak into "default"
    launcher = write_script(tmp_path / "launch.py", GOOD_RUN)
    result = experiment.run_experiment(gpus=(0, 1), machine=two_gpu_machine(), launcher=launcher,
                                   timeout=60)
    assert result.ok, result.reason
    assert result.reason == "ok" and result.category is None
    assert result.mode == experiment.MODE_GPU
    assert result.link == "NV2"
    assert result.exit_status == 0
    assert result.transports == ["P2P"]
    assert result.nccl_version == "2.18.5"
    assert result.images_per_sec == [900.0, 1800.0]
    assert result.summary["images_per_sec_median"] == 1800.0
    assert result.images_per_sec_median == 1800.0

    seen = json.loads((tmp_path / "seen.json").read_text())
    argv, env = seen["argv"], seen["env"]
    assert argv[:5] == ["-np", "2", "-H", "localhost:2", "--gloo"]
    assert argv[5] == sys.executable and argv[6].endswith("cnn_fmnist.py")
    assert "--json-out" in argv and argv[argv.index("--batch-size") + 1] == "512"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert "NCCL_P2P_LEVEL" not in env

    records = stored_records(results_in_tmp)
    assert len(records) == 1 and records[0]["ok"] is True
    assert records[0]["environment"]["hostname"]
    assert os.path.exists(result.log_path)


def test_setting_reaches_the_launcher_and_runs_are_appended(tmp_path, results_in_tmp):
    launcher = write_script(tmp_path / "launch.py", GOOD_RUN)
    for level in ("LOC", "PIX"):
        result = experiment.run_experiment(gpus=(1, 0), env={"NCCL_P2P_LEVEL": level},
                                       machine=two_gpu_machine(), launcher=launcher, timeout=60)
        seen = json.loads((tmp_path / "seen.json").read_text())
        assert seen["env"]["NCCL_P2P_LEVEL"] == level
        assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "1,0"
        assert result.env["NCCL_P2P_LEVEL"] == level
    records = stored_records(results_in_tmp)
    assert [r["env"]["NCCL_P2P_LEVEL"] for r in records] == ["LOC", "PIX"]
    assert len({r["log_path"] for r in records}) == 2  # a new folder per run


def test_nccl_error_is_classified(tmp_path, results_in_tmp):
    launcher = write_script(tmp_path / "launch.py", """
        print("[0]<stderr>:host:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2")
        print("[1]<stderr>:host:2:2 [1] NCCL WARN Cuda failure 'peer access is not supported between these two devices'")
        print("[1]<stderr>:tensorflow.python.framework.errors_impl.UnknownError: ncclUnhandledCudaError: Call to CUDA function failed.")
        sys.exit(1)
    """)
    result = experiment.run_experiment(gpus=(0, 1), machine=two_gpu_machine(), launcher=launcher,
                                   timeout=60)
    assert not result.ok
    assert result.category == experiment.NCCL_ERROR
    assert result.reason.startswith("NCCL error: ")
    assert "peer access is not supported" in result.reason
    assert "\n" not in result.reason
    assert result.exit_status == 1
    assert "ncclUnhandledCudaError" in result.log_tail
    assert result.nccl_version == "2.18.5"
    assert stored_records(results_in_tmp)[-1]["category"] == experiment.NCCL_ERROR


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to see the processes")
def test_timeout_kills_launcher_and_workers_in_other_sessions(tmp_path):
    # Like Horovod: the launcher starts a worker in a session of its own, then both hang.
    launcher = write_script(tmp_path / "launch.py", """
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                  start_new_session=True)
        with open(os.path.join(OUT, "pids"), "w") as fh:
            fh.write(f"{os.getpid()} {worker.pid}")
        print("[0]<stdout>:WORKER rank=0 size=2", flush=True)
        time.sleep(300)
    """)
    began = time.monotonic()
    result = experiment.run_experiment(gpus=(0, 1), machine=two_gpu_machine(), launcher=launcher,
                                   timeout=3)
    assert time.monotonic() - began < 30
    assert not result.ok
    assert result.category == experiment.TIMEOUT
    assert result.reason.startswith("timeout: ")
    assert "WORKER rank=0" in result.log_tail
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(p) for p in pids), f"still running: {pids}"


@pytest.mark.parametrize("gpus, words", [
    ((0, 5), "GPU 5 does not exist"),
    ((0, 0), "repeat"),
    ((0,), "2 processes need 2 GPUs"),
    ((0, "1"), "not an integer"),
    ((-1, 1), "GPU -1 does not exist"),
])
def test_bad_gpu_index_launches_nothing(tmp_path, results_in_tmp, gpus, words):
    launcher = write_script(tmp_path / "launch.py", """
        open(os.path.join(OUT, "launched"), "w").close()
    """)
    result = experiment.run_experiment(gpus=gpus, machine=two_gpu_machine(), launcher=launcher,
                                   timeout=60)
    assert not result.ok
    assert result.category == experiment.BAD_GPU
    assert result.reason.startswith("bad GPU index: ") and words in result.reason
    assert not (tmp_path / "launched").exists()
    assert result.command == []
    assert stored_records(results_in_tmp)[-1]["category"] == experiment.BAD_GPU


def test_horovod_missing_from_the_interpreter(tmp_path):
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\n"
                           "echo \"ModuleNotFoundError: No module named 'horovod'\" >&2\n"
                           "exit 1\n")
    fake_python.chmod(0o755)
    result = experiment.run_experiment(gpus=(0, 1), python=str(fake_python),
                                   machine=no_gpu_machine(), timeout=60)
    assert not result.ok
    assert result.category == experiment.HOROVOD_MISSING
    assert result.reason.startswith("Horovod missing: ")
    assert "No module named 'horovod'" in result.reason
    assert result.command == []  # checked before launching


def test_horovod_missing_inside_the_workers(tmp_path):
    launcher = write_script(tmp_path / "launch.py", """
        print("[1]<stderr>:ModuleNotFoundError: No module named 'horovod'")
        sys.exit(1)
    """)
    result = experiment.run_experiment(gpus=(0, 1), machine=two_gpu_machine(), launcher=launcher,
                                   timeout=60)
    assert result.category == experiment.HOROVOD_MISSING


def test_other_failures_quote_the_last_line(tmp_path):
    launcher = write_script(tmp_path / "launch.py", """
        print("something broke")
        print("RuntimeError: disk full")
        sys.exit(3)
    """)
    result = experiment.run_experiment(gpus=(0, 1), machine=two_gpu_machine(), launcher=launcher,
                                   timeout=60)
    assert result.category == experiment.OTHER
    assert result.reason == "other: exit status 3: RuntimeError: disk full"
    # Exit 0 without a SUMMARY line is not a success either.
    quiet = write_script(tmp_path / "quiet.py", "print('hello')\n")
    result = experiment.run_experiment(gpus=(0, 1), machine=two_gpu_machine(), launcher=quiet,
                                   timeout=60)
    assert not result.ok and result.category == experiment.OTHER
    assert "no SUMMARY line" in result.reason


def test_no_gpu_runs_on_cpu_with_gloo_and_says_so(tmp_path):
    launcher = write_script(tmp_path / "launch.py", GOOD_RUN)
    result = experiment.run_experiment(gpus=(0, 3), machine=no_gpu_machine(), launcher=launcher,
                                   timeout=60)
    assert result.ok
    assert result.mode == "cpu-gloo"
    assert "CPU" in result.reason and "Gloo" in result.note
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert "--gloo" in seen["argv"]
    assert seen["argv"][seen["argv"].index("--steps-per-epoch") + 1] == "20"


def test_missing_launcher_is_a_one_line_failure(tmp_path):
    result = experiment.run_experiment(gpus=(0, 1), machine=two_gpu_machine(),
                                   launcher=[str(tmp_path / "no-such-launcher")], timeout=60)
    assert not result.ok and result.category == experiment.OTHER
    assert "cannot start" in result.reason and "\n" not in result.reason


def test_sweep_table_with_fake_launcher(tmp_path):
    launcher = write_script(tmp_path / "launch.py", GOOD_RUN)
    rows = sweep.sweep(pairs=[(0, 1)], machine=two_gpu_machine("NV1"), launcher=launcher,
                        timeout=60)
    assert [r["setting"] for r in rows] == [name for name, _ in sweep.SETTINGS]
    for row in rows:
        assert row["pair"] == "0,1" and row["link"] == "NV1"
        assert row["ok"] and row["transports"] == "P2P"
        assert row["images_per_sec_median"] == 1800.0
        assert row["batch_per_worker"] == 512
    by_setting = {r["setting"]: r for r in rows}
    assert by_setting["NCCL_P2P_LEVEL=LOC"]["expected_transport"] == "SHM"
    assert by_setting["NCCL_P2P_LEVEL=PIX"]["expected_transport"] == "P2P"
    assert by_setting["P2P and SHM disabled"]["expected_transport"] == "NET"


def test_sweep_reads_the_nic_columns_and_takes_a_single_gpu(tmp_path, monkeypatch):
    """A SYS pair whose GPUs both sit at PIX to a NIC: NCCL 2.14 and later (the fake log says
    2.18.5) may send through the NIC instead of SHM if it is faster, which topo -m cannot tell,
    so the expected transport is None (src/transport/shm.cc shmCanConnect at v2.14.3-1). A
    one-GPU entry has no pair and no NIC pair to look up."""
    from gputopo import sweep as sweep_module
    monkeypatch.setattr(sweep_module, "local_cpu_vendor", lambda: "GenuineIntel")
    launcher = write_script(tmp_path / "launch.py", GOOD_RUN)
    machine = Machine(mode="multi-gpu", gpu_count=2, visible_gpu_count=2,
                      topology={"best_pair": [0, 1], "worst_pair": [0, 1], "nics": {"NIC0": "mlx5_0"},
                                "links": {"GPU0": {"GPU1": "SYS", "NIC0": "PIX"},
                                          "GPU1": {"GPU0": "SYS", "NIC0": "PIX"}}})
    rows = sweep.sweep(pairs=[(0, 1), (0,)], settings=sweep.SETTINGS[:1], machine=machine,
                        launcher=launcher, timeout=60)
    assert [r["pair"] for r in rows] == ["0,1", "0"]
    assert rows[0]["nccl_version"] == "2.18.5" and rows[0]["expected_transport"] is None
    assert rows[1]["expected_transport"] is None


def test_sweep_needs_two_gpus():
    with pytest.raises(ValueError, match="at least two GPUs"):
        sweep.sweep(machine=no_gpu_machine())


# ------------------------------------------------------------------------------------------
# Reference sweep and NCCL_P2P_LEVEL facts

def reference_rows():
    return {(r["system"], r["pair"], r["setting"]): r for r in sweep.reference_sweep()}


def test_reference_sweep_transports_per_setting():
    rows = reference_rows()
    v100 = "DGX-1 V100"
    assert rows[(v100, "0,3", "default")]["transports"] == "P2P"
    assert rows[(v100, "0,3", "NCCL_P2P_LEVEL=PIX (1)")]["transports"] == "P2P"
    assert rows[(v100, "0,3", "NCCL_P2P_LEVEL=LOC (0)")]["transports"] == "SHM"
    assert rows[(v100, "1,7", "default")]["transports"] == "SHM"
    a100 = "DGX A100"
    assert rows[(a100, "0,3", "NCCL_P2P_LEVEL=PIX (1)")]["transports"] == "P2P"
    assert rows[(a100, "0,3", "NCCL_P2P_LEVEL=LOC (0)")]["transports"] == "SHM"


def test_reference_sweep_numbers_and_batch_sizes():
    rows = reference_rows()
    v100 = rows[("DGX-1 V100", "0,3", "default")]
    assert v100["images_per_sec_median"] == pytest.approx(101215.77)
    assert rows[("DGX-1 V100", "0,3", "NCCL_P2P_LEVEL=LOC (0)")]["images_per_sec_median"] \
        == pytest.approx(94848.44)
    assert v100["batch_per_worker"] == 512
    # The A100 NVLink default run used another batch size; it must say so, not hide it.
    a100_default = rows[("DGX A100", "0,3", "default")]
    assert a100_default["batch_per_worker"] == 8192
    assert a100_default["transports"] == ""
    assert all(r["batch_per_worker"] is not None for r in rows.values())
    systems = [system for system, _, _ in rows]
    assert sorted(set(systems), key=systems.index) == ["2x H200 NVSwitch", "DGX-1 V100", "DGX A100"]


def test_p2p_level_facts_agree_with_the_reference_logs():
    checked = 0
    for row in sweep.reference_sweep():
        if not row["transports"]:
            continue  # no log published for that run
        assert row["expected_transport"] == row["transports"], row
        checked += 1
        # The legacy integer in the file name is echoed by NCCL as the level's name.
        level = row["env"].get("NCCL_P2P_LEVEL")
        if level is not None:
            assert row["p2p_level_in_log"] == ncclpaths.legacy_level_name(level)
    assert checked == 6 + 15 + 15  # the DGX logs; the H200 pair's 5 settings x 3 runs at batch 64 and 512


def test_p2p_level_facts_table():
    by_level = {f["level"]: f for f in ncclpaths.P2P_LEVEL_FACTS}
    assert {name: f["legacy_integer"] for name, f in by_level.items()} == {
        "LOC": 0, "NVL": None, "PIX": 1, "PXB": 2, "PHB": 3, "SYS": 4}
    assert [ncclpaths.legacy_level_name(str(i)) for i in range(7)] == [
        "LOC", "PIX", "PXB", "PHB", "SYS", "SYS", "SYS"]
    # NVLink pairs keep P2P at every level but LOC.
    assert [f["level"] for f in ncclpaths.P2P_LEVEL_FACTS if not f["nvlink_pair_uses_p2p"]] == ["LOC"]
    for level in by_level:
        expected = "SHM" if level == "LOC" else "P2P"
        assert ncclpaths.expected_transport({"NCCL_P2P_LEVEL": level}, "NVL", nics=()) == expected
    # Defaults by release: tests/test_ncclpaths_versions.py has the whole table.
    assert ncclpaths.default_p2p_level("GenuineIntel") == "PXB"
    assert ncclpaths.default_p2p_level("AuthenticAMD", "2.19.3") == "SYS"
    assert ncclpaths.default_p2p_level("AuthenticAMD") is None  # 2.23+: depends on the GPU count
    assert ncclpaths.expected_transport({}, "SYS", "GenuineIntel", nics=()) == "SHM"  # no NIC
    assert ncclpaths.expected_transport({}, "SYS", "GenuineIntel") is None  # NICs unknown (>= 2.14)
    assert ncclpaths.expected_transport({}, "SYS", "AuthenticAMD", nccl_version="2.19.3") == "P2P"
    assert ncclpaths.expected_transport({}, "PXB", None) == "P2P"  # every default reaches PXB
    assert ncclpaths.expected_transport({}, "PHB", None) is None  # default unknown
    assert ncclpaths.expected_transport({"NCCL_P2P_DISABLE": "1"}, "NVL", nics=()) == "SHM"
    assert ncclpaths.expected_transport({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
                                     "NVL") == "NET"
    assert "nccl-p2p-level" in ncclpaths.P2P_LEVEL_SOURCES["docs"]


@pytest.mark.parametrize("code, path", [
    ("NV12", "NVL"), ("NV1", "NVL"), ("PIX", "PIX"), ("PXB", "PXB"), ("PHB", "PHB"),
    ("NODE", "PHB"), ("SYS", "SYS"), ("X", None), (None, None)])
def test_topo_codes_to_nccl_path_types(code, path):
    assert ncclpaths.path_type_of_link(code) == path


def test_plot_sweep_draws_reference_rows():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    ax = plots.plot_sweep([r for r in sweep.reference_sweep() if r["system"].startswith("DGX")])
    labels = [t.get_text() for t in ax.texts]
    assert any("SHM" in t for t in labels) and any("b=8192" in t for t in labels)
    assert len(ax.patches) == 7
    assert not ax.collections  # one run per bar: no error bars


def test_plot_sweep_error_bars_span_the_repeated_runs():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    rows = [r for r in sweep.summarize(sweep.reference_sweep())
            if r["system"] == "2x H200 NVSwitch" and r["pair"] == "0,1" and r["batch_per_worker"] == 64]
    ax = plots.plot_sweep(rows)
    assert len(ax.patches) == 5
    spans = sorted(tuple(sorted((seg[0][1], seg[1][1]))) for c in ax.collections for seg in c.get_segments())
    want = sorted((r["images_per_sec_min"], r["images_per_sec_max"]) for r in rows)
    assert spans == pytest.approx(want)

"""gputopo.live: a command's saved output is read as this machine's when it is usable, and
otherwise a real machine's recorded output is printed in its place with its label.

Expected values were read by hand from the recorded files: the H100 VM's `nvidia-smi topo -m`
(reference_systems/h100-single-gpu/) has one GPU, CPU affinity 0-15; the H200 pair's
(reference_systems/h200-nvswitch-pair/) two GPUs joined by NV18.
"""

import subprocess

import pytest

from gputopo import live
from gputopo.reference import REFERENCE_DIR

H100_TOPO = REFERENCE_DIR / "h100-single-gpu" / "nvidia-smi-topo-m.txt"


def test_a_real_output_is_read_as_this_machines(tmp_path, capsys):
    saved = tmp_path / "nvidia-smi-topo-m.txt"
    saved.write_text(H100_TOPO.read_text())
    out = live.read(saved, kind="topo", recorded="h200-nvswitch-pair/nvidia-smi-topo-m.txt")
    assert out.live is True and out.label == "this machine"
    assert out.parsed["gpus"] == ["GPU0"]
    printed = capsys.readouterr().out
    assert printed.startswith("[live]") and "NV18" not in printed  # the recorded pair is not shown


def test_command_not_found_falls_back_to_the_recorded_machine(tmp_path, capsys):
    saved = tmp_path / "nvidia-smi-topo-m.txt"
    # What bash itself writes when the tool is missing, captured the way a notebook cell does.
    result = subprocess.run(
        f"no-such-tool-gputopo topo -m 2>&1 | tee {saved}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
    )
    assert "not found" in result.stdout
    out = live.read(saved, kind="topo", recorded="h200-nvswitch-pair/nvidia-smi-topo-m.txt")
    assert out.live is False
    assert out.parsed["links"]["GPU0"]["GPU1"] == "NV18"
    printed = capsys.readouterr().out
    assert printed.startswith("[recorded] the command did not run")
    assert "reference_systems/h200-nvswitch-pair/nvidia-smi-topo-m.txt" in printed
    assert "NV18" in printed  # the recorded raw text itself is printed


def test_a_cut_off_output_is_not_taken_for_this_machines(tmp_path, capsys):
    text = (REFERENCE_DIR / "h200-nvswitch-pair" / "nvidia-smi-topo-m.txt").read_text()
    saved = tmp_path / "topo.txt"
    saved.write_text(text.splitlines()[0] + "\n")  # the header row alone: no GPU row
    out = live.read(saved, kind="topo", recorded="h100-single-gpu/nvidia-smi-topo-m.txt")
    assert out.live is False and out.parsed["gpus"] == ["GPU0"]
    assert "not a complete topo output" in capsys.readouterr().out


def test_a_missing_file_says_the_cell_was_not_run(tmp_path, capsys):
    out = live.read(tmp_path / "never-written.txt", recorded="h100-single-gpu/nvidia-smi.txt")
    assert out.live is False and "H100" in out.text
    assert "was not written" in capsys.readouterr().out


def test_an_empty_output_without_a_recording_says_so(tmp_path, capsys):
    saved = tmp_path / "nvlink.txt"
    saved.write_text("")  # nvidia-smi nvlink -s on a GPU without NVLink prints nothing
    out = live.read(saved)
    assert out.live is False and out.parsed is None
    assert capsys.readouterr().out.startswith("[not live] the command printed nothing")


def test_run_dirs_are_new_per_name_and_kept_within_a_session(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(live, "_RUN_DIRS", {})
    first = live.run_dir("2-topology")
    assert first.is_dir() and first.parent == tmp_path and first.name.startswith("2-topology-")
    assert live.run_dir("2-topology") == first
    assert live.run_dir("3-p2p") != first


@pytest.mark.parametrize(
    "line",
    [
        "bash: line 1: nvidia-smi: command not found",
        "/bin/sh: 1: numactl: not found",
        "No devices were found",
    ],
)
def test_what_a_shell_or_driver_prints_is_not_an_output(tmp_path, line):
    saved = tmp_path / "x.txt"
    saved.write_text(line + "\n")
    assert live.read(saved).live is False


def test_the_recorded_text_is_printed_without_terminal_escape_codes(tmp_path, capsys):
    # The H200 pair's topo -m header row starts with ESC[4m (underline), as nvidia-smi printed it.
    assert "\x1b[4m" in (REFERENCE_DIR / "h200-nvswitch-pair" / "nvidia-smi-topo-m.txt").read_text()
    live.read(
        tmp_path / "missing.txt", kind="topo", recorded="h200-nvswitch-pair/nvidia-smi-topo-m.txt"
    )
    printed = capsys.readouterr().out
    assert "\x1b[" not in printed and "GPU0\tGPU1" in printed


def test_head_prints_the_first_lines_and_says_where_the_rest_is(tmp_path, capsys):
    recorded = "h100-single-gpu/nccl-graph-dump.xml"
    total = len((REFERENCE_DIR / recorded).read_text().splitlines())
    live.read(tmp_path / "missing.xml", recorded=recorded, head=5)
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1] == (
        f"... ({total - 5} more lines: the whole output is "
        f"source_code/reference_systems/{recorded})"
    )
    assert printed[-2].strip()  # the fifth line of the dump, not the end of the file


def test_a_run_dir_another_kernel_made_in_the_same_second_is_not_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(live, "_RUN_DIRS", {})
    first = live.run_dir("2-topology")
    (first / "nvidia-smi-topo-m.txt").write_text("another kernel's output\n")
    monkeypatch.setattr(
        live, "_RUN_DIRS", {}
    )  # a second kernel: its own cache, the same clock second
    frozen = first.name.split("2-topology-")[1]

    class Clock(live.datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return live.datetime.datetime.strptime(frozen, "%Y%m%dT%H%M%SZ").replace(tzinfo=tz)

    monkeypatch.setattr(live.datetime, "datetime", Clock)
    second = live.run_dir("2-topology")
    assert second != first and second.name == first.name + "-2"
    assert (first / "nvidia-smi-topo-m.txt").read_text() == "another kernel's output\n"


def test_results_dir_follows_the_variable_else_results_in_the_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path / "mine"))
    assert live.results_dir() == tmp_path / "mine"
    monkeypatch.delenv("GPUTOPO_RESULTS_DIR")
    default = live.results_dir()
    assert default.name == "results" and (default.parent / "CONTRIBUTING.md").exists()


def test_new_run_dir_never_reuses_a_name(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path))
    made = [live.new_run_dir("course") for _ in range(4)]  # within one second: -2, -3, -4
    assert len(set(made)) == 4 and all(path.is_dir() and path.parent == tmp_path for path in made)
    (made[0] / "keep.txt").write_text("earlier run")
    assert live.new_run_dir("course") not in made
    assert (made[0] / "keep.txt").read_text() == "earlier run"


def test_new_run_dir_skips_names_that_exist(tmp_path, monkeypatch):
    class Clock(live.datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2024, 6, 10, 14, 9, 28, tzinfo=tz)

    monkeypatch.setattr(live.datetime, "datetime", Clock)
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path))
    (tmp_path / "p2p-20240610T140928Z").mkdir()
    (tmp_path / "p2p-20240610T140928Z-2").mkdir()
    assert live.new_run_dir("p2p").name == "p2p-20240610T140928Z-3"


def test_a_tool_that_stopped_with_an_error_is_quoted_once_and_whole(tmp_path, capsys):
    # what host_device_copy.py printed in the TensorFlow environment (notebook 1's stored output)
    error = (
        "host_device_copy: error: PyTorch is not installed (pip install torch, or use the PyTorch "
        "flavour: environment/install.sh --framework pytorch)"
    )
    saved = tmp_path / "copies.txt"
    saved.write_text(error + "\n")
    out = live.read(
        saved, kind="host-device-copy", recorded="h100-single-gpu/host-device-copy-run1.txt"
    )
    first = capsys.readouterr().out.splitlines()[0]
    assert out.live is False and first.count("PyTorch is not installed") == 1
    assert f"the command failed here: {error}" in first


def test_a_complete_output_that_cannot_serve_the_lesson_gives_way_to_the_recording(
    tmp_path, capsys
):
    # the P2P test run with one GPU visible (recorded on the H200 pair with --devices=1): complete,
    # but its matrices hold only GPU 0's copy inside itself, where the lesson reads a pair
    one_gpu = (
        REFERENCE_DIR / "h200-nvswitch-pair" / "p2pBandwidthLatencyTest-devices1.txt"
    ).read_text()
    saved = tmp_path / "p2p.txt"
    saved.write_text(one_gpu)
    pair = (
        lambda p2p: len(p2p["bandwidth_gbs"]["unidirectional_write"]) >= 2,
        "has one GPU only, no pair to read",
    )
    out = live.read(
        saved,
        kind="p2p",
        recorded="h200-nvswitch-pair/p2pBandwidthLatencyTest-numElems40000000.txt",
        needs=pair,
    )
    first = capsys.readouterr().out.splitlines()[0]
    assert out.live is False and len(out.parsed["bandwidth_gbs"]["unidirectional_write"]) == 2
    assert first.startswith(
        "[recorded] this machine's output (above) is complete but has one GPU only"
    )
    # a pair's own output passes the same check and stays the learner's
    saved.write_text(
        (REFERENCE_DIR / "h200-nvswitch-pair" / "p2pBandwidthLatencyTest.txt").read_text()
    )
    assert live.read(
        saved, kind="p2p", recorded="h200-nvswitch-pair/p2pBandwidthLatencyTest.txt", needs=pair
    ).live

"""What notebook 5 prints about a live run: no absolute paths of the checkout, no host name
(review finding MI6)."""
from gputopo import experiment
from gputopo.lessons import lesson3_nccl as nl


def test_command_text_is_relative_to_the_course_folder():
    root = experiment.SOURCE_DIR.parent
    command = [str(root / ".venv/bin/python"), "-m", "horovod.runner.launch", "-np", "2",
               "/usr/bin/python3.11", str(root / "source_code/cnn_fmnist.py"), "--json-out",
               str(root / "results/run 1/record.json"), "/elsewhere/file"]
    assert nl.command_text(command) == (
        "python -m horovod.runner.launch -np 2 python3.11 ./source_code/cnn_fmnist.py "
        "--json-out './results/run 1/record.json' /elsewhere/file")
    assert nl.command_text(None) == "no command was run"


def test_worker_lines_leave_the_host_name_out(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("[1]<stdout>:WORKER rank=1 size=2 local_rank=1 device=CPU shard_images=30000 "
                   "host=node-17.example framework=tensorflow\n"
                   "[0]<stdout>:EPOCH 1/2 images_per_sec=307.8 seconds=8.316\n")
    live = nl.LiveRuns(rows=[], message="", source="live", command=None, log_path=str(log))
    text = nl.live_log_table(live)
    assert "node-17" not in text and "host=(this host)" in text and "EPOCH 1/2" in text

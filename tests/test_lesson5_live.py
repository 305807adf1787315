"""Notebook 4's live benchmark runs (review r3 of notebook 4, M-a and M-c).

M-a: the Makefile, Dockerfile and course.def always export NCCL_NVLS_ENABLE (0 unless an
instructor set it), so a live run used to be labelled "NCCL_NVLS_ENABLE=0 (your environment)";
it is the course default. M-c: the live runs add one with CUDA graphs (-G), and one process per
GPU is counted from the device list. `run` below stands in for ncclbench.run (no GPU here).
"""
from pathlib import Path

from gputopo import ncclpaths
from gputopo.lessons import lesson5_collectives as lessons
from gputopo.parsers.nccl_tests import parse

TABLE = Path(__file__).resolve().parent / "fixtures" / "parsers" / "nccl-tests-g1-two-ranks-deepops942.txt"


class FakeRun:
    """ncclbench.run's keywords and result; mode "live" for the first `live` calls."""

    def __init__(self, live=99):
        self.calls, self.live = [], live

    def __call__(self, op, env=None, max_bytes=None, cuda_graph=False):
        self.calls.append((op, dict(env or {}), cuda_graph))
        if len(self.calls) > self.live:
            return {"mode": "reference", "text": "# 1 GPU(s) visible here and this run needs 2: showing a recording\n"}
        text = TABLE.read_text(encoding="utf-8")
        return {"mode": "live", "text": text, "parsed": parse(text, strict=False)}


def test_unset_and_zero_are_the_course_default():
    assert lessons.live_nvls_label({}) == ncclpaths.NVLS_OFF == "NVLS off (course default)"
    assert lessons.live_nvls_label({"NCCL_NVLS_ENABLE": "0"}, "2.28.3") == "NVLS off (course default)"
    assert lessons.live_nvls_label({"NCCL_NVLS_ENABLE": "1"}, "2.28.3") == ncclpaths.NVLS_ON


def test_live_runs_are_every_transport_then_a_cuda_graph_run():
    run = FakeRun()
    tables, lines = lessons.live_tables(run, lessons.TRANSPORTS, environ={"NCCL_NVLS_ENABLE": "0"})
    assert [(env, graph) for _, env, graph in run.calls] == [
        ({}, False), ({"NCCL_P2P_LEVEL": "LOC"}, False), ({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, False),
        ({}, True)]
    assert [(t["transport"], t["launch"]) for t in tables] == [
        ("default", "plain launches"), ("SHM (NCCL_P2P_LEVEL=LOC)", "plain launches"),
        ("NET (sockets; P2P and SHM disabled)", "plain launches"), ("default", "CUDA graph")]
    assert {t["nvls"] for t in tables} == {"NVLS off (course default)"}
    assert {t["n"] for t in tables} == {2}          # nGpus 1, two ranks in the device list
    assert len(lines) == 4 and "CUDA graph" in lines[-1] and "NVLS off (course default)" in lines[0]
    assert "your environment" not in " ".join(lines)
    assert len({(t["file"], t["transport"]) for t in tables}) == 4   # each live table told apart


def test_an_instructors_opt_in_is_labelled_as_such():
    tables, _ = lessons.live_tables(FakeRun(), {"default": {}}, environ={"NCCL_NVLS_ENABLE": "1"})
    assert {t["nvls"] for t in tables} == {ncclpaths.NVLS_ON}


def test_no_live_run_says_the_recordings_stand_in():
    tables, lines = lessons.live_tables(FakeRun(live=0), lessons.TRANSPORTS, environ={})
    assert tables == [] and len(lines) == 1 and lines[0].endswith("The recorded runs below stand in.")
    tables, lines = lessons.live_tables(FakeRun(live=3), lessons.TRANSPORTS, environ={})
    assert len(tables) == 3 and "live runs above stay" in lines[-1]

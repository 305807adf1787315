"""nccl_view.score of a channel count and the channel-count rule (notebook 6, review V1 major 1
and minor 7), against the recorded one-rank log
reference_systems/h100-single-gpu/nccl-bench-torchrun-1rank-debug.txt: its line 302 reads
"NCCL INFO 64 coll channels, 64 collnet channels, 0 nvls channels, ..." (read by hand), from a
ring graph of 32 channels (nccl-graph-dump.xml, nchannels="32")."""

from gputopo.lessons import nccl_view
from gputopo.parsers import PARSERS
from gputopo.reference import REFERENCE_DIR

LOG = (REFERENCE_DIR / "h100-single-gpu" / "nccl-bench-torchrun-1rank-debug.txt").read_text()
GRAPH = PARSERS["nccl-graph"](
    (REFERENCE_DIR / "h100-single-gpu" / "nccl-graph-dump.xml").read_text()
)


def test_the_recorded_log_gives_64_coll_channels_from_a_32_channel_graph():
    found = nccl_view.facts(LOG, GRAPH)
    assert found["channels"] == 64 and found["graph_channels"] == 32 and found["nranks"] == 1


def test_a_right_channel_prediction_is_scored_right():
    lines = nccl_view.score({"channels": 64}, nccl_view.facts(LOG))
    assert (
        lines[0].startswith("channels: 64: right")
        and lines[-1] == "score: 1 of the 1 entries this log can check"
    )


def test_a_wrong_prediction_names_the_doubling_and_the_bounds():
    lines = nccl_view.score({"channels": 4}, nccl_view.facts(LOG, GRAPH))
    assert "the log says 64" in lines[0] and "32" in lines[0]
    assert "min(MAX, 2 x graph)" in lines[0] and "490-491" in lines[0]
    assert lines[-1] == "score: 0 of the 1 entries this log can check"


def test_a_log_without_the_line_is_not_scored_and_never_raises():
    assert nccl_view.score({"channels": None}, nccl_view.facts(LOG))[0].startswith(
        "channels: no prediction"
    )
    assert nccl_view.score(
        {"channels": "four"}, nccl_view.facts("bash: nccl_bench: command not found\n")
    ) == [
        "channels: you said four; not scored: the log has no 'coll channels' line.",
        "score: 0 of the 0 entries this log can check",
    ]


def test_the_numa_sentence_names_sysfs_numa_node_not_a_hidden_layout():
    topo = PARSERS["nccl-topo"](
        (REFERENCE_DIR / "h100-single-gpu" / "nccl-topo-dump.xml").read_text()
    )
    text = " ".join(nccl_view.differences(topo, None))
    assert "numa_node" in text and "node-1/cpumap" in text and "virtual machine" not in text


def test_a_missed_size_without_an_init_table_gives_the_rule_but_no_invented_figures():
    excerpt = (
        REFERENCE_DIR / "_nccl-dumps" / "nccl-tuning-4rank-a100-nv12-2.27.3-excerpt.txt"
    ).read_text()
    found = nccl_view.facts(excerpt)
    assert found["table"] is None  # the published log holds no init table
    line = next(
        x for x in nccl_view.score({"sizes": {8: ("Tree", "LL")}}, found) if x.startswith("8 B")
    )
    assert "NCCL chose Ring/LL at 4 B" in line and "tuning.cc" in line and "Init table" not in line


def test_the_recorded_capped_run_scores_a_prediction_of_4():
    # reference_systems/h100-single-gpu/nccl-bench-torchrun-1rank-debug-MAX_NCHANNELS-4.txt, line
    # 172 read by hand: "NCCL INFO 4 coll channels, ..." under NCCL_MAX_NCHANNELS=4 (the deprecated
    # alias of NCCL_MAX_CTAS; src/graph/connect.cc lines 490-491 at v2.28.3-1 take
    # min(MAX_NCHANNELS, maxCTAs))
    capped = (
        REFERENCE_DIR / "h100-single-gpu" / "nccl-bench-torchrun-1rank-debug-MAX_NCHANNELS-4.txt"
    ).read_text()
    found = nccl_view.facts(capped)
    assert found["channels"] == 4 and found["nranks"] == 1
    assert nccl_view.score({"channels": 4}, found)[0].startswith("channels: 4: right")
    wrong = nccl_view.score({"channels": 64}, found)[0]
    assert "the log says 4" in wrong and "NCCL_MAX_CTAS" in wrong and "deprecated" in wrong

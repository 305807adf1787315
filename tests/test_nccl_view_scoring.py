"""nccl_view.score (notebook 6, predict then check; review R3 major 8 and the nearest-size minor)
against the published 24-rank TUNING excerpt (NVIDIA/nccl issue 1453): its lines say
"4 Bytes -> Algo 0 proto 0" (Tree/LL in the 2.20-2.22 numbering, enqueue.cc at v2.23.4-1)."""

from gputopo.lessons import nccl_view
from gputopo.reference import REFERENCE_DIR

EXCERPT = (REFERENCE_DIR / "_nccl-dumps" / "nccl-tuning-24rank-h100-1453-excerpt.txt").read_text()


def test_an_empty_prediction_says_no_prediction_and_scores_nothing():
    found = nccl_view.facts(EXCERPT)
    lines = nccl_view.score({"transport": None, "channels": None, "sizes": {8: None}}, found)
    assert lines[0].startswith("transport: no prediction")
    assert any(line.startswith("channels: no prediction") for line in lines)
    assert any(line.startswith("8 B: no prediction") for line in lines)
    assert lines[-1].startswith("score: 0 of the 0 entries")  # nothing predicted, nothing scored


def test_a_size_within_a_factor_of_two_is_scored_a_far_one_is_not():
    found = nccl_view.facts(EXCERPT)
    lines = nccl_view.score({"sizes": {8: ("Tree", "LL"), 128 << 20: ("Ring", "Simple")}}, found)
    eight = next(line for line in lines if line.startswith("8 B"))
    far = next(line for line in lines if line.startswith("128 MiB"))
    assert "right" in eight and "4 B" in eight
    assert "not scored" in far and "factor of 2" in far

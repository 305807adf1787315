"""Notebook 3's report grouped by link code on more than two GPUs (R2 m13: 224 rows on 8 GPUs).

Expected values read by hand from reference_systems/h200-nvswitch-8gpu/p2pBandwidthLatencyTest.txt:
every pair NV18, one-way P2P writes 393.46 (GPU5 -> GPU1) to 394.66 (GPU3 -> GPU5) GB/s;
8 GPUs have 8 x 7 = 56 ordered pairs.
"""

from gputopo import reference
from gputopo.lessons import p2p_test


def _report(system, name="p2pBandwidthLatencyTest.txt"):
    parsed = reference.load(system, "p2p", filename=name)
    return p2p_test.report(
        parsed, p2p_test.link_lookup(system), reference.read_text(system, name), system
    )


def test_eight_gpus_give_one_row_per_copy_kind_and_link():
    rows = _report("h200-nvswitch-8gpu")
    assert len(rows) == 4 * 56
    grouped = p2p_test.by_link(rows)
    assert len(grouped) == 4
    writes = next(r for r in grouped if r[0] == "one-way, P2P writes")
    assert writes[1] == "56 pairs" and writes[2] == "NV18" and writes[3] == "393.46-394.66"
    assert writes[6] == "56 as expected"


def test_a_pair_is_shown_pair_by_pair():
    rows = _report("h200-nvswitch-pair")
    assert p2p_test.by_link(rows) == rows

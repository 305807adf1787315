"""Which recorded latencies tell a P2P path from a staged one (review finding MA3: P2P reads on
the H200 pair take as long as staged copies, so only write latency separates the two).

Expected values read by hand from the recorded outputs (GPU-timed matrices, off-diagonal cells):
- h200-nvswitch-pair/p2pBandwidthLatencyTest-p2p_read.txt, "P2P=Enabled Latency (P2P Reads)
  Matrix (us)": 13.19 (0->1), 13.29 (1->0).
- rtx2080-nvlink-pair/p2pBandwidthLatencyTest.txt, P2P writes 0.92 (the lowest write);
  h100-pcie-nvlink-pair/p2pBandwidthLatencyTest.txt, P2P writes 2.56 (the highest write).
- rtx2080-nvlink-pair, "P2P=Disabled Latency Matrix": 11.36 (1->0, the lowest staged) and
  20.55 (0->1, the highest staged).
- dgx1-v100/p2pBandwidthLatencyTest-row0-excerpt.txt: GPU 0 -> 5, 6, 7 in the "P2P=Enabled"
  latency row read 18.44, 19.15, 19.34 (no peer access: staged).
"""
from gputopo.lessons import lesson4_p2p as l4

WRITES, READS, STAGED = l4.LATENCY_KINDS


def test_write_latency_separates_p2p_from_staged():
    ranges = l4.latency_ranges()
    assert ranges[WRITES][:2] == (0.92, 2.56)
    assert ranges[STAGED][:2] == (11.36, 20.55)
    assert ranges[WRITES][1] < ranges[STAGED][0]


def test_h200_p2p_reads_fall_in_the_staged_range():
    ranges = l4.latency_ranges()
    low, high, cells, systems = ranges[READS]
    assert (low, high, cells, systems) == (13.19, 13.29, 2, ["h200-nvswitch-pair"])
    assert ranges[STAGED][0] <= low <= high <= ranges[STAGED][1]


def test_cells_without_peer_access_count_as_staged():
    dgx1 = {"dgx1-v100": l4.reference_p2p(["dgx1-v100"])["dgx1-v100"]}
    ranges = l4.latency_ranges(dgx1)
    assert ranges[WRITES][1] < 2.1            # GPUs 1-4: 1.61-2.02 us
    assert ranges[STAGED][1] == 19.34         # GPU 0 -> 7 in the "P2P=Enabled" row

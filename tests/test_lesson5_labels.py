"""Labels notebook 4 prints for its fits (review r3 of notebook 4, K1, minor 3 and 7).

K1: the fit table cut "NVLS off (course default)" to its first word, so every H200 row read
"NVLS". Minor 3: two tables of the same system, transport and GPU count (plain and CUDA graph)
had the same legend entry. Minor 7: the 8-GPU node's 2-GPU fit sat beside the 2-GPU machine's
step without saying it came from another host.
"""
from gputopo.lessons import lesson5_collectives as lessons


def fits():
    return lessons.fit_rows(lessons.nccl_tables("all_reduce") + lessons.nccl_tables("all_reduce", cuda_graph=True))


def test_the_fit_table_keeps_the_whole_nvls_label():
    all_fits = fits()
    node = lessons.fit_table(all_fits, "h200-nvswitch-8gpu")
    assert [row[2] for row in node] == ["NVLS off (course default)"] * 3   # NCCL_NVLS_ENABLE=0 in g2/g4/g8's headers
    assert [row[3] for row in node] == [2, 4, 8]
    assert len(node[0]) == len(lessons.FIT_HEADER)
    v100 = lessons.fit_table(all_fits, "v100-sxm2-8gpu-server")
    assert [row[2] for row in v100] == ["n/a (no NVSwitch)"]


def test_every_curve_has_its_own_legend_entry():
    labels = [lessons.curve_label(f) for f in fits()]
    assert len(labels) == len(set(labels))
    assert "h200-nvswitch-pair, default, CUDA graph, n=2" in labels
    assert "h200-nvswitch-pair, default, plain launches, n=2" in labels


def test_a_fit_from_another_host_says_so():
    rows = lessons.two_gpu_fits(fits(), "h200-nvswitch-pair")
    systems = {r["system"] for r in rows}
    assert systems == {"h200-nvswitch-pair", "h200-nvswitch-8gpu (another host)"}
    assert all(r["n"] == 2 for r in rows)
    assert {r["transport"] for r in rows if r["system"] == "h200-nvswitch-8gpu (another host)"} == {
        "default (P2P/direct pointer), plain launches"}

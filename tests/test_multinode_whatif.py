"""Notebook 4's what-if panel: the multi-node model against every recorded cluster.

Expected values are read by hand: each cluster's recorded busbw from its table's last row or the
published figure (reference_systems/<name>/), each bound from its NICs (count x Gb/s / 8) or,
inside one NVLink domain, from the GPU's NVLink 5 rate (18 links x 50 GB/s, links.py's source).
"""

import sys

import pytest

from gputopo import alphabeta
from gputopo.lessons import collectives as lessons

# system -> (recorded busbw GB/s, line-rate bound GB/s or None where NVLS makes the line rate no
# bound, provenance), all read by hand from the folders' files and their sources
RECORDED = {
    "a100-hdr-3node": (95.74, 4 * 200 / 8, "calibration"),  # nccl-tests #119, source of the 0.96
    "h100-4gpu-2node": (95.10, 4 * 200 / 8, "inferred"),  # NIC count inferred from the result
    "gb10-spark-pair": (18.94, 1 * 200 / 8, "independent"),  # dgx-spark-playbooks #25, MTU 1500
    "gb200-nvl72-rack": (834.57, None, "independent"),  # NVLS likely: no line-rate bound
    "edr-1nic-4node": (12.2, 1 * 100 / 8, "calibration"),  # nccl-tests #29
    "dgx1-4edr-cluster": (48.0, 4 * 100 / 8, "calibration"),  # nccl-tests #29
    "dgx-a100-8hdr-cluster": (192.0, 8 * 200 / 8, "calibration"),  # nccl #812
    "hgx-h100-8x400g-4node": (365.84, 8 * 400 / 8, "independent"),  # nccl-tests #309, 4 x 8 H100
}
# The tuned figure of a cluster whose recorded run was untuned (read by hand from its source).
TUNED = {"gb10-spark-pair": 23.74}  # dgx-spark-playbooks pull request #103: MTU 9000, both HCAs


def test_every_recorded_cluster_is_listed_with_its_hand_read_figures():
    clusters = {c["system"]: c for c in lessons.recorded_clusters()}
    assert set(clusters) == set(RECORDED)
    for system, (recorded, bound, provenance) in RECORDED.items():
        assert clusters[system]["recorded_gbps"] == pytest.approx(recorded), system
        assert clusters[system]["provenance"] == provenance, system
        if bound is not None:
            assert clusters[system]["bound_gbps"] == pytest.approx(bound), system


def test_the_band_is_defined_once_and_printed_as_the_notebook_states_it():
    # notebook 4 prints alphabeta.tolerance_text(): 0.90 x estimate <= a tuned run's busbw <= line
    # rate
    assert alphabeta.TOLERANCE_BELOW == pytest.approx(0.10)
    assert alphabeta.tolerance_text().startswith(
        "0.90 x estimate <= busbw of a tuned run <= line-rate bound"
    )


@pytest.mark.parametrize("system", sorted(RECORDED))
def test_every_recorded_cluster_lies_within_the_stated_band(system):
    # Issue 29: every cluster, each tested on its tuned figure (the Spark pair's from PR #103)
    cluster = next(c for c in lessons.recorded_clusters() if c["system"] == system)
    tested = TUNED.get(system, RECORDED[system][0])
    bound = RECORDED[system][1]
    assert 0.90 * cluster["estimate_gbps"] <= tested
    assert bound is None or tested <= bound
    assert cluster["within"] is True


def test_the_untuned_spark_pair_is_shown_below_and_tested_on_its_tuned_figure():
    # 1 x 200 Gb/s x 0.96 = 24 GB/s estimated; untuned 18.94 / 24 = 0.79 < 0.90 is shown, not
    # hidden; tuned 23.74 / 24 = 0.99 (dgx-spark-playbooks pull request #103) is what the band tests
    spark = next(c for c in lessons.recorded_clusters() if c["system"] == "gb10-spark-pair")
    assert spark["estimate_gbps"] == pytest.approx(24.0)
    assert spark["ratio"] == pytest.approx(18.94 / 24.0) and spark["ratio"] < 0.90
    assert spark["tuned"] is False and spark["tuned_gbps"] == pytest.approx(23.74)
    row = spark["row"]
    assert row[5] == "18.94 untuned; tuned 23.74" and row[8] == "0.79; tuned 0.99"
    # V1 minor 14: the untuned run is outside the band and its row says so
    assert row[9] == "NO untuned; yes tuned"


def test_a_tuned_figure_below_the_band_is_outside(monkeypatch):
    # the band can fail: the same pair with a tuned figure of 20 GB/s (0.83 of 24) is outside
    real = lessons.reference.system_info

    def info(system):
        data = real(system)
        if system == "gb10-spark-pair":
            data = {**data, "cluster": {**data["cluster"], "tuned_busbw_gbps": 20.0}}
        return data

    monkeypatch.setattr(lessons.reference, "system_info", info)
    spark = next(c for c in lessons.recorded_clusters() if c["system"] == "gb10-spark-pair")
    assert spark["within"] is False and spark["row"][-1] == "NO untuned; NO tuned"


def test_gb200_is_compared_with_the_blackwell_nvls_estimate():
    # nccl-tests #212: ring over NVLink 370 of 450 GB/s, NVLS 480 (Hopper). NVLink 5: 18 x 50 = 900
    # GB/s x 370/450 = 740 for the ring; NCCL's tuner rates NVLS at 0.74 on Blackwell against 0.85
    # on Hopper (nvlsEfficiency, src/graph/tuning.cc at v2.28.3-1): 740 x 480/370 x 0.74/0.85 =
    # 835.76.
    assert alphabeta.NVLS_EFFICIENCY == {"hopper": 0.85, "blackwell": 0.74}
    gb200 = next(c for c in lessons.recorded_clusters() if c["system"] == "gb200-nvl72-rack")
    assert gb200["nvls"] is True
    assert gb200["estimate_gbps"] == pytest.approx(900 * 480 / 450 * 0.74 / 0.85)
    assert gb200["ratio"] == pytest.approx(834.57 / (900 * 480 / 450 * 0.74 / 0.85))
    assert gb200["bound_gbps"] == float("inf") and gb200["within"] is True
    assert 834.57 > 900 * 370 / 450  # above a ring's ceiling: NVLS, not a ring
    # a Hopper NVSwitch node keeps the measured 480 GB/s
    assert alphabeta.whatif(8, 450, 8, 400, 1, 2**30, nvls=True)["busbw_gbps"] == pytest.approx(
        480.0
    )
    with pytest.raises(ValueError):
        alphabeta.whatif(8, 450, 8, 400, 1, 2**30, nvls=True, nvls_generation="ampere")


def test_clusters_whose_node_count_is_not_stated_say_so():
    clusters = {c["system"]: c for c in lessons.recorded_clusters()}
    for system in ("dgx1-4edr-cluster", "dgx-a100-8hdr-cluster"):
        assert clusters[system]["nodes"] is None
        assert clusters[system]["row"][1] == "? x 8"


def test_nvls_busbw_has_no_line_rate_bound():
    # nccl-tests #212: 480 GB/s NVLS busbw on H100 against a 450 GB/s line rate
    nvls = alphabeta.whatif(8, 450, 8, 400, 1, 2**30, nvls=True)
    assert nvls["busbw_gbps"] == pytest.approx(480.0)
    assert nvls["bound_gbps"] == float("inf")
    assert "no line-rate bound" in lessons.whatif(nodes=1, nvls=True)["text"]


def test_the_tolerance_would_catch_a_per_gpu_nic_share():
    # Finding C1: a DGX-1's bound is its four NICs together (50 GB/s), not one GPU's share
    # (50 / 8 = 6.25 GB/s); the recorded 48 GB/s lies far above a per-GPU-share bound.
    assert 48.0 > 4 * 100 / 8 / 8
    result = alphabeta.whatif(8, None, 4, 100, 2, 2**30)
    assert result["bound_gbps"] == pytest.approx(50.0)
    assert result["busbw_gbps"] == pytest.approx(50.0 * 0.96)


def test_six_or_more_clusters_of_several_generations():
    clusters = lessons.recorded_clusters()
    assert len(clusters) >= 6
    assert {c["nic_gbit"] for c in clusters} >= {100, 200, 400}


def test_each_switch_of_the_panel_changes_the_terms_as_documented():
    # eight 400 Gb/s NICs, no in-node limit (in_node_link None), 2 nodes x 8 GPUs
    base = alphabeta.whatif(8, None, 8, 400, 2, 2**30)
    assert base["busbw_gbps"] == pytest.approx(8 * 50 * 0.96)  # 384
    assert base["bound_by"] == "node's NICs"
    no_gdr = alphabeta.whatif(8, None, 8, 400, 2, 2**30, gdr=False)
    assert no_gdr["busbw_gbps"] == pytest.approx(8 * 50 * 0.64)  # 256 (nccl #412: 16 of 25)
    spine = alphabeta.whatif(
        8, None, 8, 400, 2, 2**30, rails_aligned=False, pxn=False, spine_oversubscription=2
    )
    assert spine["busbw_gbps"] == pytest.approx(384 / 2)
    pxn = alphabeta.whatif(
        8, None, 8, 400, 2, 2**30, rails_aligned=False, pxn=True, spine_oversubscription=2
    )
    assert pxn["busbw_gbps"] == pytest.approx(384)
    tree = alphabeta.whatif(8, None, 8, 400, 2, 2**30, algorithm="tree")
    assert tree["busbw_gbps"] == pytest.approx(384 * 2 * 15 / 16 * 0.92)
    tree_far = alphabeta.whatif(8, None, 8, 400, 16, 2**30, algorithm="tree")
    assert tree_far["busbw_gbps"] == pytest.approx(384 * 0.92)
    nvlink = alphabeta.whatif(8, 450, 8, 400, 2, 2**30)
    assert nvlink["busbw_gbps"] == pytest.approx(370.0) and nvlink["bound_by"] == "in-node NVLink"
    nvls = alphabeta.whatif(8, 450, 8, 400, 1, 2**30, nvls=True)
    assert nvls["busbw_gbps"] == pytest.approx(480.0)


def test_ring_time_grows_with_nccls_latency_at_scale():
    # NCCL's ring latency with the Simple protocol (src/graph/tuning.cc at v2.28.3-1, read by hand):
    # base 8.4 us (line 144), 3.4 us per NVLink hop (line 151), 14.0 us per network hop (line 163);
    # across nodes an in-node hop costs at least 3 x 1.0 us of network post overhead on an Intel
    # host (lines 214-219, 371-377). One node of 8: 8.4 + 14 x 3.4 = 56.0 us.
    one = alphabeta.whatif(8, 450, 8, 400, 1, 2**30)
    assert one["latency_us"] == pytest.approx(56.0)
    assert one["time_us"] == pytest.approx(56.0 + 2 * 7 / 8 * 2**30 / 370e3)
    # 1,024 nodes of 8: 2 x 8,191 = 16,382 steps, 2 x 1,023 = 2,046 of them on the network:
    # 8.4 + 14,336 x 3.4 + 2,046 x 14.0 = 77,394.8 us of latency, plus the bandwidth term: 83.2 ms
    many = alphabeta.whatif(8, 450, 8, 400, 1024, 2**30)
    assert many["latency_us"] == pytest.approx(8.4 + 14336 * 3.4 + 2046 * 14.0)
    assert many["time_us"] == pytest.approx(77394.8 + 2 * 8191 / 8192 * 2**30 / 370e3)
    assert many["time_us"] / 1e3 == pytest.approx(83.20, abs=0.01)


def test_an_amd_host_pays_more_per_step_across_nodes():
    # getNetOverhead: 2.0 us on AMD against 1.0 on Intel, x 3 for Simple: 6.0 > 3.4 per in-node step
    intel = alphabeta.whatif(8, 450, 8, 400, 2, 2**30)["latency_us"]
    amd = alphabeta.whatif(8, 450, 8, 400, 2, 2**30, cpu_vendor="amd")["latency_us"]
    assert intel == pytest.approx(8.4 + 28 * 3.4 + 2 * 14.0) and amd == pytest.approx(
        8.4 + 28 * 6.0 + 2 * 14.0
    )


@pytest.mark.parametrize(
    "kwargs", [dict(nodes=0), dict(nic_gbit=0), dict(algorithm="collnet"), dict(size_bytes=-1)]
)
def test_bad_settings_are_one_clear_error(kwargs):
    args = dict(
        gpus_per_node=8,
        in_node_link_gbps=450,
        nics_per_node=8,
        nic_gbit=400,
        nodes=2,
        size_bytes=2**30,
    )
    args.update(kwargs)
    with pytest.raises(ValueError):
        alphabeta.whatif(**args)


def test_nvls_is_off_by_default_and_ignored_where_the_hardware_lacks_it():
    assert lessons.WHATIF_DEFAULTS["nvls"] is False and lessons.whatif()["nvls_used"] is False
    result = lessons.whatif(link="NVLink 3: A100 SXM4", nvls=True, nodes=1)
    assert result["nvls_used"] is False and any("NVLS needs NVSwitch" in n for n in result["notes"])


def test_matching_recordings_are_shown_for_their_settings():
    result = lessons.whatif(link="NVLink 3: A100 SXM4", nics_per_node=4, nic_gbit=200, nodes=3)
    assert "a100-hdr-3node" in {c["system"] for c in result["matches"]}
    assert "a100-hdr-3node: 95.74 GB/s" in result["text"]


def test_panel_falls_back_to_a_static_view_without_ipywidgets(monkeypatch, capsys):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import fails as if not installed
    figure, panel = lessons.whatif_panel()
    out = capsys.readouterr().out
    assert panel is None
    assert "ipywidgets is not installed" in out
    assert "bounded by" in out and "node's NICs" in out
    assert figure is not None and figure.axes[0].get_xscale() == "log"


def test_panel_builds_its_widgets_when_ipywidgets_is_there(capsys):
    pytest.importorskip("ipywidgets")
    figure, panel = lessons.whatif_panel()
    assert figure is not None and panel is not None and len(panel.children) == 2


def test_the_panel_answers_its_controls(capsys):
    # Moving a control prints the prediction for the new settings (outside a kernel the panel's
    # output goes to stdout): 1,024 nodes of 8 GPUs, ring, 1 GiB: 77,394.8 us of NCCL's latency
    # + 2 x 8,191/8,192 x 2**30 B / 370 GB/s = 83,197.7 us (as in
    # test_ring_time_grows_with_nccls_latency_at_scale)
    pytest.importorskip("ipywidgets")
    _, panel = lessons.whatif_panel()
    controls = {c.description: c for column in panel.children[0].children for c in column.children}
    assert len(controls) == 12
    capsys.readouterr()
    controls["nodes"].value = 1024
    out = capsys.readouterr().out
    assert "1024 node(s) x 8 GPUs = 8192 GPUs" in out and "all-reduce time 83.198 ms" in out
    controls["in-node link"].value = next(
        o for o in controls["in-node link"].options if o.startswith("NVLink 3: A100")
    )
    controls["NVLS (opt-in; NVSwitch with SHARP only)"].value = True
    out = capsys.readouterr().out
    assert "NVLS needs NVSwitch with SHARP" in out and "NVLS off (course default)" in out


# The NET lines of the published multi-node logs (notebook 4 greps them; `python -m gputopo
# nccl-log` reads them). Expected values read by hand from the excerpts in
# source_code/reference_systems/_multinode-logs/.
LOGS = lessons.reference.REFERENCE_DIR / "_multinode-logs"


def _net_lines(name):
    from gputopo.parsers import nccl_log

    channels = nccl_log.parse((LOGS / name).read_text(encoding="utf-8"))["channels"]
    return [
        (c["channel"], c["src"], c["dst"], c["direction"], c["via"])
        for c in channels
        if c["transport"] == "NET"
    ]


def test_published_logs_net_lines_read_by_hand():
    # the three NET lines of nccl-tests #133: channel 1 receive 12 -> 4, channels 0 and 1 send 4 ->
    # 12
    assert _net_lines("nccl-tests-133-ib-gdrdma-excerpt.txt") == [
        (1, 12, 4, "receive", "NET/IB/0/GDRDMA"),
        (0, 4, 12, "send", "NET/IB/0/GDRDMA"),
        (1, 4, 12, "send", "NET/IB/0/GDRDMA"),
    ]
    # NVIDIA/nccl #1814: 13 NET lines over NICs 3-7 of the IBext plugin, no GDRDMA on any
    rails = _net_lines("nccl-1814-ibext-rails-excerpt.txt")
    assert len(rails) == 13 and {int(r[4].rsplit("/", 1)[1]) for r in rails} == {3, 4, 5, 6, 7}
    assert all(r[4].startswith("NET/IBext_v8/") and "GDRDMA" not in r[4] for r in rails)
    assert _net_lines("nccl-398-socket-excerpt.txt") == [
        (0, 15, 0, "send", "NET/Socket/0"),
        (0, 7, 8, "send", "NET/Socket/0"),
    ]
    assert {r[4] for r in _net_lines("aws-ofi-nccl-64-libfabric-excerpt.txt")} == {
        "NET/AWS Libfabric/0"
    }


def test_tree_latency_follows_nccls_tuner():
    # src/graph/tuning.cc at v2.28.3-1, lines 381-385: base + 2 * ((nRanks/nNodes - 1) * intraLat +
    # log2i(nNodes) * interLat), log2i rounding down; Simple: base 8.4, in-node hop 4.0 (NVLink and
    # PCI alike), network hop 14.0 (lines 144, 151, 157, 163): 3 nodes of 8 GPUs ->
    # 8.4 + 2 * (7 * 4.0 + 1 * 14.0) = 92.4 us; the 4-byte bandwidth term adds under 0.01 us
    result = alphabeta.whatif(8, None, 8, 400, 3, 4, algorithm="tree")
    assert result["latency_us"] == pytest.approx(92.4)
    assert result["time_us"] == pytest.approx(92.4, abs=0.01)
    # 4 nodes: log2 = 2 network hops each way, 8.4 + 2 * (28 + 28) = 120.4 us
    assert alphabeta.whatif(8, 450, 8, 400, 4, 4, algorithm="tree")["latency_us"] == pytest.approx(
        120.4
    )


def test_the_newer_net_line_format_is_read():
    # src/transport/net.cc at v2.28.3-1 prints "Channel %02d/%d : %d[%d] -> %d[%d] [send] via
    # NET/%s/%d%s%s%s": channel/connection, rank[nvmlDev], then /GDRDMA, (PCI) and /Shared when set
    from gputopo.parsers import nccl_log

    text = (
        "node1:11:22 [4] NCCL INFO Channel 00/0 : 4[4] -> 12[4] [send] "
        "via NET/IB/0/GDRDMA(PCI)/Shared\n"
        "node1:11:22 [4] NCCL INFO Channel 01/1 : 12[4] -> 4[4] [receive] via NET/IB/1/GDRDMA\n"
    )
    channels = nccl_log.parse(text)["channels"]
    assert [
        (c["channel"], c["src"], c["dst"], c["src_device"], c["direction"]) for c in channels
    ] == [(0, 4, 12, "4", "send"), (1, 12, 4, "4", "receive")]
    assert [c["via"] for c in channels] == ["NET/IB/0/GDRDMA(PCI)/Shared", "NET/IB/1/GDRDMA"]


def test_the_hgx_h100_8x400g_cluster_is_compared_with_its_nics():
    # nccl-tests #309, 4 nodes of 8 H100 with eight 400 Gb/s NICs, NCCL's own algorithm (NVLS
    # likely): in-node NVLS 370 x 480/370 = 480 GB/s, the NICs 8 x 400 / 8 x 0.96 = 384: the NICs
    # bound it. The table's last row (16 GiB) reads 365.84 GB/s: 0.953 of 384, inside the band, as
    # recorded.
    hgx = next(c for c in lessons.recorded_clusters() if c["system"] == "hgx-h100-8x400g-4node")
    assert hgx["nvls"] is True and hgx["size"] == 17179869184
    assert hgx["estimate_gbps"] == pytest.approx(8 * 400 / 8 * 0.96)
    assert hgx["ratio"] == pytest.approx(365.84 / 384, abs=1e-4)
    assert hgx["within"] is True
    row = hgx["row"]
    assert row[1] == "4 x 8" and row[2] == "8 x 400G" and row[8] == "0.95" and row[9] == "yes"


def test_untuned_or_very_large_8x400g_runs_sit_mostly_below_the_band():
    # the notebook's sentence, against the recorded cluster's estimate (384 GB/s): about 320 GB/s
    # (NVIDIA/nccl #1221) is 0.83 and "at times below 300" (nccl-tests #283) under 0.78, both below
    # the band; "around 350G" (#283) is 0.91, at its edge. The band is not widened for them.
    hgx = next(c for c in lessons.recorded_clusters() if c["system"] == "hgx-h100-8x400g-4node")
    low = (1 - alphabeta.TOLERANCE_BELOW) * hgx["estimate_gbps"]
    assert round(320 / hgx["estimate_gbps"], 2) == 0.83 and 320 < low
    assert round(300 / hgx["estimate_gbps"], 2) == 0.78 and 300 < low
    assert round(350 / hgx["estimate_gbps"], 2) == 0.91 and 350 >= low


def test_your_own_fit_is_offered_as_the_in_node_link():
    # V1 minor 15: a fit of two or more GPUs measured here becomes the panel's first in-node link.
    # With busbw 300 GB/s in the node and eight 400 Gb/s NICs (8 x 50 x 0.96 = 384 GB/s) on two
    # nodes, the ring is bounded by the node: 300 GB/s; with one 100 Gb/s NIC (12 GB/s), by the NIC.
    fit = {"system": "this machine", "n": 4, "busbw_gbps": 300.0}
    options = lessons.link_options(your_fit=fit)
    assert options[0]["label"] == "your fit: this machine, busbw 300 GB/s on 4 GPUs"
    assert options[0]["busbw_gbps"] == 300.0 and options[0]["nvls"] is False
    two = lessons.whatif(options, link="your fit", nodes=2)
    assert two["busbw_gbps"] == pytest.approx(300.0) and two["bound_by"] == "in-node NVLink"
    slow = lessons.whatif(options, link="your fit", nodes=2, nics_per_node=1, nic_gbit=100)
    assert slow["busbw_gbps"] == pytest.approx(12.0)


@pytest.mark.parametrize("fit", [None, {"system": "this machine", "n": 1, "busbw_gbps": 0.0}])
def test_no_fit_or_a_one_gpu_fit_adds_no_link(fit):
    assert not any(o["label"].startswith("your fit") for o in lessons.link_options(your_fit=fit))

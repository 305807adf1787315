"""gputopo.lessons: the glue behind notebooks 2 and 4, checked against recorded values (notebook 3's
lesson module, gputopo.lessons.p2p_test: test_p2p_test_lesson.py)."""

import re
import shutil

import pytest

from gputopo import alphabeta, reference
from gputopo.lessons import collectives as lessons
from gputopo.lessons import p2p_test

REAL_REFERENCE_DIR = reference.REFERENCE_DIR
V100_TABLE = reference.REFERENCE_DIR / "v100-sxm2-8gpu-server" / "all_reduce_perf-g8.txt"
H100_P2P = reference.REFERENCE_DIR / "h100-pcie-nvlink-pair" / "p2pBandwidthLatencyTest.txt"


@pytest.fixture()
def fake_reference(tmp_path, monkeypatch):
    """An empty reference_systems folder that tests fill with copies of recorded files."""
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)

    def add(system, name, source=V100_TABLE, text=None):
        folder = tmp_path / system
        if not folder.is_dir():  # a copy of a recorded system comes with its system.json
            folder.mkdir()
            described = REAL_REFERENCE_DIR / system / reference.SYSTEM_FILE
            if described.is_file():
                shutil.copy(described, folder / reference.SYSTEM_FILE)
        target = folder / name
        if text is None:
            shutil.copy(source, target)
        else:
            target.write_text(text, encoding="utf-8")
        return target

    return add


# ---------------------------------------------------------------------------------------
# Collectives (notebook 4)


def test_nccl_tables_and_fit_v100():
    tables = [t for t in lessons.nccl_tables() if t["system"] == "v100-sxm2-8gpu-server"]
    assert len(tables) == 1
    table = tables[0]
    assert table["n"] == 8 and table["transport"] == "default (NCCL's choice)"
    # notebook 4's fit cell: alphabeta.fit_from_table on each table
    table["alpha_step_us"], table["busbw_gbps"] = alphabeta.fit_from_table(
        table["parsed"], "all_reduce", table["n"]
    )
    fit = table
    # The same fit done by hand from the recorded rows: minimise sum(((A + B*S - T) / T)^2) over
    # all 25 out-of-place rows (2x2 normal equations, solved by Cramer's rule), then per link
    # alpha = A / 2(n-1) and beta = busbw_factor / B, as alphabeta's docstring defines them.
    points = [(row["size"], row["out_of_place"]["time_us"]) for row in table["parsed"]["rows"]]
    assert len(points) == 25
    u = [1 / t for _, t in points]
    v = [s / t for s, t in points]
    uu, uv, vv = sum(x * x for x in u), sum(x * y for x, y in zip(u, v)), sum(y * y for y in v)
    det = uu * vv - uv * uv
    a_us = (sum(u) * vv - uv * sum(v)) / det
    b_us_per_byte = (uu * sum(v) - uv * sum(u)) / det
    assert a_us > 0 and b_us_per_byte > 0  # the unconstrained fit is already physical
    assert fit["alpha_step_us"] == pytest.approx(a_us / 14, rel=1e-6)
    assert fit["busbw_gbps"] == pytest.approx((14 / 8) / (b_us_per_byte * 1e3), rel=1e-6)
    rows = table["parsed"][
        "rows"
    ]  # notebook 4's fit table prints the smallest time and the largest busbw
    assert (rows[0]["size"], rows[0]["out_of_place"]["time_us"]) == (8, 48.46)
    assert (rows[-1]["size"], rows[-1]["out_of_place"]["busbw"]) == (134217728, 129.14)
    # only all-reduce tables: the H200 machines' all_gather and reduce_scatter tables are left out
    assert all("all_reduce" in t["file"] for t in lessons.nccl_tables())


def test_nccl_tables_transports_and_repeats(fake_reference):
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce.txt")
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce-n100.txt")
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets.txt")
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt")
    found = {t["file"]: t["transport"] for t in lessons.nccl_tables()}
    assert found == {
        "nccl-bench-all_reduce.txt": "default (NCCL's choice)",
        "nccl-bench-all_reduce-sockets.txt": "NET (sockets; P2P and SHM disabled)",
        "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt": "SHM (NCCL_P2P_LEVEL=LOC)",
    }


def test_dgx1_and_blog_server_are_two_machines():
    from gputopo.lessons import topology

    wirings = topology.v100_wirings()
    dgx1, blog = wirings[topology.DGX1_V100], wirings[topology.BLOG_V100]
    # Both are hybrid cube meshes: six NVLink 2 links per GPU, 16 linked pairs, 12 without.
    for topo in (dgx1, blog):
        for gpu in topo["gpus"]:
            assert (
                sum(
                    int(code[2:])
                    for other, code in topo["links"][gpu].items()
                    if other.startswith("GPU") and code.startswith("NV")
                )
                == 6
            ), gpu
    # ...but not the same pairs: the blog's GPU0-GPU4 is SYS where the DGX-1 has NV2, and its
    # GPU1-GPU7 NV2 where the DGX-1 has none.
    diff = {pair: (a, b) for pair, a, b in topology.wiring_differences(dgx1, blog)}
    assert diff["0-4"] == ("NV2", "SYS") and diff["1-7"] == ("SYS", "NV2")
    assert len(diff) > 8


def test_dgx1_wiring_agrees_with_the_recorded_dgx1_data():
    from gputopo.lessons import topology

    dgx1 = topology.v100_wirings()[topology.DGX1_V100]["links"]
    # The recorded DGX-1 P2P row 0 (NVIDIA's sample on a DGX-1): ~48 GB/s both ways = NV1,
    # ~97 = NV2, ~14.5 = no NVLink.
    row0 = p2p_test.recorded(["dgx1-v100"])["dgx1-v100"]["parsed"]["bandwidth_gbs"][
        "bidirectional_enabled"
    ][0]
    classes = {"NV1": (40, 55), "NV2": (90, 105), "SYS": (10, 20)}
    for j in range(1, 8):
        low, high = classes[dgx1["GPU0"][f"GPU{j}"]]
        assert low < row0[j] < high, j
    # The recorded DGX-1 Horovod logs ran on pairs 0,3 (NVLink) and 1,7 (no NVLink).
    assert dgx1["GPU0"]["GPU3"].startswith("NV") and dgx1["GPU1"]["GPU7"] == "SYS"
    assert reference.system_info("dgx1-v100")["cnn"]["pairs"]["1,7"]["path_type"] == "SYS"


def test_blog_server_has_two_sockets_behind_its_single_affinity_column():
    # Its CPU affinity column shows 0-95 for every GPU (recorded in a container), yet SYS
    # means crossing sockets, and its PCIe bus ids (nccl-tests' device lines) form two groups
    # that match the two quads.
    topo = reference.load("v100-sxm2-8gpu-server", "topo")
    assert set(topo["cpu_affinity"].values()) == {"0-95"}
    text = reference.read_text("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt")
    bus = [int(b, 16) for b in re.findall(r"device\s+\d+ \[0x([0-9a-f]+)\]", text)]
    assert len(bus) == 8
    low = [i for i, b in enumerate(bus) if b < 0x80]
    assert low == [0, 1, 2, 3]
    for i in low:
        for j in range(4, 8):
            code = topo["links"][f"GPU{i}"][f"GPU{j}"]
            assert code in ("SYS", "NV1", "NV2")
    sys_pairs = [
        (i, j)
        for i in range(8)
        for j in range(i + 1, 8)
        if topo["links"][f"GPU{i}"][f"GPU{j}"] == "SYS"
    ]
    assert sys_pairs and all(
        (i < 4) != (j < 4) for i, j in sys_pairs
    )  # every SYS pair crosses the groups

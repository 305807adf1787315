"""The one table of `nvidia-smi topo -m` link codes, against hand-written expectations."""

import pytest

from gputopo import linkcodes, ncclpaths, plots
from gputopo.parsers.topo import rank_link


def test_nccl_path_types_in_nccl_order():
    # NCCL User Guide, Environment Variables, NCCL_P2P_LEVEL lists LOC, NVL, PIX, PXB, PHB, SYS
    # (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-p2p-level);
    # NCCL 2.28 accepts every name of topoPathTypeStr[] up to SYS (src/graph/topo.cc and the
    # PATH_* numbers of src/graph/topo.h at v2.28.3-1, read by hand):
    # LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS.
    assert linkcodes.PATH_ORDER == (
        "LOC",
        "NVL",
        "NVB",
        "C2C",
        "PIX",
        "PXB",
        "P2C",
        "PXN",
        "PHB",
        "SYS",
    )
    assert linkcodes.TOPO_PATH_TYPES == ("NVL", "PIX", "PXB", "PHB", "SYS")


@pytest.mark.parametrize(
    "code, family, path_type, peak",
    [
        ("NV1", "NV", "NVL", "nvlink"),
        ("NV18", "NV", "NVL", "nvlink"),
        ("PIX", "PIX", "PIX", "pcie"),
        ("PXB", "PXB", "PXB", "pcie"),
        ("PHB", "PHB", "PHB", "pcie"),
        ("NODE", "NODE", "PHB", "pcie"),
        ("SYS", "SYS", "SYS", "pcie"),
        ("SOC", "SYS", "SYS", "pcie"),
    ],
)
def test_each_code(code, family, path_type, peak):
    assert linkcodes.family(code) == family
    assert linkcodes.path_type(code) == path_type
    assert linkcodes.lookup(code).peak == peak


def test_rank_nearest_first():
    order = ["NV18", "NV12", "NV2", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS"]
    ranks = [linkcodes.rank(code) for code in order]
    assert ranks == sorted(ranks, reverse=True) and len(set(ranks)) == len(ranks)
    assert linkcodes.rank("SOC") == linkcodes.rank("SYS")


@pytest.mark.parametrize("bad", ["X", "NV", "nvlink", "", "PCI"])
def test_unknown_or_self_codes(bad):
    with pytest.raises(ValueError):
        linkcodes.rank(bad)
    with pytest.raises(ValueError):
        linkcodes.family(bad)
    assert linkcodes.nvlink_count(bad) == 0


def test_x_is_the_gpu_itself():
    assert linkcodes.path_type("X") is None and linkcodes.lookup("X").peak is None
    assert linkcodes.path_type(None) is None and linkcodes.path_type(" nv4 ") == "NVL"


def test_families_and_meanings():
    assert linkcodes.FAMILIES == ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")
    assert linkcodes.meaning("NV") == "NVLink (width = bonded links)"


def test_every_module_reads_the_same_table():
    for code in ("NV4", "PIX", "NODE", "SYS", "SOC"):
        assert rank_link(code) == linkcodes.rank(code)
        assert ncclpaths.path_type_of_link(code) == linkcodes.path_type(code)
    assert set(plots.LINK_COLOURS) == set(linkcodes.FAMILIES)
    assert ncclpaths.PATH_ORDER is linkcodes.PATH_ORDER

"""ncclTopoCheckNet: when NCCL >= 2.14 sends two GPUs of one node through the network instead of
SHM.

Expected values are read by hand from github.com/NVIDIA/nccl (`git show TAG:path`), not computed
by the code under test:
- src/graph/paths.cc ncclTopoCheckNet (v2.14.3-1 lines 405-433, v2.28.3-1 lines 517-546): for
  EACH GPU separately, netSpeedN = the best bandwidth of a NIC path of type <= PATH_PXB; NET only
  when netSpeed1 > speed AND netSpeed2 > speed (speed = the GPU-to-GPU path's bandwidth). The
  two NICs may differ. NCCL_NET_DISABLE_INTRA=1 returns "no NET" first.
- src/transport/shm.cc: shmCanConnect calls ncclTopoCheckNet from v2.14.3-1 (line 53; v2.28.3-1
  line 82); v2.12.12-1 and v2.13.4-1 have no such call.
- src/graph/topo.h at v2.28.3-1: PCI_BW 12.0 (line 22, "PCI Gen3 x16"), BDW_QPI_BW 6.0 (line 24),
  SKL_QPI_BW 10.0 (line 25), NET_BW 12.0 (line 32, "100Gbit"); at v2.14.3-1: QPI_BW 6.0 (line 19),
  SKL_QPI_BW 9.0 (line 20), PCI_BW 12.0 (line 18).
- src/graph/topo.cc at v2.28.3-1: PCI link bandwidth = width*speed/80 (line 478) with speed from
  kvDictPciGen ("8 GT/s" -> 60, "16.0 GT/s PCIe" -> 120; lines 410-413); NIC bandwidth =
  mbps/8000 (line 372).
Review findings MA1 (one NIC per GPU, not one shared NIC) and MA2 (the DGX-1 pair 1,7).
"""

import pytest

from gputopo import ncclpaths

E = ncclpaths.expected_transport
INTEL = {"cpu_vendor": "GenuineIntel", "local_gpus": 2}
# A PHB (or SYS) pair with one NIC under each GPU's own PCIe switch: each GPU is PIX to "its" NIC
# and PHB to the other's. One NIC cannot be PIX/PXB to both GPUs of a PHB pair (they would then
# share a switch and be PXB to each other).
TWO_NICS = [("PIX", "PHB"), ("PHB", "PIX")]


def test_each_gpu_may_use_its_own_nic():
    # The reviewer's case: code before the fix answered SHM here. The NICs' speed against the
    # pair's path is not in topo -m, so NET or SHM cannot be told.
    assert E({}, "PHB", nccl_version="2.28.3", nics=TWO_NICS, **INTEL) is None
    assert E({}, "PHB", nccl_version="2.14.3", nics=TWO_NICS, **INTEL) is None
    # PXB counts as close too (path->type <= PATH_PXB)
    assert (
        E({}, "SYS", nccl_version="2.28.3", nics=[("PXB", "SYS"), ("SYS", "PXB")], **INTEL) is None
    )


def test_both_gpus_need_a_close_nic():
    # Only GPU 0 has a NIC at PXB or closer: netSpeed2 stays 0, so no NET.
    assert E({}, "PHB", nccl_version="2.28.3", nics=[("PIX", "PHB")], **INTEL) == "SHM"
    assert (
        E({}, "SYS", nccl_version="2.28.3", nics=[("PIX", "SYS"), ("NODE", "SYS")], **INTEL)
        == "SHM"
    )
    # NODE is NCCL's PHB: beyond PXB, not close
    assert (
        E({}, "SYS", nccl_version="2.28.3", nics=[("NODE", "SYS"), ("SYS", "NODE")], **INTEL)
        == "SHM"
    )


def test_unknown_nics_cannot_be_told_from_2_14():
    assert E({}, "PHB", nccl_version="2.28.3", **INTEL) is None  # nics=None: unknown
    assert E({}, "PHB", nccl_version="2.28.3", nics=(), **INTEL) == "SHM"  # no NIC at all
    assert E({}, "PHB", nccl_version="2.12.12", **INTEL) == "SHM"  # no ncclTopoCheckNet yet
    assert E({"NCCL_NET_DISABLE_INTRA": "1"}, "PHB", nccl_version="2.28.3", **INTEL) == "SHM"
    assert E({}, "PHB", nccl_version="2.12.12", nics=TWO_NICS, **INTEL) == "SHM"
    # P2P is decided before SHM is asked: a PXB pair stays P2P whatever the NICs
    assert E({}, "PXB", nccl_version="2.28.3", **INTEL) == "P2P"


def test_dgx1_pair_1_7():
    # MA2. DGX-1 V100: one EDR InfiniBand card under each PCIe switch, beside two GPUs; GPUs 1
    # and 7 are SYS to each other and each PIX to its own card. Under NCCL 2.28 ncclTopoCheckNet
    # may send them to NET (NVIDIA/nccl issue #671's topology gives 12.0 GB/s to each card against
    # 6.0 over QPI), which topo -m alone cannot tell; the recorded log's NCCL (SHM spelled
    # "direct shared memory": 2.12 or older) had no such check.
    dgx1 = {"nics": [("PIX", "SYS"), ("SYS", "PIX")], **INTEL}
    assert E({}, "SYS", nccl_version="2.28.3", **dgx1) is None
    assert E({}, "SYS", nccl_version="2.12.12", **dgx1) == "SHM"


@pytest.mark.parametrize(
    "version,env,expected",
    [
        ("2.28.3", {}, None),
        ("2.14.3", {}, None),
        ("2.13.4", {}, "P2P"),
        ("2.28.3", {"NCCL_NET_DISABLE_INTRA": "1"}, "P2P"),
    ],
)
def test_p2p_also_asks_about_a_close_nic(version, env, expected):
    got = ncclpaths.expected_transport(
        env, "PIX", "GenuineIntel", nccl_version=version, local_gpus=2, nics=[("PIX", "PIX")]
    )
    assert got == expected


def test_a_p2p_pair_with_unknown_nics_stays_p2p():
    assert (
        ncclpaths.expected_transport(
            {}, "NVL", "GenuineIntel", nccl_version="2.28.3", local_gpus=2, nics=None
        )
        == "P2P"
    )

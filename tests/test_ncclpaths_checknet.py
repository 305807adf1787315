"""ncclTopoCheckNet: when NCCL >= 2.14 sends two GPUs of one node through the network instead of SHM.

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
    # The reviewer's case: code before the fix answered SHM here.
    assert E({}, "PHB", nccl_version="2.28.3", nics=TWO_NICS, **INTEL) is None  # speed unknown
    assert E({}, "PHB", nccl_version="2.28.3", nics=TWO_NICS, nic_faster=True, **INTEL) == "NET"
    assert E({}, "PHB", nccl_version="2.14.3", nics=TWO_NICS, nic_faster=True, **INTEL) == "NET"
    assert E({}, "PHB", nccl_version="2.28.3", nics=TWO_NICS, nic_faster=False, **INTEL) == "SHM"
    # PXB counts as close too (path->type <= PATH_PXB)
    assert E({}, "SYS", nccl_version="2.28.3", nics=[("PXB", "SYS"), ("SYS", "PXB")],
             nic_faster=True, **INTEL) == "NET"


def test_both_gpus_need_a_close_nic():
    # Only GPU 0 has a NIC at PXB or closer: netSpeed2 stays 0, so no NET.
    assert E({}, "PHB", nccl_version="2.28.3", nics=[("PIX", "PHB")], nic_faster=True, **INTEL) == "SHM"
    assert E({}, "SYS", nccl_version="2.28.3", nics=[("PIX", "SYS"), ("NODE", "SYS")],
             nic_faster=True, **INTEL) == "SHM"
    # NODE is NCCL's PHB: beyond PXB, not close
    assert E({}, "SYS", nccl_version="2.28.3", nics=[("NODE", "SYS"), ("SYS", "NODE")],
             nic_faster=True, **INTEL) == "SHM"


def test_unknown_nics_cannot_be_told_from_2_14():
    assert E({}, "PHB", nccl_version="2.28.3", **INTEL) is None  # nics=None: unknown
    assert E({}, "PHB", nccl_version="2.28.3", nics=(), **INTEL) == "SHM"  # no NIC at all
    assert E({}, "PHB", nccl_version="2.12.12", **INTEL) == "SHM"  # no ncclTopoCheckNet yet
    assert E({"NCCL_NET_DISABLE_INTRA": "1"}, "PHB", nccl_version="2.28.3", **INTEL) == "SHM"
    assert E({}, "PHB", nccl_version="2.12.12", nics=TWO_NICS, nic_faster=True, **INTEL) == "SHM"
    # P2P is decided before SHM is asked: a PXB pair stays P2P whatever the NICs
    assert E({}, "PXB", nccl_version="2.28.3", **INTEL) == "P2P"


def test_dgx1_pair_1_7_under_nccl_2_28():
    # MA2. DGX-1 V100: two Broadwell Xeons (NVIDIA/nccl issue #671's DGX-1 topology: modelid 79,
    # PCIe switches at 8 GT/s x16), one EDR InfiniBand card (100 Gb/s) under each PCIe switch,
    # beside two GPUs. In a job of GPUs 1 and 7 only, NCCL's topology holds these two GPUs (no
    # NVLink between them, no third GPU to route through), so their path crosses QPI:
    # min(12.0 PCIe gen3 x16, 6.0 BDW_QPI_BW) = 6.0. Each GPU's own card: min(12.0, 12.5) = 12.0.
    # 12.0 > 6.0 for both GPUs: ncclTopoCheckNet says NET (nic_faster=True below).
    dgx1 = {"nics": [("PIX", "SYS"), ("SYS", "PIX")], "nic_faster": True, **INTEL}
    assert E({}, "SYS", nccl_version="2.28.3", **dgx1) == "NET"
    assert E({}, "SYS", nccl_version="2.14.3", **dgx1) == "NET"
    # the recorded log's NCCL (SHM spelled "direct shared memory": 2.12 or older) had no such check
    assert E({}, "SYS", nccl_version="2.12.12", **dgx1) == "SHM"
    # the notebook's fallback for exercise 6 knows neither the cards nor their speed
    assert E({}, "SYS", nccl_version="2.28.3", **INTEL) is None


@pytest.mark.parametrize("version,env,faster,expected", [
    ("2.28.3", {}, True, "NET"),
    ("2.28.3", {}, False, "P2P"),
    ("2.28.3", {}, None, None),
    ("2.14.3", {}, True, "NET"),
    ("2.13.4", {}, True, "P2P"),
    ("2.28.3", {"NCCL_NET_DISABLE_INTRA": "1"}, True, "P2P"),
])
def test_p2p_also_gives_way_to_a_faster_nic(version, env, faster, expected):
    got = ncclpaths.expected_transport(env, "PIX", "GenuineIntel", nccl_version=version, local_gpus=2,
                                       nics=[("PIX", "PIX")], nic_faster=faster)
    assert got == expected


def test_a_p2p_pair_with_unknown_nics_stays_p2p():
    assert ncclpaths.expected_transport({}, "NVL", "GenuineIntel", nccl_version="2.28.3",
                                        local_gpus=2, nics=None) == "P2P"

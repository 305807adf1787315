"""NCCL's transport rules by release, against values read by hand from NCCL's source.

Every expected value below was read from github.com/NVIDIA/nccl at the tag named beside it
(`git show TAG:src/graph/paths.cc`, ncclTopoCheckP2p / ncclTopoCheckNet; src/transport/shm.cc
shmCanConnect; src/transport/p2p.cc; src/graph/topo.cc topoPathTypeStr[]), not computed by
the code under test. Audit findings M1, M2, m11, m20, M11 (m21, the NVML P2P status, is not
modelled: ncclpaths says so).
"""

import pytest

from gputopo import ncclpaths
from gputopo.lessons import training


def E(*args, **facts):
    """expected_transport for a node with no network card unless a test passes `nics`: these
    tests are about the level rules; with the NICs unknown (nics=None) NCCL >= 2.14 may prefer NET
    over SHM (ncclTopoCheckNet), and tests/test_ncclpaths_checknet.py covers that."""
    facts.setdefault("nics", ())
    return ncclpaths.expected_transport(*args, **facts)


def default_level(vendor, version, gpus):
    """NCCL's default P2P level as the rules apply it: the farthest of PIX, PXB, PHB, SYS whose
    pair gets P2P (with no NIC); None when a pair's transport cannot be told."""
    got = [
        E({}, path, vendor, nccl_version=version, local_gpus=gpus)
        for path in ("PIX", "PXB", "PHB", "SYS")
    ]
    return None if None in got else ("PIX", "PXB", "PHB", "SYS")[got.count("P2P") - 1]


# M1: the default level, one row per release range of the audit's table.
@pytest.mark.parametrize(
    "vendor, version, gpus, level",
    [
        # v2.6.4-1 lines 255-263: p2pLevel = PATH_SYS; ARM -> PXB; Intel Broadwell -> PXB.
        ("AuthenticAMD", "2.6.4", 8, "SYS"),
        ("aarch64", "2.6.4", 8, "PXB"),
        ("GenuineIntel", "2.6.4", 8, None),  # Broadwell (PXB) or not (SYS): the model decides
        # v2.7.8-1 lines 267-274: ARM PXB; Intel Broadwell PXB, other Intel PHB; others SYS.
        ("aarch64", "2.7.8", 8, "PXB"),
        ("AuthenticAMD", "2.7.8", 8, "SYS"),
        ("GenuineIntel", "2.7.8", 8, None),  # PXB or PHB
        ("CentaurHauls", "2.7.8", 8, "SYS"),  # Zhaoxin: not named at v2.7.8-1 ...
        ("CentaurHauls", "2.8.4", 8, "PXB"),  # ... PXB at v2.8.4-1 lines 286-288
        # v2.9.9-1 and v2.22.3-1 lines 291-300: Intel, ARM, Zhaoxin PXB; others SYS.
        ("GenuineIntel", "2.9.9", 8, "PXB"),
        ("GenuineIntel", "2.22.3", 8, "PXB"),
        ("CentaurHauls", "2.22.3", 8, "PXB"),
        ("aarch64", "2.22.3", 8, "PXB"),
        ("AuthenticAMD", "2.22.3", 8, "SYS"),
        ("AuthenticAMD", "2.22.3", 2, "SYS"),
        # v2.23.4-1 lines 276-282 and v2.28.3-1 lines 314-320: PXB; SYS only on x86 AMD with
        # system->nodes[GPU].count <= 2.
        ("AuthenticAMD", "2.23.4", 2, "SYS"),
        ("AuthenticAMD", "2.23.4", 3, "PXB"),
        ("AuthenticAMD", "2.28.3", 8, "PXB"),
        ("AuthenticAMD", "2.28.3", None, None),  # the GPU count decides
        ("GenuineIntel", "2.28.3", 2, "PXB"),
        ("aarch64", "2.28.3", 2, "PXB"),
        # v2.4.8-1 src/transport/p2p.cc: integer scheme, not modelled: None.
        ("GenuineIntel", "2.4.8", 2, None),
    ],
)
def test_default_p2p_level_by_release(vendor, version, gpus, level):
    assert default_level(vendor, version, gpus) == level


def test_amd_multi_gpu_job_on_current_nccl_uses_shm_for_phb_pairs():
    # The audit's case: NCCL 2.28.3, AMD host, 8-GPU job: PHB/NODE/SYS pairs are not P2P.
    assert E({}, "PHB", "AuthenticAMD", nccl_version="2.28.3", local_gpus=8) == "SHM"
    assert E({}, "SYS", "AuthenticAMD", nccl_version="2.28.3", local_gpus=8) == "SHM"
    assert E({}, "SYS", "AuthenticAMD", nccl_version="2.28.3", local_gpus=2) == "P2P"
    assert E({}, "SYS", "AuthenticAMD", nccl_version="2.22.3", local_gpus=8) == "P2P"
    # 2.7-2.8 on Intel: a SYS pair is SHM whether the CPU is Broadwell (PXB) or not (PHB) ...
    assert E({}, "SYS", "GenuineIntel", nccl_version="2.7.8", local_gpus=2) == "SHM"
    # ... a PHB pair cannot be told without the CPU model.
    assert E({}, "PHB", "GenuineIntel", nccl_version="2.7.8", local_gpus=2) is None


def test_the_default_follows_the_release():
    paths = training.PATH_COLUMNS
    assert [E({}, p, "AuthenticAMD", nccl_version="2.28.3", local_gpus=8) for p in paths] == [
        "P2P",
        "P2P",
        "P2P",
        "SHM",
        "SHM",
    ]
    assert [E({}, p, "AuthenticAMD", nccl_version="2.22.3", local_gpus=8) for p in paths] == [
        "P2P"
    ] * 5
    # the default level by release: Intel, ARM, AMD 2 GPUs, AMD 8 GPUs
    levels = {
        v: [
            default_level(cpu, v, n)
            for cpu, n in (
                ("GenuineIntel", 8),
                ("aarch64", 8),
                ("AuthenticAMD", 2),
                ("AuthenticAMD", 8),
            )
        ]
        for v in ("2.23.4", "2.22.3")
    }
    assert levels["2.23.4"] == ["PXB", "PXB", "SYS", "PXB"]
    assert levels["2.22.3"] == ["PXB", "PXB", "SYS", "SYS"]


# m11: integers meant something else before 2.6 (v2.4.8-1 src/transport/p2p.cc): not modelled.
def test_before_2_6_only_disabling_p2p_is_told():
    assert E({"NCCL_P2P_LEVEL": "4"}, "PHB", "GenuineIntel", nccl_version="2.4.8") is None
    assert E({}, "NVL", None, nccl_version="2.4.8") is None
    assert E({"NCCL_P2P_DISABLE": "1"}, "NVL", None, nccl_version="2.4.8") == "SHM"


# m20: every name of topoPathTypeStr[] up to SYS at v2.28.3-1 is a level.
@pytest.mark.parametrize(
    "level, nvl, pix, pxb, phb",
    [
        ("NVB", "P2P", "SHM", "SHM", "SHM"),
        ("C2C", "P2P", "SHM", "SHM", "SHM"),
        ("P2C", "P2P", "P2P", "P2P", "SHM"),
        ("PXN", "P2P", "P2P", "P2P", "SHM"),
    ],
)
def test_newer_level_names(level, nvl, pix, pxb, phb):
    got = [
        E({"NCCL_P2P_LEVEL": level}, path, "GenuineIntel", nccl_version="2.28.3", local_gpus=2)
        for path in ("NVL", "PIX", "PXB", "PHB")
    ]
    assert got == [nvl, pix, pxb, phb]


def test_a_name_older_nccl_does_not_know_is_ignored():
    # C2C is in topoPathTypeStr[] from v2.26.2-1, not at v2.25.1-1; ncclGetLevel leaves an unknown
    # name unset, so the default (PXB on Intel) decides: a PXB pair stays P2P.
    assert (
        E({"NCCL_P2P_LEVEL": "C2C"}, "PXB", "GenuineIntel", nccl_version="2.25.1", local_gpus=2)
        == "P2P"
    )
    assert (
        E({"NCCL_P2P_LEVEL": "C2C"}, "PXB", "GenuineIntel", nccl_version="2.28.3", local_gpus=2)
        == "SHM"
    )


# M2: shmCanConnect calls ncclTopoCheckNet (v2.14.3-1 shm.cc line 53, paths.cc 405-434;
# v2.28.3-1 shm.cc line 82, paths.cc 517-546): NET when each GPU reaches a NIC (its own) at PXB or
# better faster than their own path; NCCL_NET_DISABLE_INTRA=1 switches it off; not at v2.12.12-1.
def test_a_close_nic_makes_shm_unknown():
    # each GPU has a NIC of its own under its switch (a SYS pair cannot share a PIX/PXB NIC);
    # whether it is faster than the pair's path, topo -m does not say: cannot be told
    close = {"nics": [("PIX", "SYS"), ("SYS", "PIX")]}
    assert E({}, "SYS", "GenuineIntel", nccl_version="2.28.3", local_gpus=2, **close) is None
    assert E({}, "SYS", "GenuineIntel", nccl_version="2.12.12", local_gpus=2, **close) == "SHM"
    assert (
        E(
            {"NCCL_NET_DISABLE_INTRA": "1"},
            "SYS",
            "GenuineIntel",
            nccl_version="2.28.3",
            local_gpus=2,
            **close,
        )
        == "SHM"
    )
    # a NIC one GPU reaches only through the CPU (NODE, SYS) does not count
    assert (
        E({}, "SYS", "GenuineIntel", nccl_version="2.28.3", local_gpus=2, nics=[("PIX", "SYS")])
        == "SHM"
    )
    # p2pCanConnect asks ncclTopoCheckNet too (p2p.cc, v2.28.3-1 lines 135-141)
    assert E({}, "NVL", "GenuineIntel", nccl_version="2.28.3", local_gpus=2, **close) is None

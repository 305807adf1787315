"""ncclpaths' NCCL_P2P_LEVEL facts and transport rules, checked against real recorded logs.

The transports below were read by hand from the recorded NCCL INFO logs ("via P2P/IPC", "via
direct shared memory", "via SHM/direct/direct", "via NET/Socket"): the DGX-1 V100 and DGX A100
logs (reference_systems/dgx1-v100, dgx-a100) and the course's 2x H200 CNN runs
(reference_systems/h200-nvswitch-pair/horovod-cnn/). The legacy integer levels are NCCL's
(src/graph/paths.cc, ncclGetLevel / levelsOldToNew at v2.28.3-1).
"""

import re

import pytest

from gputopo import ncclpaths, reference
from gputopo.parsers import PARSERS

H200 = "h200-nvswitch-pair"
_RUN = re.compile(r"horovod-cnn-[a-z]+-b\d+-gpus-(?P<gpus>\d+(?:-\d+)*)-(?P<tag>.+)-r\d+\.txt")


def _rule_version(nccl):
    # A log that prints no version but spells SHM "via direct shared memory" is NCCL 2.12 or
    # older (src/transport/shm.cc at v2.12.12-1; "via SHM/%s/%s" from v2.13.4-1): before
    # ncclTopoCheckNet (2.14), so the NICs do not matter.
    if nccl.get("nccl_version"):
        return nccl["nccl_version"]
    if any(ch.get("via") == "direct shared memory" for ch in nccl.get("channels") or ()):
        return "2.12"
    return None


def _dgx_logs():
    for system in ("dgx1-v100", "dgx-a100"):
        info = reference.system_info(system)
        for name in reference.find(system, "nccl-log"):
            settings = reference.file_settings(system, name)
            if settings.get("gpus"):
                yield system, info, name, settings


def test_the_dgx_logs_transports_read_by_hand():
    seen = {}
    for system, _, name, settings in _dgx_logs():
        nccl = reference.load(system, "nccl-log", filename=name)
        seen[(system, settings["gpus"], settings["env"].get("NCCL_P2P_LEVEL"))] = nccl["transports"]
    assert seen == {
        ("dgx1-v100", "0,3", None): ["P2P"],
        ("dgx1-v100", "0,3", "1"): ["P2P"],
        ("dgx1-v100", "0,3", "0"): ["SHM"],
        ("dgx1-v100", "1,7", None): ["SHM"],
        ("dgx-a100", "0,3", "1"): ["P2P"],
        ("dgx-a100", "0,3", "0"): ["SHM"],
    }


def test_the_rules_agree_with_the_dgx_logs():
    checked = 0
    for system, info, name, settings in _dgx_logs():
        nccl = reference.load(system, "nccl-log", filename=name)
        env = dict(settings.get("env") or {})
        path_type = info["cnn"]["pairs"][settings["gpus"]]["path_type"]
        expected = ncclpaths.expected_transport(
            env, path_type, info.get("cpu_vendor"), nccl_version=_rule_version(nccl), local_gpus=2
        )
        assert [expected] == nccl["transports"], (system, name)
        if "NCCL_P2P_LEVEL" in env:  # NCCL echoes the legacy integer as the level's name
            assert nccl["p2p_level"] == ncclpaths.legacy_level_name(env["NCCL_P2P_LEVEL"])
        checked += 1
    assert checked == 6


def test_the_rules_agree_with_the_h200_cnn_runs():
    topo = reference.load(H200, "topo", filename="nvidia-smi-topo-m.txt")
    row0, row1 = topo["links"]["GPU0"], topo["links"]["GPU1"]
    nics = tuple((row0.get(nic), row1.get(nic)) for nic in topo.get("nics") or {})
    tags = {
        "default": {},
        "NCCL_P2P_LEVEL-NVL": {"NCCL_P2P_LEVEL": "NVL"},
        "NCCL_P2P_LEVEL-PIX": {"NCCL_P2P_LEVEL": "PIX"},
        "NCCL_P2P_LEVEL-LOC": {"NCCL_P2P_LEVEL": "LOC"},
        "NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
    }
    by_hand = {
        "default": "P2P",
        "NCCL_P2P_LEVEL-NVL": "P2P",
        "NCCL_P2P_LEVEL-PIX": "P2P",
        "NCCL_P2P_LEVEL-LOC": "SHM",
        "NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1": "NET",
    }
    checked = 0
    for path in sorted((reference.REFERENCE_DIR / H200 / "horovod-cnn").glob("*.txt")):
        match = _RUN.fullmatch(path.name)
        if not match or match["gpus"] != "0-1":
            continue
        nccl = PARSERS["nccl-log"](path.read_text(errors="replace"))
        assert nccl["transports"] == [by_hand[match["tag"]]], path.name
        expected = ncclpaths.expected_transport(
            tags[match["tag"]],
            "NVL",
            None,
            local_gpus=2,
            nccl_version=nccl["nccl_version"],
            nics=nics,
        )
        assert expected == by_hand[match["tag"]], path.name
        checked += 1
    assert checked == 30  # five settings x three runs, at batch 64 and at batch 512


def test_p2p_level_facts():
    # NCCL User Guide, "Integer Values (Legacy)": 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS (above 4: SYS)
    assert [ncclpaths.legacy_level_name(str(i)) for i in range(7)] == [
        "LOC",
        "PIX",
        "PXB",
        "PHB",
        "SYS",
        "SYS",
        "SYS",
    ]
    # NVLink pairs keep P2P at every level but LOC (User Guide: LOC "never use P2P").
    for level in ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS"):
        expected = "SHM" if level == "LOC" else "P2P"
        assert ncclpaths.expected_transport({"NCCL_P2P_LEVEL": level}, "NVL", nics=()) == expected
    # Defaults by release: tests/test_ncclpaths_versions.py has the whole table.
    assert ncclpaths.expected_transport({}, "PXB", "GenuineIntel", nics=()) == "P2P"  # default PXB
    assert (
        ncclpaths.expected_transport({}, "PHB", "AuthenticAMD", nics=()) is None
    )  # 2.23+: GPU count
    assert ncclpaths.expected_transport({}, "SYS", "GenuineIntel", nics=()) == "SHM"  # no NIC
    assert ncclpaths.expected_transport({}, "SYS", "GenuineIntel") is None  # NICs unknown (>= 2.14)
    assert ncclpaths.expected_transport({}, "SYS", "AuthenticAMD", nccl_version="2.19.3") == "P2P"
    assert ncclpaths.expected_transport({}, "PXB", None) == "P2P"  # every default reaches PXB
    assert ncclpaths.expected_transport({}, "PHB", None) is None  # default unknown
    assert ncclpaths.expected_transport({"NCCL_P2P_DISABLE": "1"}, "NVL", nics=()) == "SHM"
    assert (
        ncclpaths.expected_transport({"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}, "NVL")
        == "NET"
    )
    assert "nccl-p2p-level" in ncclpaths.P2P_LEVEL_SOURCES["docs"]


@pytest.mark.parametrize(
    "code, path",
    [
        ("NV12", "NVL"),
        ("NV1", "NVL"),
        ("PIX", "PIX"),
        ("PXB", "PXB"),
        ("PHB", "PHB"),
        ("NODE", "PHB"),
        ("SYS", "SYS"),
        ("X", None),
        (None, None),
    ],
)
def test_topo_codes_to_nccl_path_types(code, path):
    assert ncclpaths.path_type_of_link(code) == path

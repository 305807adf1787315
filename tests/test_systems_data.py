"""Recorded systems are data: each folder's system.json, read by one loader (gputopo.reference).

Adding a recorded system is one folder with its files and its system.json, no code: the
tests below add one (copies of real recordings) and find it in every reader.
"""

import json
import shutil

import pytest

from gputopo import reference
from gputopo.lessons import collectives
from gputopo.lessons import p2p_test

REAL = reference.REFERENCE_DIR


@pytest.fixture()
def reference_dir(tmp_path, monkeypatch):
    """A reference_systems folder holding copies of the real systems, which tests add to."""
    for system in reference.list_systems():
        shutil.copytree(REAL / system, tmp_path / system)
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    return tmp_path


@pytest.mark.parametrize("system", reference.list_systems())
def test_every_system_has_a_system_json(system):
    info = json.loads((REAL / system / reference.SYSTEM_FILE).read_text(encoding="utf-8"))
    assert info["machine"] and info["what"] and info["source"]
    assert isinstance(info["nvswitch"], bool)
    assert reference.SYSTEM_FILE not in reference.files(system)  # a description, not a recording


def test_the_dgx1_facts_are_read_from_its_system_json():
    known = reference.known_links("dgx1-v100")
    # NVIDIA's DGX-1 V100 wiring, GPU 0's row: one NVLink to 1 and 2, two to 3 and 4, none to 5-7.
    assert [known["pairs"][(0, j)] for j in range(1, 8)] == [
        "NV1",
        "NV1",
        "NV2",
        "NV2",
        "SYS",
        "SYS",
        "SYS",
    ]
    blocked, why = reference.no_peer_access("dgx1-v100")
    assert (0, 5) in blocked and (0, 3) not in blocked and "staged copy" in why
    assert blocked == {pair for pair, code in known["pairs"].items() if code == "SYS"}
    assert reference.file_settings("dgx1-v100", "horovod-cnn-gpus-1-7-default.txt") == {
        "gpus": "1,7",
        "env": {},
        "framework": "tensorflow",
        "batch_per_worker": 512,
    }
    assert reference.file_settings("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets.txt")[
        "env"
    ] == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    assert reference.file_settings("h200-nvswitch-pair", "nccl-bench-all_reduce-n100.txt") == {}


def test_a_new_system_folder_appears_in_every_reader(reference_dir):
    new = reference_dir / "a100-pcie-quad"
    new.mkdir()
    # Its recordings: copies of real ones (a V100 all_reduce table, a DGX-1 Horovod log).
    shutil.copy(
        REAL / "v100-sxm2-8gpu-server" / "all_reduce_perf-g8.txt", new / "all_reduce_perf-g8.txt"
    )
    shutil.copy(
        REAL / "dgx1-v100" / "horovod-cnn-gpus-1-7-default.txt",
        new / "horovod-cnn-gpus-0-2-default.txt",
    )
    shutil.copy(
        REAL / "rtx2080-nvlink-pair" / "p2pBandwidthLatencyTest.txt",
        new / "p2pBandwidthLatencyTest.txt",
    )
    (new / reference.SYSTEM_FILE).write_text(
        json.dumps(
            {
                "machine": "4x test GPU, two NVLink pairs",
                "what": "copies",
                "source": "this test",
                "cpu_vendor": "AuthenticAMD",
                "nvswitch": False,
                "links": {
                    "source": "this test",
                    "pairs": {"0,1": "NV4", "0,2": "PHB", "2,3": "NV4"},
                },
                "no_peer_access": {"pairs": ["0,3"], "why": "this test"},
                "cnn": {
                    "label": "Test quad",
                    "order": 5,
                    "pairs": {"0,2": {"link": "PCIe through the host bridge", "path_type": "PHB"}},
                },
                "files": {
                    "horovod-cnn-gpus-0-2-default.txt": {
                        "gpus": "0,2",
                        "env": {},
                        "framework": "tensorflow",
                        "batch_per_worker": 256,
                    }
                },
            }
        ),
        encoding="utf-8",
    )

    assert "a100-pcie-quad" in reference.list_systems()
    assert reference.describe("a100-pcie-quad")["machine"] == "4x test GPU, two NVLink pairs"
    link = p2p_test.link_lookup("a100-pcie-quad")
    assert link(1, 0) == "NV4" and link(2, 0) == "PHB" and link(1, 3) is None
    access = p2p_test.peer_access({}, "a100-pcie-quad")
    assert access(3, 0) is False and access(0, 1) is True
    assert "a100-pcie-quad" in p2p_test.recorded()
    tables = [t for t in collectives.nccl_tables() if t["system"] == "a100-pcie-quad"]
    assert [t["file"] for t in tables] == ["all_reduce_perf-g8.txt"] and tables[0][
        "nvls"
    ] == "n/a (no NVSwitch)"

    # The CNN log is found as an NCCL log with the settings and pair facts system.json gives it.
    log = "horovod-cnn-gpus-0-2-default.txt"
    assert log in reference.find("a100-pcie-quad", "nccl-log")
    assert reference.file_settings("a100-pcie-quad", log)["batch_per_worker"] == 256
    assert reference.system_info("a100-pcie-quad")["cnn"]["pairs"]["0,2"]["path_type"] == "PHB"


def test_recorded_transport_files_come_from_system_json(reference_dir):
    info_file = reference_dir / "h200-nvswitch-pair" / reference.SYSTEM_FILE
    info = json.loads(info_file.read_text(encoding="utf-8"))
    name = "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt"
    # by hand from its system.json: the pattern nccl-bench-*-P2P_LEVEL-LOC.txt names the setting
    settings = reference.file_settings("h200-nvswitch-pair", name)
    assert settings["env"] == {"NCCL_P2P_LEVEL": "LOC"} and settings["transport"].startswith("SHM")
    del info["files"]["nccl-bench-*-P2P_LEVEL-LOC.txt"]
    info_file.write_text(json.dumps(info), encoding="utf-8")
    assert reference.file_settings("h200-nvswitch-pair", name) == {}


def test_a_broken_system_json_is_a_one_line_error(reference_dir):
    (reference_dir / "dgx1-v100" / reference.SYSTEM_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="dgx1-v100/system.json is not valid JSON"):
        reference.describe("dgx1-v100")

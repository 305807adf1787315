"""The recorded reference systems: every file has a kind, loader errors (facts per file:
test_reference_golden.py)."""

from pathlib import Path

import pytest

from gputopo import reference

ALL_FILES = [
    (system, name) for system in reference.list_systems() for name in reference.files(system)
]
# Where the course's copy came from; present on the development machine only.
SHARED_COPY = Path(__file__).resolve().parents[2] / "shared" / "reference-systems"


def test_the_published_systems_are_all_there():
    assert {
        "v100-sxm2-8gpu-server",
        "dgx1-v100",
        "dgx-a100",
        "h100-pcie-nvlink-pair",
        "rtx2080-nvlink-pair",
        "pcie-gen3-8gpu-mxnet",
    } <= set(reference.list_systems())


@pytest.mark.parametrize("system,name", ALL_FILES)
def test_every_file_has_a_kind(system, name):
    assert reference.kinds_of(name), f"{system}/{name} matches no pattern in KIND_PATTERNS"


@pytest.mark.parametrize("system", reference.list_systems())
def test_every_system_is_described(system):
    row = reference.describe(system)
    assert row["system"] == system
    assert row["machine"] and row["source"] and row["what"]


def test_describe_reads_the_table():
    row = reference.describe("h100-pcie-nvlink-pair")
    assert "H100" in row["machine"] and "NV12" in row["machine"]
    assert "HPE-Japan-Presales/e-learning" in row["source"]


def test_unknown_system_lists_the_known_ones():
    for call in (reference.files, reference.describe, lambda s: reference.load(s, "topo")):
        with pytest.raises(ValueError) as error:
            call("dgx-9000")
        assert "dgx-9000" in str(error.value) and "v100-sxm2-8gpu-server" in str(error.value)


@pytest.mark.parametrize("filename", ["../README.md", "nope.txt", "."])
def test_read_text_serves_only_recorded_files(filename):
    with pytest.raises(ValueError):
        reference.read_text("dgx1-v100", filename)


def test_read_text_is_the_stored_text():
    text = reference.read_text("v100-sxm2-8gpu-server", "nvidia-smi-topo-m.txt")
    assert text.startswith("\tGPU0\tGPU1")


def test_load_single_file_kind():
    topo = reference.load("v100-sxm2-8gpu-server", "topo")
    assert topo["best_pair"] == [0, 3]
    assert topo["links"]["GPU0"]["GPU3"] == "NV2" and topo["links"]["GPU0"]["GPU4"] == "SYS"


def test_load_passes_parser_options():
    table = reference.load("v100-sxm2-8gpu-server", "nccl-tests", strict=False)
    assert table["truncated"] is False and len(table["rows"]) == 25


def test_load_with_several_files_asks_for_a_name():
    with pytest.raises(ValueError) as error:
        reference.load("dgx1-v100", "horovod")
    assert "filename=" in str(error.value) and "horovod-cnn-gpus-1-7-default.txt" in str(
        error.value
    )
    one = reference.load("dgx1-v100", "horovod", filename="horovod-cnn-gpus-1-7-default.txt")
    assert one["epochs"][0]["images_per_sec"] == 98996.51


def test_load_picks_each_log_by_name():
    assert len(reference.find("dgx1-v100", "nccl-log")) == 4
    load = reference.load
    assert load("dgx1-v100", "nccl-log", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-0.txt")[
        "transports"
    ] == ["SHM"]
    assert load("dgx1-v100", "nccl-log", "horovod-cnn-gpus-0-3-default.txt")["transports"] == [
        "P2P"
    ]


def test_load_errors():
    with pytest.raises(ValueError, match="no topo file"):
        reference.load("rtx2080-nvlink-pair", "topo")
    with pytest.raises(ValueError, match="use read_text"):
        reference.load("h100-pcie-nvlink-pair", "nvlink-status")
    with pytest.raises(ValueError, match="unknown kind"):
        reference.load("h100-pcie-nvlink-pair", "nvlink")
    with pytest.raises(ValueError, match="not a topo file"):
        reference.load("h100-pcie-nvlink-pair", "topo", filename="nvidia-smi.txt")


def test_csv_files_load_as_rows():
    summary = reference.load("dgx1-v100", "csv")
    assert summary["columns"][:3] == ["system", "gpus", "condition"]
    assert len(summary["rows"]) == 7
    assert summary["rows"][3]["gpus"] == "1,7"


@pytest.mark.skipif(
    not SHARED_COPY.is_dir(),
    reason="the shared source folder exists only on the development machine",
)
def test_copy_is_byte_exact():
    # a folder renamed since the copy keeps its former name in system.json ("formerly")
    former = {reference.system_info(s).get("formerly"): s for s in reference.list_systems()}
    for source in SHARED_COPY.rglob("*"):
        if source.is_file() and source.name != "README.md":
            relative = source.relative_to(SHARED_COPY)
            folder = former.get(relative.parts[0], relative.parts[0])
            copy = reference.REFERENCE_DIR / folder / Path(*relative.parts[1:])
            assert copy.read_bytes() == source.read_bytes(), copy

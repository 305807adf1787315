"""NCCL's topology and graph dumps (NCCL_TOPO_DUMP_FILE, NCCL_GRAPH_DUMP_FILE), issue 27.

Fixtures are dumps others published (tests/fixtures/parsers/nccl-xml/, sources in its
SOURCES.md). Every expected value was read by hand from the fixture; a bandwidth is NCCL's
formula (src/graph/topo.cc and topo.h at v2.28.3-1, quoted beside it) worked by hand.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo import reference
from gputopo.parsers import PARSERS, ParseError
from gputopo.parsers.nccl_xml import (
    parse_graphs as parse_nccl_graph,
    parse_topology as parse_nccl_topo,
)

XML = Path(__file__).parent / "fixtures" / "parsers" / "nccl-xml"
SOURCE = Path(__file__).resolve().parents[1] / "source_code"
IBM = "topo-ibm-cloud-h100-vsi.xml"


def read(name):
    return (XML / name).read_text(encoding="utf-8")


def test_every_dump_lists_its_source():
    listed = re.findall(r"^\| `([^`]+)` \| [^|]*https://", (XML / "SOURCES.md").read_text(), re.M)
    assert sorted(listed) == sorted(path.name for path in XML.glob("*.xml"))


# ---------------------------------------------------------------- topology dumps


def test_ibm_h100_vm_cpus_gpus_and_numa():
    topo = parse_nccl_topo(read(IBM))
    assert topo["version"] == 1
    assert [(c["numaid"], c["vendor"], c["modelid"], c["host_hash"]) for c in topo["cpus"]] == [
        (0, "GenuineIntel", 143, "0xa5f31daa95182da8"),
        (1, "GenuineIntel", 143, "0xa5f31daa95182da8"),
    ]
    assert [(g["dev"], g["rank"], g["sm"], g["gdr"]) for g in topo["gpus"]] == [
        (d, d, 90, 1) for d in range(8)
    ]
    assert [g["numaid"] for g in topo["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    gpu0 = topo["gpus"][0]
    assert (gpu0["busid"], gpu0["link_speed"], gpu0["link_width"]) == (
        "0000:a4:00.0",
        "32.0 GT/s PCIe",
        0,
    )
    assert topo["unknown_elements"] == {}


def test_ibm_h100_vm_bandwidths_as_nccl_assigns_them():
    topo = parse_nccl_topo(read(IBM))
    gpu0 = topo["gpus"][0]
    # topo.cc: width 0 is read as 16; "32.0 GT/s PCIe" is 240 (x100 Mb/s per lane); 16*240/80 = 48
    assert next(p for p in topo["pci"] if p["busid"] == gpu0["busid"])["nccl_bw_gbs"] == 48.0
    # the bridge the virtual server reports: "2.5 GT/s PCIe" x1 -> 1*15/80 = 0.1875 GB/s
    bridge = next(p for p in topo["pci"] if p["busid"] == "0000:a1:00.0")
    assert (bridge["kind"], bridge["parent"], bridge["nccl_bw_gbs"]) == ("bridge", None, 0.19)
    # NVLinks of GPU 0: 5, 5, 4, 4 links to NVSwitches; sm 90 -> 20.6 GB/s a link (topo.h)
    assert [(l["target"], l["count"], l["target_kind"]) for l in gpu0["nvlinks"]] == [
        ("0000:f5:00.0", 5, "nvswitch"),
        ("0000:f4:00.0", 5, "nvswitch"),
        ("0000:f3:00.0", 4, "nvswitch"),
        ("0000:f6:00.0", 4, "nvswitch"),
    ]
    assert [l["nccl_bw_gbs"] for l in gpu0["nvlinks"]] == [103.0, 103.0, 82.4, 82.4]
    assert {g["nvlink_count"] for g in topo["gpus"]} == {18}


def test_ibm_h100_vm_nics_beside_each_gpu():
    topo = parse_nccl_topo(read(IBM))
    assert [(n["name"], n["dev"], n["speed_mbps"], n["gdr"]) for n in topo["nets"]][:2] == [
        ("mlx5_7", 7, 200000, 1),
        ("mlx5_6", 6, 200000, 1),
    ]
    assert sorted(n["dev"] for n in topo["nets"]) == list(range(8))
    assert {n["nccl_bw_gbs"] for n in topo["nets"]} == {25.0}  # topo.cc: 200000 Mb/s / 8000


def test_windows_line_ends_and_an_xml_declaration_change_nothing():
    text = read(IBM)
    assert parse_nccl_topo(
        '<?xml version="1.0"?>\r\n' + text.replace("\n", "\r\n")
    ) == parse_nccl_topo(text)


def test_a_hand_written_topology_file_with_bare_pci_entries():
    topo = parse_nccl_topo(read("topo-g5-12xlarge-topo-file-aws-466.xml"))
    assert [c["numaid"] for c in topo["cpus"]] == [0] and topo["cpus"][0]["affinity"] is None
    assert [p["busid"] for p in topo["pci"]] == [
        "0000:00:1b.0",
        "0000:00:1c.0",
        "0000:00:1d.0",
        "0000:00:1e.0",
    ]
    assert {p["nccl_bw_gbs"] for p in topo["pci"]} == {None}
    assert topo["gpus"] == []


@pytest.mark.parametrize(
    "name,lineno,last",
    [
        ("topo-8xv100-excerpt-507.xml", 21, "GPU dev 0 (0000:39:00.0)"),
        ("topo-4xa100-excerpt-1125.xml", 12, None),
    ],
)
def test_a_cut_topology_dump_is_reported_truncated(name, lineno, last):
    with pytest.raises(ParseError) as error:
        parse_nccl_topo(read(name))
    assert error.value.truncated is True
    assert error.value.lineno == lineno
    assert error.value.last_complete == last


def test_a_cut_dump_completed_by_hand_reads_its_gpus():
    # The 507 excerpt closed after GPU 0 (closing tags added here, nothing else) reads as
    # the 2020 spelling: "8 GT/s" x16 -> 16*60/80 = 12 GB/s; six NVLinks of count 1, sm 70 -> 20.0
    lines = read("topo-8xv100-excerpt-507.xml").splitlines()[:14]
    topo = parse_nccl_topo("\n".join(lines + ["</pci></pci></cpu></system>"]))
    [gpu] = topo["gpus"]
    assert (gpu["busid"], gpu["numaid"], gpu["nvlink_count"]) == ("0000:39:00.0", 0, 6)
    assert next(p for p in topo["pci"] if p["busid"] == gpu["busid"])["nccl_bw_gbs"] == 12.0
    assert {l["nccl_bw_gbs"] for l in gpu["nvlinks"]} == {20.0}
    assert topo["cpus"][0]["affinity"] == "000000ff,ffff0000,00ffffff"


# ---------------------------------------------------------------- graph dumps


def test_a_maintainers_graph_file_of_2021():
    graphs = parse_nccl_graph(read("graph-4gpu-2nic-sjeaugey-524.xml"))
    assert graphs["version"] == 1
    ring, tree, collnet = graphs["graphs"]
    assert (ring["id"], ring["algorithm"], ring["pattern"], ring["pattern_name"]) == (
        0,
        "ring",
        4,
        "ring",
    )
    assert (ring["nchannels"], ring["channels_listed"], ring["speedintra"], ring["speedinter"]) == (
        2,
        2,
        12.0,
        12.0,
    )
    assert (ring["typeintra"], ring["typeinter"], ring["samechannels"], ring["latencyinter"]) == (
        "SYS",
        "SYS",
        1,
        None,
    )
    assert ring["channels"][0] == {"gpus": [0, 1, 2, 3], "nets": [3, 0], "net_in": 3, "net_out": 0}
    assert (tree["pattern_name"], tree["speedintra"], tree["channels"][1]["net_out"]) == (
        "tree",
        6.0,
        3,
    )
    assert (collnet["id"], collnet["nchannels"], collnet["channels"], collnet["typeintra"]) == (
        2,
        0,
        [],
        "NVL",
    )


def test_four_graphs_with_nvls_and_one_gpu():
    graphs = parse_nccl_graph(read("graph-1gpu-1nic-p2p-shm-disabled-1406.xml"))["graphs"]
    assert [(g["id"], g["pattern"], g["nchannels"]) for g in graphs] == [
        (0, 4, 1),
        (1, 3, 1),
        (2, 3, 0),
        (3, 5, 0),
    ]
    assert (graphs[1]["speedintra"], graphs[1]["speedinter"], graphs[1]["latencyinter"]) == (
        48.0,
        24.0,
        0.0,
    )
    assert (graphs[3]["algorithm"], graphs[3]["pattern_name"]) == ("nvls", "nvls")
    assert graphs[0]["channels"] == [{"gpus": [0], "nets": [0, 0], "net_in": 0, "net_out": 0}]


@pytest.mark.parametrize(
    "name,lineno,last",
    [
        ("graph-4xv100-nvlink-excerpt-713.xml", 31, "graph 0 channel 3"),
        ("graph-1gpu-16ch-no-net-excerpt-1667.xml", 28, "graph 0 channel 7"),
    ],
)
def test_a_cut_graph_dump_is_reported_truncated(name, lineno, last):
    with pytest.raises(ParseError) as error:
        parse_nccl_graph(read(name))
    assert (error.value.truncated, error.value.lineno, error.value.last_complete) == (
        True,
        lineno,
        last,
    )


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "parser,text,what",
    [
        (parse_nccl_topo, "", "empty input"),
        (
            parse_nccl_topo,
            "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n",
            "not an XML file",
        ),
        (
            parse_nccl_topo,
            '<graphs version="1"></graphs>',
            "root element is <graphs> (a graph dump: use kind nccl-graph)",
        ),
        (
            parse_nccl_graph,
            '<system version="1">\n  <cpu numaid="0">\n',
            "root element is <system> (a topology dump",
        ),
        (parse_nccl_topo, '<system version="1">\n<cpu></pci>\n</system>\n', "not well-formed XML"),
        (
            parse_nccl_topo,
            '<system version="1">\n<cpu>\n</pci>',
            "not well-formed XML",
        ),  # garbled, not cut
        (
            parse_nccl_topo,
            "<system><cpu>" + '<pci busid="x">' * 100 + "</pci>" * 100 + "</cpu></system>",
            "nested deeper than 64 levels",
        ),
    ],
)
def test_bad_input_is_one_clear_error(parser, text, what):
    with pytest.raises(ParseError) as error:
        parser(text)
    assert what in error.value.what
    assert error.value.truncated is False


# ---------------------------------------------------------------- command line


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "gputopo", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SOURCE), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


@pytest.mark.parametrize(
    "kind,name", [("nccl-topo", IBM), ("nccl-graph", "graph-4gpu-2nic-sjeaugey-524.xml")]
)
def test_cli_prints_the_parsers_result(kind, name):
    result = run_cli(kind, str(XML / name), "--json")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.count("\n") == 1
    assert json.loads(result.stdout) == json.loads(json.dumps(PARSERS[kind](read(name))))


def test_cli_cut_dump_one_line_exit_2_and_truncated_json():
    path = XML / "graph-4xv100-nvlink-excerpt-713.xml"
    result = run_cli("nccl-graph", str(path), "--json")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == (
        "gputopo nccl-graph: error: truncated input: the XML stops before its closing tags "
        f"(unclosed token); last complete section: graph 0 channel 3 ({path}:31)\n"
    )
    assert json.loads(result.stdout)["truncated"] is True


def test_cli_wrong_kind_is_one_line():
    result = run_cli("nccl-topo", str(XML / "graph-4gpu-2nic-sjeaugey-524.xml"))
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "use kind nccl-graph" in result.stderr


def test_a_recorded_dump_named_so_is_found_by_its_kind():
    assert reference.kinds_of("nccl-topo-h200-pair.xml") == ["nccl-topo"]
    assert reference.kinds_of("nccl-graph-h200-pair.xml") == ["nccl-graph"]
    assert reference.kinds_of("nccl-tuning-h200-pair.txt") == ["nccl-tuning"]


def test_help_lists_the_new_kinds():
    result = run_cli("--help")
    assert result.returncode == 0
    for kind in ("nccl-topo", "nccl-graph", "nccl-tuning"):
        assert kind in result.stdout

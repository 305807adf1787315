"""docs/recorded-figures.md's tables of recorded figures, written from the committed files \
they describe.

    python tools/readme_tables.py          # rewrite the generated blocks of
                                           docs/recorded-figures.md
    python tools/readme_tables.py --check  # exit 1 (one line) when that file differs from the
                                           recorded files

Each block sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`; the text
around the blocks is hand-written. Every figure comes from a file under
source_code/reference_systems/ named in the table, with the number of files (n) and the range
over them. `make test` runs the --check form (tests/test_readme_tables.py), so a changed
recording or a hand edit of a figure fails until this script has been run again.
"""

import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "source_code"))

from gputopo import reference  # noqa: E402
from gputopo.parsers import ParseError, horovod_log, nccl_log, nccl_tests, p2p  # noqa: E402

PAIR = "h200-nvswitch-pair"
TARGET = ROOT / "docs" / "recorded-figures.md"
TARGET_NAME = "docs/recorded-figures.md"
MiB, GiB = 2**20, 2**30


def _p2p(filename):
    return p2p.parse(reference.read_text(PAIR, filename))


def _bench(filename):
    return nccl_tests.parse(reference.read_text(PAIR, filename))


def _span(values, digits=1):
    """'a' for one value or equal values, 'lo-hi' otherwise."""
    lo, hi = min(values), max(values)
    fmt = f"{{:.{digits}f}}"
    return (
        fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"
    )


def _cells(files, group, key, digits=1):
    """'0->1 / 1->0' over the given P2P files: one value, or the range over the files."""
    parsed = [_p2p(f) for f in files]
    forward = [p[group][key][0][1] for p in parsed]
    backward = [p[group][key][1][0] for p in parsed]
    return f"{_span(forward, digits)} / {_span(backward, digits)}"


def _column(files, size, column):
    """The out-of-place `column` at `size` bytes from each file that has that size, and those
    files."""
    values, used = [], []
    for name in files:
        for row in _bench(name)["rows"]:
            if row["size"] == size:
                values.append(row["out_of_place"][column])
                used.append(name)
    return values, used


def _names(files):
    return ", ".join(f"`{f}`" for f in sorted(set(files)))


def _files(pattern):
    return sorted(f for f in reference.files(PAIR) if re.fullmatch(pattern, f))


def pair_tools_table():
    runs256 = [f"p2pBandwidthLatencyTest-256MiB-run{i}.txt" for i in (1, 2, 3)]
    default_ar = _files(r"nccl-bench-all_reduce(-n100|-cuda-graph)?\.txt")
    loc = _files(r"nccl-bench-all_reduce-P2P_LEVEL-LOC(-cuda-graph)?\.txt")
    sockets = _files(r"nccl-bench-all_reduce-sockets.*\.txt")
    rows = [
        (
            "P2P writes one way, copy engine, 1 GiB x 4 (0->1 / 1->0)",
            "`p2pBandwidthLatencyTest.txt`",
            1,
            _cells(["p2pBandwidthLatencyTest.txt"], "bandwidth_gbs", "unidirectional_write")
            + " GB/s",
        ),
        (
            "P2P writes one way, copy engine, 256 MiB x 8",
            "`p2pBandwidthLatencyTest-256MiB-run1..3.txt`",
            3,
            _cells(runs256, "bandwidth_gbs", "unidirectional_write") + " GB/s",
        ),
        (
            "P2P reads one way, copy engine, 256 MiB x 8",
            "`p2pBandwidthLatencyTest-p2p_read.txt`",
            1,
            _cells(["p2pBandwidthLatencyTest-p2p_read.txt"], "bandwidth_gbs", "unidirectional_read")
            + " GB/s",
        ),
        (
            "P2P writes one way, copy kernel (`--sm_copy`)",
            "`p2pBandwidthLatencyTest-sm_copy.txt`",
            1,
            _cells(["p2pBandwidthLatencyTest-sm_copy.txt"], "bandwidth_gbs", "unidirectional_write")
            + " GB/s",
        ),
        (
            "P2P both ways at once, copy engine, 1 GiB x 4",
            "`p2pBandwidthLatencyTest.txt`",
            1,
            _cells(["p2pBandwidthLatencyTest.txt"], "bandwidth_gbs", "bidirectional_enabled")
            + " GB/s",
        ),
        (
            "P2P write latency, GPU side",
            "`p2pBandwidthLatencyTest-256MiB-run1..3.txt`",
            3,
            _cells(runs256, "latency_us", "write_gpu", 2) + " us",
        ),
    ]
    for size, label in ((128 * MiB, "128 MiB"), (512 * MiB, "512 MiB"), (2 * GiB, "2 GiB")):
        values, used = _column(default_ar, size, "busbw")
        rows.append(
            (
                f"all_reduce busbw at {label}, NCCL defaults, NVLS off (course default)",
                _names(used),
                len(values),
                _span(values) + " GB/s",
            )
        )
    for size, label in ((128 * MiB, "128 MiB"), (2 * GiB, "2 GiB")):
        values, used = _column(loc, size, "busbw")
        rows.append(
            (
                f"all_reduce busbw at {label}, `NCCL_P2P_LEVEL=LOC` (SHM)",
                _names(used),
                len(values),
                _span(values) + " GB/s",
            )
        )
    for size, label in ((128 * MiB, "128 MiB"), (GiB, "1 GiB")):
        values, used = _column(sockets, size, "busbw")
        rows.append(
            (
                f"all_reduce busbw at {label}, sockets (`NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`)",
                _names(used),
                len(values),
                _span(values) + " GB/s",
            )
        )
    for name, label in (
        ("nccl-bench-all_reduce.txt", "plain launches"),
        ("nccl-bench-all_reduce-cuda-graph.txt", "CUDA graph (`-G`)"),
    ):
        values, used = _column([name], 8, "time_us")
        rows.append(
            (
                f"all_reduce of 8 B, one process driving both GPUs, {label}",
                _names(used),
                len(values),
                _span(values, 2) + " us",
            )
        )
    out = ["| what (2x H200, NV18) | file(s) | n | recorded |", "| --- | --- | --- | --- |"]
    out += [f"| {what} | {files} | {n} | {value} |" for what, files, n, value in rows]
    return "\n".join(out)


# The recorded CNN runs:
# <PAIR>/horovod-cnn/horovod-cnn-<framework>-b<batch>-gpus-<0-1>-<tag>-r<n>.txt
# (the log) beside a .json record; the tag names the NCCL variables set for the run.
_CNN_RUN = re.compile(
    r"horovod-cnn-[a-z]+-b(?P<batch>\d+)-gpus-(?P<gpus>\d+(?:-\d+)*)-(?P<tag>[A-Za-z].*)-r\d+\.txt"
)
_CNN_SETTINGS = {
    "default": "default",
    "NCCL_P2P_LEVEL-NVL": "NCCL_P2P_LEVEL=NVL",
    "NCCL_P2P_LEVEL-PIX": "NCCL_P2P_LEVEL=PIX",
    "NCCL_P2P_LEVEL-LOC": "NCCL_P2P_LEVEL=LOC",
    "NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1": "P2P and SHM disabled",
}


def recorded_cnn_runs():
    """One row per recorded CNN run of PAIR: batch, GPUs, setting, NCCL transports, images/s."""
    folder = reference.REFERENCE_DIR / PAIR / "horovod-cnn"
    rows = []
    for log_file in sorted(folder.glob("horovod-cnn-*.txt")):
        match = _CNN_RUN.fullmatch(log_file.name)
        if not match or match.group("tag") not in _CNN_SETTINGS:
            continue
        log = log_file.read_text(encoding="utf-8", errors="replace")
        try:
            transports = nccl_log.parse(log)["transports"]
        except ParseError:
            transports = []
        try:
            summary = json.loads(log_file.with_suffix(".json").read_text()).get("summary")
        except (OSError, ValueError):
            summary = None
        if not summary:
            try:
                summary = horovod_log.parse(log)["summary"] or {}
            except ParseError:
                summary = {}
        rows.append(
            {
                "batch_per_worker": int(match.group("batch")),
                "pair": match.group("gpus").replace("-", ","),
                "setting": _CNN_SETTINGS[match.group("tag")],
                "transports": "+".join(transports),
                "images_per_sec_median": summary.get("images_per_sec_median"),
            }
        )
    return rows


def cnn_table():
    runs = recorded_cnn_runs()
    groups = {}
    for run in runs:
        key = (run["batch_per_worker"], run["pair"], run["setting"])
        groups.setdefault(key, []).append(run)
    out = [
        "| batch per GPU | GPUs | setting | NCCL transport in the log | n runs "
        "| images/s, median (range) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    order = [
        "default",
        "NCCL_P2P_LEVEL=NVL",
        "NCCL_P2P_LEVEL=PIX",
        "NCCL_P2P_LEVEL=LOC",
        "P2P and SHM disabled",
    ]

    def place(item):
        (batch, pair, setting), _ = item
        return (batch, len(pair), order.index(setting) if setting in order else len(order), setting)

    for (batch, pair, setting), group in sorted(groups.items(), key=place):
        rates = [r["images_per_sec_median"] for r in group]
        transports = sorted({r["transports"] or "none" for r in group})
        if len(rates) == 1:
            value = f"{rates[0]:,.0f} (one run)"
        else:
            value = f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
        if pair.count(",") == 0:
            setting = "one GPU, no all-reduce"
        out.append(
            f"| {batch} | {pair} | {setting} | {', '.join(transports)} | {len(rates)} | {value} |"
        )
    return "\n".join(out)


def node8_table():
    node = "h200-nvswitch-8gpu"
    parsed = p2p.parse(reference.read_text(node, "p2pBandwidthLatencyTest.txt"))

    def off_diagonal(key):
        matrix = parsed["bandwidth_gbs"][key]
        return [v for i, row in enumerate(matrix) for j, v in enumerate(row) if i != j]

    out = [
        "| what (8x H200, NVSwitch) | file(s) | recorded |",
        "| --- | --- | --- |",
        f"| P2P writes one way, every pair of the 8 GPUs | `p2pBandwidthLatencyTest.txt` | "
        f"{_span(off_diagonal('unidirectional_write'))} GB/s |",
        f"| P2P both ways at once, every pair | `p2pBandwidthLatencyTest.txt` | "
        f"{_span(off_diagonal('bidirectional_enabled'))} GB/s |",
    ]
    for gpus in (2, 4, 8):
        name = f"nccl-bench-all_reduce-g{gpus}.txt"
        rows = nccl_tests.parse(reference.read_text(node, name))["rows"]
        by_size = {r["size"]: r["out_of_place"] for r in rows}
        big = max(by_size)
        out.append(
            f"| all_reduce on {gpus} GPUs, one process: busbw at {big // GiB} GiB; time of 8 B "
            f"| `{name}` | "
            f"{by_size[big]['busbw']:.1f} GB/s; {by_size[8]['time_us']:.1f} us |"
        )
    return "\n".join(out)


def nvidia_tools_table():
    """NVIDIA's own tools on the same machine: figures only, as the recorded JSON gives them."""
    name = "nvidia-tools-figures-2026-11-21.json"
    data = json.loads(reference.read_text(PAIR, name))
    out = ["| NVIDIA's tool (2x H200, NV18, 2026-11-21) | what | figures |", "| --- | --- | --- |"]
    for key in ("p2pBandwidthLatencyTest", "nccl-tests"):
        section = data[key]
        for figure in section["figures"]:
            values = "; ".join(
                f"{k} {'-'.join(str(x) for x in v) if isinstance(v, list) else v}"
                for k, v in figure.items()
                if k not in ("what", "approximate")
            )
            out.append(f"| {section['tool']} | {figure['what']} | {values} |")
    return "\n".join(out)


BLOCKS = {
    "h200-pair-tools": pair_tools_table,
    "h200-pair-nvidia": nvidia_tools_table,
    "h200-pair-cnn": cnn_table,
    "h200-node8": node8_table,
}


def render(text):
    for name, build in BLOCKS.items():
        pattern = re.compile(
            rf"(<!-- generated: {re.escape(name)} -->\n)(?:.*?\n)?"
            rf"(<!-- end generated: {re.escape(name)} -->)",
            re.S,
        )
        if not pattern.search(text):
            raise SystemExit(
                f"readme_tables.py: error: {TARGET_NAME} has no block '{name}' "
                "(add the two marker lines)"
            )
        table = build()
        text = pattern.sub(lambda m, table=table: m.group(1) + table + "\n" + m.group(2), text)
    return text


def main(argv):
    usage = "usage: python tools/readme_tables.py [--check]"
    if argv in (["-h"], ["--help"]):
        print(usage)
        print(__doc__.strip().splitlines()[0])
        return 0
    if argv not in ([], ["--check"]):
        print(
            f"readme_tables.py: error: unknown arguments {' '.join(argv)} ({usage})",
            file=sys.stderr,
        )
        return 2
    try:
        current = TARGET.read_text()
    except OSError as exc:
        print(
            f"readme_tables.py: error: cannot read {TARGET_NAME} ({exc.strerror})", file=sys.stderr
        )
        return 2
    wanted = render(current)
    if argv == ["--check"]:
        if wanted != current:
            print(
                f"readme_tables.py: error: {TARGET_NAME}'s generated tables differ from the "
                "recorded files: "
                "run python tools/readme_tables.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if wanted != current:
        TARGET.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

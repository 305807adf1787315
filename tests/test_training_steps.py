"""gputopo.lessons.training's step split (notebook 5, "The extra, split") against values read by
hand from the recorded series reference_systems/cpu-gloo-pair/step_breakdown/results.jsonl
(TensorFlow, two Gloo workers on a 2-core CPU, 5 paired rounds) and its README's table, and the
alpha-beta formula of notebook 4: T = 2(n-1) alpha + 2(n-1)/n x S / busbw."""

import json

import pytest

from gputopo.lessons import training

SERIES = "cpu-gloo-pair/step_breakdown"
FUSED = 134217728


def recorded():
    found = dict(training.step_series())
    label = next(label for label in found if label.startswith(SERIES))
    return label, found[label]


def test_the_recorded_cpu_series_is_found_and_labelled():
    label, rows = recorded()
    assert label == f"{SERIES}: tensorflow, 2 workers at most, 5 rounds"
    assert len(rows) == 25  # 5 rounds x (1 baseline + 4 settings), every rc 0
    assert sum(r["workers"] == 1 for r in rows) == 5


def test_split_per_round_of_cycle_5ms():
    split = training.step_split(recorded()[1])[(5.0, FUSED)]
    # results.jsonl lines 4, 8, 12, 16, 25 (two workers) and the rounds' one-worker lines
    assert split["two"] == pytest.approx([269.333, 431.933, 236.267, 141.267, 86.333], abs=1e-3)
    assert split["one"] == pytest.approx([69.6, 64.8, 59.267, 66.067, 57.2], abs=1e-3)
    # round 1: extra 269.333 - 69.6; collective_us 12823; framework 52 + 0 + 217701 + 59 us
    assert split["extra"][0] == pytest.approx(199.733, abs=1e-3)
    assert split["collective"][0] == pytest.approx(12.823)
    assert split["framework"][0] == pytest.approx(217.812)
    assert split["unexplained"][0] == pytest.approx(199.733 - 12.823 - 217.812, abs=1e-3)


def test_table_matches_the_recorded_readme():
    label, rows = recorded()
    fit = {"transport": "NET (sockets)", "alpha_us": 31.0, "busbw_gbps": 3.3}
    text = training.step_table([(label, rows)], 4_799_528, fit)
    # cpu-gloo-pair/README.md, rows "5 | 128 MiB" and "1 | 0 (no fusion)", ms median [min to max]
    lines = {tuple(line.split()[:2]): line for line in text.splitlines()[3:]}
    five = lines[("5", "134,217,728")]
    for cell in (
        "64.8 [57.2 to 69.6]",
        "236.3 [86.3 to 431.9]",
        "177.0 [29.1 to 367.1]",
        "11.5 [6.8 to 35.2]",
        "85.0 [33.4 to 217.8]",
        "-14.6 [-30.9 to 208.5]",
    ):
        assert cell in five
    off = lines[("1", "0")]
    for cell in (
        "288.8 [126.2 to 319.4]",
        "222.7 [69.0 to 254.6]",
        "81.5 [27.3 to 91.5]",
        "16.6 [-0.4 to 73.3]",
    ):
        assert cell in off
    assert "model (NET)" in text.splitlines()[1]


@pytest.mark.parametrize(
    "operations, expected_ms",
    [
        (1, "4.02"),  # one all-reduce: 2 alpha + S / busbw (n = 2): 0.020 + 4.0 ms
        (8, "4.16"),  # one per tensor: 8 x 2 alpha, the same bytes
        (5, "4.10"),  # five fused operations, as a recorded step shows
    ],
)
def test_model_counts_one_alpha_per_all_reduce(operations, expected_ms):
    fit = {"transport": "x", "alpha_us": 10.0, "busbw_gbps": 1.0}
    one = {
        "workers": 1,
        "series": "s",
        "round": 1,
        "cycle_time_ms": 1.0,
        "fusion_threshold_bytes": 0,
        "step_ms": 10.0,
    }
    two = dict(
        one,
        workers=2,
        step_ms=20.0,
        timeline={
            "operations": operations,
            "collective_us": 1000,
            "fusion_copy_us": 0,
            "wait_us": 0,
            "negotiate_us": 0,
            "other_us": 0,
        },
    )
    line = training.step_table([("x", [one, two])], 4_000_000, fit).splitlines()[3].split()
    assert line[8] == expected_ms


def write(folder, rows):
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_live_series_first_failed_runs_left_out_and_one_worker_only(tmp_path):
    _, rows = recorded()
    ones = [dict(r) for r in rows if r["workers"] == 1][:2]
    ones[1]["cycle_time_ms"] = 5.0  # as `--workers 1` writes one per setting
    failed = dict(ones[0], rc=1, step_ms=None)
    write(tmp_path, ones + [failed])
    series = training.step_series(tmp_path)
    assert series[0][0] == "the machine that ran this cell: tensorflow, 1 worker at most, 2 rounds"
    assert [r["rc"] for r in series[0][1]] == [0, 0]
    text = training.step_table(
        series[:1], 4_799_528, {"transport": "P2P", "alpha_us": 11.4, "busbw_gbps": 312.2}
    )
    rows_out = text.splitlines()[3:]
    assert len(rows_out) == 2 and rows_out[0].split()[:3] == ["1", "134,217,728", "69.6"]
    assert (
        rows_out[1].split()[:3] == ["5", "134,217,728", "64.8"] and rows_out[1].split()[-1] == "-"
    )


def test_no_live_file_and_empty_results(tmp_path):
    assert [label for label, _ in training.step_series(tmp_path / "missing")][0].startswith(SERIES)
    assert training.step_table([], 1, {"transport": "P2P"}) == "no step-breakdown series to show"


def test_a_cut_off_line_is_skipped(tmp_path):
    _, rows = recorded()
    base = next(r for r in rows if r["workers"] == 1)
    (tmp_path / "results.jsonl").write_text(json.dumps(base) + "\n" + json.dumps(base)[:40])
    assert len(training.step_series(tmp_path)[0][1]) == 1


def test_one_gpu_series_folders_are_globbed(tmp_path, monkeypatch):
    # where the one-GPU series land: h100-single-gpu/step_breakdown-*/results.jsonl
    _, rows = recorded()
    one = dict(next(r for r in rows if r["workers"] == 1), framework="pytorch")
    for name in ("step_breakdown-gpu", "step_breakdown-cpu16"):
        (tmp_path / "h100-single-gpu" / name).mkdir(parents=True)
        write(tmp_path / "h100-single-gpu" / name, [one])
    monkeypatch.setattr(training.reference, "REFERENCE_DIR", tmp_path)
    assert [label for label, _ in training.step_series()] == [
        "h100-single-gpu/step_breakdown-cpu16: pytorch, 1 worker at most, 1 round",
        "h100-single-gpu/step_breakdown-gpu: pytorch, 1 worker at most, 1 round",
    ]

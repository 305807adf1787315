"""The results store appends, never overwrites, and says where and when a result was measured."""

import json
import multiprocessing
import os
import socket

import pytest

from coursetools import results
from gputopo import live


def lines_of(kind):
    """The records of results/<kind>.jsonl, read here as people read them (one JSON per line)."""
    return [
        json.loads(line) for line in (live.results_dir() / f"{kind}.jsonl").read_text().splitlines()
    ]


@pytest.fixture
def store(tmp_path, monkeypatch):
    folder = tmp_path / "my-results"
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(folder))
    return folder


def test_environment_variable_moves_the_store(store):
    assert live.results_dir() == store
    path = results.append_record("p2p", {"gbs": 1.5})
    assert path == store / "p2p.jsonl"


def test_two_appends_give_two_lines_and_keep_the_first(store):
    first = results.append_record("allreduce", {"size": 8, "busbw": 0.01})
    text_after_first = first.read_text()
    results.append_record("allreduce", {"size": 16, "busbw": 0.02})
    text_after_second = first.read_text()
    assert text_after_second.startswith(text_after_first)
    lines = text_after_second.splitlines()
    assert len(lines) == 2
    records = [json.loads(line) for line in lines]
    assert [r["size"] for r in records] == [8, 16]
    for record in records:
        assert record["kind"] == "allreduce"
        assert record["recorded_at"].endswith("+00:00")
        assert record["environment"]["hostname"] == socket.gethostname()


def test_environment_keeps_nccl_settings(store, monkeypatch):
    monkeypatch.setenv("NCCL_P2P_LEVEL", "NVL")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("UNRELATED_SECRET_THING", "x")
    record = lines_of(results.append_record("env", {"n": 1}).stem)[0]
    variables = record["environment"]["variables"]
    assert variables["NCCL_P2P_LEVEL"] == "NVL"
    assert variables["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "UNRELATED_SECRET_THING" not in variables


@pytest.mark.parametrize("kind", ["../escape", "a/b", "", ".hidden", "sp ace"])
def test_kind_must_be_a_plain_file_name(store, kind):
    with pytest.raises(ValueError, match="result kind"):
        results.append_record(kind, {"x": 1})
    assert not store.exists() or not any(store.iterdir())


def test_reserved_keys_are_refused(store):
    with pytest.raises(ValueError, match="'kind' is reserved"):
        results.append_record("x", {"kind": "other"})


def _append_many(folder, worker, count):
    os.environ["GPUTOPO_RESULTS_DIR"] = str(folder)
    for index in range(count):
        results.append_record("race", {"worker": worker, "index": index, "pad": "x" * 2000})


def test_concurrent_appends_do_not_interleave(store):
    store.mkdir()
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_append_many, args=(store, worker, 40)) for worker in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    lines = (store / "race.jsonl").read_text().splitlines()
    assert len(lines) == 120
    records = [json.loads(line) for line in lines]  # any interleaving would break the JSON
    assert sorted((r["worker"], r["index"]) for r in records) == [
        (w, i) for w in range(3) for i in range(40)
    ]


def _gpu_facts_of(path):
    environment = json.loads(path.read_text().splitlines()[-1])["environment"]
    return {
        key: environment[key]
        for key in ("gpus", "driver_version", "cuda_version", "nccl_version", "mode")
    }


def test_record_metadata_does_not_depend_on_what_was_called_first(
    store, fake_nvidia_smi, monkeypatch
):
    import importlib

    detect_module = importlib.import_module("coursetools.detect")
    fake_nvidia_smi("h100-pcie-nvlink-pair")
    monkeypatch.setenv("GPUTOPO_CUDA_PROBE", "0")
    orders = {}
    for order in ("record first", "detect first"):
        monkeypatch.setattr(detect_module, "_cached", None)
        if order == "detect first":
            detect_module.detect_once(check_horovod=False)
        orders[order] = _gpu_facts_of(results.append_record("order", {"order": order}))
        detect_module.detect_once()  # what a notebook's banner does afterwards
    assert orders["record first"] == orders["detect first"]
    assert orders["record first"]["gpus"] == ["NVIDIA H100 PCIe"] * 2
    assert orders["record first"]["mode"] == "multi-gpu"


def test_a_given_machine_supplies_the_gpu_facts(store, monkeypatch):
    import importlib

    from coursetools.machine import Machine

    detect_module = importlib.import_module("coursetools.detect")
    monkeypatch.setattr(detect_module, "_cached", Machine(mode="reference", reason="cached one"))
    given = Machine(
        mode="single-gpu",
        gpu_names=["Tesla V100-SXM2-16GB"],
        driver_version="535.1",
        cuda_version="12.2",
        nccl_version="2.18.3",
    )
    facts = _gpu_facts_of(results.append_record("given", {"n": 1}, machine=given))
    assert facts == {
        "gpus": ["Tesla V100-SXM2-16GB"],
        "driver_version": "535.1",
        "cuda_version": "12.2",
        "nccl_version": "2.18.3",
        "mode": "single-gpu",
    }

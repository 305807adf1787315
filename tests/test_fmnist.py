"""The offline Fashion-MNIST loader: real data, corrupted and truncated copies, the search order.

The real-data tests use whatever folder the loader finds (``make test`` installs Debian's
``dataset-fashion-mnist`` first). Without data they skip with the reason, unless
GPUTOPO_REQUIRE_DATASET=1 (set by ``make test``), where a missing dataset is a failure.
"""

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gputopo import fmnist

NAMES = list(fmnist.FILES)
TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS = NAMES


@pytest.fixture(scope="module")
def real_dir():
    d = fmnist.find_dataset_dir()
    if d is None:
        msg = "Fashion-MNIST not on this machine; " + fmnist.HOW_TO_GET_IT
        if os.environ.get("GPUTOPO_REQUIRE_DATASET") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return d


@pytest.fixture(scope="module")
def real_data(real_dir):
    return fmnist.load(directory=real_dir)


@pytest.fixture
def copy_dir(real_dir, tmp_path):
    """A private copy of the real files, free to damage."""
    d = tmp_path / "fm"
    d.mkdir()
    for name in NAMES:
        shutil.copy(real_dir / name, d / name)
    return d


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """Point every search location at empty folders; no download."""
    monkeypatch.delenv("FASHION_MNIST_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(fmnist, "DEBIAN_DIR", tmp_path / "debian")
    monkeypatch.setattr(fmnist, "PROJECT_DATA_DIR", tmp_path / "project")
    monkeypatch.setattr(fmnist, "_network_available", lambda timeout=3.0: False)
    return tmp_path


def test_debian_path_is_in_search_order():
    dirs = fmnist.search_dirs()
    assert Path("/usr/share/datasets/fashion-mnist") in dirs
    assert dirs[-1].parts[-3:] == ("source_code", "data", "fashion-mnist")


def test_real_data_shapes_types_and_classes(real_data):
    (x_train, y_train), (x_test, y_test) = real_data
    assert x_train.shape == (60000, 28, 28) and x_test.shape == (10000, 28, 28)
    assert y_train.shape == (60000,) and y_test.shape == (10000,)
    for a in (x_train, y_train, x_test, y_test):
        assert a.dtype == np.uint8
    # Fashion-MNIST is balanced: 6000 / 1000 images per class, labels 0..9.
    assert np.bincount(y_train).tolist() == [6000] * 10
    assert np.bincount(y_test).tolist() == [1000] * 10
    assert x_train.max() == 255 and x_train.min() == 0
    # Not MNIST (the old lab's silent substitute): MNIST digits have far more black pixels.
    assert 0.25 < (x_train[:1000] > 0).mean() < 0.75
    assert x_train.flags.writeable


def test_search_order_env_var_wins(real_dir, isolated, monkeypatch, tmp_path):
    env_dir = tmp_path / "env"
    shutil.copytree(real_dir, env_dir)
    keras_dir = tmp_path / "home" / ".keras" / "datasets" / "fashion-mnist"
    shutil.copytree(real_dir, keras_dir)
    assert fmnist.find_dataset_dir() == keras_dir
    monkeypatch.setenv("FASHION_MNIST_DIR", str(env_dir))
    assert fmnist.find_dataset_dir() == env_dir


def test_incomplete_folder_is_passed_over(real_dir, isolated, monkeypatch, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(real_dir / TRAIN_LABELS, partial / TRAIN_LABELS)
    monkeypatch.setenv("FASHION_MNIST_DIR", str(partial))
    shutil.copytree(real_dir, tmp_path / "project")
    assert fmnist.find_dataset_dir() == tmp_path / "project"


@pytest.mark.parametrize("num_shards", [1, 2, 3, 7])
def test_shard_sizes_add_up_and_cover_everything(real_dir, num_shards):
    parts = [fmnist.load(k, num_shards, directory=real_dir) for k in range(num_shards)]
    sizes = [len(p[0][0]) for p in parts]
    assert sum(sizes) == 60000 and max(sizes) - min(sizes) <= 1
    assert all(len(p[0][0]) == len(p[0][1]) for p in parts)
    assert all(len(p[1][0]) == 10000 for p in parts)  # the test set stays whole by default
    (x_all, y_all), _ = fmnist.load(directory=real_dir)
    assert np.array_equal(np.concatenate([p[0][1] for p in parts]), y_all)
    assert np.array_equal(np.concatenate([p[0][0] for p in parts]), x_all)


def test_shard_test_set_too(real_dir):
    sizes = [len(fmnist.load(k, 3, shard_test=True, directory=real_dir)[1][1]) for k in range(3)]
    assert sum(sizes) == 10000


def test_bad_shard_arguments(real_dir):
    with pytest.raises(ValueError):
        fmnist.load(2, 2, directory=real_dir)
    with pytest.raises(ValueError):
        fmnist.load(0, 0, directory=real_dir)


def test_truncated_file_names_the_file(copy_dir):
    path = copy_dir / TRAIN_IMAGES
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(fmnist.DatasetError) as e:
        fmnist.load(directory=copy_dir)
    assert str(path) in str(e.value) and "truncated" in str(e.value)


def test_corrupted_gzip_names_the_file(copy_dir):
    path = copy_dir / TEST_IMAGES
    data = bytearray(path.read_bytes())
    for i in range(1000, 1100):  # flip bytes inside the deflate stream
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(fmnist.DatasetError) as e:
        fmnist.load(directory=copy_dir)
    assert str(path) in str(e.value)


def test_valid_gzip_with_changed_pixels_fails_the_checksum(copy_dir):
    path = copy_dir / TEST_IMAGES
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[5000] ^= 0x01  # one pixel, one bit: gzip is fine, the content is not
    path.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(fmnist.DatasetError, match="checksum") as e:
        fmnist.load(directory=copy_dir)
    assert str(path) in str(e.value)


def test_recompressed_identical_content_is_accepted(copy_dir):
    # What Debian did: other gzip bytes, same content. The loader checks content.
    path = copy_dir / TRAIN_LABELS
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()), compresslevel=1, mtime=0))
    (_, y_train), _ = fmnist.load(directory=copy_dir)
    assert len(y_train) == 60000


def test_wrong_magic_number(copy_dir):
    # Labels file where the images file should be: magic 2049 instead of 2051.
    shutil.copy(copy_dir / TEST_LABELS, copy_dir / TEST_IMAGES)
    with pytest.raises(fmnist.DatasetError, match="magic") as e:
        fmnist.load(directory=copy_dir)
    assert str(copy_dir / TEST_IMAGES) in str(e.value)


def test_wrong_count_in_header(copy_dir):
    path = copy_dir / TEST_LABELS
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[4:8] = (9999).to_bytes(4, "big")
    path.write_bytes(gzip.compress(bytes(raw[:-1])))
    with pytest.raises(fmnist.DatasetError, match="shape") as e:
        fmnist.load(directory=copy_dir)
    assert str(path) in str(e.value)


def test_label_out_of_range(copy_dir):
    path = copy_dir / TEST_LABELS
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[100] = 10
    path.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(fmnist.DatasetError, match="0-9"):
        fmnist.load(directory=copy_dir)


def test_missing_everywhere_names_the_three_ways(isolated):
    with pytest.raises(fmnist.DatasetError) as e:
        fmnist.load()
    msg = str(e.value)
    assert "apt-get install dataset-fashion-mnist" in msg
    assert "python -m gputopo.fmnist --download" in msg
    assert "FASHION_MNIST_DIR" in msg
    for d in fmnist.search_dirs():
        assert str(d) in msg  # says where it looked


def test_download_without_network_says_so(isolated, tmp_path):
    with pytest.raises(fmnist.DatasetError, match="no network"):
        fmnist.download(tmp_path / "dl")


def test_download_keeps_files_with_the_official_md5(isolated, tmp_path, monkeypatch):
    # Files already present with the right MD5 are not fetched again (no network needed);
    # the fake files then fail the content check, so the MD5 alone is not trusted either.
    dest = tmp_path / "dl"
    dest.mkdir()
    import hashlib

    fake = {}
    for name in NAMES:
        (dest / name).write_bytes(name.encode())
        fake[name] = hashlib.md5(name.encode()).hexdigest()
    monkeypatch.setattr(fmnist, "OFFICIAL_MD5", fake)
    monkeypatch.setattr(
        fmnist.urllib.request,
        "urlopen",
        lambda *a, **k: pytest.fail("must not download files that are present"),
    )
    with pytest.raises(fmnist.DatasetError, match="gzip"):
        fmnist.download(dest)


def _cli(*args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=str(Path(fmnist.__file__).parents[1]))
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "gputopo.fmnist", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_check_finds_real_data(real_dir):
    r = _cli("--check", env_extra={"FASHION_MNIST_DIR": str(real_dir)})
    assert r.returncode == 0, r.stderr
    assert str(real_dir) in r.stdout and "checksums OK" in r.stdout


def test_cli_check_reports_corrupt_file(copy_dir):
    (copy_dir / TRAIN_LABELS).write_bytes(b"not gzip at all")
    r = _cli("--check", env_extra={"FASHION_MNIST_DIR": str(copy_dir)})
    assert r.returncode == 1
    assert str(copy_dir / TRAIN_LABELS) in r.stderr and "Traceback" not in r.stderr


def test_cli_needs_an_action():
    r = _cli()
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
    assert r.stderr.count("\n") == 1  # one line, no usage dump (CONTRIBUTING.md)
    assert r.stderr.startswith("python -m gputopo.fmnist: error: ") and "--check" in r.stderr

"""Fashion-MNIST, offline: find the four idx ``.gz`` files, verify their content, return arrays.

    from gputopo import fmnist
    (x_train, y_train), (x_test, y_test) = fmnist.load()               # whole set
    (x_train, y_train), (x_test, y_test) = fmnist.load(hvd.rank(), hvd.size())  # one shard

Where the files are looked for, in this order (the first folder holding all four files wins):

1. ``$FASHION_MNIST_DIR``
2. ``~/.keras/datasets/fashion-mnist``    (where ``keras.datasets.fashion_mnist`` caches them)
3. ``/usr/share/datasets/fashion-mnist``  (Debian's package ``dataset-fashion-mnist``, MIT licence)
4. ``source_code/data/fashion-mnist``     (the project's own, git-ignored data folder)

What is verified is the *content*, not the gzip bytes (Debian's ``.gz`` files differ from the
official ones only in the gzip header): the idx magic numbers, 60000 training and 10000 test
images of 28x28 uint8, labels 0-9, and the SHA-256 of every decompressed array.

If no folder has the data, :func:`load` tries the official download (MD5-checked) into the
project's data folder when a network is reachable, and otherwise raises :class:`DatasetError`
with one message naming the three ways to get the data.

Command line::

    python -m gputopo.fmnist --check            # where is it, is it intact? exit 0 / 1
    python -m gputopo.fmnist --download [DIR]   # official download with MD5 check

numpy is imported inside functions (the rest of the module is standard library only).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import socket
import struct
import sys
import tempfile
import urllib.request
import zlib
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from gputopo.cliutil import OneLineParser, parse_args_or_exit

__all__ = ["DatasetError", "FILES", "find_dataset_dir", "search_dirs", "load", "verify", "download"]

#: The project's own data folder (git-ignored); also where :func:`download` puts the files.
PROJECT_DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "fashion-mnist"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")

# name -> (idx magic, shape, SHA-256 of the decompressed array bytes after the idx header).
# The SHA-256 values are the dataset's identity: they were computed from the files of Debian's
# package dataset-fashion-mnist 0.0~git20200523.55506a9-1, whose decompressed content is the
# official Zalando release (the .gz files differ only in the gzip header), and are checked for
# every copy, wherever it was found or however it was obtained.
FILES = {
    "train-images-idx3-ubyte.gz": (
        2051,
        (60000, 28, 28),
        "2e487a6c89124f78f2d7521542223cafe96f7123c3ca13d447772ac6ecbb3012",
    ),
    "train-labels-idx1-ubyte.gz": (
        2049,
        (60000,),
        "657fbd221bfc9f4198cc14b5619cc33ec57c58dd0e47af4d99d6650759e869a7",
    ),
    "t10k-images-idx3-ubyte.gz": (
        2051,
        (10000, 28, 28),
        "c867c93ff95360594e8ec3287995350b824dd110b11595c0e13d5423f621867a",
    ),
    "t10k-labels-idx1-ubyte.gz": (
        2049,
        (10000,),
        "3d0e6c6ea990b53b6f8f500a41cac93881d981b315f84578b7d915342ade01e9",
    ),
}

# The official files (github.com/zalandoresearch/fashion-mnist, MIT licence) and their MD5s as
# published there; mirrors are tried in order.
OFFICIAL_MD5 = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
MIRRORS = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/",
)

HOW_TO_GET_IT = """\
Three ways to get it (any one is enough):
  1. Debian package (as root):  apt-get install dataset-fashion-mnist
     (installs /usr/share/datasets/fashion-mnist; `make test` does this where apt and root exist)
  2. Official download with MD5 check (needs the internet):  python -m gputopo.fmnist --download
     (writes source_code/data/fashion-mnist)
  3. Copy the four files train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
     t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz from any machine (or the course
     container's /usr/share/datasets/fashion-mnist) into a folder and set FASHION_MNIST_DIR \
to it."""


class DatasetError(RuntimeError):
    """The data set is missing, incomplete or corrupt; the message says which file and what to
    do."""


def search_dirs() -> List[Path]:
    """The folders looked in, in order."""
    dirs = []
    env = os.environ.get("FASHION_MNIST_DIR")
    if env:
        dirs.append(Path(env).expanduser())
    dirs += [Path.home() / ".keras" / "datasets" / "fashion-mnist", DEBIAN_DIR, PROJECT_DATA_DIR]
    return dirs


def find_dataset_dir(dirs: Optional[Sequence[os.PathLike]] = None) -> Optional[Path]:
    """The first folder that holds all four files, or ``None``. Content is not checked here."""
    for d in search_dirs() if dirs is None else [Path(p) for p in dirs]:
        if all((d / name).is_file() for name in FILES):
            return d
    return None


def _read_idx(path: Path, magic: int, shape: Tuple[int, ...], sha256: Optional[str]):
    import numpy as np

    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
        raise DatasetError(
            f"{path}: not a readable gzip file, corrupt or truncated ({e})"
        ) from None
    header = 4 + 4 * len(shape)
    if len(raw) < header:
        raise DatasetError(f"{path}: truncated: {len(raw)} bytes, shorter than the idx header")
    got_magic = struct.unpack(">I", raw[:4])[0]
    if got_magic != magic:
        raise DatasetError(
            f"{path}: wrong idx magic number {got_magic} (expected {magic}); "
            "not a Fashion-MNIST file of this kind"
        )
    dims = struct.unpack(">" + "I" * len(shape), raw[4:header])
    if dims != shape:
        raise DatasetError(f"{path}: idx header says shape {dims}, expected {shape}")
    data = raw[header:]
    size = 1
    for n in shape:
        size *= n
    if len(data) != size:
        raise DatasetError(
            f"{path}: truncated or padded: {len(data)} bytes of data, expected {size}"
        )
    arr = np.frombuffer(data, dtype=np.uint8).reshape(shape)
    if len(shape) == 1 and int(arr.max()) > 9:
        raise DatasetError(f"{path}: label {int(arr.max())} outside 0-9")
    if sha256 is not None:
        got = hashlib.sha256(data).hexdigest()
        if got != sha256:
            raise DatasetError(
                f"{path}: content checksum mismatch (SHA-256 {got[:16]}..., expected "
                f"{sha256[:16]}...); the file is corrupt or not Fashion-MNIST"
            )
    arr.flags.writeable = False  # read-only in the cache; load() hands out copies
    return arr


def verify(directory: os.PathLike, checksums: bool = True):
    """Read and verify the four files in ``directory``; return ``{name: array}``.

    Raises :class:`DatasetError` naming the file on any problem."""
    d = Path(directory)
    out = {}
    for name, (magic, shape, sha) in FILES.items():
        path = d / name
        if not path.is_file():
            raise DatasetError(f"{path}: missing\n{HOW_TO_GET_IT}")
        out[name] = _read_idx(path, magic, shape, sha if checksums else None)
    return out


def _network_available(timeout: float = 3.0) -> bool:
    if any(os.environ.get(v) for v in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")):
        return True  # behind a proxy a direct connect says nothing; let urllib try
    for url in MIRRORS:
        host = url.split("/")[2]
        port = 443 if url.startswith("https") else 80
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return True
        except OSError:
            continue
    return False


def download(dest: os.PathLike = PROJECT_DATA_DIR, timeout: float = 60.0) -> Path:
    """Download the four official files into ``dest`` with the MD5 check, then verify content.

    Files already in ``dest`` with the right MD5 are kept. Raises :class:`DatasetError`."""
    dest = Path(dest)
    if not all((dest / n).is_file() for n in OFFICIAL_MD5) and not _network_available():
        raise DatasetError(
            f"cannot download into {dest}: no network (none of the mirrors answers)\n"
            + HOW_TO_GET_IT
        )
    dest.mkdir(parents=True, exist_ok=True)
    for name, md5 in OFFICIAL_MD5.items():
        target = dest / name
        if target.is_file() and hashlib.md5(target.read_bytes()).hexdigest() == md5:
            continue
        errors = []
        for base in MIRRORS:
            fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{name}.")
            try:
                with (
                    os.fdopen(fd, "wb") as out,
                    urllib.request.urlopen(base + name, timeout=timeout) as r,
                ):
                    digest = hashlib.md5()
                    for chunk in iter(lambda: r.read(1 << 20), b""):
                        out.write(chunk)
                        digest.update(chunk)
                if digest.hexdigest() != md5:
                    errors.append(f"{base}{name}: MD5 {digest.hexdigest()} != {md5}")
                    continue
                os.replace(tmp, target)
                break
            except OSError as e:
                errors.append(f"{base}{name}: {e}")
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        else:
            raise DatasetError(
                f"download of {name} failed:\n  " + "\n  ".join(errors) + "\n" + HOW_TO_GET_IT
            )
    verify(dest)
    return dest


def _missing_message(dirs: Sequence[Path]) -> str:
    looked = "\n".join(f"  - {d}" for d in dirs)
    return f"Fashion-MNIST not found. Looked in (in this order):\n{looked}\n{HOW_TO_GET_IT}"


def load(
    shard: Optional[int] = None,
    num_shards: int = 1,
    *,
    shard_test: bool = False,
    directory: Optional[os.PathLike] = None,
    download_if_missing: bool = True,
):
    """Return ``((x_train, y_train), (x_test, y_test))`` as uint8 arrays, like Keras' loader.

    Images are ``(N, 28, 28)`` uint8 (0-255), labels ``(N,)`` uint8 (0-9).
    With ``shard``/``num_shards`` (e.g. ``hvd.rank(), hvd.size()``) the training set is split
    into ``num_shards`` contiguous parts whose sizes differ by at most one and add up to 60000;
    this worker gets part ``shard``. The test set stays whole unless ``shard_test=True``.
    ``directory`` skips the search. If nothing is found and ``download_if_missing``, the official
    files are downloaded into the project's data folder when a network is reachable.
    """
    import numpy as np

    if num_shards < 1:
        raise ValueError(f"num_shards must be >= 1, got {num_shards}")
    if shard is not None and not 0 <= shard < num_shards:
        raise ValueError(f"shard must be in 0..{num_shards - 1}, got {shard}")
    if directory is not None:
        d = Path(directory)
    else:
        dirs = search_dirs()
        d = find_dataset_dir(dirs)
        if d is None:
            if download_if_missing and _network_available():
                print(
                    f"fmnist: data not found locally; downloading the official files into "
                    f"{PROJECT_DATA_DIR} (MD5-checked)",
                    file=sys.stderr,
                )
                d = download(PROJECT_DATA_DIR)
            else:
                raise DatasetError(_missing_message(dirs))
    arrays = _verify_cached(d)
    x_train, y_train = arrays["train-images-idx3-ubyte.gz"], arrays["train-labels-idx1-ubyte.gz"]
    x_test, y_test = arrays["t10k-images-idx3-ubyte.gz"], arrays["t10k-labels-idx1-ubyte.gz"]
    if shard is not None and num_shards > 1:

        def part(a):
            return np.array_split(a, num_shards)[shard]

        x_train, y_train = part(x_train), part(y_train)
        if shard_test:
            x_test, y_test = part(x_test), part(y_test)
    # Copies: the caller may change them in place without touching the cache.
    return (x_train.copy(), y_train.copy()), (x_test.copy(), y_test.copy())


_CACHE: dict = {}


def _verify_cached(d: Path):
    """:func:`verify`, remembered for the same files (same path, size, mtime, inode)."""
    key = []
    for name in FILES:
        try:
            st = (d / name).stat()
        except OSError:
            return verify(d)  # verify names the missing file
        key.append((str((d / name).resolve()), st.st_size, st.st_mtime_ns, st.st_ino))
    key = tuple(key)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = verify(d)
    return _CACHE[key]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = OneLineParser(
        prog="python -m gputopo.fmnist",
        description="Find and verify the offline Fashion-MNIST files.",
    )
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument(
        "--check", action="store_true", help="say where the data is and verify it (exit 0/1)"
    )
    g.add_argument(
        "--download",
        nargs="?",
        const=str(PROJECT_DATA_DIR),
        metavar="DIR",
        help=f"official download with MD5 check (default DIR: {PROJECT_DATA_DIR})",
    )
    args = parse_args_or_exit(p, argv, where="command line")
    try:
        if args.download:
            d = download(args.download)
            print(f"Fashion-MNIST downloaded and verified in {d}")
            return 0
        dirs = search_dirs()
        d = find_dataset_dir(dirs)
        if d is None:
            print(_missing_message(dirs), file=sys.stderr)
            return 1
        verify(d)
    except DatasetError as e:
        print(f"fmnist: error: {e}", file=sys.stderr)
        return 1
    print(f"Fashion-MNIST found in {d}: 60000 training + 10000 test images, content checksums OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Regenerates the hash-pinned lock files from the top-level pins (`make lock`):
#   requirements-cpu.lock.txt     from requirements-cpu.txt (with requirements-common.txt)
#   requirements-gpu.lock.txt     from requirements-gpu.txt (with requirements-common.txt)
#   requirements-common.lock.txt  from requirements-common.txt alone (no TensorFlow)
#   requirements-pytorch-pypi.lock.txt  from requirements-pytorch-pypi.txt (PyTorch's CUDA 13
#                                 wheel, nvcc and NCCL from PyPI; Python 3.10 and newer)
# Every package, dependencies included, gets an exact version and the sha256 of each of its
# files on PyPI; install.sh installs them with `pip install --require-hashes`. One lock serves
# Python 3.9-3.11 (the PyTorch set: 3.10-3.12) on every platform (uv's --universal resolution,
# markers where they differ).
# Needs the network (PyPI). uv (pinned below) is installed into a private venv under
# ${XDG_CACHE_HOME:-~/.cache}/gputopo/ on first use. To update: change a pin in
# requirements-*.txt (or nothing, to pick up nothing new: pins stay), run `make lock`, review
# the diff, run `make test`, commit the .txt and .lock.txt files together.
# Usage: environment/lock.sh [--help] [SET ...]   (SET: cpu gpu common pytorch-pypi; default all)
set -euo pipefail
uv_version=0.13.9
case ${1-} in
  -h|--help) sed -n '2,/^# Usage/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
sets=("$@")
((${#sets[@]})) || sets=(cpu gpu common pytorch-pypi)
for set in "${sets[@]}"; do
  case $set in
    cpu|gpu|common|pytorch-pypi) ;;
    *) echo "lock.sh: error: unknown set '$set' (cpu, gpu, common or pytorch-pypi; try --help)" >&2
       exit 2 ;;
  esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools=${XDG_CACHE_HOME:-$HOME/.cache}/gputopo/uv-$uv_version
uv=$tools/bin/uv
if ! "$uv" --version 2>/dev/null | grep -q "^uv $uv_version"; then
  echo "[lock] installing uv $uv_version into $tools"
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install --disable-pip-version-check -q "uv==$uv_version"
fi
cd "$here"
for set in "${sets[@]}"; do
  echo "[lock] requirements-$set.txt -> requirements-$set.lock.txt"
  # The TensorFlow sets serve 3.9-3.11; PyTorch 2.11 needs 3.10 or newer.
  oldest=$([[ $set == pytorch-pypi ]] && echo 3.10 || echo 3.9)
  "$uv" pip compile --quiet --universal --python-version "$oldest" --generate-hashes \
    --custom-compile-command "make lock" "requirements-$set.txt" -o "requirements-$set.lock.txt.new"
  mv "requirements-$set.lock.txt.new" "requirements-$set.lock.txt"
done
echo "[lock] done; review with: git diff --stat environment/"

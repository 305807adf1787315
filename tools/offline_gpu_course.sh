#!/usr/bin/env bash
# The README's commands on a fresh copy of the repository, on a GPU machine with no package index
# and no FRAMEWORK given (issue 38 item 5; issue 37's one-GPU mysteries of notebook 7 after it):
#
#   tools/offline_gpu_course.sh OUTDIR [SECONDS]     # SECONDS: make course's limit (default 420)
#
# What it needs beside the repository, in CARRY (default .devcarry, git-ignored; with the device
# tool, name CARRY/whl and CARRY/fm in `carry`):
#   CARRY/whl  wheels for the machine's Python that it lacks, and Horovod's sdist, e.g. for the
#              H200 image (Python 3.12, PyTorch already there):
#                pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#                  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#                  --platform manylinux2014_x86_64 --platform any -d CARRY/whl \
#                  ipykernel==6.29.5 ipywidgets nbclient==0.10.2 nbconvert==7.16.6 \
#                  nbformat==5.10.4 nbval==0.11.0 cffi
#                pip download --no-binary=:all: --no-deps -d CARRY/whl horovod==0.28.1
#              then delete the wheels the image already has (pip list there), to stay small.
#   CARRY/fm   Fashion-MNIST's four files; the two image files may be xz-compressed (*.xz, about
#              26 MB for all four) to fit the device tool's 64 MiB.
# Writes into OUTDIR: flavour.txt (what environment/flavour.sh chose and why), dry-run.txt,
# check-before.txt, make-course.txt (with its seconds), check-after.txt, nb7-mystery6.txt and
# results.tgz (results/ and the install logs). NCCL_NVLS_ENABLE stays 0, as everywhere.
set -u
usage="usage: tools/offline_gpu_course.sh OUTDIR [SECONDS]   (CARRY: see the script's header)"
case ${1:-} in
  -h|--help) echo "$usage"; exit 0 ;;
  "") echo "offline_gpu_course.sh: error: no OUTDIR given ($usage)" >&2; exit 2 ;;
  -*) echo "offline_gpu_course.sh: error: unknown option $1 ($usage)" >&2; exit 2 ;;
esac
out=$1
limit=${2:-420}
carry=${CARRY:-.devcarry}
[[ -d $carry/whl && -d $carry/fm ]] || {
  echo "offline_gpu_course.sh: error: $carry/whl and $carry/fm are needed (see the header)" >&2
  exit 2
}
export NCCL_NVLS_ENABLE=0 PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/$carry/whl
mkdir -p "$out" /tmp/fm
python3 - "$carry/fm" <<'PY'
import gzip, lzma, shutil, sys
from pathlib import Path

for src in Path(sys.argv[1]).iterdir():
    if src.suffix == ".xz":  # the loaders read .gz: recompress, fast
        with lzma.open(src) as raw, gzip.open(f"/tmp/fm/{src.stem}.gz", "wb", 1) as gz:
            shutil.copyfileobj(raw, gz)
    else:
        shutil.copy(src, f"/tmp/fm/{src.name}")
PY
export FASHION_MNIST_DIR=/tmp/fm
{ bash environment/flavour.sh; echo "rc=$?"; } >"$out/flavour.txt" 2>&1
{ bash environment/install.sh --dry-run; echo "rc=$?"; } >"$out/dry-run.txt" 2>&1
{ make check; echo "rc=$?"; } >"$out/check-before.txt" 2>&1
start=$SECONDS
{ timeout "$limit" make course; echo "rc=$?"; } >"$out/make-course.txt" 2>&1
echo "make course: $((SECONDS - start)) s" >>"$out/make-course.txt"
{ timeout 60 make check SKIP_INSTALL=1; echo "rc=$?"; } >"$out/check-after.txt" 2>&1
{
  PYTHONPATH=source_code timeout 60 python3 -c \
    "import sys; from pathlib import Path; from gputopo.lessons import diagnose as m; \
print(m.run(6, Path(sys.argv[1])))" "$out"
  echo "rc=$?"
} >"$out/nb7-mystery6.txt" 2>&1
tar czf "$out/results.tgz" results .venv-pytorch/install-logs 2>/dev/null
echo "offline_gpu_course.sh: outputs in $out"

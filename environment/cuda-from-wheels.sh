#!/usr/bin/env bash
# Makes VENV/cuda, a CUDA toolkit root made of NVIDIA's PyPI wheels installed in VENV, and
# VENV/bin/nvcc that runs its nvcc. install.sh runs it for PyTorch from PyPI (step 3b).
#
# Usage: environment/cuda-from-wheels.sh VENV
#
# Why a root of links: NVIDIA's CUDA 13 wheels (nvidia-cuda-nvcc, -runtime, -crt, nvidia-nvvm)
# put nvcc, its tools, the headers and the runtime under site-packages/nvidia/cu13 (bin, include,
# lib, nvvm), and nvidia-nccl-cu13 puts NCCL under nvidia/nccl. nvcc finds its tools, headers and
# libraries relative to the folder it is run from (bin/nvcc.profile) and looks for libraries in
# lib64, where the wheels have lib; CMake (Horovod's build) and the linker want the unversioned
# libcudart.so and libnccl.so, which the wheels lack. VENV/cuda has bin (links to the wheel's
# tools), include and lib64 (links to CUDA's and NCCL's files, plus the two unversioned names),
# lib -> lib64 and nvvm: CUDA_HOME=VENV/cuda is a whole toolkit with NCCL in it. VENV/bin/nvcc is
# a two-line script, not a link: run through a link, nvcc would take VENV/bin for its root.
# Made again from scratch on every run; the wheels themselves are never changed.
# Exit 0 with one line saying what it made; a missing wheel file: one line, exit 1; usage: exit 2.
set -euo pipefail
die() { echo "cuda-from-wheels.sh: error: $2" >&2; exit "$1"; }  # EXIT-CODE MESSAGE
case ${1-} in
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  '') die 2 "give the venv's folder (try --help)" ;;
  -*) die 2 "unknown option '$1' (try --help)" ;;
esac
(($# == 1)) || die 2 "one argument, the venv's folder (try --help)"
venv=$(cd "$1" 2>/dev/null && pwd) || die 2 "no folder $1"
[[ -x $venv/bin/python ]] || die 2 "$venv/bin/python is missing: not a venv"

site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cu=$site/nvidia/cu13
nc=$site/nvidia/nccl
tk=$venv/cuda
for f in "$cu/bin/nvcc" "$cu/bin/nvcc.profile" "$cu/nvvm/bin/cicc" "$cu/include/cuda_runtime.h" \
         "$cu/include/crt/host_config.h" "$cu/lib/libcudart_static.a" "$cu/lib/libcudart.so.13" \
         "$nc/include/nccl.h" "$nc/lib/libnccl.so.2"; do
  [[ -e $f ]] || die 1 "$f is missing (the nvcc, CUDA runtime, crt, nvvm and NCCL wheels of\
 requirements-pytorch-pypi.lock.txt must all be installed in $venv)"
done
rm -rf "$tk"
mkdir -p "$tk/bin" "$tk/include" "$tk/lib64"
link_all() {  # DEST FILE...: a link in DEST to each FILE, Python's package files left out
  local dest=$1 f; shift
  for f in "$@"; do
    case ${f##*/} in __init__.py|__pycache__) ;; *) ln -s "$f" "$dest/" ;; esac
  done
}
link_all "$tk/bin" "$cu"/bin/*
link_all "$tk/include" "$cu"/include/* "$nc"/include/*
link_all "$tk/lib64" "$cu"/lib/* "$nc"/lib/*
ln -s libcudart.so.13 "$tk/lib64/libcudart.so"
ln -s libnccl.so.2 "$tk/lib64/libnccl.so"
ln -s lib64 "$tk/lib"
ln -s "$cu/nvvm" "$tk/nvvm"
{
  echo '#!/bin/sh'
  echo "# nvcc of NVIDIA's CUDA wheels, run from the root environment/cuda-from-wheels.sh made"
  printf 'exec "%s" "$@"\n' "$tk/bin/nvcc"
} >"$venv/bin/nvcc"
chmod +x "$venv/bin/nvcc"
release=$("$venv/bin/nvcc" --version 2>/dev/null \
          | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p') || true
[[ -n $release ]] || die 1 "$venv/bin/nvcc (the nvcc wheel's) does not run or prints no release"
nccl=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$tk/include/nccl.h" \
       | paste -sd.)
echo "CUDA toolkit root $tk from the wheels: nvcc $release, NCCL ${nccl:-?}; $venv/bin/nvcc runs it"

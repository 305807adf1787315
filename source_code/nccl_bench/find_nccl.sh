#!/bin/sh
# Prints "INCLUDE_DIR LIBRARY_FILE" of an NCCL installation, or nothing.
# Looks, in this order, at: $NCCL_HOME, $CUDA_HOME, the CUDA toolkit next to
# nvcc (and VENV/cuda for a venv's VENV/bin/nvcc: environment/cuda-from-wheels.sh),
# /usr/local/cuda, /usr/local, /usr (and its multiarch lib dir), and the
# nvidia-nccl-cu* Python wheel of python3 (PyTorch ships one).
# Header and library must come from the same place.
# Usage: find_nccl.sh   (no arguments; exit 0 when found, 1 when not)

case ${1-} in
    '') ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "find_nccl.sh: error: unknown argument '$1' (it takes none; try --help)" >&2; exit 2 ;;
esac

lib_in() {  # the first libnccl in the given directories
    for d in "$@"; do
        for f in "$d/libnccl.so" "$d/libnccl.so.2"; do
            if [ -e "$f" ]; then echo "$f"; return 0; fi
        done
    done
    return 1
}

try_prefix() {  # prefix [include dir]
    p=$1
    inc=${2:-$p/include}
    [ -n "$p" ] && [ -f "$inc/nccl.h" ] || return 1
    lib=$(lib_in "$p/lib" "$p/lib64" "$p/lib/x86_64-linux-gnu" "$p/lib/aarch64-linux-gnu" \
          "$p/targets/x86_64-linux/lib" "$p/targets/sbsa-linux/lib") || return 1
    echo "$inc $lib"
    exit 0
}

if [ -n "$NCCL_HOME" ]; then
    try_prefix "$NCCL_HOME"
    echo "find_nccl.sh: NCCL_HOME=$NCCL_HOME holds no include/nccl.h with lib*/libnccl.so*" >&2
    exit 1
fi
try_prefix "$CUDA_HOME"
nvcc_path=$(command -v nvcc 2>/dev/null)
[ -n "$nvcc_path" ] && try_prefix "$(dirname "$(dirname "$nvcc_path")")"
[ -n "$nvcc_path" ] && try_prefix "$(dirname "$(dirname "$nvcc_path")")/cuda"
try_prefix /usr/local/cuda
try_prefix /usr/local
try_prefix /usr
for py in python3 python; do
    wheel=$($py -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) || continue
    [ -n "$wheel" ] && try_prefix "$wheel"
done
exit 1

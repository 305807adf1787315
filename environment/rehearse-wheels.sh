#!/usr/bin/env bash
# Rehearses a GPU machine that has only a driver (no CUDA toolkit, no NCCL, no PyTorch) on a
# machine without a GPU: PyTorch from PyPI (requirements-pytorch-pypi.lock.txt) installed for
# real by `install.sh --pytorch-from-pypi`, Horovod 0.28.1 built by it with NCCL operations, and
# both CUDA programs built, all against NVIDIA's PyPI wheels alone (`make rehearse-wheels`).
#
# Usage: environment/rehearse-wheels.sh [--work DIR] [--arch CC] [--keep-venv] [--help]
#   --work DIR    where the wheels, the venv, the program copies and the log go
#                 (default build/rehearse-wheels; the wheel folder is reused by a second run)
#   --arch CC     the one compute capability to build for (default 90, the H200's)
#   --keep-venv   reuse WORK/venv (default: a fresh venv, so the install is timed from nothing)
#
# Steps:
#   A. pip download, with the lock's hashes, the wheels this Python and platform need, pip
#      itself and Horovod's sdist into WORK/wheels: their size, and the time when fetched
#   B. in a mount namespace (unshare, as root) where every /usr/local/cuda* and /opt/cuda* folder
#      is an empty one, with PATH=/usr/bin:/bin and CUDA_HOME, CUDA_PATH, NCCL_HOME and the
#      HOROVOD_* variables unset: first a check that no nvcc, CUDA runtime or NCCL is left in
#      sight, then install.sh --pytorch-from-pypi --venv WORK/venv offline from WORK/wheels
#      (PIP_NO_INDEX=1 PIP_FIND_LINKS=WORK/wheels), timed, then `make` of copies of the P2P test
#      and nccl_bench (SMS=CC) with WORK/venv/bin first on PATH, as a notebook's kernel has it
#   C. the checks: which nvcc and NCCL the builds used, what the programs and Horovod's PyTorch
#      library load (ldd), and `horovodrun --check-build` listing PyTorch, NCCL and Gloo
# Passes when every check does; the log is WORK/rehearse.log (appended). No GPU is used.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
work="$root/build/rehearse-wheels"
arch=90
keep_venv=0
pip_version=24.3.1
horovod_version=0.28.1

die() { echo "rehearse-wheels.sh: error: $*" >&2; exit 2; }
fail() { echo "rehearse-wheels.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
inner=0
while (($#)); do
  case "$1" in
    --work) [[ $# -ge 2 && -n $2 ]] || die "--work needs a directory (try --help)"
            work=$2; shift ;;
    --arch) [[ $# -ge 2 ]] || die "--arch needs a compute capability such as 90 (try --help)"
            [[ $2 =~ ^[1-9][0-9]{1,2}$ ]] \
              || die "--arch '$2' is not a compute capability such as 80, 90 or 100"
            arch=$2; shift ;;
    --keep-venv) keep_venv=1 ;;
    --inside) inner=1 ;;  # internal: the part that runs in the mount namespace
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
  shift
done
case $work in /*) ;; *) work="$PWD/$work" ;; esac
say() { printf '[rehearse-wheels] %s\n' "$*"; }
lock=$here/requirements-pytorch-pypi.lock.txt
venv=$work/venv
first_word() { sed -n "s/$1/\\1/p" | sort -u | paste -sd' '; }  # SED-PATTERN: its \1, one line

# --- B and C, inside the namespace -----------------------------------------------------------
if ((inner)); then
  left=()
  if command -v nvcc >/dev/null 2>&1; then left+=("$(command -v nvcc)"); fi
  for f in /usr/include/nccl.h /usr/include/cuda_runtime.h \
           /usr/local/include/nccl.h /usr/local/include/cuda_runtime.h; do
    [[ -e $f ]] && left+=("$f")
  done
  for l in libcudart.so libcudart_static.a libnccl.so libnccl.so.2 libnccl_static.a; do
    p=$(gcc -print-file-name="$l"); [[ $p == "$l" ]] || left+=("$p")
  done
  while read -r f; do [[ -e $f ]] && left+=("$f"); done \
    < <(ldconfig -p 2>/dev/null | awk '/libnccl|libcudart/ {print $NF}')
  ((${#left[@]} == 0)) || fail "CUDA or NCCL of this machine is still in sight: ${left[*]}"
  say "step B: no nvcc, CUDA runtime or NCCL of this machine in sight" \
      "(PATH=$PATH; /usr/local/cuda* hidden)"
  ((keep_venv)) || rm -rf "$venv"
  SECONDS=0
  rc=0
  PIP_NO_INDEX=1 PIP_FIND_LINKS=$work/wheels HOROVOD_BUILD_CUDA_CC_LIST=$arch \
    bash "$here/install.sh" --pytorch-from-pypi --venv "$venv" || rc=$?
  install_s=$SECONDS
  ((rc == 0)) || fail "install.sh --pytorch-from-pypi failed (exit $rc) after ${install_s}s;" \
                      "logs in $venv/install-logs"
  say "step B: install.sh --pytorch-from-pypi, offline from the wheel folder: ${install_s}s"
  mkdir -p "$work/src"
  rm -rf "$work/src"/{cuda_common,p2pBandwidthLatencyTest,nccl_bench}
  cp -r "$root"/source_code/{cuda_common,p2pBandwidthLatencyTest,nccl_bench} "$work/src/"
  export PATH="$venv/bin:$PATH"
  for d in p2pBandwidthLatencyTest nccl_bench; do
    blog=$work/src/$d.build.log
    make -s -C "$work/src/$d" clean >/dev/null
    SECONDS=0
    if ! make -C "$work/src/$d" SMS="$arch" >"$blog" 2>&1; then
      tail -20 "$blog" >&2; fail "make in $d failed (log $blog)"
    fi
    used=$(first_word '^\([^ ]*nvcc\) .*' <"$blog")
    say "step B: make -C $d SMS=$arch: ${SECONDS}s, compiler $used"
  done

  say "step C: the checks"
  p2p=$work/src/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest nb=$work/src/nccl_bench/nccl_bench
  runs=$(sed -n 's/^exec "\([^"]*\)".*/\1/p' "$venv/bin/nvcc")
  say "nvcc: $(command -v nvcc) -> $runs ($(nvcc --version | first_word '.*\(release [0-9.]*\).*'))"
  say "NCCL found by find_nccl.sh: $(sh "$work/src/nccl_bench/find_nccl.sh")"
  needs=$(readelf -d "$p2p" | first_word '.*Shared library: \[\(.*\)\].*')
  say "P2P test needs: $needs (CUDA runtime linked statically from" \
      "$(readlink -f "$venv/cuda/lib64/libcudart_static.a"))"
  nccl_at=$(ldd "$nb" | sed -n 's/.*libnccl.so.2 => \([^ ]*\).*/\1/p')
  say "nccl_bench loads libnccl.so.2 from $nccl_at -> $(readlink -f "$nccl_at")"
  [[ $(readlink -f "$nccl_at") == "$venv"/* ]] \
    || fail "nccl_bench's NCCL is not the wheel's: $nccl_at"
  lib=$(compgen -G "$venv/lib/python3*/site-packages/horovod/torch/mpi_lib_v2*.so" | head -1)
  [[ -n $lib ]] || fail "no horovod/torch/mpi_lib_v2*.so in $venv"
  hv_nccl=$("$venv/bin/python" - "$lib" <<'PY'
import ctypes, sys
import torch  # noqa: F401  loads the wheel's CUDA and NCCL first, as `import horovod.torch` does
ctypes.CDLL(sys.argv[1])
maps = open("/proc/self/maps").read().split("\n")
print(" ".join(sorted({l.split()[-1] for l in maps if "libnccl" in l or "libcudart" in l})))
PY
)
  needs=$(readelf -d "$lib" | first_word '.*Shared library: \[\(lib\(nccl\|cudart\)[^]]*\)\].*')
  say "Horovod's PyTorch library $(basename "$lib") needs $needs; loaded with torch: $hv_nccl"
  [[ $hv_nccl != *"/usr/local/cuda"* && $hv_nccl == *"$venv"* ]] \
    || fail "Horovod's CUDA/NCCL libraries are not the wheels': $hv_nccl"
  check=$("$venv/bin/horovodrun" --check-build)
  printf '%s\n' "$check" | sed 's/^/[rehearse-wheels]   /'
  for want in PyTorch NCCL Gloo; do
    grep -q -E "\[X\] $want\b" <<<"$check" || fail "horovodrun --check-build does not list $want"
  done
  "$venv/bin/python" -c 'import horovod.torch as h; assert h.nccl_built() and h.gloo_built()'
  say "horovod.torch: nccl_built() and gloo_built() are true"
  echo "install_s=$install_s" >"$work/.inside-result"
  exit 0
fi

# --- A. the wheels, outside ------------------------------------------------------------------
mkdir -p "$work/wheels"
log=$work/rehearse.log
exec > >(tee -a "$log") 2>&1
say "$(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname) ($(nproc) cores):" \
    "PyTorch from PyPI against the wheels alone, sm_$arch"
# The Python install.sh will pick inside (same PATH): the lock's markers can differ by its version.
py=$(env -i HOME="$HOME" PATH=/usr/bin:/bin bash "$here/flavour.sh" --pypi --print python \
     2>/dev/null || true)
[[ -n $py ]] || fail "no Python 3.10-3.12 with venv on PATH=/usr/bin:/bin for install.sh to take"
"$py" -m pip --version >/dev/null 2>&1 || fail "$py (the Python install.sh takes) has no pip"
pip_get=("$py" -m pip download --disable-pip-version-check --no-input -q --no-deps
         -d "$work/wheels")
before=$(du -sb "$work/wheels" | cut -f1)
SECONDS=0
"${pip_get[@]}" --require-hashes -r "$lock" \
  || fail "pip download of $(basename "$lock") failed (no PyPI?)"
"${pip_get[@]}" "pip==$pip_version" || fail "pip download pip==$pip_version failed"
"${pip_get[@]}" --no-binary=:all: "horovod==$horovod_version" \
  || fail "pip download of Horovod's sdist failed"
fetch_s=$SECONDS
after=$(du -sb "$work/wheels" | cut -f1)
lock_bytes=$("$py" - "$lock" "$work/wheels" <<'PY'
import pathlib, re, sys
def norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()
names = {norm(l.split("==")[0]) for l in open(sys.argv[1]) if re.match(r"[A-Za-z0-9]", l)}
found = [f for f in pathlib.Path(sys.argv[2]).glob("*.whl") if norm(f.name.split("-")[0]) in names]
print(sum(f.stat().st_size for f in found), len(found))
PY
)
read -r lock_bytes lock_files <<<"$lock_bytes"
fetched=$(( (after - before) / 1000000 ))
if ((fetched > 0)); then got="fetched now: $fetched MB in ${fetch_s}s"
else got="all already in $work/wheels (checked in ${fetch_s}s)"; fi
say "step A: $lock_files wheels of $(basename "$lock") for $("$py" --version) on $(uname -m):" \
    "$((lock_bytes / 1000000)) MB; $got"

# --- B and C in a mount namespace with this machine's CUDA hidden --------------------------------
hide=()
for d in /usr/local/cuda* /opt/cuda*; do [[ -d $d && ! -L $d ]] && hide+=("$d"); done
if ((${#hide[@]})); then
  if [[ $(id -u) != 0 ]] || ! command -v unshare >/dev/null 2>&1; then
    fail "this machine's CUDA (${hide[*]}) must be hidden for the rehearsal:" \
         "run as root with unshare (util-linux)"
  fi
fi
mkdir -p "$work/empty"
mounts=""
for d in "${hide[@]}"; do mounts+="mount --bind '$work/empty' '$d' && "; done
args=(--inside --work "$work" --arch "$arch")
((keep_venv)) && args+=(--keep-venv)
rm -f "$work/.inside-result"
inside=(env -i HOME="$HOME" PATH=/usr/bin:/bin LANG=C.UTF-8 TERM=dumb
        bash "$here/rehearse-wheels.sh" "${args[@]}")
SECONDS=0
if ((${#hide[@]})); then
  unshare --mount --propagation private bash -c "${mounts}exec \"\$@\"" _ "${inside[@]}" \
    || fail "the rehearsal failed (above)"
else
  "${inside[@]}" || fail "the rehearsal failed (above)"
fi
# shellcheck source=/dev/null
source "$work/.inside-result"
say "PASSED in ${SECONDS}s: download $((lock_bytes / 1000000)) MB ($lock_files wheels);" \
    "install.sh offline ${install_s}s (pip install and Horovod's build for sm_$arch," \
    "$(nproc) cores);" \
    "both CUDA programs and Horovod's NCCL operations built against the wheels alone. Log: $log"

#!/usr/bin/env bash
# Rehearses the GPU image's riskiest step, `environment/install.sh --gpu`, on a machine without
# a GPU or a CUDA 12 toolkit: TensorFlow 2.15.1 (GPU wheel) installed for real into a separate
# venv, then Horovod 0.28.1 built by install.sh with NCCL operations against CUDA 12.2 and NCCL 2.19.
#
# Usage: environment/rehearse-gpu.sh [--work DIR] [--arch CC] [--help]
#        environment/rehearse-gpu.sh --arrange SRC ROOT
#   --work DIR      where the wheels, the toolkit root, the venv and the log go
#                   (default: build/rehearse-gpu; a second run reuses what is there)
#   --arch CC       the one compute capability to build for, e.g. 80 (default 80; the image builds 70-90)
#   --arrange SRC ROOT  only arrange a toolkit root ROOT from SRC, a folder holding the unpacked
#                   wheels (nvidia/cuda_runtime, nvidia/cuda_nvcc, nvidia/nccl) and the unpacked
#                   compiler package (usr/...); then check ROOT/bin/nvcc is CUDA 12 and stop
#
# What the toolkit root is made of (the versions the image's base, nvidia/cuda:12.2.2-cudnn8-devel,
# carries, where a registry has them):
#   - nvidia-cuda-runtime-cu12==12.2.140   CUDA 12.2 runtime headers and libcudart.so.12 (PyPI)
#   - nvidia-cuda-nvcc-cu12==12.2.140      CUDA 12.2 compiler headers (crt/), ptxas, libdevice (PyPI)
#   - nvidia-nccl-cu12==2.19.3             NCCL 2.19.3 header and libnccl.so.2 (PyPI)
#   - nvidia-cuda-toolkit 12.4.131 (Debian trixie, non-free; 12.4.131~12.4.1-2 in 2026-11): the nvcc
#     driver, cicc, cudafe++, ptxas, fatbinary, nvlink. No PyPI nvidia-cuda-nvcc-cu12 wheel ships the
#     nvcc driver (12.2.140, 12.3.107, 12.4.131, 12.6.85 and 12.9.86 hold ptxas only; checked with
#     pip download and unzip -l) and no registry reachable here has CUDA 12.2's, so
#     device code is compiled by CUDA 12.4's nvcc against the CUDA 12.2 headers. The .deb is
#     unpacked into the work folder, never installed; the machine's own nvcc is not used.
# Differences from the image, all forced by what PyPI ships: the CUDA runtime and NCCL are linked
# as shared libraries (the image links libcudart_static.a and libnccl_static.a), set through a
# CMake toolchain file named by CMAKE_TOOLCHAIN_FILE, and lib64/libcudadevrt.a is an empty archive
# (Horovod has no relocatable device code); install.sh itself runs unchanged. The linker searches
# the root's lib64 (LIBRARY_PATH) before the system's folders, so no CUDA 13 library is linked.
# Passes when `horovodrun --check-build` lists TensorFlow, NCCL and Gloo and
# `import horovod.tensorflow` works. The log is WORK/rehearse.log.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
work="$root/build/rehearse-gpu"
arch=80
arrange_src='' arrange_root=''

nvcc_wheel=nvidia-cuda-nvcc-cu12==12.2.140
runtime_wheel=nvidia-cuda-runtime-cu12==12.2.140
nccl_wheel=nvidia-nccl-cu12==2.19.3
# Debian's revision may move within trixie (a stable update); any CUDA 12 nvcc it has will do,
# and step C refuses anything else. 12.4.131~12.4.1-2 is the one the recorded runs used.
compiler_deb=nvidia-cuda-toolkit
debian_suite="trixie non-free"

die() { echo "rehearse-gpu.sh: error: $*" >&2; exit 2; }
fail() { echo "rehearse-gpu.sh: error: $*" >&2; exit 1; }
usage() { sed -n '6,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --work) [[ $# -ge 2 && -n $2 ]] || die "--work needs a directory (try --help)"; work=$2; shift ;;
    --arch) [[ $# -ge 2 ]] || die "--arch needs a compute capability such as 80 (try --help)"
            [[ $2 =~ ^[1-9][0-9]$ ]] || die "--arch '$2' is not a compute capability such as 70, 80 or 90"
            arch=$2; shift ;;
    --arrange) [[ $# -ge 3 && -n $2 && -n $3 ]] || die "--arrange needs SRC and ROOT (try --help)"
               arrange_src=$2; arrange_root=$3; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (try --help)" ;;
  esac
  shift
done

say() { printf '[rehearse] %s\n' "$*"; }

# arrange SRC ROOT: a CUDA toolkit root as CMake and Horovod expect one (bin/nvcc, include/,
# lib64/ with the unversioned .so names the linker looks for, nvvm/), from the unpacked wheels
# and the unpacked compiler package in SRC.
arrange() {
  local src=$1 dst=$2 f
  local need=(nvidia/cuda_runtime/include/cuda_runtime_api.h nvidia/cuda_runtime/lib/libcudart.so.12
              nvidia/cuda_nvcc/include/crt/host_config.h nvidia/nccl/include/nccl.h nvidia/nccl/lib/libnccl.so.2
              usr/lib/nvidia-cuda-toolkit/bin/nvcc usr/lib/nvidia-cuda-toolkit/bin/cicc
              usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc
              usr/bin/cudafe++ usr/bin/ptxas usr/bin/fatbinary usr/bin/nvlink usr/bin/bin2c)
  [[ -d $src ]] || die "--arrange: $src is not a directory"
  for f in "${need[@]}"; do
    [[ -e $src/$f ]] || die "$src lacks $f (an incomplete or wrong wheel or package)"
  done
  rm -rf "$dst"
  mkdir -p "$dst"/{bin/crt,include,lib64,nvvm/bin,nvvm/libdevice}
  cp -r "$src"/nvidia/cuda_runtime/include/. "$src"/nvidia/cuda_nvcc/include/. "$src"/nvidia/nccl/include/. "$dst/include/"
  find "$dst/include" -name __init__.py -delete
  cp "$src"/nvidia/cuda_runtime/lib/libcudart.so.12 "$src"/nvidia/nccl/lib/libnccl.so.2 "$dst/lib64/"
  ln -s libcudart.so.12 "$dst/lib64/libcudart.so"
  ln -s libnccl.so.2 "$dst/lib64/libnccl.so"
  # CMake links CUDA code with -lcudadevrt, the runtime for relocatable device code, which the
  # wheels lack; Horovod's kernels have none, so an empty archive stands in (the linker takes
  # nothing from it) and the machine's CUDA 13 copy is never searched.
  ar rc "$dst/lib64/libcudadevrt.a"
  local tk=$src/usr/lib/nvidia-cuda-toolkit
  cp "$tk/bin/nvcc" "$src"/usr/bin/{cudafe++,ptxas,fatbinary,nvlink,bin2c} "$dst/bin/"
  if [[ -d $tk/bin/crt ]]; then cp "$tk"/bin/crt/* "$dst/bin/crt/"; fi
  cp "$tk/bin/cicc" "$dst/nvvm/bin/"
  cp "$tk/libdevice/libdevice.10.bc" "$dst/nvvm/libdevice/"
  # nvcc reads bin/nvcc.profile: where its tools, headers and libraries are, relative to itself.
  cat >"$dst/bin/nvcc.profile" <<'PROFILE'
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
PATH += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/lib64"
PROFILE
}

# check_root ROOT: says which nvcc and which CUDA runtime / NCCL headers the build will use;
# refuses anything but a CUDA 12 nvcc (the machine's CUDA 13 must never stand in).
check_root() {
  local dst=$1 release cudart nccl
  release=$("$dst/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p') || true
  [[ -n $release ]] || die "$dst/bin/nvcc does not run or prints no release"
  [[ $release == 12.* ]] || die "$dst/bin/nvcc is CUDA $release, not CUDA 12 (the image's TensorFlow 2.15.1 needs CUDA 12)"
  cudart=$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' "$dst/include/cuda_runtime_api.h")
  nccl=$(sed -n 's/^#define NCCL_VERSION_CODE *\([0-9]*\).*/\1/p' "$dst/include/nccl.h")
  say "toolkit root: $dst"
  say "nvcc: $dst/bin/nvcc (CUDA $release)"
  say "CUDA runtime headers: CUDART_VERSION $cudart; NCCL header: NCCL_VERSION_CODE $nccl"
}

if [[ -n $arrange_src ]]; then
  arrange "$arrange_src" "$arrange_root"
  check_root "$arrange_root"
  exit 0
fi

# --- the full rehearsal ---------------------------------------------------------------------
case $work in /*) ;; *) work="$PWD/$work" ;; esac
mkdir -p "$work"
log="$work/rehearse.log"
exec > >(tee -a "$log") 2>&1
say "$(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname) ($(nproc) cores): rehearsal of install.sh --gpu, arch sm_$arch"
SECONDS=0

py=$(command -v python3.11 || command -v python3.10 || command -v python3) || fail "no python3 on PATH"
src="$work/src"
mkdir -p "$work/wheels" "$src"
say "step A: the pinned CUDA/NCCL wheels from PyPI ($runtime_wheel $nvcc_wheel $nccl_wheel)"
"$py" -m pip download --disable-pip-version-check --no-input --no-deps -q -d "$work/wheels" \
  "$runtime_wheel" "$nvcc_wheel" "$nccl_wheel"
for w in "$work"/wheels/nvidia_cuda_runtime_cu12-12.2.140-*.whl "$work"/wheels/nvidia_cuda_nvcc_cu12-12.2.140-*.whl \
         "$work"/wheels/nvidia_nccl_cu12-2.19.3-*.whl; do
  [[ -f $w ]] || fail "pip download did not leave $w"
  "$py" -m zipfile -e "$w" "$src"
done

say "step B: the CUDA 12 compiler from Debian ($compiler_deb of $debian_suite), unpacked, not installed"
apt_dir="$work/apt"
mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,debs}
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian ${debian_suite}" >"$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::lists=$apt_dir/lists"
          -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
if ! compgen -G "$apt_dir/debs/nvidia-cuda-toolkit_*.deb" >/dev/null; then
  apt-get "${apt_opts[@]}" -qq update || fail "apt-get update for Debian ${debian_suite} failed (no network to the Debian mirror?)"
  (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" -qq download "$compiler_deb") || fail "apt-get download $compiler_deb failed"
fi
deb=$(compgen -G "$apt_dir/debs/nvidia-cuda-toolkit_*.deb" | tail -1)
say "$(basename "$deb") ($(dpkg-deb -f "$deb" Version))"
dpkg-deb -x "$deb" "$src"

say "step C: arranging the toolkit root"
tk="$work/cuda-12"
arrange "$src" "$tk"
check_root "$tk"
say "machine's own nvcc (NOT used): $(command -v nvcc || echo none) $(nvcc --version 2>/dev/null | sed -n 's/.*\(release [0-9.]*\).*/\1/p')"

# The image links libcudart_static.a and libnccl_static.a, which PyPI does not ship: link shared.
cat >"$work/shared-cudart.cmake" <<'CMAKE'
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared CACHE STRING "PyPI's CUDA runtime wheel has no libcudart_static.a")
CMAKE

say "step D: environment/install.sh --gpu (the Dockerfile's command, one architecture)"
# No other CUDA on PATH or in the usual variables: only the root's nvcc can be found.
clean_path=$(tr ':' '\n' <<<"$PATH" | grep -v -E '^/usr/local/cuda[^/]*/' | paste -sd:)
rc=0
env -u CUDA_PATH -u CUDAToolkit_ROOT -u CUDACXX \
  PATH="$tk/bin:$clean_path" CUDA_HOME="$tk" HOROVOD_CUDA_HOME="$tk" HOROVOD_NCCL_HOME="$tk" \
  HOROVOD_NCCL_LINK=SHARED CMAKE_TOOLCHAIN_FILE="$work/shared-cudart.cmake" LIBRARY_PATH="$tk/lib64" \
  LD_LIBRARY_PATH="$tk/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  HOROVOD_BUILD_CUDA_CC_LIST="$arch" PYTHON="$py" \
  bash "$here/install.sh" --gpu --venv "$work/venv" || rc=$?
venv="$work/venv"
hlog="$venv/install-logs/horovod.log"
if [[ -f $hlog ]]; then
  say "what Horovod's build log ($hlog) says about CUDA and NCCL:"
  grep -E 'CUDA compiler identification|Found CUDAToolkit|Found NCCL|NCCL version from the header|NCCL_(MAJOR_VERSION|VERSION_CODE)|Linking against (shared|static) NCCL|HVD_NVCC_COMPILE_FLAGS' "$hlog" \
    | awk '!seen[$0]++' | sed 's/^/[rehearse]   /' || true
  grep -E -o '[^ ]*nvcc [^ ]* .*cuda_kernels\.cu' "$hlog" | head -1 | cut -c1-400 | sed 's/^/[rehearse]   kernels: /' || true
  grep -E 'nccl_operations\.cc' "$hlog" | grep -o -E '(-isystem|-I) *[^ ]*cuda-12[^ ]*' | sort -u | sed 's/^/[rehearse]   nccl_operations.cc includes: /' || true
fi
((rc == 0)) || { echo "[rehearse] FAILED: install.sh --gpu exit $rc after ${SECONDS}s" >&2; exit 1; }

say "step E: the checks"
export LD_LIBRARY_PATH="$tk/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TF_CPP_MIN_LOG_LEVEL=3
for l in libcudart.so libcudadevrt.a libnccl.so; do
  say "the build's linker finds $l at $(LIBRARY_PATH="$tk/lib64" gcc -print-file-name=$l)"
done
lib=$("$venv/bin/python" -c 'import glob, os, horovod.tensorflow as h; print(glob.glob(os.path.join(os.path.dirname(h.__file__), "mpi_lib*.so"))[0])')
needed=$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\].*/\1/p' | paste -sd' ')
say "Horovod's TensorFlow library $lib needs: $needed"
[[ $needed != *.so.13* ]] || fail "Horovod's library needs a CUDA 13 library: $needed"
say "its libnccl.so.2 resolves to $(ldd "$lib" | sed -n 's/.*libnccl.so.2 => \([^ ]*\).*/\1/p')"
# The CUDA runtime functions Horovod calls: TensorFlow's framework library exports them (it carries
# its own CUDA 12.2 runtime), so they resolve there whether libcudart is linked or not.
tf_fw=$(dirname "$(dirname "$lib")")/../tensorflow/libtensorflow_framework.so.2
uses=$(nm -D --undefined-only "$lib" | awk '$2 ~ /^cuda/ {print $2}' | sort -u)
gives=$(nm -D --defined-only "$tf_fw" | awk '$3 ~ /^cuda/ {print $3}' | sort -u)
say "CUDA runtime functions Horovod calls: $(wc -w <<<"$uses"), of them exported by TensorFlow's libtensorflow_framework.so.2: $(comm -12 <(echo "$uses") <(echo "$gives") | wc -l)"
"$venv/bin/python" - <<'PY'
import horovod, horovod.tensorflow as hvd, tensorflow as tf
print(f"[rehearse] horovod {horovod.__version__} tensorflow {tf.__version__} (built with CUDA: {tf.test.is_built_with_cuda()}, "
      f"CUDA {tf.sysconfig.get_build_info().get('cuda_version')})")
print(f"[rehearse] hvd.cuda_built()={hvd.cuda_built()} hvd.nccl_built()={hvd.nccl_built()} hvd.gloo_built()={hvd.gloo_built()}")
assert hvd.cuda_built() and hvd.nccl_built() and hvd.gloo_built()
PY
check=$("$venv/bin/horovodrun" --check-build)
printf '%s\n' "$check" | sed 's/^/[rehearse]   /'
missing=()
for want in TensorFlow NCCL Gloo; do
  grep -q -E "\[X\] $want\b" <<<"$check" || missing+=("$want")
done
# Horovod 0.28.1's check marks a framework when its Python package imports, and horovod.torch
# imports without its compiled extension: say whether that extension really exists.
torch_ext=$(compgen -G "$venv/lib/python*/site-packages/horovod/torch/mpi_lib_v2*.so" || true)
say "horovod.torch extension: ${torch_ext:-none built (HOROVOD_WITHOUT_PYTORCH=1); a [X] PyTorch above means only that its Python package imports}"
if ((${#missing[@]})); then
  echo "[rehearse] FAILED: horovodrun --check-build does not list ${missing[*]} (${SECONDS}s)" >&2
  exit 1
fi
say "PASSED in ${SECONDS}s: TensorFlow 2.15.1 + Horovod 0.28.1 with NCCL and Gloo, built by install.sh --gpu. Log: $log"

#!/usr/bin/env bash
# The one install script of the course. `make lab`, `make test`, the Dockerfile and the
# Apptainer definition all call it, so the tested path and the container path cannot drift.
#
# Usage: environment/install.sh [--framework tensorflow|pytorch] [--gpu|--cpu] [--venv DIR]
#                               [--pytorch-from-pypi] [--with-dataset] [--with-lab] [--dry-run]
#                               [--help]
#   --framework F   tensorflow: TensorFlow 2.15.1 + Horovod for Keras (its CPU or GPU set).
#                   pytorch: no TensorFlow; Horovod built for PyTorch, with NCCL operations when
#                   that PyTorch has CUDA; on top of a Python that already has PyTorch (an NGC
#                   container, a cluster module, a conda env; a CPU-only build only where no
#                   CUDA one can come: no GPU, or rule 5's PyPI unreachable), else PyTorch from
#                   PyPI (rule 5 below).
#                   Not given: the rule below. An existing venv keeps its framework.
#   --gpu           TensorFlow's GPU set (Horovod with NCCL operations); with pytorch: require CUDA
#   --cpu           TensorFlow's CPU set (tensorflow-cpu); with pytorch: Horovod with Gloo only.
#                   Alone, --gpu and --cpu mean TensorFlow; an existing TensorFlow venv switches set
#   --pytorch-from-pypi  the PyTorch flavour with PyTorch, nvcc and NCCL from PyPI (rule 5 below)
#                   even where a Python already has PyTorch
#   --venv DIR      virtual environment to create or reuse (default: .venv for TensorFlow,
#                   .venv-pytorch for PyTorch, at the repo root, as make uses them)
#   --with-dataset  make sure Fashion-MNIST is on this machine (see step 6)
#   --with-lab      pytorch: also JupyterLab (requirements-lab.txt; `make lab` asks for it);
#                   the TensorFlow sets and PyTorch from PyPI always have it
#   --dry-run       print the set chosen and why, and what would be installed; change nothing
#   PYTHON=/path    use this interpreter (tensorflow: 3.9, 3.10 or 3.11; pytorch: one that
#                   imports torch, else 3.10-3.12 for PyTorch from PyPI)
#
# Which set, when none is named (make lab, make course, make check, make install without
# FRAMEWORK; environment/flavour.sh is the rule's one implementation, make and this script call it):
#   1. an existing venv keeps its flavour (make: .venv-pytorch or .venv, whichever exists);
#   2. no GPU listed by `nvidia-smi`: the TensorFlow CPU set, in .venv;
#   3. GPUs, and a Python ($PYTHON, python3, python) imports a CUDA build of PyTorch, with nvcc and
#      NCCL here to build Horovod's NCCL operations: the PyTorch flavour on it, in .venv-pytorch;
#   4. GPUs, no such PyTorch, a CUDA 12 toolkit (TensorFlow 2.15.1 is built for CUDA 12) and NCCL:
#      the TensorFlow GPU set (--gpu), in .venv;
#   5. GPUs and no toolkit to use (a workstation with only a driver): PyTorch from PyPI, in
#      .venv-pytorch: requirements-pytorch-pypi.lock.txt, PyTorch 2.11.0 for CUDA 13.0 with NVIDIA's
#      wheels of nvcc 13.0 and NCCL 2.28.9 (about 3 GB), when the driver is 580 or newer (CUDA 13),
#      a Python 3.10-3.12 is there and the package index answers (PIP_INDEX_URL, pip's index-url,
#      or PIP_NO_INDEX=1 with PIP_FIND_LINKS folders holding the wheels);
#   6. otherwise the TensorFlow CPU set, with one line saying what runs live and the one command
#      that gets the GPU path.
# One line before the install (`[install] chosen: ...`) says what was chosen and why.
#
# Steps (each logged to DIR/install-logs/<step>.log; a failure names the step and its log):
#   0. pytorch only, before anything is created: PyTorch, and for a CUDA build of it nvcc and
#      NCCL, must be there; a missing one is named in one line (exit 1)
#   1. find a Python that TensorFlow 2.15 supports (3.11, 3.10, 3.9)   [$PYTHON overrides]
#   2. create the virtual environment DIR if missing
#   3. pip install the locked requirements (CPU or GPU set: requirements-<set>.lock.txt, every
#      package pinned with its sha256, checked by pip --require-hashes), skipped when unchanged;
#      PyTorch from PyPI: requirements-pytorch-pypi.lock.txt, then DIR/cuda, a CUDA toolkit root
#      of links into its nvcc, CUDA runtime and NCCL wheels, and DIR/bin/nvcc that runs it
#   4. build Horovod 0.28.1 from source, skipped when the right build is already there
#      (pytorch: the sdist gets the edits of environment/patch-horovod.py first)
#   5. make the course package `gputopo` importable (a .pth file pointing at source_code/)
#   6. with --with-dataset: skipped when the loader finds verified data; else Debian's
#      dataset-fashion-mnist where apt and root exist; else the official download (MD5-checked);
#      if all fail, a warning (the course still runs in reference mode) naming the ways to get it
# Running it again skips every step that is already done, and says so.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
venv=
flavour=
dry_run=0
from_pypi=0
framework=
with_dataset=0
with_lab=0
horovod_version=0.28.1
pip_version=24.3.1

usage() { sed -n '5,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --framework) [[ $# -ge 2 && -n $2 ]] || { echo "install.sh: error: --framework needs tensorflow or pytorch (try --help)" >&2; exit 2; }
                 framework=$2; shift ;;
    --framework=*) framework=${1#--framework=} ;;
    --gpu) flavour=gpu ;;
    --cpu) flavour=cpu ;;
    --venv) [[ $# -ge 2 && -n $2 ]] || { echo "install.sh: error: --venv needs a directory (try --help)" >&2; exit 2; }
            venv=$2; shift ;;
    --venv=*) venv=${1#--venv=} ;;
    --with-dataset) with_dataset=1 ;;
    --with-lab) with_lab=1 ;;
    --dry-run) dry_run=1 ;;
    --pytorch-from-pypi) from_pypi=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
case $framework in
  ''|tensorflow|pytorch) ;;
  *) echo "install.sh: error: --framework must be tensorflow or pytorch, not '$framework' (try --help)" >&2; exit 2 ;;
esac
[[ -z $venv ]] || case $venv in /*) ;; *) venv="$PWD/$venv" ;; esac
# A venv holds one framework: asking it for the other is refused before anything is looked at.
if [[ $framework == tensorflow && -f $venv/.requirements-pytorch.sha256 ]]; then
  echo "install.sh: error: $venv holds the PyTorch flavour; give TensorFlow another --venv (make uses .venv for TensorFlow, .venv-pytorch for PyTorch)" >&2
  exit 1
fi
if [[ $framework == pytorch && -x $venv/bin/python && ! -f $venv/.requirements-pytorch.sha256 ]] \
   && ls "$venv"/.requirements-*.sha256 >/dev/null 2>&1; then
  echo "install.sh: error: $venv holds the TensorFlow set; give PyTorch another --venv (make FRAMEWORK=pytorch uses .venv-pytorch)" >&2
  exit 1
fi
# Which set: environment/flavour.sh (the rule of --help, shared with the Makefile). It returns
# framework, set (cpu/gpu), torch (env: this machine's PyTorch; pypi: PyTorch from PyPI), the
# Python to build from, the venv, and one line saying why.
asked=()
if ((from_pypi)); then
  if [[ -n $framework && $framework != pytorch ]]; then
    echo "install.sh: error: --pytorch-from-pypi is the PyTorch flavour, not --framework" \
         "$framework (try --help)" >&2
    exit 2
  fi
  framework=pytorch asked+=(--pypi)
fi
[[ -z $framework ]] || asked+=(--framework "$framework")
[[ -z $flavour ]] || asked+=("--$flavour")
[[ -z $venv ]] || asked+=(--venv "$venv")
decision=$("$BASH" "$here/flavour.sh" "${asked[@]}") || exit $?
torch_from='' chosen_python='' why=''
while IFS= read -r line; do
  case ${line%%=*} in
    framework) framework=${line#*=} ;;
    set) flavour=${line#*=} ;;
    torch) torch_from=${line#*=} ;;
    python) chosen_python=${line#*=} ;;
    venv) venv=${line#*=} ;;
    why) why=${line#*=} ;;
  esac
done <<<"$decision"
if [[ $framework == pytorch && $torch_from == none ]]; then
  echo "install.sh: error: --framework pytorch needs a Python (3.9 or newer) that already has" \
       "PyTorch, or PyTorch from PyPI: $why (install PyTorch, set PYTHON=/path/to/python, or use" \
       "--framework tensorflow)" >&2
  exit 1
fi
printf '[install] chosen: %s -> %s\n' "$why" "$venv"
other=$([[ $flavour == cpu ]] && echo gpu || echo cpu)

say() { printf '[install] %s\n' "$*"; }
logdir="$venv/install-logs"
# run_step NAME CMD...: runs CMD with its output in a log; on failure names the step and the log.
run_step() {
  local name=$1; shift
  mkdir -p "$logdir"
  local log="$logdir/$name.log" rc=0
  if [[ -t 1 ]]; then
    # On a terminal show the tool's own progress (pip's bars, the compiler's lines) and keep a log.
    "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
  else
    # In CI or a docker build: a progress line every 15 s instead of thousands of lines.
    "$@" >"$log" 2>&1 &
    local pid=$! t=0
    while kill -0 "$pid" 2>/dev/null; do
      sleep 1; t=$((t + 1))
      if ((t % 15 == 0)) && kill -0 "$pid" 2>/dev/null; then
        printf '[install]   ... %s running for %ds (%s)\n' "$name" "$t" "$(tail -c 300 "$log" | tr '\n\r' '  ' | tail -c 70)"
      fi
    done
    wait "$pid" || rc=$?
  fi
  if ((rc != 0)); then
    echo "[install] FAILED at step '$name' (exit $rc). Full log: $log" >&2
    tail -n 25 "$log" | sed 's/^/[install]   | /' >&2
    exit 1
  fi
}

# --- 0. PyTorch flavour: what the build needs, checked before anything is created ---------
# Sets torch_python (the interpreter that has PyTorch), torch_site (where torch lives),
# flavour (gpu: Horovod with NCCL operations; cpu: Gloo only) and, for gpu, cuda_home,
# nccl_include, nccl_lib and cuda_cc_list. Every miss is one line naming what is missing.
torch_facts() {  # python -> "version<TAB>cuda or None<TAB>site dir<TAB>compute capabilities"
  "$1" - <<'PY' 2>/dev/null
import os, sys
if sys.version_info[:2] < (3, 9):
    sys.exit(3)
import torch
caps = sorted({"%d%d" % torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}) \
    if torch.version.cuda and torch.cuda.is_available() else []
print(torch.__version__, torch.version.cuda, os.path.dirname(os.path.dirname(torch.__file__)),
      ",".join(caps), sep="\t")
PY
}
pytorch_preflight() {
  local candidates=() c facts
  if [[ -n ${PYTHON:-} ]]; then candidates=("$PYTHON"); else candidates=(python3 python); fi
  # flavour.sh's pick first (the same search: $PYTHON, python3, python)
  [[ -n $chosen_python ]] && candidates=("$chosen_python" "${candidates[@]}")
  [[ -x $venv/bin/python ]] && candidates=("$venv/bin/python" "${candidates[@]}")
  for c in "${candidates[@]}"; do
    command -v "$c" >/dev/null 2>&1 || continue
    if facts=$(torch_facts "$c") && [[ -n $facts ]]; then torch_python=$(command -v "$c"); break; fi
  done
  if [[ -z ${torch_python:-} ]]; then
    echo "install.sh: error: --framework pytorch needs a Python (3.9 or newer) that already has PyTorch; ${candidates[*]} cannot import torch (install PyTorch, set PYTHON=/path/to/python, or use --framework tensorflow)" >&2
    exit 1
  fi
  IFS=$'\t' read -r torch_version torch_cuda torch_site torch_caps <<<"$facts"
  if [[ $torch_cuda == None || -z $torch_cuda ]]; then
    if [[ $flavour == gpu ]]; then
      echo "install.sh: error: --gpu: PyTorch $torch_version in $torch_python is a CPU-only build (torch.version.cuda is None); install a CUDA build of PyTorch or drop --gpu" >&2
      exit 1
    fi
    flavour=cpu
    say "step 0: PyTorch $torch_version (CPU-only build) in $torch_python: Horovod gets Gloo only"
    return 0
  fi
  if [[ $flavour == cpu ]]; then
    say "step 0: PyTorch $torch_version (CUDA $torch_cuda) in $torch_python; --cpu: Horovod gets Gloo only"
    return 0
  fi
  flavour=gpu
  local nvcc=
  if [[ -n ${CUDA_HOME:-} ]]; then
    [[ -x $CUDA_HOME/bin/nvcc ]] || { echo "install.sh: error: CUDA_HOME=$CUDA_HOME has no bin/nvcc, which Horovod's NCCL operations need (PyTorch $torch_version is built for CUDA $torch_cuda); point CUDA_HOME at a CUDA toolkit, or add --cpu for a Gloo-only Horovod" >&2; exit 1; }
    nvcc=$CUDA_HOME/bin/nvcc
  fi
  for c in "$nvcc" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc; do
    [[ -n $c && -x $c ]] && { nvcc=$c; break; }
  done
  if [[ -z $nvcc ]]; then
    echo "install.sh: error: PyTorch $torch_version is built for CUDA $torch_cuda, but no CUDA compiler (nvcc) was found to build Horovod's NCCL operations (looked at \$CUDA_HOME/bin, PATH, /usr/local/cuda/bin); set CUDA_HOME, or add --cpu for a Gloo-only Horovod" >&2
    exit 1
  fi
  horovod_cuda "$nvcc" "${HOROVOD_NCCL_HOME:-${NCCL_HOME:-}}"
  say "step 0: PyTorch $torch_version (CUDA $torch_cuda) in $torch_python; nvcc $nvcc; NCCL $nccl_include, $nccl_lib; architectures $cuda_cc_list"
}
# horovod_cuda NVCC [NCCL_HOME]: cuda_home, nccl_include, nccl_lib and cuda_cc_list for Horovod's
# NCCL operations (the GPUs' architectures when torch sees GPUs, else those this nvcc knows
# among V100..B200/RTX 50); no NCCL: one line, exit 1.
horovod_cuda() {
  local nvcc=$1 found
  cuda_home=$(cd "$(dirname "$nvcc")/.." && pwd)
  if ! found=$(CUDA_HOME=$cuda_home NCCL_HOME=${2:-} sh "$root/source_code/nccl_bench/find_nccl.sh" 2>/dev/null) || [[ -z $found ]]; then
    echo "install.sh: error: no NCCL found to build Horovod's NCCL operations (nccl.h and libnccl.so; looked at \$HOROVOD_NCCL_HOME/\$NCCL_HOME, $cuda_home, /usr/local, /usr and Python's nvidia-nccl wheel); install NCCL's development files (e.g. apt-get install libnccl-dev) or set NCCL_HOME" >&2
    exit 1
  fi
  nccl_include=${found%% *}
  nccl_lib=$(dirname "${found#* }")
  if [[ -n ${HOROVOD_BUILD_CUDA_CC_LIST:-} ]]; then
    cuda_cc_list=$HOROVOD_BUILD_CUDA_CC_LIST
  elif [[ -n ${torch_caps:-} ]]; then
    cuda_cc_list=$torch_caps
  else
    cuda_cc_list=$("$nvcc" --list-gpu-arch 2>/dev/null | sed -n 's/^compute_//p' | grep -xE '70|75|80|86|89|90|100|120' | paste -sd, -)
    cuda_cc_list=${cuda_cc_list:-80,90}
  fi
}
if [[ $framework == pytorch && $torch_from == env ]]; then
  pytorch_preflight
elif [[ $torch_from == pypi ]]; then
  flavour=${flavour:-gpu}
  hvd_with="with Gloo only (--cpu)"
  [[ $flavour == cpu ]] || hvd_with="with NCCL operations against the nvcc and NCCL wheels"
  say "step 0: PyTorch from PyPI (requirements-pytorch-pypi.lock.txt) for $chosen_python;" \
      "Horovod $hvd_with"
fi

# --- 1-2. interpreter and virtual environment ------------------------------------------
if [[ $torch_from == pypi ]]; then
  supported() {
    "$1" -c 'import sys, venv; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)' \
      >/dev/null 2>&1
  }
elif [[ $framework == pytorch ]]; then
  supported() { "$1" -c 'import torch' >/dev/null 2>&1; }
else
  supported() { "$1" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 11) else 1)' >/dev/null 2>&1; }
fi
no_python() {
  cat >&2 <<MSG
install.sh: error: $1
  TensorFlow 2.15 (pinned because Horovod 0.28.1 needs it) supports Python 3.9, 3.10 and 3.11 only.
  Options:
    - install one, e.g. \`apt-get install python3.11 python3.11-venv\` (Debian 12),
      \`pyenv install 3.11\`, or conda; then re-run, optionally with PYTHON=/path/to/python3.11
    - or use the course container, which brings its own Python (docs/maintainer.md: Docker / Apptainer)
MSG
  exit 1
}
find_python() {
  local candidate
  for candidate in python3.11 python3.10 python3.9 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && supported "$candidate"; then command -v "$candidate"; return 0; fi
  done
  return 1
}

reuse=0
if [[ -x $venv/bin/python ]] && supported "$venv/bin/python"; then
  reuse=1 py=$venv/bin/python
elif [[ $framework == pytorch && $torch_from == env ]]; then
  py=$torch_python
elif [[ $torch_from == pypi ]]; then
  py=$chosen_python
elif [[ -n ${PYTHON:-} ]]; then
  supported "$PYTHON" || no_python "PYTHON=$PYTHON is not a Python 3.9, 3.10 or 3.11 ($("$PYTHON" --version 2>&1 || echo 'cannot run it'))."
  py=$PYTHON
else
  py=$(find_python) || no_python "no python3.11, python3.10, python3.9 or python3 of those versions on PATH."
fi

if ((dry_run)); then
  if [[ $torch_from == pypi ]]; then
    lockfile=$here/requirements-pytorch-pypi.lock.txt
    pin() { sed -n "s/^$1==\\([^ ;]*\\).*/\\1/p" "$lockfile"; }
    what="$(grep -c '^[A-Za-z0-9]' "$lockfile") pinned packages of $(basename "$lockfile"),"
    what+=" sha256-checked (PyTorch $(pin torch) for CUDA 13.0, nvcc $(pin nvidia-cuda-nvcc),"
    what+=" NCCL $(pin nvidia-nccl-cu13); about 3 GB), then a CUDA toolkit root $venv/cuda from"
    what+=" those wheels"
  elif [[ $framework == pytorch ]]; then
    lab_file=''
    ((with_lab == 0)) || lab_file=", requirements-lab.txt"
    what="the course's packages next to PyTorch $torch_version (requirements-pytorch.txt$lab_file)"
  else
    what="$(grep -c '^[A-Za-z0-9]' "$here/requirements-$flavour.lock.txt") pinned packages"
    what+=" of requirements-$flavour.lock.txt, sha256-checked"
  fi
  hvd="Horovod $horovod_version for $framework with Gloo only"
  [[ $flavour != gpu ]] || hvd="Horovod $horovod_version for $framework with NCCL operations, Gloo"
  where="reuse $venv"
  ((reuse)) || where="create $venv with $py ($("$py" --version 2>&1))"
  data=''
  ((with_dataset == 0)) || data="; make sure Fashion-MNIST is here"
  say "dry run: would $where; install $what; build $hvd (each step skipped where already" \
      "done)$data. Nothing was changed."
  exit 0
fi

if ((reuse)); then
  say "step 1-2: reusing $venv ($("$venv/bin/python" --version 2>&1)); skipped creating it"
else
  if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    echo "install.sh: error: $py has no working 'venv'/'ensurepip' module; on Debian/Ubuntu: apt-get install python$v-venv" >&2
    exit 1
  fi
  [[ -e $venv ]] && { say "step 2: $venv exists but holds no usable Python; recreating it"; rm -rf "$venv"; }
  say "step 1: using $py ($("$py" --version 2>&1))"
  say "step 2: creating virtual environment $venv"
  mkdir -p "$(dirname "$venv")"
  if [[ $framework == pytorch && $torch_from == env ]]; then
    # The venv sees the PyTorch environment's packages (they come after its own on sys.path).
    # --system-site-packages alone is not enough when that Python is itself a venv (NGC, uv).
    run_step venv "$py" -m venv --system-site-packages "$venv"
    vsite=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    printf 'import site; site.addsitedir(%s)\n' "'$torch_site'" >"$vsite/gputopo-pytorch-env.pth"
    supported "$venv/bin/python" || { echo "install.sh: error: the new venv $venv cannot import torch from $torch_site" >&2; exit 1; }
  else
    run_step venv "$py" -m venv "$venv"
  fi
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)

# --- 3. pinned packages -------------------------------------------------------------------
if [[ $torch_from == pypi ]]; then
  # PyTorch, its CUDA libraries, nvcc and NCCL from PyPI: hash-locked like the TensorFlow sets.
  lock="$here/requirements-pytorch-pypi.lock.txt"
  reqs=("$here/requirements-common.txt" "$here/requirements-pytorch-pypi.txt" "$lock")
  stamp="$venv/.requirements-pytorch.sha256"
  want=$( (cat "${reqs[@]}"; echo "pip==$pip_version") | sha256sum | cut -d' ' -f1)
  set_name="PyTorch-from-PyPI"
elif [[ $framework == pytorch ]]; then
  # One set for PyTorch hosts; pip is the venv's own (such hosts are often offline, with
  # PIP_FIND_LINKS pointing at a wheel folder). Lower bounds for what the PyTorch environment
  # brings, so no lock: pip must keep that environment's numpy and friends.
  reqs=("$here/requirements-pytorch.txt")
  ((with_lab)) && reqs+=("$here/requirements-lab.txt")
  stamp="$venv/.requirements-pytorch.sha256"
  want=$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)
  set_name=pytorch
else
  # The lock (make lock writes it from the .txt pins) is what is installed; the stamp covers both.
  lock="$here/requirements-$flavour.lock.txt"
  reqs=("$here/requirements-common.txt" "$here/requirements-$flavour.txt" "$lock")
  stamp="$venv/.requirements-$flavour.sha256"
  want=$( (cat "${reqs[@]}"; echo "pip==$pip_version") | sha256sum | cut -d' ' -f1)
  set_name=$flavour
fi
if [[ $framework == tensorflow && -f "$venv/.requirements-$other.sha256" ]]; then
  # The venv holds the other set: tensorflow and tensorflow-cpu must not share one environment.
  say "step 3: $venv was built for the $other set; removing its TensorFlow and Horovod first"
  run_step switch-flavour "${pip[@]}" uninstall -y tensorflow tensorflow-cpu horovod
  rm -f "$venv/.requirements-$other.sha256"
fi
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  say "step 3: pinned $set_name requirements already installed; skipped"
elif [[ $torch_from == pypi ]]; then
  say "step 3: installing PyTorch, nvcc and NCCL from PyPI, pinned with hashes" \
      "(about 3 GB; minutes on a fast link)"
  run_step pip-upgrade "${pip[@]}" install --progress-bar on "pip==$pip_version"
  run_step requirements "${pip[@]}" install --progress-bar on --require-hashes -r "$lock"
  # The marker says where this venv's PyTorch came from (flavour.sh reads it on the next run).
  basename "$lock" >"$venv/.pytorch-from-pypi"
  echo "$want" >"$stamp"
elif [[ $framework == pytorch ]]; then
  say "step 3: installing the course's packages next to PyTorch (no TensorFlow)"
  run_step requirements "${pip[@]}" install --progress-bar on "${reqs[@]/#/--requirement=}"
  echo "$want" >"$stamp"
else
  say "step 3: installing pinned $flavour requirements (TensorFlow is a ~250 MB download; a few minutes)"
  run_step pip-upgrade "${pip[@]}" install --progress-bar on "pip==$pip_version"
  run_step requirements "${pip[@]}" install --progress-bar on --require-hashes -r "$lock"
  echo "$want" >"$stamp"
fi

# --- 3b. PyTorch from PyPI: a CUDA toolkit root made of the wheels ----------------------------
# DIR/cuda (links into the nvcc, CUDA runtime and NCCL wheels) and DIR/bin/nvcc; why a root of
# links: environment/cuda-from-wheels.sh.
if [[ $torch_from == pypi ]]; then
  made=$("$BASH" "$here/cuda-from-wheels.sh" "$venv") || exit 1
  if [[ $flavour == gpu ]]; then
    facts=$(torch_facts "$venv/bin/python" || true)
    IFS=$'\t' read -r torch_version torch_cuda torch_site torch_caps <<<"$facts"
    horovod_cuda "$venv/cuda/bin/nvcc" "$venv/cuda"
  fi
  say "step 3b: $made"
fi

# --- 4. Horovod ---------------------------------------------------------------------------
horovod_ok() {
  "$venv/bin/python" - "$horovod_version" "$flavour" "$framework" <<'PY' >/dev/null 2>&1
import importlib, sys
import horovod
hvd = importlib.import_module("horovod.torch" if sys.argv[3] == "pytorch" else "horovod.tensorflow")
assert horovod.__version__ == sys.argv[1]
assert hvd.gloo_built()
if sys.argv[2] == "gpu":
    assert hvd.nccl_built()
PY
}
if horovod_ok; then
  say "step 4: horovod $horovod_version built for $framework ($flavour set) already there; skipped the build"
elif [[ $framework == pytorch ]]; then  # this machine's PyTorch, or PyTorch from PyPI
  say "step 4: building horovod $horovod_version for PyTorch from source ($([[ $flavour == gpu ]] && echo "NCCL operations for compute capability $cuda_cc_list, Gloo" || echo "Gloo only"))"
  # The sdist, with the edits of patch-horovod.py (gcc 13 and PyTorch >= 2.1 need them).
  src="$venv/build/horovod-src"
  rm -rf "$src"; mkdir -p "$src"
  run_step horovod-sdist "${pip[@]}" download --no-deps --no-binary=:all: --no-build-isolation -d "$src" "horovod==$horovod_version"
  tar -xzf "$src/horovod-$horovod_version.tar.gz" -C "$src"
  run_step horovod-patch "$venv/bin/python" "$here/patch-horovod.py" "$src/horovod-$horovod_version"
  export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
  export HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1
  # CMake 4 refuses the old minimum version of Horovod's bundled gloo without this.
  export PATH="$venv/bin:$PATH" CMAKE_POLICY_VERSION_MINIMUM=3.5
  MAKEFLAGS="-j$(nproc)"; export MAKEFLAGS
  if [[ $flavour == gpu ]]; then
    export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_CUDA_HOME=$cuda_home CUDA_HOME=$cuda_home
    export HOROVOD_NCCL_INCLUDE=$nccl_include HOROVOD_NCCL_LIB=$nccl_lib
    export HOROVOD_BUILD_CUDA_CC_LIST=$cuda_cc_list
  else
    export HOROVOD_CPU_OPERATIONS=GLOO
    unset HOROVOD_GPU_OPERATIONS
  fi
  run_step horovod "${pip[@]}" install -v --no-build-isolation --no-cache-dir --force-reinstall --no-deps "$src/horovod-$horovod_version"
  if ! "$venv/bin/python" -c 'import horovod.torch' >>"$logdir/horovod.log" 2>&1 || ! horovod_ok; then
    echo "[install] FAILED at step 'horovod': built, but 'import horovod.torch' or its build checks fail. Log: $logdir/horovod.log" >&2
    tail -n 15 "$logdir/horovod.log" | sed 's/^/[install]   | /' >&2
    exit 1
  fi
  rm -rf "$src"
else
  say "step 4: building horovod $horovod_version from source (about 3 minutes on 2 cores; more with --gpu)"
  export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_PYTORCH=1
  export HOROVOD_WITHOUT_MPI=1
  # cmake 4 rejects the old policy of Horovod's bundled gloo; the venv's cmake 3.x comes first on PATH.
  export PATH="$venv/bin:$PATH" CMAKE_POLICY_VERSION_MINIMUM=3.5
  MAKEFLAGS="-j$(nproc)"
  export MAKEFLAGS
  if [[ $flavour == gpu ]]; then
    export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-70,75,80,86,89,90}
    # Which nvcc Horovod's CMake will take, in its order: $HOROVOD_CUDA_HOME/bin, $CUDACXX, PATH,
    # then CMake's CUDA toolkit search ($CUDA_PATH, /usr/local/cuda). Say which, or stop here.
    nvcc_bin=
    for c in ${HOROVOD_CUDA_HOME:+"$HOROVOD_CUDA_HOME/bin/nvcc"} ${CUDACXX:+"$CUDACXX"} "$(command -v nvcc || true)" \
             ${CUDA_PATH:+"$CUDA_PATH/bin/nvcc"} /usr/local/cuda/bin/nvcc; do
      [[ -n $c && -x $c ]] && { nvcc_bin=$c; break; }
    done
    [[ -n $nvcc_bin ]] || { echo "install.sh: error: --gpu builds Horovod's NCCL operations with CUDA but finds no nvcc (HOROVOD_CUDA_HOME, CUDACXX, PATH, CUDA_PATH, /usr/local/cuda); put CUDA 12's bin on PATH or set HOROVOD_CUDA_HOME" >&2; exit 1; }
    say "step 4: CUDA compiler $nvcc_bin ($("$nvcc_bin" --version 2>&1 | sed -n 's/.*\(release [0-9.]*\).*/\1/p')); NCCL from ${HOROVOD_NCCL_HOME:-the CUDA toolkit and system paths}"
  fi
  # --force-reinstall: a Horovod that is installed but broken (e.g. built against another
  # TensorFlow) must be rebuilt, not reported "already satisfied". Its run-time dependencies
  # are pinned in requirements-common.txt, hence --no-deps.
  run_step horovod "${pip[@]}" install -v --no-build-isolation --no-cache-dir --no-binary=horovod \
    --force-reinstall --no-deps "horovod==$horovod_version"
  if ! "$venv/bin/python" -c 'import horovod.tensorflow' >>"$logdir/horovod.log" 2>&1 || ! horovod_ok; then
    echo "[install] FAILED at step 'horovod': built, but 'import horovod.tensorflow' or its build checks fail. Log: $logdir/horovod.log" >&2
    tail -n 15 "$logdir/horovod.log" | sed 's/^/[install]   | /' >&2
    exit 1
  fi
fi

# --- 5. the course package ----------------------------------------------------------------
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pth="$site/gputopo-course.pth"
if [[ -f $pth && $(cat "$pth") == "$root/source_code" ]]; then
  say "step 5: gputopo already importable from $root/source_code; skipped"
else
  echo "$root/source_code" >"$pth"
  say "step 5: gputopo importable from $root/source_code"
fi
# JupyterLab's defaults for a classroom: no pop-up asking to fetch news from the internet
# (workshop nodes are often offline), no update check.
lab_settings="$venv/share/jupyter/lab/settings"
mkdir -p "$lab_settings"
cat >"$lab_settings/overrides.json" <<'JSON'
{
  "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}
}
JSON

# --- 6. dataset ---------------------------------------------------------------------------
if ((with_dataset)); then
  fmnist=("$venv/bin/python" -m gputopo.fmnist)
  if found=$("${fmnist[@]}" --check 2>/dev/null); then
    say "step 6: ${found%%:*}; skipped"
  elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 \
       && { apt-cache show dataset-fashion-mnist >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-cache show dataset-fashion-mnist >/dev/null 2>&1; }; }; then
    say "step 6: installing Debian's dataset-fashion-mnist (MIT licence) into /usr/share/datasets/fashion-mnist"
    run_step dataset env DEBIAN_FRONTEND=noninteractive apt-get install -y -q dataset-fashion-mnist
    run_step dataset-check "${fmnist[@]}" --check
  else
    say "step 6: no verified Fashion-MNIST here and no apt package to install (not root, no apt, or no such package); trying the official download"
    if msg=$("${fmnist[@]}" --download 2>&1); then
      say "step 6: $msg"
    else
      # Not fatal: the notebooks still run in reference mode; the dataset tests fail and say why.
      say "step 6: WARNING: no Fashion-MNIST on this machine and the download failed:"
      printf '%s\n' "$msg" | sed 's/^/[install]   /'
    fi
  fi
fi
say "done: $venv ready ($framework, $flavour set)"

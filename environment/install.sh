#!/usr/bin/env bash
# The one install script of the course. `make lab`, `make test`, the Dockerfile and the
# Apptainer definition all call it, so the tested path and the container path cannot drift.
#
#   environment/install.sh [--gpu] [--venv DIR] [--with-dataset] [--help]
#
# Steps (each logged to DIR/install-logs/<step>.log; a failure names the step and its log):
#   1. find a Python that TensorFlow 2.15 supports (3.11, 3.10, 3.9)   [$PYTHON overrides]
#   2. create the virtual environment DIR (default .venv) if missing
#   3. pip install the pinned requirements (CPU or GPU set), skipped when unchanged
#   4. build Horovod 0.28.1 from source, skipped when the right build is already there
#   5. make the course package `gputopo` importable (a .pth file pointing at source_code/)
#   6. with --with-dataset: install Debian's dataset-fashion-mnist where apt and root exist
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
venv="$root/.venv"
flavour=cpu
with_dataset=0
horovod_version=0.28.1

usage() { sed -n '5,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --gpu) flavour=gpu ;;
    --venv) venv=${2:?--venv needs a directory}; shift ;;
    --venv=*) venv=${1#--venv=} ;;
    --with-dataset) with_dataset=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { printf '[install] %s\n' "$*"; }
logdir="$venv/install-logs"
# run_step NAME CMD...: runs CMD with its output in a log; on failure names the step and the log.
run_step() {
  local name=$1; shift
  mkdir -p "$logdir"
  local log="$logdir/$name.log"
  if [[ -t 1 ]]; then
    # On a terminal show the tool's own progress (pip's bars, the compiler's lines) and keep a log.
    "$@" 2>&1 | tee "$log"; local rc=${PIPESTATUS[0]}
  else
    # In CI or a docker build: one progress dot every 15 s instead of thousands of lines.
    "$@" >"$log" 2>&1 & local pid=$!
    while kill -0 "$pid" 2>/dev/null; do sleep 15; kill -0 "$pid" 2>/dev/null && printf '[install]   ... %s still running (%s)\n' "$name" "$(tail -c 200 "$log" | tr '\n\r' '  ' | tail -c 70)"; done
    wait "$pid"; local rc=$?
  fi
  if ((rc != 0)); then
    echo "[install] FAILED at step '$name' (exit $rc). Full log: $log" >&2
    tail -n 25 "$log" | sed 's/^/[install]   | /' >&2
    exit 1
  fi
}

# --- 1. interpreter ---------------------------------------------------------------------
supported() { "$1" -c 'import sys; sys.exit(0 if (3, 9) <= sys.version_info[:2] <= (3, 11) else 1)' >/dev/null 2>&1; }
find_python() {
  local candidate
  if [[ -n ${PYTHON:-} ]]; then
    if supported "$PYTHON"; then echo "$PYTHON"; return 0; fi
    echo "install.sh: \$PYTHON=$PYTHON is not Python 3.9, 3.10 or 3.11, which TensorFlow 2.15 needs." >&2
    return 1
  fi
  for candidate in python3.11 python3.10 python3.9 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && supported "$candidate"; then command -v "$candidate"; return 0; fi
  done
  return 1
}

if [[ -x $venv/bin/python ]] && supported "$venv/bin/python"; then
  say "step 1-2: reusing $venv ($("$venv/bin/python" --version 2>&1)); skipped creating it"
else
  if ! py=$(find_python); then
    cat >&2 <<'MSG'
install.sh: no Python 3.9, 3.10 or 3.11 found; TensorFlow 2.15 (pinned for Horovod 0.28.1) supports only those.
  Options: install one (e.g. `apt-get install python3.11 python3.11-venv`, `pyenv install 3.11`, or conda),
  then re-run, optionally with PYTHON=/path/to/python3.11; or use the container (see README: docker / apptainer).
MSG
    exit 1
  fi
  [[ -e $venv ]] && { say "step 2: $venv exists but holds no usable Python; recreating it"; rm -rf "$venv"; }
  say "step 1: using $py ($("$py" --version 2>&1))"
  say "step 2: creating virtual environment $venv"
  mkdir -p "$(dirname "$venv")"
  run_step venv "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# --- 3. pinned packages -------------------------------------------------------------------
reqs=("$here/requirements-common.txt" "$here/requirements-$flavour.txt")
stamp="$venv/.requirements-$flavour.sha256"
want=$(cat "${reqs[@]}" | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  say "step 3: pinned $flavour requirements already installed; skipped"
else
  say "step 3: installing pinned $flavour requirements (TensorFlow is a ~250 MB download; a few minutes)"
  run_step pip-upgrade "${pip[@]}" install --progress-bar on "pip==24.3.1"
  run_step requirements "${pip[@]}" install --progress-bar on -r "$here/requirements-$flavour.txt"
  echo "$want" >"$stamp"
fi

# --- 4. Horovod ---------------------------------------------------------------------------
horovod_ok() {
  "$venv/bin/python" - "$horovod_version" "$flavour" <<'PY' >/dev/null 2>&1
import sys
import horovod, horovod.tensorflow as hvd
assert horovod.__version__ == sys.argv[1]
assert hvd.gloo_built()
if sys.argv[2] == "gpu":
    assert hvd.nccl_built()
PY
}
if horovod_ok; then
  say "step 4: horovod $horovod_version with TensorFlow already built; skipped"
else
  say "step 4: building horovod $horovod_version from source (about 3 minutes on 2 cores)"
  export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_PYTORCH=1
  export HOROVOD_WITHOUT_MPI=1
  # cmake 4 rejects the old policy of Horovod's bundled gloo; the venv's cmake 3.31 comes first on PATH.
  export PATH="$venv/bin:$PATH" CMAKE_POLICY_VERSION_MINIMUM=3.5
  export MAKEFLAGS="-j$(nproc)"
  if [[ $flavour == gpu ]]; then
    export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-70,75,80,86,89,90}
  fi
  run_step horovod "${pip[@]}" install -v --no-build-isolation --no-cache-dir --no-binary=horovod "horovod==$horovod_version"
  horovod_ok || { echo "[install] FAILED at step 'horovod': built, but 'import horovod.tensorflow' fails. Log: $logdir/horovod.log" >&2; exit 1; }
fi

# --- 5. the course package ----------------------------------------------------------------
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$root/source_code" >"$site/gputopo-course.pth"
say "step 5: gputopo importable from $root/source_code"

# --- 6. dataset ---------------------------------------------------------------------------
if ((with_dataset)); then
  if [[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
    say "step 6: Fashion-MNIST already in /usr/share/datasets/fashion-mnist; skipped"
  elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "step 6: installing Debian's dataset-fashion-mnist (MIT licence)"
    run_step dataset bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist'
  else
    say "step 6: not root or no apt-get; the loader will look elsewhere (see README: Fashion-MNIST)"
  fi
fi
say "done: $venv ready ($flavour)"

#!/usr/bin/env bash
# Which install of the course this machine gets: the one implementation of the rule that
# environment/install.sh and the Makefile both call. The rule, in words: install.sh --help.
#
# Usage: environment/flavour.sh [--framework tensorflow|pytorch] [--cpu|--gpu] [--pypi]
#                               [--venv DIR] [--print KEY] [--help]
#   --framework, --cpu, --gpu   a choice made by the user (make's FRAMEWORK, install.sh's options)
#   --pypi          PyTorch from PyPI even where a Python has PyTorch
#                   (install.sh --pytorch-from-pypi)
#   --venv DIR      the venv asked for; without it .venv or .venv-pytorch, whichever the rule picks
#   --print KEY     print only that value (the Makefile asks for `framework`)
# Prints key=value lines (values on one line):
#   framework  tensorflow | pytorch
#   set        cpu | gpu (TensorFlow's set; for PyTorch: Horovod with NCCL operations or not;
#              empty: PyTorch's own build decides)
#   torch      env (a PyTorch already on this machine) | pypi (requirements-pytorch-pypi) | none
#   python     the interpreter to build the venv from (empty: install.sh looks for one)
#   venv       the venv's absolute path
#   state      new | existing
#   why        one line for people: what was chosen and why
# Reads only: nvidia-smi, the Pythons on PATH ($PYTHON first), nvcc and NCCL (find_nccl.sh),
# the venvs' stamps, and one request to the package index (PIP_INDEX_URL, else pip's configured
# index-url, else https://pypi.org/simple; with PIP_NO_INDEX: PIP_FIND_LINKS folders) when the
# rule gets as far as PyTorch from PyPI. It changes nothing. Exit 0; a bad option: one line, 2.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

# PyPI's PyTorch wheel is built for CUDA 13, which needs driver branch 580 or newer (CUDA 13.x
# row of "Minimum Required Driver Version", docs.nvidia.com/deploy/cuda-compatibility/
# minor-version-compatibility.html). The pin itself is read from requirements-pytorch-pypi.txt.
pypi_min_driver=580
pypi_cuda=13.0
pypi_torch=$(sed -n 's/^torch==\([^ ;]*\).*/\1/p' "$here/requirements-pytorch-pypi.txt")

framework='' set='' venv='' key='' pypi_asked=0
die() { echo "flavour.sh: error: $* (try --help)" >&2; exit 2; }
while (($#)); do
  case $1 in
    --framework) [[ $# -ge 2 ]] || die "--framework needs tensorflow or pytorch"
                 framework=$2; shift ;;
    --framework=*) framework=${1#*=} ;;
    --cpu) set=cpu ;;
    --gpu) set=gpu ;;
    --pypi) pypi_asked=1 framework=pytorch ;;
    --venv) [[ $# -ge 2 && -n $2 ]] || die "--venv needs a directory"; venv=$2; shift ;;
    --venv=*) venv=${1#*=} ;;
    --print) [[ $# -ge 2 ]] || die "--print needs a key"; key=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1'" ;;
  esac
  shift
done
case $framework in
  ''|tensorflow|pytorch) ;;
  *) die "--framework must be tensorflow or pytorch, not '$framework'" ;;
esac
case $key in
  ''|framework|set|torch|python|venv|state|why) ;;
  *) die "--print: no key '$key'" ;;
esac
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
default_venv() { [[ $1 == pytorch ]] && echo "$root/.venv-pytorch" || echo "$root/.venv"; }

# --- what an existing venv holds (install.sh's stamps) ---------------------------------------
held() {  # DIR -> "pytorch pypi" | "pytorch env" | "tensorflow gpu" | "tensorflow cpu" | ""
  local d=$1
  if [[ -f $d/.requirements-pytorch.sha256 ]]; then
    [[ -f $d/.pytorch-from-pypi ]] && echo "pytorch pypi" || echo "pytorch env"
  elif [[ -f $d/.requirements-gpu.sha256 ]]; then echo "tensorflow gpu"
  elif [[ -f $d/.requirements-cpu.sha256 ]]; then echo "tensorflow cpu"
  fi
}

# --- the machine ----------------------------------------------------------------------------
gpu_count=0 gpu_name='' driver='' gpu_note=''
probe_gpus() {
  local out rc=0
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    gpu_note="no GPU (no nvidia-smi on PATH)"; return
  fi
  out=$(timeout 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null) \
    || rc=$?
  if ((rc != 0)); then gpu_note="no GPU (nvidia-smi exit $rc)"; return; fi
  gpu_count=$(grep -c '[^[:space:]]' <<<"$out" || true)
  if ((gpu_count == 0)); then gpu_note="no GPU (nvidia-smi lists none)"; return; fi
  gpu_name=$(head -1 <<<"$out" | sed 's/,[^,]*$//; s/^ *//; s/ *$//')
  driver=$(head -1 <<<"$out" | sed 's/.*, *//; s/ *$//')
  local plural=''
  ((gpu_count == 1)) || plural=s
  gpu_note="$gpu_count GPU$plural ($gpu_name, driver $driver)"
}

# $PYTHON, else the first of python3, python, if it imports torch: torch_python, torch_version,
# torch_cuda ("None" for a CPU-only build).
torch_python='' torch_version='' torch_cuda=''
probe_torch() {
  local c facts candidates=(python3 python)
  [[ -z ${PYTHON:-} ]] || candidates=("$PYTHON")  # PYTHON=... names the one to use
  for c in "${candidates[@]}"; do
    if [[ -z $c ]] || ! command -v "$c" >/dev/null 2>&1; then continue; fi
    facts=$(timeout 120 "$c" -c 'import sys, torch
print(torch.__version__, torch.version.cuda, sys.executable)' 2>/dev/null) || continue
    read -r torch_version torch_cuda torch_python <<<"$facts"
    [[ -n $torch_python ]] && return 0
  done
  return 1
}

# A CUDA toolkit (nvcc as install.sh finds it: $CUDA_HOME/bin, PATH, then /usr/local/cuda/bin
# where CUDA_HOME is not set) and NCCL (find_nccl.sh).
nvcc='' nvcc_release='' nccl=''
probe_toolkit() {
  local c places=("$(command -v nvcc 2>/dev/null || true)")
  if [[ -n ${CUDA_HOME:-} ]]; then
    places=("$CUDA_HOME/bin/nvcc" "${places[@]}")
  else
    places+=(/usr/local/cuda/bin/nvcc)
  fi
  for c in "${places[@]}"; do
    [[ -n $c && -x $c ]] && { nvcc=$c; break; }
  done
  [[ -n $nvcc ]] || return 0
  nvcc_release=$("$nvcc" --version 2>/dev/null \
                 | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p') || true
  local home
  home=$(cd "$(dirname "$nvcc")/.." && pwd)
  nccl=$(CUDA_HOME=$home sh "$root/source_code/nccl_bench/find_nccl.sh" 2>/dev/null) || nccl=''
}

# A Python for PyPI's PyTorch: 3.10-3.12 with venv ($PYTHON, else the newest on PATH).
pypi_python=''
probe_pypi_python() {
  local c candidates=(python3.12 python3.11 python3.10 python3)
  [[ -z ${PYTHON:-} ]] || candidates=("$PYTHON")
  for c in "${candidates[@]}"; do
    command -v "$c" >/dev/null 2>&1 || continue
    # The interpreter itself (a pyenv shim resolved), or $PYTHON as given.
    pypi_python=$("$c" -c 'import sys, venv, ensurepip
print(sys.executable) if (3, 10) <= sys.version_info[:2] <= (3, 12) else sys.exit(1)' 2>/dev/null) \
      && [[ -n $pypi_python ]] \
      && { [[ -z ${PYTHON:-} ]] || pypi_python=$(command -v "$PYTHON"); return 0; }
  done
  pypi_python=''
  return 1
}

# Can pip get PyTorch's wheel? index_note says where it looked.
index_note=''
probe_index() {
  local py=$1 url d
  case ${PIP_NO_INDEX:-} in
    1|[Tt]rue|[Yy]es|[Oo]n)
      for d in ${PIP_FIND_LINKS:-}; do
        if compgen -G "${d#file://}/torch-$pypi_torch-*.whl" >/dev/null; then
          index_note="torch $pypi_torch in $d"; return 0
        fi
      done
      index_note="PIP_NO_INDEX is set and no PIP_FIND_LINKS folder holds torch-$pypi_torch"
      return 1 ;;
  esac
  url=${PIP_INDEX_URL:-$("$py" -m pip config get global.index-url 2>/dev/null || true)}
  url=${url:-https://pypi.org/simple}
  if "$py" - "${url%/}/torch/" <<'PY' >/dev/null 2>&1; then index_note="$url"; return 0; fi
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=8) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
  index_note="$url is not reachable"
  return 1
}

# --- the rule -------------------------------------------------------------------------------
torch='' python='' state=new why=''
pypi_words="PyTorch $pypi_torch (CUDA $pypi_cuda), nvcc and NCCL from PyPI"
pypi_words+=" (requirements-pytorch-pypi.lock.txt, about 3 GB)"
cpu_fallback() {  # REASON GPU-PATH: the TensorFlow CPU set, what runs live, the GPU path's command
  framework=tensorflow set=cpu torch=none
  why="TensorFlow CPU set: $gpu_note, but $1. Live here: nvidia-smi's views (and the P2P test"
  why+=" and NCCL benchmark where nvcc and NCCL are); the CNN trains on the CPU. GPU path: $2"
}

decide_new() {  # sets framework, set, torch, python, why for a new venv
  probe_gpus
  if [[ $framework == tensorflow ]]; then
    torch=none
    if [[ -n $set ]]; then why="TensorFlow ${set^^} set ($how, --$set)"; return; fi
    if ((gpu_count)); then probe_toolkit; fi
    if ((gpu_count)) && [[ $nvcc_release == 12.* && -n $nccl ]]; then
      set=gpu why="TensorFlow GPU set ($how): $gpu_note, CUDA $nvcc_release ($nvcc) and NCCL"
    else
      local extra=''
      ((gpu_count == 0)) || extra=", no CUDA 12 toolkit with NCCL"
      set=cpu why="TensorFlow CPU set ($how): ${gpu_note}$extra"
    fi
    return
  fi
  if [[ -z $framework && -n $set ]]; then  # --cpu/--gpu alone name TensorFlow's sets, as always
    framework=tensorflow torch=none why="TensorFlow ${set^^} set (--$set)"; return
  fi
  if [[ $framework == pytorch ]]; then
    # A CUDA PyTorch of this machine first; a CPU-only one only where PyPI's CUDA build cannot
    # come instead (no GPU, an old driver, no index); none: PyPI's.
    local have_torch=0 pypi_no='' major=0
    ((pypi_asked)) || ! probe_torch || have_torch=1
    if ((have_torch)) && [[ $torch_cuda != None ]]; then
      torch=env python=$torch_python set=${set:-gpu}
      why="PyTorch flavour ($how) on PyTorch $torch_version (CUDA $torch_cuda) of $torch_python"
      return
    fi
    if ((have_torch && gpu_count == 0)); then
      torch=env python=$torch_python set=${set:-cpu}
      why="PyTorch flavour ($how) on PyTorch $torch_version (a CPU-only build)"
      why+=" of $torch_python: $gpu_note"
      return
    fi
    [[ $driver =~ ^[0-9]+ ]] && major=${BASH_REMATCH[0]}
    if ((major > 0 && major < pypi_min_driver)); then
      pypi_no="driver $driver is older than the $pypi_min_driver that PyPI's PyTorch"
      pypi_no+=" $pypi_torch (CUDA $pypi_cuda) needs"
    elif ! probe_pypi_python; then
      pypi_no="none of Python 3.10-3.12 (with venv) is here for PyPI's PyTorch $pypi_torch"
    elif ! probe_index "$pypi_python"; then
      pypi_no="PyPI's PyTorch $pypi_torch cannot be fetched ($index_note)"
    fi
    if [[ -z $pypi_no ]]; then
      torch=pypi set=${set:-gpu} python=$pypi_python
      local reason=''
      if ((!pypi_asked)); then
        reason="no Python here imports torch"
        ((have_torch == 0)) || reason="PyTorch $torch_version of $torch_python is a CPU-only build\
 and there are $gpu_note"
      fi
      local as_asked=''
      ((pypi_asked == 0)) || as_asked=", from PyPI as asked"
      why="PyTorch flavour ($how$as_asked): ${reason:+$reason, so }$pypi_words, for $python"
    elif ((have_torch && !pypi_asked)); then
      torch=env python=$torch_python set=${set:-cpu}
      why="PyTorch flavour ($how) on PyTorch $torch_version (a CPU-only build) of $torch_python:"
      why+=" Horovod with Gloo only, since $pypi_no"
    else
      torch=none why="no Python imports torch, and $pypi_no"
      ((pypi_asked == 0)) || why="PyTorch from PyPI was asked for, and $pypi_no"
    fi
    return
  fi
  # Nothing named: the machine decides.
  if ((gpu_count == 0)); then
    framework=tensorflow set=cpu torch=none why="TensorFlow CPU set: $gpu_note"
    return
  fi
  probe_toolkit
  if probe_torch; then
    if [[ $torch_cuda != None && -n $nvcc && -n $nccl ]]; then
      framework=pytorch set=gpu torch=env python=$torch_python
      why="PyTorch flavour: $gpu_note and $torch_python imports PyTorch $torch_version"
      why+=" (CUDA $torch_cuda); nvcc $nvcc_release and NCCL for Horovod's NCCL operations"
      return
    fi
  fi
  if [[ $nvcc_release == 12.* && -n $nccl ]]; then
    framework=tensorflow set=gpu torch=none
    local its=''
    [[ -z $torch_python ]] || its=" and its nvcc and NCCL"
    why="TensorFlow GPU set: $gpu_note, no Python with a CUDA build of PyTorch$its,"
    why+=" CUDA $nvcc_release ($nvcc) and NCCL"
    return
  fi
  local missing
  if [[ -z $torch_python ]]; then missing="no Python imports PyTorch"
  elif [[ $torch_cuda == None ]]; then
    missing="PyTorch $torch_version of $torch_python is a CPU-only build"
  else
    missing="PyTorch $torch_version (CUDA $torch_cuda) of $torch_python has no nvcc and NCCL here"
    missing+=" to build Horovod's NCCL operations"
  fi
  if [[ -z $nvcc ]]; then missing+=", no CUDA toolkit"
  elif [[ $nvcc_release != 12.* ]]; then
    missing+=", CUDA $nvcc_release's toolkit is not the CUDA 12 that TensorFlow 2.15.1 needs"
  else missing+=", CUDA $nvcc_release without NCCL"
  fi
  local major=0
  [[ $driver =~ ^[0-9]+ ]] && major=${BASH_REMATCH[0]}
  if ((major > 0 && major < pypi_min_driver)); then
    cpu_fallback "$missing, and driver $driver is older than the $pypi_min_driver that PyPI's\
 PyTorch $pypi_torch (CUDA $pypi_cuda) needs" \
      "update the NVIDIA driver to $pypi_min_driver or newer, then: make lab FRAMEWORK=pytorch"
    return
  fi
  if ! probe_pypi_python; then
    cpu_fallback "$missing, and no Python 3.10-3.12 (with venv) for PyPI's PyTorch $pypi_torch" \
      "install Python 3.12 (e.g. apt-get install python3.12-venv), then: make lab FRAMEWORK=pytorch"
    return
  fi
  if ! probe_index "$pypi_python"; then
    cpu_fallback "$missing, and PyPI's PyTorch $pypi_torch cannot be fetched ($index_note)" \
      "where PyPI is reachable (or with PIP_NO_INDEX=1 PIP_FIND_LINKS=<a folder of the lock's\
 wheels>): make lab FRAMEWORK=pytorch"
    return
  fi
  framework=pytorch set=gpu torch=pypi python=$pypi_python
  why="PyTorch flavour: $gpu_note, $missing; $pypi_words, for $python"
}

words() {  # "pytorch pypi" -> words for people
  case $1 in
    "tensorflow cpu") echo "TensorFlow CPU set" ;;
    "tensorflow gpu") echo "TensorFlow GPU set" ;;
    "pytorch env") echo "PyTorch flavour (on this machine's PyTorch)" ;;
    "pytorch pypi") echo "PyTorch flavour (PyTorch from PyPI)" ;;
  esac
}
keep() {  # VENV HELD: an existing venv keeps its flavour; TensorFlow's --cpu/--gpu still switch
  venv=$1 state=existing framework=${2% *}
  if [[ $framework == pytorch ]]; then
    torch=${2#* } python=$venv/bin/python
    [[ $torch == pypi ]] && set=${set:-gpu}
    why="$(words "$2") kept: $venv holds it"
  else
    torch=none python=''
    if [[ -n $set && $set != "${2#* }" ]]; then
      why="TensorFlow ${set^^} set (--$set): $venv held the ${2#* } set, which is replaced"
    else
      set=${2#* } why="$(words "$2") kept: $venv holds it"
    fi
  fi
}

asked_framework=$framework asked_set=$set
how=${framework:+--framework $framework}  # what named the framework, for the why line
named_for() {  # make's two venvs: .venv is TensorFlow's, .venv-pytorch PyTorch's; else nothing
  case $1 in "$root/.venv") echo tensorflow ;; "$root/.venv-pytorch") echo pytorch ;; esac
}

if [[ -n $venv || -n $framework ]]; then
  venv=$(abs "${venv:-$(default_venv "$framework")}")
  have=$(held "$venv")
  named=$(named_for "$venv")
  if [[ -n $have && ( -z $framework || $framework == "${have% *}" ) ]]; then
    keep "$venv" "$have"
    if [[ -z $asked_framework && -n $named ]]; then
      # Say so when a new venv would get something else (plain `make lab` on a changed machine).
      pick=$(set=$asked_set; decide_new
             echo "$framework $([[ $framework == pytorch ]] && echo "$torch" || echo "$set")|$why")
      [[ ${pick%%|*} == "$have" ]] || why+=" (for a new venv this machine gets: ${pick#*|})"
    fi
  elif [[ -z $framework && -n $named ]]; then
    # A new venv under one of make's names gets that name's framework: make chose the name by this
    # same rule, and install.sh asked directly for such a venv keeps to the name too.
    decide_new
    if [[ $framework != "$named" ]]; then
      was=$why
      framework=$named set=$asked_set torch='' python=''
      how="$(basename "$venv") is make's $named venv"
      decide_new
      why+="; a new venv elsewhere would get: $was"
    fi
  else
    decide_new  # a new venv (or one holding the other framework: install.sh refuses that one)
  fi
else
  # Nothing named (plain `make lab`): the rule's pick; an existing course venv keeps its flavour.
  decide_new
  pick=$(default_venv "$framework")
  other=$(default_venv "$([[ $framework == pytorch ]] && echo tensorflow || echo pytorch)")
  was=$why
  if [[ -n $(held "$pick") ]]; then
    set=''; keep "$pick" "$(held "$pick")"
  elif [[ -n $(held "$other") ]]; then
    set=''; keep "$other" "$(held "$other")"
    why+=" (for a new venv this machine gets: $was;"
    why+=" make distclean VENV=$(basename "$other") removes this one)"
  else
    venv=$pick
  fi
fi

value() {
  case $1 in
    framework) echo "$framework" ;; set) echo "$set" ;; torch) echo "$torch" ;;
    python) echo "$python" ;; venv) echo "$venv" ;; state) echo "$state" ;; why) echo "$why" ;;
  esac
}
if [[ -n $key ]]; then
  value "$key"
else
  for k in framework set torch python venv state why; do echo "$k=$(value "$k")"; done
fi

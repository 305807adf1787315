#!/usr/bin/env bash
# Usage: sweep.sh OUTDIR NAME:ARGS...   (e.g. sweep.sh out plain: read:--p2p_read)
# The tuning sweep that chose the defaults (run on 2x H200, NVSwitch).
# Builds for sm_90, records the machine, then runs the test under several settings.
# Every output goes to OUTDIR, which must be new or empty (results are never overwritten;
# a repeated NAME is refused too); a one-line summary of each run goes to stdout.
set -u
case ${1-} in
  -h|--help) sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "sweep.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
  '') echo "sweep.sh: error: no OUTDIR given (usage: sweep.sh OUTDIR NAME:ARGS...)" >&2; exit 2 ;;
esac
out=$1; shift
export NCCL_NVLS_ENABLE=0
here=$(cd "$(dirname "$0")" && pwd)
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "sweep.sh: error: $out already holds files; results are never overwritten, name a new OUTDIR (argument 1)" >&2
  exit 2
fi
names=" "
for spec in "$@"; do
  case $names in *" ${spec%%:*} "*)
    echo "sweep.sh: error: the name '${spec%%:*}' is given twice; each run needs its own files" >&2; exit 2 ;;
  esac
  names="$names${spec%%:*} "
done
mkdir -p "$out"
set -o noclobber  # no redirection below ever replaces a file
make -C "$here" SMS=90 >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
nvidia-smi topo -m >"$out/nvidia-smi-topo-m.txt" 2>&1
nvidia-smi nvlink -s >"$out/nvidia-smi-nvlink-s.txt" 2>&1
nvidia-smi topo -p2p rw >"$out/nvidia-smi-topo-p2p-rw.txt" 2>&1
bin=$here/p2pBandwidthLatencyTest
run() {  # run NAME ARGS...
  local name=$1; shift
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout 60 "$bin" "$@" --json "$out/$name.json" >"$out/$name.txt" 2>"$out/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  # one line: name rc seconds, then the off-diagonal cells of the enabled matrices
  python3 - "$out/$name.json" "$name" "$rc" "$t0" "$t1" "$*" <<'PY'
import json, sys
path, name, rc, t0, t1, args = sys.argv[1:]
secs = float(t1) - float(t0)
try:
    j = json.load(open(path))
except Exception as e:
    print(f"{name} rc={rc} {secs}s ({args}) no json: {e}"); sys.exit()
b, l = j["bandwidth_gbs"], j["latency_us"]
def num(v):  # null in the JSON: the program had no finite number for the cell
    return "N/A" if v is None else f"{v:.1f}"
def off(m):
    return " ".join(num(m[i][k]) for i in range(len(m)) for k in range(len(m)) if i != k) or f"diag {num(m[0][0])}"
parts = [f"{k.replace('unidirectional_','uni_').replace('bidirectional_','bi_')}={off(v)}" for k, v in b.items()]
parts += [f"{k}={off(v)}" for k, v in l.items() if k.endswith("gpu")]
print(f"{name} rc={rc} {secs:.1f}s ({args}) ok={j['verification']['ok']} " + " ".join(parts))
PY
}
for spec in "$@"; do
  name=${spec%%:*}; args=${spec#*:}
  # shellcheck disable=SC2086
  run "$name" $args
done

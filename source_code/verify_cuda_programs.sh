#!/usr/bin/env bash
# Usage: verify_cuda_programs.sh OUTDIR   (on a machine with 2 or more NVIDIA GPUs)
# Shows that the data checks of both CUDA programs work: builds p2pBandwidthLatencyTest and
# nccl_bench, runs each at small sizes as is (exit 0 expected) and with --inject-fault (exit 1
# expected, and the element the check names must be the one that was flipped), then runs both
# under compute-sanitizer --tool memcheck and --tool racecheck (no error expected).
# Every output goes to OUTDIR (new or empty) with its exact command on top; SUMMARY.txt has one
# line per step. Exit 0 when every step met its expectation, 1 otherwise, 2 for bad usage.
# NCCL_NVLS_ENABLE=0 is forced. About 1-3 minutes on 2x H200; each step has its own time limit.
set -u
case ${1-} in
  -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "verify_cuda_programs.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
  '') echo "verify_cuda_programs.sh: error: no OUTDIR given (usage: verify_cuda_programs.sh OUTDIR)" >&2; exit 2 ;;
esac
[ $# -eq 1 ] || { echo "verify_cuda_programs.sh: error: one OUTDIR only, got $# arguments" >&2; exit 2; }
out=$1
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "verify_cuda_programs.sh: error: $out already holds files; results are never overwritten, name a new OUTDIR (argument 1)" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
set -o noclobber  # no redirection below replaces a file
export NCCL_NVLS_ENABLE=0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
p2p_dir=$here/p2pBandwidthLatencyTest
nccl_dir=$here/nccl_bench
summary=$out/SUMMARY.txt
failures=0

# The machine, first.
{
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ) (UTC); host: $(hostname)"
  echo "# NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} >"$out/machine.txt"

# Build for the GPUs present (compute capability 9.0 -> SMS=90), else for sm_90.
sms=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '.' | sort -un | tr '\n' ' ')
sms=${sms:-90}
{
  echo "# command: make -C $p2p_dir SMS=\"$sms\" && make -C $nccl_dir SMS=\"$sms\""
  make -C "$p2p_dir" SMS="$sms" -j8 && make -C "$nccl_dir" SMS="$sms" -j8
} >"$out/build.log" 2>&1
build_rc=$?
echo "build: exit $build_rc (SMS=$sms)" >"$summary"
if [ $build_rc -ne 0 ]; then
  echo "verify_cuda_programs.sh: error: the build failed; see $out/build.log" >&2
  tail -20 "$out/build.log" >&2
  exit 1
fi
p2p=$p2p_dir/p2pBandwidthLatencyTest
nccl=$nccl_dir/nccl_bench

sanitizer=$(command -v compute-sanitizer || true)
for candidate in "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -n "$sanitizer" ] || { [ -x "$candidate" ] && sanitizer=$candidate; }
done
{ echo "# compute-sanitizer: ${sanitizer:-not found}"; [ -n "$sanitizer" ] && "$sanitizer" --version; } >>"$out/machine.txt" 2>&1

# step NAME EXPECTED_EXIT SECONDS COMMAND...: runs COMMAND into NAME.txt (command on top).
step() {
  local name=$1 expected=$2 limit=$3; shift 3
  local file=$out/$name.txt
  {
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ) (UTC)"
    echo "# command: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE $*"
    echo "# expected exit status: $expected"
  } >"$file"
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >>"$file" 2>&1
  rc=$?
  echo "# exit status: $rc after $((SECONDS - t0)) s (limit $limit s)" >>"$file"
  last_file=$file
  [ "$rc" -eq "$expected" ]
}

# verdict NAME OK DETAIL: one line of SUMMARY.txt
verdict() {
  local name=$1 ok=$2 detail=$3
  if [ "$ok" = yes ]; then echo "PASS $name: $detail" >>"$summary"
  else echo "FAIL $name: $detail" >>"$summary"; failures=$((failures + 1)); fi
}

# The flipped element (from the --inject-fault line) and the element the check names.
p2p_elements() {
  local flipped named
  flipped=$(sed -n 's/.*--inject-fault: flipped one bit of element \([0-9]*\) in copy 0.*/\1/p' "$1" | head -n 1)
  named=$(sed -n 's/.*data mismatch.*first in copy 0 at element \([0-9]*\):.*/\1/p' "$1" | head -n 1)
  echo "${flipped:--} ${named:--}"
}
nccl_elements() {
  local flipped named
  flipped=$(sed -n "s/.*--inject-fault: flipped one bit of element \([0-9]*\) of rank 0's output.*/\1/p" "$1" | head -n 1)
  named=$(sed -n 's/.*data check failed on rank 0 .*first at element \([0-9]*\)$/\1/p' "$1" | head -n 1)
  echo "${flipped:--} ${named:--}"
}

P2P_SMALL=(--numElems=1048576 --iters=2 --reps=2 --warmup=1 --lat_iters=10 --timeout_s=5)
NCCL_SMALL=(-b 8 -e 1M -f 4 -w 1 -n 5)

# 1. As is: exit 0, data check passed, JSON written.
if step p2p-clean 0 40 "$p2p" "${P2P_SMALL[@]}" --json "$out/p2p-clean.json" &&
   grep -q "elements wrong: PASSED" "$last_file"; then
  verdict p2p-clean yes "exit 0, data check PASSED"
else
  verdict p2p-clean no "exit $rc (expected 0 and 'PASSED'); see $(basename "$last_file")"
fi
for op in all_reduce all_gather; do
  if step "nccl-$op-clean" 0 40 "$nccl" "$op" "${NCCL_SMALL[@]}" -J "$out/nccl-$op-clean.json" &&
     grep -q "Wrong elements (all rows, both placements): 0 OK" "$last_file"; then
    verdict "nccl-$op-clean" yes "exit 0, 0 wrong elements"
  else
    verdict "nccl-$op-clean" no "exit $rc (expected 0 and 0 wrong); see $(basename "$last_file")"
  fi
done

# 2. With --inject-fault: exit 1 and the flipped element named by the check.
step p2p-inject-fault 1 40 "$p2p" "${P2P_SMALL[@]}" --inject-fault
rc_fault=$rc
read -r flipped named <<<"$(p2p_elements "$last_file")"
if [ "$rc_fault" -eq 1 ] && [ "$flipped" != - ] && [ "$flipped" = "$named" ]; then
  verdict p2p-inject-fault yes "exit 1; flipped element $flipped, the check named element $named"
else
  verdict p2p-inject-fault no "exit $rc_fault (expected 1); flipped '$flipped', named '$named'"
fi
for op in all_reduce all_gather; do
  step "nccl-$op-inject-fault" 1 40 "$nccl" "$op" "${NCCL_SMALL[@]}" --inject-fault
  rc_fault=$rc
  read -r flipped named <<<"$(nccl_elements "$last_file")"
  if [ "$rc_fault" -eq 1 ] && [ "$flipped" != - ] && [ "$flipped" = "$named" ]; then
    verdict "nccl-$op-inject-fault" yes "exit 1; flipped element $flipped, the check named element $named"
  else
    verdict "nccl-$op-inject-fault" no "exit $rc_fault (expected 1); flipped '$flipped', named '$named'"
  fi
done

# 3. compute-sanitizer: memcheck (with leak check) and racecheck, tiny sizes.
P2P_TINY=(--numElems=65536 --iters=1 --reps=1 --warmup=0 --lat_iters=4 --timeout_s=2)
NCCL_TINY=(all_reduce -b 1K -e 64K -f 8 -w 1 -n 2)
if [ -z "$sanitizer" ]; then
  verdict compute-sanitizer no "compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda)"
else
  for tool in memcheck racecheck; do
    for prog in p2p nccl; do
      extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check full)
      # Inside libnccl, NCCL itself makes CUDA calls that fail by design and that it handles:
      # cudaFuncGetAttributes on kernels not built for this GPU (NoKernelImageForDevice) and
      # cudaGetLastError after enabling peer access that is already on (PeerAccessAlreadyEnabled);
      # on 2x H200 (NCCL 2.28.3) memcheck's ERROR SUMMARY counted 102 such calls (each one it
      # printed was one of these two) and no memory error.
      # nccl_bench checks the return of each of its own calls, so for it memcheck reports memory
      # errors and leaks only; the P2P program keeps the API error report.
      [ "$tool" = memcheck ] && [ "$prog" = nccl ] && extra+=(--report-api-errors no)
      if [ "$prog" = p2p ]; then cmd=("$p2p" "${P2P_TINY[@]}"); else cmd=("$nccl" "${NCCL_TINY[@]}"); fi
      step "sanitizer-$tool-$prog" 0 75 "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 "${cmd[@]}"
      line=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$last_file" | tail -n 1 | sed 's/^=* *//')
      if [ "$rc" -eq 0 ]; then
        verdict "sanitizer-$tool-$prog" yes "exit 0; ${line:-no summary line}"
      else
        verdict "sanitizer-$tool-$prog" no "exit $rc (99: the tool found errors); ${line:-no summary line}"
      fi
    done
  done
fi

echo "# $failures step(s) failed" >>"$summary"
cat "$summary"
[ "$failures" -eq 0 ]

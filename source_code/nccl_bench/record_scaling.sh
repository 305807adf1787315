#!/usr/bin/env bash
# Records the scaling runs behind notebook 4 (issue 9) on one NVSwitch node with 4 or 8 GPUs:
# the topology, the P2P test on all GPUs, and all_reduce / all_gather / reduce_scatter from
# 8 B to 4 GiB on 2, 4, ... N GPUs. One file per run in DIR/<n>gpu/, each starting with the
# date, driver, CUDA, NCCL version and the exact command.
#
# Usage: ./record_scaling.sh DIR   (builds both programs for sm_90 first)
# Keep NCCL_NVLS_ENABLE=0 on shared machines (it is forced here). Nothing is overwritten:
# if DIR/<n>gpu already exists the script says so and stops (exit 2) before building.
set -u
case ${1-} in
  -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "record_scaling.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
  '') echo "record_scaling.sh: error: no DIR given (usage: record_scaling.sh DIR)" >&2; exit 2 ;;
esac
out=$1
here=$(cd "$(dirname "$0")" && pwd)
p2pdir=$here/../p2pBandwidthLatencyTest
export NCCL_NVLS_ENABLE=0

ngpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
top=$out/${ngpus}gpu
if [ -e "$top" ]; then
  echo "record_scaling.sh: error: $top already exists; results are never overwritten, use a new DIR (argument 1)" >&2
  exit 2
fi
mkdir -p "$top"
set -o noclobber  # no redirection below ever replaces a file

if ! { make -C "$here" SMS=90 -j8 && make -C "$p2pdir" SMS=90 -j8; } >"$top/build.log" 2>&1; then
  echo "build failed:"; tail -20 "$top/build.log"; exit 1
fi

driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
cuda_driver=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | sed 's/^ *//' | paste -sd, -)

# preamble FILE COMMAND...: the facts every recorded file starts with
preamble() {
  local file=$1; shift
  {
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ) (UTC)"
    echo "# machine: $ngpus GPUs of one host, $(hostname) ($gpus)"
    echo "# driver: $driver (CUDA $cuda_driver); NCCL_NVLS_ENABLE=0"
    echo "# command: $*"
  } >"$file"
}

nvidia-smi topo -m >"$top/nvidia-smi-topo-m.txt" 2>&1
nvidia-smi topo -p2p rw >"$top/nvidia-smi-topo-p2p-rw.txt" 2>&1
nvidia-smi nvlink -s >"$top/nvidia-smi-nvlink-s.txt" 2>&1

f=$top/p2pBandwidthLatencyTest.txt
cmd=(./p2pBandwidthLatencyTest --numElems=67108864 --iters=4 --reps=3)
preamble "$f" "${cmd[@]}"
(cd "$p2pdir" && timeout 240 "${cmd[@]}" >>"$f" 2>&1); echo "p2p all GPUs: exit $?"

n=2
while ((n <= ngpus)); do
  for op in all_reduce all_gather reduce_scatter; do
    f=$top/nccl-bench-$op-g$n.txt
    cmd=(./nccl_bench "$op" -g "$n" -b 8 -e 4G -f 2 -w 5 -n 20)
    preamble "$f" "${cmd[@]}"
    (cd "$here" && timeout 180 "${cmd[@]}" >>"$f" 2>&1); echo "$op on $n GPUs: exit $?"
  done
  n=$((n * 2))
done

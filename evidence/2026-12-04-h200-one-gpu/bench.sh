#!/usr/bin/env bash
# One H200 (device tool), from the repository root: the copy program beside nvbandwidth, its
# recordings for notebook 1, nccl_bench's nccl-tests flags, notebook 7's one-GPU mysteries.
set -u
usage() { echo "usage: bench.sh OUTDIR NVBANDWIDTH [ALL_REDUCE_PERF]"; }
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  -*) echo "bench.sh: error: unknown option '$1' ($(usage))" >&2; exit 2 ;;
  "") echo "bench.sh: error: OUTDIR and NVBANDWIDTH are required ($(usage))" >&2; exit 2 ;;
esac
[ $# -ge 2 ] || { echo "bench.sh: error: expected OUTDIR NVBANDWIDTH ($(usage))" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 CUDA_DEVICE_ORDER=PCI_BUS_ID
out=$1 nvb=$2
mkdir -p "$out/bench" "$out/record" "$out/nccl" "$out/nb7"
log() { echo "[$(date -u +%T)] $*" | tee -a "$out/console.txt"; }
nvidia-smi -L > "$out/nvidia-smi-L.txt"; nvidia-smi topo -m > "$out/nvidia-smi-topo-m.txt" 2>&1
log "build"; for d in host_copy_bench nccl_bench p2pBandwidthLatencyTest; do
  make -s -C source_code/$d SMS=90 >> "$out/build.txt" 2>&1 || log "build of $d failed"; done
hcb=source_code/host_copy_bench/host_copy_bench
bind=()
if command -v numactl >/dev/null; then
  bus=$(nvidia-smi -i 0 --query-gpu=pci.bus_id --format=csv,noheader | tr A-F a-f)
  node=$(cat "/sys/bus/pci/devices/${bus:4}/numa_node" 2>/dev/null || echo -1)
  [ "$node" -ge 0 ] 2>/dev/null && bind=(numactl "--cpunodebind=$node" "--membind=$node")
fi
log "bind: '${bind[*]:-none}'"
# One-copy latency through PyTorch (the same quantity as the program's "latency of one copy")
cat > "$out/torch_latency.py" <<'PY'
import statistics, time, torch
h = torch.zeros(2, dtype=torch.int32).pin_memory(); d = torch.empty(2, dtype=torch.int32, device=0)
for _ in range(100): d.copy_(h, non_blocking=True); torch.cuda.synchronize()
t = []
for _ in range(2000):
    t0 = time.perf_counter(); d.copy_(h, non_blocking=True); torch.cuda.synchronize()
    t.append(time.perf_counter() - t0)
print(f"torch one-copy latency 8 B pinned h2d: median {statistics.median(t)*1e6:.2f} us "
      f"min {min(t)*1e6:.2f} n=2000")
PY
for r in 1 2 3 4 5; do
  log "round $r"
  "${bind[@]}" "$hcb" -b 256M -e 256M --memory pinned > "$out/bench/hcb-256M-r$r.txt" 2>&1
  "${bind[@]}" "$nvb" -d -t host_to_device_memcpy_ce device_to_host_memcpy_ce -b 256 -i 5 \
    > "$out/bench/nvb-256M-r$r.txt" 2>&1
  "${bind[@]}" "$hcb" -b 8 -e 8 > "$out/bench/hcb-8B-r$r.txt" 2>&1
  "${bind[@]}" python3 "$out/torch_latency.py" > "$out/bench/torch-lat-r$r.txt" 2>&1
  "${bind[@]}" "$nvb" -d -t host_device_latency_sm > "$out/bench/nvb-lat-r$r.txt" 2>&1
done
"$hcb" --inject-fault -b 1M -e 1M > "$out/bench/hcb-inject-fault.txt" 2>&1; echo "exit $?" >> "$out/bench/hcb-inject-fault.txt"
log "recordings"
for r in 1 2; do "$hcb" > "$out/record/host-device-copy-bench-run$r.txt" 2>&1; done
log "nccl_bench"
nb=source_code/nccl_bench/nccl_bench
"$nb" --help > "$out/nccl/help.txt" 2>&1
"$nb" all_reduce -b 8 -e 128M -f 2 -g 1 -J "$out/nccl/all_reduce-g1.json" > "$out/nccl/all_reduce-g1.txt" 2>&1
"$nb" all_reduce -b 8 -e 1M -f 4 -g 1 -G 10 > "$out/nccl/all_reduce-g1-G10.txt" 2>&1
"$nb" all_gather -o max -b 1K -e 1M -f 4 -g 1 > "$out/nccl/all_gather-o-max.txt" 2>&1
NCCL_MAX_CTAS=4 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING RANK=0 WORLD_SIZE=1 \
  LOCAL_RANK=0 "$nb" all_reduce --launcher torchrun -b 8 -e 1M -f 2 > "$out/nccl/maxctas4.txt" 2>&1
source_code/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest > "$out/nccl/p2p-1gpu.txt" 2>&1
log "notebook 7 mysteries 4-6"
PYTHONPATH=source_code python3 -c "
from pathlib import Path
from gputopo.lessons import diagnose as m
for n in (4, 5, 6):
    print(n, m.run(n, Path('$out/nb7')))" > "$out/nb7/console.txt" 2>&1
log "done"
# Real JSON outputs of NVIDIA's tools for the parsers (nccl-tests v2.19.6 built from its public
# source for sm_90 on a CPU machine; nvbandwidth v0.8 likewise)
if [ -x "${3:-}" ]; then
  "$3" -b 8 -e 128M -f 2 -g 1 -J "$out/nccl/nccl-tests-all_reduce_perf-g1.json" \
    > "$out/nccl/nccl-tests-all_reduce_perf-g1.txt" 2>&1
fi
"$nvb" -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce -b 256 > "$out/bench/nvb-256M.json" 2>&1
log "done with the JSON outputs"

#!/usr/bin/env bash
# Record what a one-GPU machine shows, for a new source_code/reference_systems/<system>/ folder:
# nvidia-smi's views, the CPU and NUMA layout, host<->GPU copies (3 runs), the bundled NCCL
# benchmark as one rank under torchrun, and NCCL's own topology and graph dumps with its
# INIT/GRAPH/ENV/TUNING log. Needs nvidia-smi, PyTorch with CUDA (python3), and nccl_bench
# built (`make -C source_code/nccl_bench`). NVLS stays off unless the caller exported a value.
#
#   tools/record_one_gpu.sh DIR        # DIR must not exist: nothing is overwritten
set -u
usage="usage: tools/record_one_gpu.sh DIR   (DIR must not exist yet)"
case ${1:-} in
  -h|--help) echo "$usage"; exit 0 ;;
  "") echo "record_one_gpu.sh: error: no DIR given ($usage)" >&2; exit 2 ;;
  -*) echo "record_one_gpu.sh: error: unknown option $1 ($usage)" >&2; exit 2 ;;
esac
out=$1
if [[ -e $out ]]; then echo "record_one_gpu.sh: error: $out exists; results are never overwritten" >&2; exit 2; fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=$root/source_code/nccl_bench/nccl_bench
mkdir -p "$out" && out=$(cd "$out" && pwd)

step() {  # step FILE COMMAND...: the command's output and exit status, with the command on top
  local file=$1; shift
  { echo "# command: $*"; "$@" 2>&1; echo "# exit status: $?"; } >"$out/$file"
}

date -u +%FT%TZ >"$out/date.txt"
step nvidia-smi.txt nvidia-smi
step nvidia-smi-topo-m.txt nvidia-smi topo -m
step nvidia-smi-topo-p2p-rw.txt nvidia-smi topo -p2p rw
step nvidia-smi-nvlink-s.txt nvidia-smi nvlink -s
step nvidia-smi-query-pcie.csv nvidia-smi --format=csv \
  --query-gpu=name,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode,clocks.sm,clocks.max.sm
step lscpu.txt lscpu
step numactl-H.txt numactl -H
step virt.txt systemd-detect-virt
step versions.txt python3 -c "import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())"
for r in 1 2 3; do
  step "host-device-copy-run$r.txt" python3 "$root/source_code/labs/host_device_copy.py"
done
step nccl-bench-torchrun-1rank.txt python3 -m torch.distributed.run --standalone --nproc_per_node 1 \
  --no_python "$bench" --launcher torchrun -b 8 -e 128M
step nccl-bench-torchrun-1rank-G.txt python3 -m torch.distributed.run --standalone --nproc_per_node 1 \
  --no_python "$bench" --launcher torchrun -b 8 -e 128M -G
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV,TUNING \
  NCCL_TOPO_DUMP_FILE="$out/nccl-topo-dump.xml" NCCL_GRAPH_DUMP_FILE="$out/nccl-graph-dump.xml" \
  step nccl-bench-torchrun-1rank-debug.txt python3 -m torch.distributed.run --standalone \
  --nproc_per_node 1 --no_python "$bench" --launcher torchrun -b 8 -e 1M
echo "record_one_gpu: wrote $out"

#!/usr/bin/env bash
# Runs one rank's command on the CPU cores and memory of the NUMA node nearest that rank's GPU.
#
#   srun --cpu-bind=none bind_local_rank.sh python train.py ...        (one task per GPU)
#   torchrun --no_python ... bind_local_rank.sh python train.py ...    (torchrun's workers)
#   mpirun --bind-to none --report-bindings bind_local_rank.sh python train.py ...   (Open MPI;
#     never --map-by numa, which deals ranks round-robin over the NUMA nodes)
#
# The rank's GPU is its local rank: HOROVOD_LOCAL_RANK (horovodrun), else LOCAL_RANK (torchrun),
# else OMPI_COMM_WORLD_LOCAL_RANK (mpirun), else SLURM_LOCALID (srun; last, since a launcher
# started by one srun task passes that task's id to all its workers). All of the node's GPUs stay
# visible, because Horovod and torchrun programs pick their GPU by local rank among the visible
# ones; when CUDA_VISIBLE_DEVICES is set (Slurm sets it to the job's GPUs), the rank's GPU is its
# local-rank-th entry. The GPU's NUMA node is read from sysfs through its PCI bus id (nvidia-smi's
# index, PCI bus order, as everywhere in the course). Without numactl, or when the GPU reports no
# NUMA node (-1), the command runs unbound and a line on stderr says so.
# CPUs: always --cpunodebind. Memory (GPUTOPO_NUMA_MEM): preferred (default) adds --preferred,
# so allocations go to that node first and spill to another when it is full; none binds CPUs
# only and leaves memory to first touch (as torchrun --numa-binding does); membind adds
# --membind, which fails (an OOM kill) rather than spill: with several NUMA nodes per socket
# (NPS4, SNC) a rank then gets a small slice of host RAM, too little for CPU offload or large
# pinned buffers, so use it only when you know the rank fits. (GPUTOPO_SYSFS replaces /sys.)
# Usage: bind_local_rank.sh COMMAND [ARGS...]   (--help: this text)
set -euo pipefail
case ${1-} in
  -h|--help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  '') echo "bind_local_rank.sh: error: no command to run (try --help)" >&2; exit 2 ;;
  -*) echo "bind_local_rank.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac
mem=${GPUTOPO_NUMA_MEM:-preferred}
case $mem in
  preferred|none|membind) ;;
  *) echo "bind_local_rank.sh: error: GPUTOPO_NUMA_MEM must be preferred, none or membind," \
          "not '$mem'" >&2; exit 2 ;;
esac
local_rank=${HOROVOD_LOCAL_RANK:-${LOCAL_RANK:-${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-0}}}}
export CUDA_DEVICE_ORDER=PCI_BUS_ID
gpu=$local_rank
if [[ -n ${CUDA_VISIBLE_DEVICES-} ]]; then
  IFS=, read -r -a visible <<<"$CUDA_VISIBLE_DEVICES"
  gpu=${visible[$local_rank]:-$local_rank}
fi
node=-1
if bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i "$gpu" 2>/dev/null); then
  # nvidia-smi prints 00000000:18:00.0; sysfs names the device 0000:18:00.0
  sysfs=${GPUTOPO_SYSFS:-/sys}/bus/pci/devices/$(tr '[:upper:]' '[:lower:]' <<<"${bus: -12}")/numa_node
  [[ -r $sysfs ]] && node=$(<"$sysfs")
fi
if [[ $node != -1 ]] && command -v numactl >/dev/null; then
  memory=()
  [[ $mem != none ]] && memory=("--$mem=$node")
  exec numactl --cpunodebind="$node" "${memory[@]}" "$@"
fi
echo "bind_local_rank.sh: local rank $local_rank (GPU $gpu): no NUMA binding (numa node $node, numactl $(command -v numactl || echo missing))" >&2
exec "$@"

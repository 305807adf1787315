#!/bin/bash
# Runs the measurement set recorded under
# source_code/reference_systems/h200-nvswitch-pair/ and writes one file per
# run into DIR: a preamble (date, driver, CUDA, NCCL, exact command), then
# nccl_bench's output. JSON files and NCCL's INFO logs go to DIR/extra/.
#
# Usage: ./record_runs.sh DIR [main|graph]   (after `make`; keep NCCL_NVLS_ENABLE=0 on shared machines)
# main (default): the plain runs; graph: CUDA-graph runs and a repeat of the sockets run.
# RUN_TIMEOUT (seconds, default 300) limits each run. Nothing is overwritten: if any file of
# the set already exists in DIR, the script says which and stops (exit 2) before running.
set -u
case ${1-} in
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "record_runs.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
    '') echo "record_runs.sh: error: no DIR given (usage: record_runs.sh DIR [main|graph])" >&2; exit 2 ;;
esac
out=$1
set_name=${2:-main}
case $set_name in
    main|graph) ;;
    *) echo "record_runs.sh: error: unknown set '$set_name': expected main or graph (argument 2)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
bench=$here/nccl_bench
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda=$("$nvcc_bin" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
cuda_driver=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | paste -sd, -)

mkdir -p "$out/extra"
mode=check  # first pass: refuse before running anything if a result of the set exists
record() {  # name env-assignments... -- arguments...
    local name=$1; shift
    if [ "$mode" = check ]; then
        local f
        for f in "$out/$name.txt" "$out/extra/$name.json" "$out/extra/$name.nccl-log.txt" "$out/extra/$name.raw"; do
            if [ -e "$f" ]; then
                echo "record_runs.sh: error: $f already exists; results are never overwritten, use a new DIR (argument 1)" >&2
                exit 2
            fi
        done
        return 0
    fi
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    local cmd=(env "${envs[@]}" "$bench" "$@" -J "$out/extra/$name.json"
               --nccl-log "$out/extra/$name.nccl-log.txt")
    local tmp=$out/extra/$name.raw
    local start rc nccl
    start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    timeout "${RUN_TIMEOUT:-300}" "${cmd[@]}" >"$tmp" 2>&1
    rc=$?
    nccl=$(sed -n 's/^# NCCL version \([0-9.]*\) .*/\1/p' "$tmp" | head -n 1)
    {
        echo "# date: $start (UTC)"
        echo "# machine: $(hostname) ($gpus)"
        echo "# driver: $driver (CUDA $cuda_driver); CUDA toolkit (nvcc): $cuda; NCCL library: ${nccl:-unknown}"
        echo "# command: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE ${envs[*]} ./nccl_bench $*"
        echo "# exit status: $rc"
        cat "$tmp"
    } >"$out/$name.txt"
    rm -f "$tmp"
    echo "$name: exit $rc"
}

runs() {
if [ "$set_name" = main ]; then
    record nccl-bench-all_reduce -- all_reduce -b 8 -e 2G -f 2 -w 5 -n 20
    record nccl-bench-all_reduce-n100 -- all_reduce -b 1M -e 2G -f 2 -w 10 -n 100
    record nccl-bench-all_reduce-P2P_LEVEL-LOC NCCL_P2P_LEVEL=LOC -- \
        all_reduce -b 8 -e 2G -f 2 -w 5 -n 20
    record nccl-bench-all_reduce-sockets NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- \
        all_reduce -b 8 -e 1G -f 2 -w 5 -n 20
    record nccl-bench-all_gather -- all_gather -b 8 -e 1G -f 2 -w 5 -n 20
    record nccl-bench-reduce_scatter -- reduce_scatter -b 8 -e 2G -f 2 -w 5 -n 20
    record nccl-bench-sendrecv -- sendrecv -b 8 -e 512M -f 2 -w 5 -n 20
    record nccl-bench-broadcast -- broadcast -b 8 -e 2G -f 2 -w 5 -n 20
else
    record nccl-bench-all_reduce-cuda-graph -- all_reduce -b 8 -e 2G -f 2 -n 20 -G 1
    record nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph NCCL_P2P_LEVEL=LOC -- \
        all_reduce -b 8 -e 256M -f 2 -n 20 -G 1
    record nccl-bench-sendrecv-cuda-graph -- sendrecv -b 8 -e 512M -f 2 -n 20 -G 1
    record nccl-bench-all_reduce-sockets-run2 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 -- \
        all_reduce -b 8 -e 1G -f 2 -w 5 -n 20
fi
}

runs          # check: stops with exit 2 if anything would be overwritten
mode=run
set -o noclobber  # and a redirection never replaces a file either
runs

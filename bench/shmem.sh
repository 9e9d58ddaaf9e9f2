#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/shmem.sh - the PGAS layer's figures in one run (docs/perf.md keeps
# them): put message rate against CTAs and put bandwidth against size,
# GPU-initiated against the same puts handed to a CPU proxy thread (same
# run); put/get latency; signal ping-pong; all-to-all time; same-node
# bandwidth through the CUDA IPC mapping against cudaMemcpy between the two
# mappings. Two PEs (processes) on this machine's GPU(s): the NIC sections
# with the same-node path off (the software NIC's wire between them), the
# same-node section with it on.
#
# usage: bench/shmem.sh [BUILD_DIR] [PES]     (defaults: build, 2)
# Needs a GPU. With one GPU, both PEs share it: start the CUDA MPS daemon
# first (or let MPS=1 do it: nvidia-cuda-mps-control -d with a pipe folder
# of its own, stopped at the end), otherwise the kernels time-slice and the
# latencies mean little. bench/shmem_bench.cu is built with nvcc into
# BUILD_DIR/bench when it is not there yet.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${BUILD:-build}}
PES=${2:-2}
BIN="$BUILD/bench/shmem_bench"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$BIN" ]; then
  if [ ! -f "$BUILD/src/libkinet_shmem.so" ] || [ ! -f "$BUILD/src/libkinet_cuda.so" ]; then
    echo "bench/shmem.sh: $BUILD/src/libkinet_shmem.so (built with CUDA) not found" >&2
    exit 1
  fi
  mkdir -p "$BUILD/bench"
  "$NVCC" -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
    -Iinclude -I"$BUILD/gen" bench/shmem_bench.cu -o "$BIN" \
    -L"$BUILD/src" -lkinet_shmem -lkinet_cuda -lkinet -Xlinker -rpath,"$(cd "$BUILD/src" && pwd)"
fi

if [ "${MPS:-0}" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/kinet-mps-pipe}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/kinet-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
fi

# one job of PES processes: run_job P2P SECTION...
run_job() {
  local p2p=$1
  shift
  local port=$((20000 + RANDOM % 20000)) pids=() r
  for ((r = 0; r < PES; r++)); do
    KINET_BOOT_ADDR=127.0.0.1:$port KINET_BOOT_SIZE=$PES KINET_BOOT_RANK=$r \
      KINET_BOOT_SECRET=shmem-bench KINET_BACKEND=soft KINET_SHMEM_P2P=$p2p \
      KINET_ALLOW_HOST_STAGING=1 KINET_SHMEM_EXEC=cuda FI_TCP_IFACE=lo \
      "$BIN" "$@" &
    pids+=($!)
  done
  local rc=0
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  return $rc
}

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
echo "### PGAS layer benchmark (bench/shmem.sh)"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- GPU: ${gpu:-unknown}; $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s), MPS ${MPS:-0}"
echo "- host: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr)"
echo "- $PES PEs (processes); NIC sections: the software NIC's wire between them (KINET_SHMEM_P2P=0,"
echo "  KINET_SHMEM_QPS=${KINET_SHMEM_QPS:-4} QPs per peer by CTA); same-node: CUDA IPC (KINET_SHMEM_P2P=1)"
run_job 0 rate lat a2a
run_job 1 p2p

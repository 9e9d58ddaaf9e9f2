#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/gpu.sh - the GPU figures of kinet in one run (docs/perf.md keeps
# them): floors (GPU<->CPU round trip through mapped host memory, GPU write
# bandwidth into host memory, device-to-device copy), put + completion
# latency per doorbell mode, message rate against CTAs and engine threads,
# GPU->GPU bandwidth against cudaMemcpyAsync, GPU- against host-initiated
# ping-pong, and the GPU-side posting cost with the NIC excluded.
#
# usage: bench/gpu.sh [BUILD_DIR]       (default: build)
# Needs a GPU; prints markdown. bench/gpu_bench.cu is built with nvcc into
# BUILD_DIR/bench when it is not there yet.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${BUILD:-build}}
BIN="$BUILD/bench/gpu_bench"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$BIN" ]; then
  if [ ! -f "$BUILD/src/libkinet_cuda.so" ]; then
    echo "bench/gpu.sh: $BUILD/src/libkinet_cuda.so not found: build with CUDA first" >&2
    exit 1
  fi
  mkdir -p "$BUILD/bench"
  "$NVCC" -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
    -Iinclude -I"$BUILD/gen" bench/gpu_bench.cu -o "$BIN" \
    -L"$BUILD/src" -lkinet_cuda -lkinet -Xlinker -rpath,"$(cd "$BUILD/src" && pwd)"
fi

gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null | head -1 || true)
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
echo "### GPU benchmark (bench/gpu.sh)"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- GPU: ${gpu:-unknown} (name, driver, SM clock, memory clock at start)"
echo "- host: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr)"
echo "- software NIC: engine threads on CPU cores; queues in pinned host memory mapped into the GPU"
echo
shift $(( $# > 0 ? 1 : 0 ))
"$BIN" "$@"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/dma.sh - copies posted by CUDA kernels on kinet copy queues against
# cudaMemcpyAsync of the same sizes and directions, one run (docs/perf.md).
#
# usage: bench/dma.sh [BUILD_DIR] [soft|mlx5] [MiB]   (default: build soft 256)
# Needs a GPU; prints markdown. bench/dma_bench.cu is built with nvcc into
# BUILD_DIR/bench.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${BUILD:-build}}
BIN="$BUILD/bench/dma_bench"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -f "$BUILD/src/libkinet_cuda.so" ]; then
  echo "bench/dma.sh: $BUILD/src/libkinet_cuda.so not found: build with CUDA first" >&2
  exit 1
fi
mkdir -p "$BUILD/bench"
"$NVCC" -O2 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
  -Iinclude -I"$BUILD/gen" bench/dma_bench.cu -o "$BIN" \
  -L"$BUILD/src" -lkinet_cuda -lkinet -Xlinker -rpath,"$(cd "$BUILD/src" && pwd)"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
echo "### Copy queues (bench/dma.sh)"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- GPU: ${gpu:-unknown}; host: $(nproc) CPUs, $(uname -sr)"
echo
shift $(( $# > 0 ? 1 : 0 ))
"$BIN" "$@"

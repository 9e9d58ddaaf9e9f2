#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/gpunetio.sh - open GPUNetIO (github.com/NVIDIA-DOCA/gpunetio), its host
# library and its three examples built unchanged from their own sources
# against the installed rdma-core, run on kinet-verbs through kinet-run: a
# server and a client process on this machine's GPU (under CUDA MPS when it
# has one GPU), for each NIC handler the examples offer. Each example checks
# its own results; this script reports, per run, whether both processes
# exited 0 and the example's last words (docs/stacks.md says where an
# unmodified GPUNetIO stops on kinet-verbs, and why).
#
# usage: GPUNETIO_SRC=DIR bench/gpunetio.sh [BUILD_DIR]   (default: build)
#   GPUNETIO_SRC  a checkout of GPUNetIO (a copy is built under BUILD_DIR)
#   HANDLERS      the examples' -p values to run (default "0 1 2 6": auto, CPU
#                 proxy, GPU doorbell, GPU BlueFlame)
#   EXAMPLES      default "write_lat write_bw put_bw"
#   GID           the GID index (-l, default 3: kinet-verbs' IPv4-mapped RoCE v2)
#   ITERS         -i (default 64; the bandwidth examples' is rounded up to a
#                 multiple of their CUDA_THREADS_BW, which they require)
#   OUT           where the examples' output goes (default /tmp/gpunetio-out)
#   MPS=0         do not start the CUDA MPS daemon
# exit: 0 every run passed; 1 some run failed (listed); 77 skipped, with the
# reason (no sources, no GPU, no nvcc, no rdma-core headers, no kinet-run).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
skip() { echo "bench/gpunetio.sh: $*: skipped" >&2; exit 77; }
SRC=${GPUNETIO_SRC:-}
if [ -z "$SRC" ] || [ ! -f "$SRC/Makefile" ] || [ ! -d "$SRC/examples" ]; then
  skip "GPUNetIO's sources not found (set GPUNETIO_SRC to a checkout of github.com/NVIDIA-DOCA/gpunetio)"
fi
nvidia-smi -L >/dev/null 2>&1 || skip "no GPU (nvidia-smi -L failed)"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
[ -x "$CUDA_HOME/bin/nvcc" ] || skip "no nvcc (set CUDA_HOME)"
[ -f /usr/include/infiniband/mlx5dv.h ] || skip "no rdma-core headers (libibverbs-dev)"
KRUN=$BUILD/tools/run/kinet-run
[ -x "$KRUN" ] || skip "no kinet-run in $BUILD"
HANDLERS=${HANDLERS:-"0 1 2 6"}
EXAMPLES=${EXAMPLES:-"write_lat write_bw put_bw"}
GID=${GID:-3}
ITERS=${ITERS:-64}
OUT=${OUT:-/tmp/gpunetio-out}
mkdir -p "$OUT"

# the build: a copy of the sources, GPUNetIO's own Makefiles, the GPU's
# architecture; libcuda from the driver (the toolkit's stub to link)
W=$BUILD/gpunetio
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
if [ ! -x "$W/examples/gpunetio_verbs_put_bw/gpunetio_verbs_put_bw" ]; then
  rm -rf "$W" && mkdir -p "$W" && cp -a "$SRC"/. "$W"/ || exit 1
  W=$(cd "$W" && pwd)
  L="-L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs"
  if ! make -C "$W" lib CUDA_HOME="$CUDA_HOME" CUDA_ARCH="$arch" \
    LDFLAGS="$L -lcudart_static -lcuda -libverbs -lmlx5" >"$OUT/build.log" 2>&1; then
    echo "bench/gpunetio.sh: GPUNetIO's library did not build ($OUT/build.log)" >&2
    exit 1
  fi
  for e in write_lat write_bw put_bw; do
    if ! make -C "$W/examples/gpunetio_verbs_$e" TOP_DIR="$W" CUDA_HOME="$CUDA_HOME" \
      CUDA_ARCH="$arch" \
      LDFLAGS="-L$W/lib -ldoca_gpunetio_host $L -libverbs -lmlx5 -lcuda -lcudart" \
      >>"$OUT/build.log" 2>&1; then
      echo "bench/gpunetio.sh: example $e did not build ($OUT/build.log)" >&2
      exit 1
    fi
  done
fi
W=$(cd "$W" && pwd)
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if [ "${MPS:-1}" = 1 ] && [ "$(nvidia-smi -L | wc -l)" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps-pipe CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && trap 'echo quit | nvidia-cuda-mps-control' EXIT
fi
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1)

echo "### GPUNetIO's examples on kinet-verbs (bench/gpunetio.sh)"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
echo "- GPUNetIO $([ -e "$SRC/.git" ] && git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '(not a git checkout)'); server and client on one GPU$([ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && echo ', CUDA MPS'); GID index $GID; $ITERS iterations"
echo
echo "| example | handler (-p) | result | last line |"
echo "| --- | ---: | --- | --- |"
fails=0
# the bandwidth examples take iterations in multiples of their threads
bw_threads=$(awk '$1 == "#define" && $2 == "CUDA_THREADS_BW" {print $3}' "$SRC/examples/verbs_common.h")
for e in $EXAMPLES; do
  bin=$W/examples/gpunetio_verbs_$e/gpunetio_verbs_$e
  args=(-d kinet0 -g "$bus")
  # -l (the GID index) where the example takes it (write_bw does not)
  grep -qs 'getopt(argc, argv, "[^"]*l:' "$SRC/examples/gpunetio_verbs_$e/"*_main.cpp &&
    args+=(-l "$GID")
  it=$ITERS
  case $e in *_bw) [ -n "$bw_threads" ] && it=$(( (ITERS + bw_threads - 1) / bw_threads * bw_threads )) ;; esac
  args+=(-i "$it")
  for h in $HANDLERS; do
    log=$OUT/${e}_p$h
    timeout 120 "$KRUN" "$bin" "${args[@]}" -p "$h" >"$log.srv" 2>&1 &
    srv=$!
    sleep 2
    timeout 120 "$KRUN" "$bin" "${args[@]}" -p "$h" -c 127.0.0.1 >"$log.cli" 2>&1
    crc=$?
    wait $srv
    src=$?
    last=$(grep -v '^\s*$' "$log.cli" | tail -1 | tr '|' '/' | cut -c1-120)
    if [ $crc = 0 ] && [ $src = 0 ]; then
      r=passed
    else
      r="failed (client $crc, server $src)"
      fails=$((fails + 1))
    fi
    echo "| $e | $h | $r | $last |"
  done
done
echo
echo "Output of each run: $OUT/<example>_p<handler>.{srv,cli}."
[ $fails = 0 ]

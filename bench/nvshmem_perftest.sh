#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/nvshmem_perftest.sh - NVSHMEM's own perftest programs, unchanged,
# built twice from the same sources: against NVSHMEM itself and against
# kinet-shmem (kinet's nvshmem.h); both run in this one call, 2 PEs on this
# machine's GPU (CUDA MPS when there is one GPU), and the figures side by
# side with their ratio (docs/perf.md, "kinet-shmem against NVSHMEM").
#
# usage: bench/nvshmem_perftest.sh [BUILD_DIR] [PROGRAM...]
#   BUILD_DIR     kinet built with CUDA (default: build)
#   PROGRAM       perftest programs by name (default: the latency and
#                 bandwidth set of the "GPU memory at GPU speed" targets)
# environment:
#   NVSHMEM_SRC   NVSHMEM's sources (a checkout or export of its public
#                 repository, tag v3.4.5-0 for NVSHMEM 3.4.5: perftest/
#                 is used); without them the run is skipped (exit 77)
#   NVSHMEM_HOME  NVSHMEM's installation (include/, lib/ with
#                 libnvshmem_host.so.3, libnvshmem_device.a and the bootstrap
#                 plugins); default: the Python package nvidia-nvshmem-cu13
#   OUT           where builds, logs and the table go (default: a temporary
#                 folder); the table is also printed
#   ITERS         perftest's -n (default: what each program defaults to)
#   MPS=0         do not start the CUDA MPS daemon (it is started, and
#                 stopped at the end, when there is one GPU)
#   RUN_TIMEOUT   seconds one program may run on one side (default 120)
#   JOBS          builds side by side (default: the number of CPUs)
# A program that does not build against one side, or fails, is reported as
# such in the table, with its log; the run goes on.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BUILD=${1:-build}
[ $# -gt 0 ] && shift
PROGS=("$@")
[ ${#PROGS[@]} -gt 0 ] || PROGS=(shmem_put_latency shmem_p_latency shmem_get_latency
  shmem_g_latency shmem_atomic_latency shmem_put_signal_ping_pong_latency
  shmem_put_ping_pong_latency shmem_atomic_ping_pong_latency shmem_st_bw shmem_put_bw)

skip() {
  echo "bench/nvshmem_perftest.sh: skipped: $*" >&2
  exit 77
}

SRC=${NVSHMEM_SRC:-}
[ -n "$SRC" ] && [ -f "$SRC/perftest/common/utils.cu" ] ||
  skip "NVSHMEM's sources not found (set NVSHMEM_SRC to a checkout of github.com/NVIDIA/nvshmem at tag v3.4.5-0)"
NVH=${NVSHMEM_HOME:-$(python3 -c 'import nvidia.nvshmem, os; print(os.path.dirname(nvidia.nvshmem.__file__))' 2>/dev/null ||
  python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null)}
[ -n "$NVH" ] && [ -d "$NVH/include" ] || skip "NVSHMEM not installed (pip package nvidia-nvshmem-cu13, or NVSHMEM_HOME)"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || skip "nvcc not found"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
command -v mpirun >/dev/null || skip "mpirun not found"
nvidia-smi -L >/dev/null 2>&1 || skip "no usable GPU"
[ -f "$BUILD/src/libkinet_shmem.so" ] && [ -f "$BUILD/src/libkinet_cuda.so" ] ||
  { echo "bench/nvshmem_perftest.sh: $BUILD/src/libkinet_shmem.so (built with CUDA) not found" >&2; exit 1; }
BUILD=$(cd "$BUILD" && pwd)

# perftest's utils.h includes nvml.h (NVML is loaded with dlopen: only the
# header is needed); CUDA's include folder has it where cuda-nvml-dev is in
NVML_INC=
for d in "$CUDA_HOME/include" "$CUDA_HOME"/targets/*/include /usr/include /usr/local/cuda/include \
  $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "include") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
  [ -f "$d/nvml.h" ] && { NVML_INC=$d; break; }
done
[ -n "$NVML_INC" ] || skip "nvml.h not found (CUDA's cuda-nvml-dev), which NVSHMEM's perftest includes"
MPI_INC=$(mpicc --showme:compile 2>/dev/null || true)
NVLIB=$NVH/lib
NVHOST=$(ls "$NVLIB"/libnvshmem_host.so* 2>/dev/null | head -1)
[ -n "$NVHOST" ] && [ -f "$NVLIB/libnvshmem_device.a" ] || skip "NVSHMEM's libraries not in $NVLIB"
MPI_PLUGIN=$(ls "$NVLIB"/nvshmem_bootstrap_mpi.so* 2>/dev/null | head -1)

OUT=${OUT:-$(mktemp -d /tmp/kinet-nvshmem-perftest.XXXXXX)}
mkdir -p "$OUT/nvshmem" "$OUT/kinet" "$OUT/logs"
PT=$SRC/perftest
find_src() { find "$PT/device" "$PT/host" -name "$1.cu" 2>/dev/null | head -1; }
ARCH=${ARCH:-sm_90}
read -ra MPI_INC_A <<<"$MPI_INC"
COMMON=(-std=c++17 -O2 -arch="$ARCH" -DNVSHMEMTEST_MPI_SUPPORT "${MPI_INC_A[@]}" -I"$NVML_INC" -I"$PT/common")

build_one() { # side prog src
  local side=$1 prog=$2 src=$3 log="$OUT/logs/build-$1-$2.log"
  if [ "$side" = nvshmem ]; then
    "$NVCC" "${COMMON[@]}" -rdc=true -I"$NVH/include" "$PT/common/utils.cu" "$src" \
      -o "$OUT/nvshmem/$prog" -L"$NVLIB" -l:"$(basename "$NVHOST")" -lnvshmem_device -lcuda \
      -Xlinker -rpath,"$NVLIB" >"$log" 2>&1
  else
    "$NVCC" "${COMMON[@]}" -I"$ROOT/include/kinet/nvshmem" -I"$ROOT/include" -I"$BUILD/gen" \
      "$PT/common/utils.cu" "$src" -o "$OUT/kinet/$prog" -L"$BUILD/src" -lkinet_shmem \
      -lkinet_cuda -lkinet -lcuda -Xlinker -rpath,"$BUILD/src" >"$log" 2>&1
  fi
}

if [ "${MPS:-1}" = 1 ] && [ "$(nvidia-smi -L | wc -l)" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps-pipe CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && trap 'echo quit | nvidia-cuda-mps-control' EXIT
fi

run_one() { # side prog
  local side=$1 prog=$2 log="$OUT/logs/run-$1-$2.log" args=()
  [ -n "${ITERS:-}" ] && args+=(-n "$ITERS")
  local env=(-x NVSHMEM_MACHINE_READABLE_OUTPUT=1 -x OMPI_MCA_btl_vader_single_copy_mechanism=none)
  if [ "$side" = nvshmem ]; then
    env+=(-x NVSHMEM_BOOTSTRAP=MPI)
    [ -n "$MPI_PLUGIN" ] && env+=(-x NVSHMEM_BOOTSTRAP_MPI_PLUGIN="$MPI_PLUGIN")
  else
    env+=(-x KINET_BOOT_MODE=mpi -x KINET_SHMEM_EXEC=cuda)
  fi
  timeout "${RUN_TIMEOUT:-120}" mpirun --allow-run-as-root --oversubscribe -np 2 "${env[@]}" \
    "$OUT/$side/$prog" "${args[@]}" >"$log" 2>&1
}

# "job___subjob___size__N___var value unit" lines of one log, first PE's
perf_lines() {
  grep -h '^&&&& PERF' "$1" 2>/dev/null | awk '!seen[$3]++ {print $3, $4}'
}

{
  echo "### kinet-shmem against NVSHMEM: NVSHMEM's perftest (bench/nvshmem_perftest.sh)"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "- NVSHMEM: $NVH; sources: $SRC ($(cat "$SRC/.git_tag" 2>/dev/null || git -C "$SRC" describe --tags 2>/dev/null || echo 'tag not recorded'))"
  echo "- 2 PEs, one GPU$([ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && echo ', CUDA MPS'), mpirun; kinet: KINET_BOOT_MODE=mpi"
  echo
  echo "| program | test, size | NVSHMEM | kinet | kinet / NVSHMEM |"
  echo "| --- | --- | ---: | ---: | ---: |"
} | tee "$OUT/table.md"

# every build first, side by side (nvcc is slow; the runs are not)
JOBS=${JOBS:-$(nproc)}
for prog in "${PROGS[@]}"; do
  src=$(find_src "$prog")
  [ -n "$src" ] || continue
  for side in nvshmem kinet; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    ( build_one "$side" "$prog" "$src" || touch "$OUT/logs/build-$side-$prog.failed" ) &
  done
done
wait

for prog in "${PROGS[@]}"; do
  src=$(find_src "$prog")
  if [ -z "$src" ]; then
    echo "| $prog | not in NVSHMEM's perftest | | | |" | tee -a "$OUT/table.md"
    continue
  fi
  st_n=ok st_k=ok
  [ -e "$OUT/logs/build-nvshmem-$prog.failed" ] && st_n="does not build"
  [ -e "$OUT/logs/build-kinet-$prog.failed" ] && st_k="does not build"
  [ "$st_n" = ok ] && { run_one nvshmem "$prog" || st_n="failed (rc $?)"; }
  [ "$st_k" = ok ] && { run_one kinet "$prog" || st_k="failed (rc $?)"; }
  if [ "$st_n" != ok ] || [ "$st_k" != ok ]; then
    echo "| $prog | NVSHMEM: $st_n; kinet: $st_k (logs in $OUT/logs) | | | |" | tee -a "$OUT/table.md"
  fi
  # the figures both sides report, by key
  join <(perf_lines "$OUT/logs/run-nvshmem-$prog.log" | sort) \
       <(perf_lines "$OUT/logs/run-kinet-$prog.log" | sort) |
    awk -v p="$prog" '{
      k = $1; sub(/^[^_]*___/, "", k); gsub(/___/, " ", k); gsub(/__/, " ", k)
      r = ($2 > 0) ? sprintf("%.2fx", $3 / $2) : "-"
      printf("| %s | %s | %s | %s | %s |\n", p, k, $2, $3, r)
    }' | tee -a "$OUT/table.md"
done
echo
echo "Latencies: a ratio above 1 is kinet slower; bandwidths: below 1 is kinet slower. Logs: $OUT/logs"

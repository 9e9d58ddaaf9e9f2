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
#   PROGRAM       perftest programs by name, device or host (.cu or .cpp,
#                 found as bench/nvshmem_compile.sh finds them; default: the
#                 latency and bandwidth set of the "GPU memory at GPU speed"
#                 targets)
# environment:
#   NVSHMEM_SRC   NVSHMEM's sources (a checkout or export of its public
#                 repository, tag v3.4.5-0 for NVSHMEM 3.4.5: perftest/
#                 is used); without them the run is skipped (exit 77)
#   NVSHMEM_HOME  NVSHMEM's installation (include/, lib/ with
#                 libnvshmem_host.so.3, libnvshmem_device.a and the bootstrap
#                 plugins); default: the Python package nvidia-nvshmem-cu13
#   NVCC, NVML_INC, ARCH  nvcc, a folder with nvml.h and the GPU architecture,
#                 found as bench/nvshmem_compile.sh finds them (its usage)
#   OUT           where builds, logs and the table go (default: a temporary
#                 folder); the table is also printed
#   ITERS         perftest's -n (default: what each program defaults to)
#   MPS=0         do not start the CUDA MPS daemon (it is started, and
#                 stopped at the end, when there is one GPU)
#   RUN_TIMEOUT   seconds one program may run on one side (default 120)
#   JOBS          builds side by side (default: the number of CPUs)
#   IBGDA=0       skip the third run: NVSHMEM itself (the same binaries) over
#                 its IBGDA transport, and its ibrc transport, on kinet-verbs,
#                 through kinet-run (P2P off so the NIC path is used; the
#                 settings docs/stacks.md gives), reported in a second table
#                 against NVSHMEM's P2P
#   IBGDA_HANDLERS  NVSHMEM_IBGDA_NIC_HANDLER values to run (default
#                 "cpu_host_memory gpu ibrc": the CPU-assisted mode, the GPU's,
#                 and "ibrc", which is not a handler but NVSHMEM's other IB
#                 transport, RC queues driven by NVSHMEM's CPU proxy thread
#                 (NVSHMEM_REMOTE_TRANSPORT=ibrc), which needs no DC)
# A program that does not build against one side, or fails, is reported as
# such in the table, with its log; the run goes on.
set -uo pipefail
# the source root, NVSHMEM_SRC, NVCC, NVML_INC, ARCH, skip, nvshmem_program_src
# shellcheck source=bench/nvshmem_env.sh
. "$(dirname "$0")/nvshmem_env.sh"
BUILD=${1:-build}
[ $# -gt 0 ] && shift
PROGS=("$@")
[ ${#PROGS[@]} -gt 0 ] || PROGS=(shmem_put_latency shmem_p_latency shmem_get_latency
  shmem_g_latency shmem_atomic_latency shmem_put_signal_ping_pong_latency
  shmem_put_ping_pong_latency shmem_atomic_ping_pong_latency shmem_st_bw shmem_put_bw)

NVH=${NVSHMEM_HOME:-$(python3 -c 'import nvidia.nvshmem, os; print(os.path.dirname(nvidia.nvshmem.__file__))' 2>/dev/null ||
  python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null)}
[ -n "$NVH" ] && [ -d "$NVH/include" ] || skip "NVSHMEM not installed (pip package nvidia-nvshmem-cu13, or NVSHMEM_HOME)"
command -v mpirun >/dev/null || skip "mpirun not found"
nvidia-smi -L >/dev/null 2>&1 || skip "no usable GPU"
[ -f "$BUILD/src/libkinet_shmem.so" ] && [ -f "$BUILD/src/libkinet_cuda.so" ] ||
  { echo "bench/nvshmem_perftest.sh: $BUILD/src/libkinet_shmem.so (built with CUDA) not found" >&2; exit 1; }
BUILD=$(cd "$BUILD" && pwd)

MPI_INC=$(mpicc --showme:compile 2>/dev/null || true)
NVLIB=$NVH/lib
NVHOST=$(ls "$NVLIB"/libnvshmem_host.so* 2>/dev/null | head -1)
[ -n "$NVHOST" ] && [ -f "$NVLIB/libnvshmem_device.a" ] || skip "NVSHMEM's libraries not in $NVLIB"
MPI_PLUGIN=$(ls "$NVLIB"/nvshmem_bootstrap_mpi.so* 2>/dev/null | head -1)

OUT=${OUT:-$(mktemp -d /tmp/kinet-nvshmem-perftest.XXXXXX)}
mkdir -p "$OUT/nvshmem" "$OUT/kinet" "$OUT/logs"
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

# After a run: no process of the binary may outlive it. A run that timed
# out leaves its PEs behind when mpirun is stopped, and they hold the GPU
# (measured: the next program's CUDA context failed with "device(s) busy or
# unavailable"). They are killed, and waited for up to 20 s.
reap() { # binary
  pkill -9 -f -- "$1" 2>/dev/null || return 0
  local i
  for i in $(seq 40); do pgrep -f -- "$1" >/dev/null || return 0; sleep 0.5; done
  echo "bench/nvshmem_perftest.sh: processes of $1 still there after 20 s" >&2
}

run_one() { # side prog
  local side=$1 prog=$2 log="$OUT/logs/run-$1-$2.log" args=()
  [ -n "${ITERS:-}" ] && args+=(-n "$ITERS")
  local env=(-x NVSHMEM_MACHINE_READABLE_OUTPUT=1 -x OMPI_MCA_btl_vader_single_copy_mechanism=none)
  if [ "$side" = nvshmem ]; then
    env+=(-x NVSHMEM_BOOTSTRAP=MPI)
    [ -n "$MPI_PLUGIN" ] && env+=(-x NVSHMEM_BOOTSTRAP_MPI_PLUGIN="$MPI_PLUGIN")
  else
    # GPU heaps are reached by the software NIC through copies, which must be
    # allowed (docs/shmem.md); without it kinet-shmem's init refuses the heap
    env+=(-x KINET_BOOT_MODE=mpi -x KINET_SHMEM_EXEC=cuda -x KINET_ALLOW_HOST_STAGING=1)
  fi
  timeout "${RUN_TIMEOUT:-120}" mpirun --allow-run-as-root --oversubscribe -np 2 "${env[@]}" \
    "$OUT/$side/$prog" "${args[@]}" >"$log" 2>&1
  local rc=$?
  reap "$OUT/$side/$prog"
  return $rc
}

# NVSHMEM's own binary over its IBGDA transport on kinet-verbs (kinet-run),
# with the NIC handler h: the settings that go furthest (docs/stacks.md);
# h "ibrc": over its IB RC transport (CPU proxy) instead
run_ibgda() { # prog handler
  local prog=$1 h=$2 log="$OUT/logs/run-ibgda-$2-$1.log" args=()
  [ -n "${ITERS:-}" ] && args+=(-n "$ITERS")
  local env=(-x NVSHMEM_MACHINE_READABLE_OUTPUT=1 -x OMPI_MCA_btl_vader_single_copy_mechanism=none
    -x NVSHMEM_BOOTSTRAP=MPI -x NVSHMEM_DISABLE_P2P=1 -x NVSHMEM_HCA_PREFIX=kinet
    -x NVSHMEM_IB_GID_INDEX=3 -x KINET_ALLOW_HOST_STAGING=1)
  if [ "$h" = ibrc ]; then
    env+=(-x NVSHMEM_REMOTE_TRANSPORT=ibrc)
  else
    env+=(-x NVSHMEM_REMOTE_TRANSPORT=ibgda -x NVSHMEM_IB_ENABLE_IBGDA=1
      -x NVSHMEM_IBGDA_NIC_HANDLER="$h" -x NVSHMEM_IBGDA_FORCE_NIC_BUF_MEMTYPE=hostmem)
  fi
  [ -n "$MPI_PLUGIN" ] && env+=(-x NVSHMEM_BOOTSTRAP_MPI_PLUGIN="$MPI_PLUGIN")
  timeout "${RUN_TIMEOUT:-120}" mpirun --allow-run-as-root --oversubscribe -np 2 "${env[@]}" \
    "$BUILD/tools/run/kinet-run" "$OUT/nvshmem/$prog" "${args[@]}" >"$log" 2>&1
  local rc=$?
  reap "$OUT/nvshmem/$prog"
  return $rc
}

# "job___subjob___size__N___var value unit" lines of one log, first PE's
perf_lines() {
  grep -h '^&&&& PERF' "$1" 2>/dev/null | awk '!seen[$3]++ {print $3, $4}'
}

{
  echo "### kinet-shmem against NVSHMEM: NVSHMEM's perftest (bench/nvshmem_perftest.sh)"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "- NVSHMEM: $NVH; sources: $SRC ($(cat "$SRC/.git_tag" 2>/dev/null || { [ -e "$SRC/.git" ] && git -C "$SRC" describe --tags 2>/dev/null; } || echo 'tag not recorded'))"
  echo "- 2 PEs, one GPU$([ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && echo ', CUDA MPS'), mpirun; kinet: KINET_BOOT_MODE=mpi, KINET_ALLOW_HOST_STAGING=1"
  echo
  echo "| program | test, size | NVSHMEM | kinet | kinet / NVSHMEM |"
  echo "| --- | --- | ---: | ---: | ---: |"
} | tee "$OUT/table.md"

# every build first, side by side (nvcc is slow; the runs are not)
JOBS=${JOBS:-$(nproc)}
for prog in "${PROGS[@]}"; do
  src=$(nvshmem_program_src "$prog")
  [ -n "$src" ] || continue
  for side in nvshmem kinet; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    ( build_one "$side" "$prog" "$src" || touch "$OUT/logs/build-$side-$prog.failed" ) &
  done
done
wait

for prog in "${PROGS[@]}"; do
  src=$(nvshmem_program_src "$prog")
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

[ "${IBGDA:-1}" = 1 ] || exit 0
echo
if [ ! -x "$BUILD/tools/run/kinet-run" ]; then
  echo "NVSHMEM over IBGDA and ibrc on kinet-verbs: not run ($BUILD/tools/run/kinet-run not found)" |
    tee -a "$OUT/table.md"
  exit 0
fi
{
  echo "### NVSHMEM over its IB transports on kinet-verbs, against NVSHMEM's P2P"
  echo
  echo "- the NVSHMEM binaries above, through kinet-run: NVSHMEM_DISABLE_P2P=1, NVSHMEM_HCA_PREFIX=kinet, NVSHMEM_IB_GID_INDEX=3, KINET_ALLOW_HOST_STAGING=1; IBGDA rows: NVSHMEM_REMOTE_TRANSPORT=ibgda, NVSHMEM_IBGDA_FORCE_NIC_BUF_MEMTYPE=hostmem and the NIC handler of the row; ibrc rows: NVSHMEM_REMOTE_TRANSPORT=ibrc (RC queues, NVSHMEM's CPU proxy)"
  echo
  echo "| program | IBGDA handler, or ibrc | test, size | NVSHMEM P2P | on kinet-verbs | kinet-verbs / P2P |"
  echo "| --- | --- | --- | ---: | ---: | ---: |"
} | tee -a "$OUT/table.md"
for prog in "${PROGS[@]}"; do
  [ -n "$(nvshmem_program_src "$prog")" ] || continue
  [ -e "$OUT/logs/build-nvshmem-$prog.failed" ] && continue
  for h in ${IBGDA_HANDLERS:-cpu_host_memory gpu ibrc}; do
    if ! run_ibgda "$prog" "$h"; then
      # the first line NVSHMEM or kinet printed as an error, leaving out
      # NVSHMEM's warnings (it warns, then falls back, on some steps), with
      # NVSHMEM's source path cut to the file
      why=$(grep -v '^WARN' "$OUT/logs/run-ibgda-$h-$prog.log" |
        grep -m1 -iE 'error|fail|skipping|abort' | sed 's|^/[^ ]*/\([^/ ]*:[0-9]*:\)|\1|' |
        tr '|' '/' | cut -c1-160)
      echo "| $prog | $h | failed: ${why:-see the log} | | | |" | tee -a "$OUT/table.md"
      continue
    fi
    join <(perf_lines "$OUT/logs/run-nvshmem-$prog.log" | sort) \
         <(perf_lines "$OUT/logs/run-ibgda-$h-$prog.log" | sort) |
      awk -v p="$prog" -v h="$h" '{
        k = $1; sub(/^[^_]*___/, "", k); gsub(/___/, " ", k); gsub(/__/, " ", k)
        r = ($2 > 0) ? sprintf("%.2fx", $3 / $2) : "-"
        printf("| %s | %s | %s | %s | %s | %s |\n", p, h, k, $2, $3, r)
      }' | tee -a "$OUT/table.md"
  done
done

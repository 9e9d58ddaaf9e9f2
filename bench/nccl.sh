#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/nccl.sh - NCCL, unmodified, over kinet-verbs: nccl-tests' all_reduce,
# all_gather and alltoall between 2 ranks (2 GPUs of one machine, one
# process each: NCCL refuses two ranks on one GPU), through NCCL's IB
# transport on the software NIC (kinet-run; NCCL's P2P and SHM transports
# off so that the network path carries everything), beside NCCL's own
# transports of the same run: its socket transport (the network path
# without RDMA) and its defaults (NVLink/PCIe P2P).
#
# usage: bench/nccl.sh [BUILD_DIR]                 (default: build)
# environment:
#   NCCL_TESTS_SRC  nccl-tests' sources (github.com/NVIDIA/nccl-tests);
#                   without them the run is skipped (exit 77)
#   NCCL_HOME       NCCL's installation (include/nccl.h, lib/libnccl.so.2);
#                   default: the Python package nvidia-nccl-cu13
#   OUT             builds, logs and the table (default: a temporary folder)
#   SIZES           nccl-tests' -b/-e (default: "8 128M")
# Needs 2 GPUs, mpirun and nvcc; reports itself skipped (77) otherwise.
#
# NCCL's GIN (its device API's GPU-initiated puts, NCCL_GIN_TYPE) needs a
# program written against ncclDevComm; nccl-tests' collectives do not use
# it. Not scripted yet (docs/verbs.md, "GPU-initiated stacks").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
skip() {
  echo "bench/nccl.sh: skipped: $*" >&2
  exit 77
}
SRC=${NCCL_TESTS_SRC:-}
[ -n "$SRC" ] && [ -f "$SRC/src/Makefile" ] || skip "nccl-tests' sources not found (NCCL_TESTS_SRC)"
NCCL=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)}
[ -n "$NCCL" ] && [ -f "$NCCL/include/nccl.h" ] || skip "NCCL not installed (nvidia-nccl-cu13, or NCCL_HOME)"
command -v mpirun >/dev/null || skip "mpirun not found"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || skip "nvcc not found"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$ngpu" -ge 2 ] || skip "$ngpu GPU(s): NCCL needs one GPU per rank, 2 ranks"
KRUN=$BUILD/tools/run/kinet-run
[ -x "$KRUN" ] || { echo "bench/nccl.sh: $KRUN not found: build kinet first" >&2; exit 1; }

OUT=${OUT:-$(mktemp -d /tmp/kinet-nccl.XXXXXX)}
mkdir -p "$OUT/nccl/lib" "$OUT/logs"
# nccl-tests links -lnccl: the package has only the versioned name
ln -sf "$NCCL/include" "$OUT/nccl/include"
ln -sf "$(ls "$NCCL"/lib/libnccl.so* | head -1)" "$OUT/nccl/lib/libnccl.so"
MPI_HOME=${MPI_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v mpicc)")")")}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
make -C "$SRC/src" MPI=1 MPI_HOME="$MPI_HOME" NCCL_HOME="$OUT/nccl" CUDA_HOME="$CUDA_HOME" \
  BUILDDIR="$OUT/build" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
  >"$OUT/logs/build.log" 2>&1 || { echo "bench/nccl.sh: nccl-tests did not build ($OUT/logs/build.log)" >&2; exit 1; }

read -r B E <<<"${SIZES:-8 128M}"
# -x NAME forwards the value mpirun sees: under kinet-run, kinet-verbs first
export LD_LIBRARY_PATH="$NCCL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# shellcheck disable=SC2054 # the comma is NCCL's list separator
base=(mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO
  -x NCCL_DEBUG_SUBSYS=INIT,NET)
# NCCL over kinet-verbs: its IB transport on kinet0 (RoCE v2 GID 1, the
# link-local one), payloads through host memory (no GPUDirect: kinet-verbs
# registers no GPU memory)
ib=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_NET=IB -x NCCL_IB_HCA=kinet0
  -x NCCL_IB_GID_INDEX=1 -x NCCL_NET_GDR_LEVEL=LOC)
sock=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_NET=Socket -x NCCL_SOCKET_IFNAME=lo)

run() { # name test extra...
  local name=$1 test=$2
  shift 2
  timeout 600 "$@" "$OUT/build/${test}_perf" -b "$B" -e "$E" -f 4 -g 1 -c 1 \
    >"$OUT/logs/$name-$test.log" 2>&1
}
{
  echo "### NCCL over kinet-verbs (bench/nccl.sh)"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -2 | paste -sd,)"
  echo "- NCCL: $NCCL; nccl-tests: $SRC; 2 ranks, one GPU each, mpirun"
  echo
  echo "| test | size | NCCL default (us) | NCCL sockets (us) | NCCL IB on kinet-verbs (us) | kinet / sockets |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
} | tee "$OUT/table.md"
for t in all_reduce all_gather alltoall; do
  run default "$t" "${base[@]}"
  run sockets "$t" "${base[@]}" "${sock[@]}"
  "$KRUN" true 2>/dev/null # kinet-run's notice once, not per rank
  run kinet "$t" "$KRUN" "${base[@]}" "${ib[@]}"
  # nccl-tests' rows: size count type redop root time(out-of-place) ...
  rows() { awk '$1 ~ /^[0-9]+$/ && NF > 8 {print $1, $6}' "$OUT/logs/$1-$t.log"; }
  join <(rows default | sort) <(rows sockets | sort) | join - <(rows kinet | sort) | sort -n |
    awk -v t="$t" '{ r = ($3 > 0) ? sprintf("%.2fx", $4 / $3) : "-";
      printf("| %s | %s | %s | %s | %s | %s |\n", t, $1, $2, $3, $4, r) }' | tee -a "$OUT/table.md"
  grep -q "Avg bus bandwidth" "$OUT/logs/kinet-$t.log" ||
    echo "| $t | over kinet-verbs: failed ($OUT/logs/kinet-$t.log) | | | | |" | tee -a "$OUT/table.md"
done
echo
echo "Data checked by nccl-tests (-c 1: a wrong result counts as an error in its log). Logs: $OUT/logs"

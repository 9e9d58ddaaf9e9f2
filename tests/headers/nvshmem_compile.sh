#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/headers/nvshmem_compile.sh - the ctest nvshmem_compile: a fixed few
# of NVSHMEM 3.4.5's perftest programs and examples, unchanged, built against
# kinet's NVSHMEM headers by bench/nvshmem_compile.sh: a device
# point-to-point, a device collective and a host (on-stream) perftest program
# (with perftest's common utils.cu) and an example.
#
# usage: nvshmem_compile.sh SOURCE_DIR BUILD_DIR LINK NVSHMEM_SRC NVML_INC OUT
#   NVSHMEM_SRC and NVML_INC may be empty: then the environment's are used.
# Exit status: 0 all built, 1 one did not, 77 skipped (no NVSHMEM sources,
# no nvcc or no nvml.h).
set -u
src=$1 build=$2 link=$3 nvsrc=$4 nvml=$5 out=$6
[ -n "$nvsrc" ] && export NVSHMEM_SRC=$nvsrc
[ -n "$nvml" ] && export NVML_INC=$nvml
rm -rf "$out"
mkdir -p "$out"
LINK=$link OUT=$out JOBS=2 "$src/bench/nvshmem_compile.sh" "$build" \
  shmem_put_bw barrier_latency sync_on_stream ring-reduce

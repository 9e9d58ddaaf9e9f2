#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/headers/cuda_host.sh - a host file of a CUDA program, compiled by a
# C++ compiler (not nvcc) with CUDA's include path, includes <cuda_runtime.h>
# and kinet's nvshmem.h in either order (NVSHMEM's perftest and examples do):
# kinet's CUDA stand-ins for the host executor must step aside for CUDA's.
# Each file is compiled to an object with -pedantic -Wall -Wextra -Werror.
#
# usage: cuda_host.sh CXX INCLUDE_DIR CUDA_INCLUDE_DIR OUT_DIR
# Exit status: 0 both compiled, 1 one did not, 77 skipped (no C++ compiler or
# no CUDA runtime header).
set -u
cxx=$1 inc=$2 cuda=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$cxx" ] || [[ "$cxx" == *NOTFOUND ]] || ! command -v "$cxx" > /dev/null 2>&1; then
  echo "SKIPPED headers_cuda_host: no C++ compiler"
  exit 77
fi
if [ -z "$cuda" ] || [[ "$cuda" == *NOTFOUND ]] || [ ! -f "$cuda/cuda_runtime.h" ]; then
  echo "SKIPPED headers_cuda_host: CUDA's runtime header (cuda_runtime.h) is not installed"
  exit 77
fi
mkdir -p "$out"
fail=0
for f in cudart_first nvshmem_first; do
  cmd=("$cxx" -std=c++17 -pedantic -Wall -Wextra -Werror -I"$inc" -I"$inc/kinet/nvshmem"
       -I"$cuda" -c "$here/cuda_host/$f.cpp" -o "$out/$f.o")
  if log=$("${cmd[@]}" 2>&1); then
    echo "ok    $f.cpp"
  else
    echo "FAIL  $f.cpp: ${cmd[*]}"
    echo "$log"
    fail=1
  fi
done
exit $fail

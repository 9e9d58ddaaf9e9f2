# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
#
# bench/nvshmem_env.sh - what bench/nvshmem_compile.sh and
# bench/nvshmem_perftest.sh share; sourced by them (bash), not run.
#
# It moves to kinet's source root and finds the tools and sources both need;
# a missing one makes the calling script skip (exit 77, the reason on
# stderr, prefixed with the script's name).
#
# environment (the caller's, see its usage):
#   NVSHMEM_SRC   NVSHMEM's sources (tag v3.4.5-0); perftest/ is needed, and
#                 examples/ too when NVSHMEM_ENV_EXAMPLES=1
#   NVCC          nvcc (default: from PATH, else /usr/local/cuda/bin/nvcc)
#   CUDA_HOME     CUDA (default: the folder above nvcc's bin/)
#   NVML_INC      a folder with nvml.h (perftest's utils.h includes it; NVML
#                 itself is loaded at run time); default: searched in CUDA's
#                 include folders, then in the Python nvidia-* packages'
#   ARCH          GPU architecture (default sm_90)
# sets: ROOT (kinet's source root, the working directory), SRC, PT (its
# perftest/), EX (its examples/), NVCC, CUDA_HOME, NVML_INC, ARCH
# defines: skip REASON (exit 77), nvshmem_programs (every program of
# perftest/device/*, perftest/host/* and examples/, one "kind name source"
# line each, sorted) and nvshmem_program_src NAME (the source of perftest
# program NAME: device or host, .cu or .cpp; empty when there is none).

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
# shellcheck disable=SC2034 # ROOT: for the scripts that source this
ROOT=$PWD
NVSHMEM_ENV_ME="bench/$(basename "$0")"

skip() {
  echo "$NVSHMEM_ENV_ME: skipped: $*" >&2
  exit 77
}

SRC=${NVSHMEM_SRC:-}
[ -n "$SRC" ] && [ -f "$SRC/perftest/common/utils.cu" ] &&
  { [ "${NVSHMEM_ENV_EXAMPLES:-0}" != 1 ] || [ -d "$SRC/examples" ]; } ||
  skip "NVSHMEM's sources not found (set NVSHMEM_SRC to a checkout of github.com/NVIDIA/nvshmem at tag v3.4.5-0)"
SRC=$(cd "$SRC" && pwd)
PT=$SRC/perftest
EX=$SRC/examples

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || skip "nvcc not found (set NVCC)"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$NVCC")")")}

NVML_INC=${NVML_INC:-}
if [ -z "$NVML_INC" ]; then
  for d in "$CUDA_HOME/include" "$CUDA_HOME"/targets/*/include /usr/include /usr/local/cuda/include \
    $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "include") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
    [ -f "$d/nvml.h" ] && { NVML_INC=$d; break; }
  done
fi
[ -n "$NVML_INC" ] && [ -f "$NVML_INC/nvml.h" ] ||
  skip "nvml.h not found (CUDA's cuda-nvml-dev, or NVML_INC), which NVSHMEM's perftest includes"

ARCH=${ARCH:-sm_90}

nvshmem_programs() {
  local f d
  {
    for f in "$PT"/device/*/*.cu; do
      [ -e "$f" ] && echo "perftest/device/$(basename "$(dirname "$f")") $(basename "${f%.*}") $f"
    done
    for f in "$PT"/host/*/*.cu "$PT"/host/*/*.cpp; do
      [ -e "$f" ] && echo "perftest/host/$(basename "$(dirname "$f")") $(basename "${f%.*}") $f"
    done
    for f in "$EX"/*.cu "$EX"/*.cpp "$EX"/*/*.cu; do
      [ -e "$f" ] || continue
      d=$(dirname "${f#"$EX"/}")
      [ "$d" = . ] && d= || d=/$d
      echo "examples$d $(basename "${f%.*}") $f"
    done
  } | sort
}

nvshmem_program_src() { # NAME
  local kind name src
  while read -r kind name src; do
    case $kind in perftest/*) [ "$name" = "$1" ] && { echo "$src"; return; } ;; esac
  done < <(nvshmem_programs)
}

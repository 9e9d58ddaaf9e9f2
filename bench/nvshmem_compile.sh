#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/nvshmem_compile.sh - build NVSHMEM's own perftest programs and
# examples, unchanged, against kinet-shmem's NVSHMEM headers (compile and
# link; nothing is run, no GPU is needed) and print a table: program, whether
# it builds, the first error.
#
# usage: bench/nvshmem_compile.sh [BUILD_DIR] [PROGRAM...]
#   BUILD_DIR     kinet built with CUDA (default: build); its src/ must hold
#                 libkinet_shmem.so and libkinet_cuda.so unless LINK=0
#   PROGRAM       programs by name (file name without extension, e.g.
#                 shmem_put_bw, hello, ring-bcast); default: every program of
#                 perftest/device/*, perftest/host/* and examples/
# environment:
#   NVSHMEM_SRC   NVSHMEM's sources (tag v3.4.5-0): perftest/ and examples/
#                 are used, never modified; without them: skipped (exit 77)
#   NVCC          nvcc (default: from PATH, else /usr/local/cuda/bin/nvcc);
#                 none: skipped (exit 77)
#   NVML_INC      a folder with nvml.h (perftest's utils.h includes it; NVML
#                 itself is loaded at run time); default: searched in CUDA's
#                 include folders and the Python nvidia-* packages'; none:
#                 skipped (exit 77)
#   CUTLASS_HOME  CUTLASS's sources: without them the CUTLASS example
#                 (examples/gemm_allreduce) is listed as skipped
#   LINK=0        compile only (no link; BUILD_DIR's libraries not needed)
#   ARCH          GPU architecture (default sm_90)
#   OUT           where objects, logs and table.md go (default: a temporary
#                 folder)
#   JOBS          builds side by side (default 2)
# Exit status: 0 when every program asked for builds (skipped ones aside),
# 1 when one does not, 77 when the tools or sources are missing.
set -uo pipefail
# the source root, NVSHMEM_SRC, NVCC, NVML_INC, ARCH, skip, nvshmem_programs
NVSHMEM_ENV_EXAMPLES=1
# shellcheck source=bench/nvshmem_env.sh
. "$(dirname "$0")/nvshmem_env.sh"
BUILD=${1:-build}
[ $# -gt 0 ] && shift
WANT=("$@")

LINK=${LINK:-1}
if [ "$LINK" = 1 ]; then
  [ -f "$BUILD/src/libkinet_shmem.so" ] && [ -f "$BUILD/src/libkinet_cuda.so" ] ||
    { echo "bench/nvshmem_compile.sh: $BUILD/src/libkinet_shmem.so (kinet built with CUDA) not found (LINK=0 to compile only)" >&2; exit 1; }
fi
[ -f "$BUILD/gen/kinet_config.h" ] ||
  { echo "bench/nvshmem_compile.sh: $BUILD/gen/kinet_config.h not found: configure kinet in $BUILD first" >&2; exit 1; }
BUILD=$(cd "$BUILD" && pwd)

# MPI: the programs are built with NVSHMEMTEST_MPI_SUPPORT, as NVSHMEM's own
# build does when MPI is there; without mpicc they are built without it
MPI_CFLAGS=() MPI_LDFLAGS=() MPI_DEF=()
if command -v mpicc >/dev/null 2>&1; then
  read -ra MPI_CFLAGS <<<"$(mpicc --showme:compile 2>/dev/null)"
  # C++'s link line: with Open MPI's C++ bindings, which mpi.h brings into
  # C++ files (NVSHMEM links its programs with MPI::MPI_CXX)
  mpi_link=$(mpicxx --showme:link 2>/dev/null || mpicc --showme:link 2>/dev/null)
  for f in $mpi_link; do
    case $f in
      -Wl,*) IFS=, read -ra parts <<<"${f#-Wl,}"; for p in "${parts[@]}"; do MPI_LDFLAGS+=(-Xlinker "$p"); done ;;
      -pthread) MPI_LDFLAGS+=(-Xcompiler -pthread) ;;
      *) MPI_LDFLAGS+=("$f") ;;
    esac
  done
  MPI_DEF=(-DNVSHMEMTEST_MPI_SUPPORT)
fi

OUT=${OUT:-$(mktemp -d /tmp/kinet-nvshmem-compile.XXXXXX)}
mkdir -p "$OUT/obj" "$OUT/bin" "$OUT/logs"
KINC=(-I"$ROOT/include/kinet/nvshmem" -I"$ROOT/include" -I"$BUILD/gen")
COMMON=(-std=c++17 -O2 -arch="$ARCH" "${MPI_DEF[@]}" "${MPI_CFLAGS[@]}" "${KINC[@]}")
LIBS=(-L"$BUILD/src" -lkinet_shmem -lkinet_cuda -lkinet -lcuda "${MPI_LDFLAGS[@]}"
  -Xlinker -rpath,"$BUILD/src")

mapfile -t ALL < <(nvshmem_programs)
PROGS=()
if [ ${#WANT[@]} -gt 0 ]; then
  for w in "${WANT[@]}"; do
    hit=
    for l in "${ALL[@]}"; do
      read -r _ n _ <<<"$l"
      [ "$n" = "$w" ] && { PROGS+=("$l"); hit=1; }
    done
    [ -n "$hit" ] || { echo "bench/nvshmem_compile.sh: $w: no such program in $SRC" >&2; exit 1; }
  done
else
  PROGS=("${ALL[@]}")
fi

# perftest's common code, once (its own log)
need_utils=
for l in "${PROGS[@]}"; do case $l in perftest/*) need_utils=1 ;; esac; done
UTILS_OK=1
if [ -n "$need_utils" ]; then
  "$NVCC" "${COMMON[@]}" -I"$NVML_INC" -I"$PT/common" -c "$PT/common/utils.cu" -o "$OUT/obj/utils.o" \
    >"$OUT/logs/utils.log" 2>&1 || UTILS_OK=0
fi

build_one() { # kind name src
  local kind=$1 name=$2 src=$3 log="$OUT/logs/$2.log" inc=()
  case $kind in
    perftest/*) inc=(-I"$NVML_INC" -I"$PT/common" -I"$(dirname "$src")") ;;
    examples*) inc=(-I"$EX" -I"$(dirname "$src")") ;;
  esac
  : >"$log"
  "$NVCC" "${COMMON[@]}" "${inc[@]}" -c "$src" -o "$OUT/obj/$name.o" >>"$log" 2>&1 || return 1
  [ "$LINK" = 1 ] || return 0
  case $kind in perftest/*) [ "$UTILS_OK" = 1 ] || return 0 ;; esac
  local objs=("$OUT/obj/$name.o") extra=()
  case $kind in perftest/*) objs=("$OUT/obj/utils.o" "${objs[@]}") ;; esac
  # shmem-based-init starts OpenSHMEM first (NVSHMEM links it with
  # liboshmem when built with NVSHMEM_SHMEM_SUPPORT)
  [ "$name" = shmem-based-init ] && extra=(-loshmem)
  "$NVCC" -arch="$ARCH" "${objs[@]}" -o "$OUT/bin/$name" "${LIBS[@]}" "${extra[@]}" >>"$log" 2>&1
}

# why a program is not attempted here (empty: it is)
why_skipped() { # kind name
  case $2 in
    redmaxloc_latency)
      echo "not built by NVSHMEM's own perftest CMake: it does not compile against NVSHMEM 3.4.5 either (MAX_ELEMS undefined, rdxn_calling_kernel called with an argument too many)"
      return ;;
    shmem-based-init)
      local d have=
      for d in "${MPI_CFLAGS[@]}"; do [ -f "${d#-I}/shmem.h" ] && have=1; done
      [ -n "$have" ] || { echo "needs OpenSHMEM (Open MPI's shmem.h and liboshmem)"; return; } ;;
  esac
  case $1 in
    examples/gemm_allreduce)
      [ -n "${CUTLASS_HOME:-}" ] || { echo "needs CUTLASS (CUTLASS_HOME not set) and a Blackwell (sm_100) target"; return; } ;;
  esac
}

JOBS=${JOBS:-2}
for l in "${PROGS[@]}"; do
  read -r kind name src <<<"$l"
  [ -z "$(why_skipped "$kind" "$name")" ] || continue
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  ( build_one "$kind" "$name" "$src" || touch "$OUT/logs/$name.failed" ) &
done
wait

first_error() { # log
  local e
  e=$(grep -m1 -E ' error|error:|undefined reference|Error' "$1" 2>/dev/null)
  [ -n "$e" ] || e=$(grep -m1 . "$1" 2>/dev/null)
  e=${e//$SRC\//}
  e=${e//$ROOT\//}
  e=${e//|/\\|}
  printf '%s' "${e:0:200}"
}

ok=0 bad=0 skipped=0
{
  echo "| program | where | builds | first error |"
  echo "| --- | --- | --- | --- |"
  for l in "${PROGS[@]}"; do
    read -r kind name src <<<"$l"
    why=$(why_skipped "$kind" "$name")
    if [ -n "$why" ]; then
      echo "| $name | $kind | skipped | $why |"
      skipped=$((skipped + 1))
    elif [ -e "$OUT/logs/$name.failed" ]; then
      echo "| $name | $kind | no | $(first_error "$OUT/logs/$name.log") |"
      bad=$((bad + 1))
    elif [[ $kind == perftest/* ]] && [ "$UTILS_OK" != 1 ]; then
      echo "| $name | $kind | no | perftest/common/utils.cu: $(first_error "$OUT/logs/utils.log") |"
      bad=$((bad + 1))
    else
      echo "| $name | $kind | yes | |"
      ok=$((ok + 1))
    fi
  done
  echo
  echo "$ok of $((ok + bad)) build$([ "$LINK" = 1 ] || echo ' (compiled, not linked)')$([ "$skipped" -gt 0 ] && echo "; $skipped skipped"). Logs: $OUT/logs"
} | tee "$OUT/table.md"
grep -q '| no |' "$OUT/table.md" && exit 1
exit 0

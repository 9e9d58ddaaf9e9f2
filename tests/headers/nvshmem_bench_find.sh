#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/headers/nvshmem_bench_find.sh - the ctest nvshmem_bench_find:
# bench/nvshmem_perftest.sh and bench/nvshmem_compile.sh find the same
# perftest programs (device .cu, host .cu and host .cpp) in an NVSHMEM source
# tree. Runs anywhere: the source tree, nvcc, nvidia-smi, mpirun and the
# NVSHMEM installation are stand-ins made here (nvcc records its command
# line and makes an empty output; mpirun prints one perftest figure), so
# nothing is compiled or run on a GPU.
#
# usage: nvshmem_bench_find.sh SOURCE_DIR WORK_DIR
# Exit status: 0 pass, 1 fail.
set -u
src=$1 w=$2
rm -rf "$w"
mkdir -p "$w/bin" "$w/nv/include" "$w/nv/lib" "$w/build/src" "$w/build/gen" "$w/cuda/include"
n=$w/nvshmem-src
mkdir -p "$n/perftest/common" "$n/perftest/device/pt-to-pt" "$n/perftest/host/pt-to-pt" \
  "$n/perftest/host/coll" "$n/examples"
touch "$n/perftest/common/utils.cu" "$n/perftest/device/pt-to-pt/dev_prog.cu" \
  "$n/perftest/host/pt-to-pt/stream_prog.cu" "$n/perftest/host/pt-to-pt/host_prog.cpp" \
  "$n/perftest/host/coll/coll_prog.cpp" "$n/examples/ex_prog.cu" \
  "$w/cuda/include/nvml.h" "$w/nv/lib/libnvshmem_host.so.3" "$w/nv/lib/libnvshmem_device.a" \
  "$w/build/src/libkinet_shmem.so" "$w/build/src/libkinet_cuda.so" "$w/build/gen/kinet_config.h"
cat >"$w/bin/nvcc" <<'STUB'
#!/bin/sh
echo "$*" >>"$STUB_LOG"
o= prev=
for a; do [ "$prev" = -o ] && o=$a; prev=$a; done
[ -z "$o" ] || : >"$o"
STUB
cat >"$w/bin/nvidia-smi" <<'STUB'
#!/bin/sh
case "$*" in *query*) echo "stand-in, 0" ;; *) echo "GPU 0: stand-in" ;; esac
STUB
cat >"$w/bin/mpirun" <<'STUB'
#!/bin/sh
echo "$*" >>"$STUB_LOG.mpirun"
case "$*" in *NVSHMEM_IBGDA_NIC_HANDLER=gpu*) echo "stand-in IBGDA error: gpu handler"; exit 3 ;; esac
echo "&&&& PERF t___size__8 1.5 usec"
STUB
mkdir -p "$w/build/tools/run"
cat >"$w/build/tools/run/kinet-run" <<'STUB'
#!/bin/sh
exec "$@"
STUB
chmod +x "$w/build/tools/run/kinet-run"
chmod +x "$w/bin/"*
export PATH=$w/bin:$PATH NVCC=$w/bin/nvcc CUDA_HOME=$w/cuda NVSHMEM_SRC=$n NVSHMEM_HOME=$w/nv MPS=0
fail=0
check() { # what, then a command that must succeed
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}

STUB_LOG=$w/perftest.log OUT=$w/perftest "$src/bench/nvshmem_perftest.sh" "$w/build" \
  dev_prog stream_prog host_prog coll_prog ex_prog nonesuch >"$w/perftest.out" 2>&1
check "nvshmem_perftest.sh exits 0" test $? = 0
for p in device/pt-to-pt/dev_prog.cu host/pt-to-pt/stream_prog.cu host/pt-to-pt/host_prog.cpp \
  host/coll/coll_prog.cpp; do
  prog=$(basename "${p%.*}")
  # built for both sides (NVSHMEM and kinet)
  check "perftest builds $p twice" test "$(grep -c "perftest/$p" "$w/perftest.log")" = 2
  check "perftest's table has $prog's figures" grep -q "^| $prog | size 8 | 1.5 | 1.5 | 1.00x |" "$w/perftest.out"
done
# NVSHMEM's binaries again over IBGDA through kinet-run, one row per handler, and over
# ibrc; a failed run says the error it printed
runs_with() { # prog, then settings that one mpirun line of it through kinet-run has
  local prog=$1 l
  shift
  l=$(grep "build/tools/run/kinet-run .*/nvshmem/$prog" "$w/perftest.log.mpirun") || return 1
  for v; do printf '%s\n' "$l" | grep -q -- "$v" || return 1; done
}
runs_ibrc() { # prog: a line of it with ibrc and without a NIC handler
  grep "build/tools/run/kinet-run .*/nvshmem/$1" "$w/perftest.log.mpirun" |
    grep "NVSHMEM_REMOTE_TRANSPORT=ibrc" | grep "NVSHMEM_DISABLE_P2P=1" |
    grep -qv "NVSHMEM_IBGDA_NIC_HANDLER"
}
for prog in dev_prog stream_prog host_prog coll_prog; do
  check "IBGDA table has $prog (cpu_host_memory)" \
    grep -q "^| $prog | cpu_host_memory | size 8 | 1.5 | 1.5 | 1.00x |" "$w/perftest.out"
  check "IBGDA table says $prog (gpu) failed" \
    grep -q "^| $prog | gpu | failed: stand-in IBGDA error: gpu handler |" "$w/perftest.out"
  check "IBGDA runs $prog through kinet-run with the transport set" \
    runs_with "$prog" NVSHMEM_REMOTE_TRANSPORT=ibgda NVSHMEM_DISABLE_P2P=1 \
    NVSHMEM_IBGDA_NIC_HANDLER=cpu_host_memory
  check "the table has $prog over ibrc" \
    grep -q "^| $prog | ibrc | size 8 | 1.5 | 1.5 | 1.00x |" "$w/perftest.out"
  check "ibrc runs $prog through kinet-run without a NIC handler" runs_ibrc "$prog"
done
# an example is not a perftest program; an unknown name is said to be one
for prog in ex_prog nonesuch; do
  check "perftest reports $prog as not in perftest" grep -q "^| $prog | not in NVSHMEM's perftest |" "$w/perftest.out"
done

STUB_LOG=$w/compile.log OUT=$w/compile LINK=0 "$src/bench/nvshmem_compile.sh" "$w/build" \
  >"$w/compile.out" 2>&1
check "nvshmem_compile.sh exits 0" test $? = 0
for p in device/pt-to-pt/dev_prog.cu host/pt-to-pt/stream_prog.cu host/pt-to-pt/host_prog.cpp \
  host/coll/coll_prog.cpp; do
  check "compile builds $p" grep -q "perftest/$p" "$w/compile.log"
done
check "compile builds the example" grep -q "examples/ex_prog.cu" "$w/compile.log"
check "compile's table: 5 of 5" grep -q "^5 of 5 build" "$w/compile.out"

[ $fail = 0 ] || { echo "--- perftest:"; cat "$w/perftest.out"; echo "--- compile:"; cat "$w/compile.out"; }
exit $fail

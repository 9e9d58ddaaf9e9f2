#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/util/gpunetio_host.sh - the ctest test_verbs_gpunetio_host: open
# GPUNetIO's host library (github.com/NVIDIA-DOCA/gpunetio), built unchanged
# from the sources GPUNETIO_SRC names (with its own Makefile; its CUDA calls
# through its run-time wrapper, so no GPU is needed), drives kinet-verbs in
# tests/verbs/gpunetio_host.cpp: its DevX CQs and QPs made over host-memory
# umems, connected as its examples connect them, RDMA writes checked byte
# for byte, a counter behind a WAIT on a companion QP made with its
# core-direct attribute; and its own CQ umem path, whose doorbell record
# names umem 0, refused with a line that says so.
#
# usage: gpunetio_host.sh KINET_RUN SOURCE_DIR WORK_DIR
# Exits 77 (skipped) without GPUNETIO_SRC, CUDA's runtime headers and
# library, or g++; 0 pass, 1 fail.
set -u
if [ -n "${KINET_TEST_SANITIZED:-}" ]; then
	echo "SKIPPED gpunetio_host: the ASan build's kinet-verbs cannot be loaded into uninstrumented programs (the plain build runs this test)"
	exit 77
fi
run=$1 src=$2 w=$3
g=${GPUNETIO_SRC:-}
if [ -z "$g" ] || [ ! -f "$g/Makefile" ] || [ ! -f "$g/include/host/doca_verbs.h" ]; then
	echo "SKIPPED gpunetio_host: GPUNetIO's sources not found (set GPUNETIO_SRC to a checkout of github.com/NVIDIA-DOCA/gpunetio)"
	exit 77
fi
cuda=${CUDA_HOME:-}
[ -n "$cuda" ] || cuda=$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")
if [ ! -f "$cuda/include/cuda_runtime.h" ] || [ ! -e "$cuda/lib64/libcudart.so" ]; then
	echo "SKIPPED gpunetio_host: CUDA's runtime headers and library not found (GPUNetIO's host library includes and links them; set CUDA_HOME)"
	exit 77
fi
command -v g++ >/dev/null || { echo "SKIPPED gpunetio_host: no g++"; exit 77; }
rm -rf "$w" && mkdir -p "$w" && cp -a "$g"/. "$w/gpunetio/" || exit 1
if ! make -C "$w/gpunetio" lib USE_CUDA_WRAPPER=1 CUDA_HOME="$cuda" \
	LDFLAGS="-libverbs -lmlx5 -ldl" >"$w/build.log" 2>&1; then
	echo "FAIL gpunetio_host: GPUNetIO's library did not build:"
	tail -20 "$w/build.log"
	exit 1
fi
G=$w/gpunetio
if ! g++ -std=c++17 -O1 -Wall -I"$G/include/host" -I"$G/include/common" -I"$G/include" \
	"$src/tests/verbs/gpunetio_host.cpp" -o "$w/gpunetio_host" -L"$G/lib" -ldoca_gpunetio_host \
	-L"$cuda/lib64" -lcudart -libverbs -lmlx5 -Wl,-rpath,"$G/lib:$cuda/lib64" \
	>>"$w/build.log" 2>&1; then
	echo "FAIL gpunetio_host: the test program did not build:"
	tail -20 "$w/build.log"
	exit 1
fi
fail=0
timeout 120 "$run" "$w/gpunetio_host" >"$w/run.log" 2>&1
rc=$?
cat "$w/run.log"
if [ $rc != 0 ] || ! grep -q "laps of the CQ, a counter behind a WAIT on .* writes: ok" "$w/run.log"; then
	echo "FAIL gpunetio_host: GPUNetIO's QPs on kinet-verbs (exit $rc)"
	fail=1
fi
timeout 60 "$run" "$w/gpunetio_host" internal >"$w/internal.log" 2>&1
rc=$?
cat "$w/internal.log"
if [ $rc != 0 ] || ! grep -q "CREATE_CQ: the doorbell record: umem 0 unknown" "$w/internal.log"; then
	echo "FAIL gpunetio_host: GPUNetIO's own CQ umem: not refused with a line naming umem 0 (exit $rc)"
	fail=1
fi
exit $fail

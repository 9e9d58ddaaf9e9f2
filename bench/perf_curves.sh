#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# kinet-perf's size sweeps on the software NIC, as JSON records, drawn by
# kinet-plot with the markdown table of the same points (docs/perf.md shows
# both). One run: write bandwidth and write latency, both ends in one process
# (--loopback) and two processes on this machine (--pair, over the wire), by
# CPU threads (host executor, host memory) and, where a GPU is usable, by GPU
# threads with the payload in pinned host memory and in GPU memory (two
# processes on the GPU only under a CUDA MPS daemon).
#
#   bench/perf_curves.sh [BUILD_DIR] [OUT_DIR]   (default build, BUILD_DIR/bench/curves)
#
# N: iterations per size of the bandwidth sweeps (default 2000; latency: N/2);
# MAX: the largest size of the bandwidth sweeps (default 4M; latency: 64K);
# PIN: a CPU list (taskset -c) for every
# run (default: none). Files in OUT_DIR: one NAME.json per run (kinet-perf
# --out_json_file), bw.png and lat.png with their tables in tables.md
# (kinet-plot --table; where kinet-plot cannot draw, without matplotlib, it
# says so and leaves the JSON files for another machine, which makes both).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
OUT=${2:-$BUILD/bench/curves}
N=${N:-2000}
MAX=${MAX:-4M}
PERF=$BUILD/tools/perf/kinet-perf
. "$ROOT/bench/plot_lib.sh"
[ -x "$PERF" ] || { echo "perf_curves.sh: $PERF not built" >&2; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT"/bw-*.json "$OUT"/lat-*.json "$OUT"/tables.md
PRE=()
[ -n "${PIN:-}" ] && PRE=(taskset -c "$PIN")
GPU=0
if nvidia-smi -L >/dev/null 2>&1 && [ -f "$BUILD/src/libkinet_cuda.so" ]; then
	GPU=1
fi

FAILED=""
BW_FILES=()
BW_LABELS=()
LAT_FILES=()
LAT_LABELS=()
# run KIND(bw|lat) NAME LABEL ARGS...: one sweep into OUT/NAME.json
run() {
	local kind=$1 name=$2 label=$3
	shift 3
	echo "== $name: kinet-perf $*" >&2
	timeout 600 "${PRE[@]}" "$PERF" "$@" --out_json_file="$OUT/$name.json" >"$OUT/$name.txt" 2>&1 || {
		echo "perf_curves.sh: $name failed:" >&2
		tail -5 "$OUT/$name.txt" >&2
		FAILED+=" $name"
		return 0
	}
	if [ "$kind" = bw ]; then
		BW_FILES+=("$OUT/$name.json")
		BW_LABELS+=(--label "$label")
	else
		LAT_FILES+=("$OUT/$name.json")
		LAT_LABELS+=(--label "$label")
	fi
}

BWA=(write_bw -a --max-size "$MAX" -n "$N" --warmup 200)
LATA=(write_lat -a --max-size 64K -n $((N / 2)) --warmup 200)
run bw bw-host-loop "CPU thread, host memory, one process" "${BWA[@]}" --loopback --executor host
run bw bw-host-pair "CPU thread, host memory, two processes" "${BWA[@]}" --pair --executor host
run lat lat-host-loop "CPU thread, host memory, one process" "${LATA[@]}" --loopback --executor host
run lat lat-host-pair "CPU thread, host memory, two processes" "${LATA[@]}" --pair --executor host
if [ $GPU = 1 ]; then
	run bw bw-gpu-loop-h "GPU thread, pinned host memory, one process" "${BWA[@]}" --loopback --executor cuda --mem host
	run bw bw-gpu-loop-g "GPU thread, GPU memory, one process" "${BWA[@]}" --loopback --executor cuda --mem gpu
	run lat lat-gpu-loop-h "GPU thread, pinned host memory, one process" "${LATA[@]}" --loopback --executor cuda --mem host
	run lat lat-gpu-loop-g "GPU thread, GPU memory, one process" "${LATA[@]}" --loopback --executor cuda --mem gpu
	# two processes on one GPU take turns in time slices of about 2 ms
	# without MPS, which the figures would measure (kinet-perf says so)
	if pgrep nvidia-cuda-mps >/dev/null 2>&1; then # (a process name keeps 15 characters)
		run bw bw-gpu-pair-g "GPU thread, GPU memory, two processes" "${BWA[@]}" --pair --executor cuda --mem gpu
		run lat lat-gpu-pair-g "GPU thread, GPU memory, two processes" "${LATA[@]}" --pair --executor cuda --mem gpu
	else
		echo "perf_curves.sh: no CUDA MPS daemon: two processes on the GPU skipped" \
			"(start nvidia-cuda-mps-control -d first)" >&2
	fi
else
	echo "perf_curves.sh: no usable GPU (or no libkinet_cuda): CPU threads only" >&2
fi

echo "JSON records: $OUT/*.json ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, N=$N, pinning: ${PIN:-none})"
# draw KIND: OUT/KIND.png and its table into OUT/tables.md
draw() {
	local kind=$1
	shift
	if kplot "$OUT/$kind.png" "$OUT/$kind.plot" --table "$@"; then
		sed -n '/^$/,$p' "$OUT/$kind.plot" >>"$OUT/tables.md"
	fi
}
: >"$OUT/tables.md"
[ ${#BW_FILES[@]} -gt 0 ] && draw bw --logy "${BW_LABELS[@]}" "${BW_FILES[@]}"
[ ${#LAT_FILES[@]} -gt 0 ] && draw lat "${LAT_LABELS[@]}" "${LAT_FILES[@]}"
[ -s "$OUT/tables.md" ] && cat "$OUT/tables.md"
if [ -n "$FAILED" ]; then
	echo "perf_curves.sh: failed:$FAILED" >&2
	exit 1
fi

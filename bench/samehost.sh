#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Two kinet-perf processes on this host (--pair): their QPs over shm (the
# same-host choice, KINET_FI_SAME_HOST=shm, no KINET_FI_PROVIDER) against
# tcp;ofi_rxm (KINET_FI_SAME_HOST=off), alternating REPS times in one run.
# Prints markdown for docs/perf.md: medians, and the spread of the per-round
# ratios shm / tcp.
#
#   bench/samehost.sh [BUILD_DIR] [N] [REPS]   (default build, N=2000, REPS=5)
#
# N: iterations per bandwidth size, and latency samples.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
N=${2:-2000}
REPS=${3:-5}
PERF=$BUILD/tools/perf/kinet-perf
[ -x "$PERF" ] || { echo "no $PERF: build first" >&2; exit 1; }
unset KINET_FI_PROVIDER
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SIZES_BW="65536 262144 1048576"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# one run: mode (shm|off), test, size; prints the figure (MB/s average, or
# typical usec), or fails
one() {
	local mode=$1 test=$2 size=$3 out
	out=$(KINET_FI_SAME_HOST=$mode timeout 120 "$PERF" "$test" --pair -s "$size" -n "$N" 2>&1) || {
		echo "$out" >&2
		return 1
	}
	local tr
	tr=$(echo "$out" | awk -F': ' '/Transport/ {print $2; exit}')
	case $mode in
	shm) [ "$tr" = shm ] || { echo "expected shm, got '$tr'" >&2; return 1; } ;;
	off) [ "$tr" = "tcp;ofi_rxm" ] || { echo "expected tcp;ofi_rxm, got '$tr'" >&2; return 1; } ;;
	esac
	if [ "$test" = write_lat ]; then
		echo "$out" | awk -v s="$size" '$1 == s && NF >= 9 {print $5; exit}'
	else
		echo "$out" | awk -v s="$size" '$1 == s && NF == 5 {print $4; exit}'
	fi
}

for r in $(seq 1 "$REPS"); do
	for mode in off shm; do
		for s in $SIZES_BW; do
			v=$(one $mode write_bw "$s")
			echo "$v" >>"$TMP/bw.$mode.$s"
		done
		v=$(one $mode write_lat 8)
		echo "$v" >>"$TMP/lat.$mode"
	done
done

med() { sort -g "$1" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# min-max of per-round ratios a/b
spread() { paste "$1" "$2" | awk '{r = $1 / $2; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r} END {printf "%.2f-%.2f", lo, hi}'; }

echo "kinet-perf --pair on $(hostname), $(nproc) CPUs, load before: $LOAD0; N=$N, $REPS rounds (tcp then shm in each), medians"
echo
echo "| test | size | tcp;ofi_rxm | shm | shm / tcp (per round) |"
echo "| --- | --- | --- | --- | --- |"
for s in $SIZES_BW; do
	echo "| write_bw MB/s | $s | $(med "$TMP/bw.off.$s") | $(med "$TMP/bw.shm.$s") | $(spread "$TMP/bw.shm.$s" "$TMP/bw.off.$s") |"
done
echo "| write_lat typical us | 8 | $(med "$TMP/lat.off") | $(med "$TMP/lat.shm") | $(spread "$TMP/lat.shm" "$TMP/lat.off") |"
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The software NIC's wire against raw libfabric, in one run, on the same
# paths: loopback, then two network namespaces joined by a veth pair (made
# here and removed on exit; needs root). Raw and kinet alternate REPS times
# on each path; the tables give medians (and the spread of the per-round
# ratios). Prints markdown for docs/perf.md.
#
#   bench/net.sh [BUILD_DIR] [N] [REPS]   (default build, N=1000, REPS=5)
#
# N scales the iterations (N*64 KiB bytes per size, 10*N latency samples).
# PIN_SRV / PIN_CLI: CPU lists (taskset -c) for the server / client process,
# applied alike to both programs (default: no pinning). KINET_ARGS: more
# options for the kinet client (e.g. -y: its application thread polls with
# sched_yield between checks).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
N=${2:-1000}
REPS=${3:-5}
OUT=$BUILD/bench
mkdir -p "$OUT"
. "$ROOT/bench/net_lib.sh"
net_build

# the raw side runs the one provider: so does kinet (without this, two kinet
# processes on one host would take shm, KINET_FI_SAME_HOST)
export KINET_FI_SAME_HOST=off

net_init kinet-bench

# run_path NAME SRV_PREFIX CLI_PREFIX SRV_IFACE CLI_IFACE
run_path() {
	local name=$1
	shift
	for r in $(seq 1 "$REPS"); do
		pair "" fabric_bw "$@" -n "$N" >"$TMP/raw.$name.$r"
		pair "" kinet_net_bw "$@" -n "$N" ${KINET_ARGS:-} >"$TMP/kin.$name.$r"
	done
}

# table NAME LABEL: bandwidth rows, then latency row, from the rounds' files
table_bw() {
	local name=$1 label=$2
	for sz in 65536 262144 1048576 4194304; do
		local w s k rmin rmax
		w=$(cat "$TMP"/raw."$name".* | awk -v z=$sz '$1 == "bw" && $2 == z {print $3}' | median)
		s=$(cat "$TMP"/raw."$name".* | awk -v z=$sz '$1 == "bw" && $2 == z {print $4}' | median)
		k=$(cat "$TMP"/kin."$name".* | awk -v z=$sz '$1 == "bw" && $2 == z {print $3}' | median)
		# per-round ratios (raw and kinet of the same round)
		local ratios=""
		for r in $(seq 1 "$REPS"); do
			local a b
			a=$(awk -v z=$sz '$1 == "bw" && $2 == z {print $3}' "$TMP/raw.$name.$r")
			b=$(awk -v z=$sz '$1 == "bw" && $2 == z {print $3}' "$TMP/kin.$name.$r")
			ratios="$ratios $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b / a}')"
		done
		rmin=$(echo $ratios | tr ' ' '\n' | sort -g | head -1)
		rmax=$(echo $ratios | tr ' ' '\n' | sort -g | tail -1)
		awk -v l="$label" -v z=$sz -v w="$w" -v s="$s" -v k="$k" -v a="$rmin" -v b="$rmax" \
			'BEGIN {printf "| %s | %d KiB | %.0f | %.0f | %.0f | %.2f | %s-%s |\n", l, z / 1024, w, s, k, k / w, a, b}'
	done
}

table_lat() {
	local name=$1 label=$2 r k
	r=$(cat "$TMP"/raw."$name".* | awk '$1 == "lat" {print $2}' | median)
	k=$(cat "$TMP"/kin."$name".* | awk '$1 == "lat" {print $2}' | median)
	awk -v l="$label" -v r="$r" -v k="$k" 'BEGIN {printf "| %s | %.1f us | %.1f us | %+.1f us |\n", l, r, k, k - r}'
}

PATHS=(lo)
run_path lo "" "" lo lo
if [ "$(id -u)" = 0 ]; then
	net_ns kbv$$ 10.232.254
	run_path ns "ip netns exec $NSB" "ip netns exec $NSA" kbv$$b kbv$$a
	PATHS+=(ns)
fi

echo "provider ${KINET_FI_PROVIDER:-tcp;ofi_rxm}, N=$N, $REPS rounds (raw then kinet in each), medians;" \
	"libfabric $(ldd "$OUT/fabric_bw" | awk '/libfabric/ {print $3}');" \
	"pinning: server ${PIN_SRV:-none}, client ${PIN_CLI:-none}; kinet client options: ${KINET_ARGS:-none}"
echo
echo "| path | size | raw fi_write MB/s | raw fi_send MB/s | kinet write MB/s | kinet / raw write | per-round ratios |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for p in "${PATHS[@]}"; do
	table_bw "$p" "$([ "$p" = lo ] && echo loopback || echo namespaces)"
done
echo
echo "| path | raw 8-byte fi_send round trip | kinet 8-byte write, post to completion | kinet - raw |"
echo "|---|---:|---:|---:|"
for p in "${PATHS[@]}"; do
	table_lat "$p" "$([ "$p" = lo ] && echo loopback || echo namespaces)"
done
[ "$(id -u)" = 0 ] || echo -e "\n(namespaces skipped: needs root)"

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
CC=${CC:-cc}
# NET_PREBUILT=1: fabric_bw and kinet_net_bw are in BUILD_DIR/bench already (a
# machine without libfabric's headers: build them elsewhere, carry them)
if [ "${NET_PREBUILT:-0}" != 1 ]; then
	$CC -O2 -Wall -Wextra -Werror -o "$OUT/fabric_bw" "$ROOT/bench/fabric_bw.c" $(pkg-config --cflags --libs libfabric)
	$CC -O2 -Wall -Wextra -Werror -I"$ROOT/include" -I"$BUILD/gen" -o "$OUT/kinet_net_bw" \
		"$ROOT/bench/kinet_net_bw.c" -L"$BUILD/src" -lkinet -Wl,-rpath,"$BUILD/src"
fi

# the raw side runs the one provider: so does kinet (without this, two kinet
# processes on one host would take shm, KINET_FI_SAME_HOST)
export KINET_FI_SAME_HOST=off

TMP=$(mktemp -d)
NSA=kinet-bench-a$$
NSB=kinet-bench-b$$
cleanup() {
	ip netns del "$NSA" 2>/dev/null || true
	ip netns del "$NSB" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

PS=()
PC=()
[ -n "${PIN_SRV:-}" ] && PS=(taskset -c "$PIN_SRV")
[ -n "${PIN_CLI:-}" ] && PC=(taskset -c "$PIN_CLI")

# pair PROG SRV_PREFIX CLI_PREFIX SRV_IFACE CLI_IFACE [CLIENT OPTIONS]:
# server in the background, client in front; both bounded. The client's
# lines go to stdout.
pair() {
	local prog=$1 spre=$2 cpre=$3 sif=$4 cif=$5
	shift 5
	rm -rf "$TMP/x"
	mkdir "$TMP/x"
	$spre env FI_TCP_IFACE="$sif" timeout 300 "${PS[@]}" "$OUT/$prog" -s "$TMP/x" &
	local spid=$!
	$cpre env FI_TCP_IFACE="$cif" timeout 300 "${PC[@]}" "$OUT/$prog" -c "$TMP/x" -n "$N" "$@"
	wait $spid
}

# median of the numbers on stdin
median() {
	sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# run_path NAME SRV_PREFIX CLI_PREFIX SRV_IFACE CLI_IFACE
run_path() {
	local name=$1
	shift
	for r in $(seq 1 "$REPS"); do
		pair fabric_bw "$@" >"$TMP/raw.$name.$r"
		pair kinet_net_bw "$@" ${KINET_ARGS:-} >"$TMP/kin.$name.$r"
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
	ip netns add "$NSA"
	ip netns add "$NSB"
	ip link add kbva$$ type veth peer name kbvb$$
	ip link set kbva$$ netns "$NSA"
	ip link set kbvb$$ netns "$NSB"
	ip -n "$NSA" addr add 10.232.254.1/30 dev kbva$$
	ip -n "$NSB" addr add 10.232.254.2/30 dev kbvb$$
	for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
	ip -n "$NSA" link set kbva$$ up
	ip -n "$NSB" link set kbvb$$ up
	run_path ns "ip netns exec $NSB" "ip netns exec $NSA" kbvb$$ kbva$$
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

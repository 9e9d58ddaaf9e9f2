#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The software NIC's wire against raw libfabric, in one run, on the same
# paths: loopback, then two network namespaces joined by a veth pair (made
# here and removed on exit; needs root). Raw and kinet alternate REPS times
# on each path; the tables give medians (and the spread of the per-round
# ratios); the 8-byte round trip of raw fi_send is measured twice, with the
# CQ raw fabric_bw opens (no wait object) and with the one kinet's wire opens
# by default (a wait fd: fabric_bw -w). Prints markdown for docs/perf.md,
# and writes the bandwidth medians as kinet-perf JSON records (test
# write_bw, one file per path and side: net-PATH-raw.json,
# net-PATH-kinet.json in NET_JSON_DIR, default BUILD_DIR/bench), which
# kinet-plot draws; where it can draw, into NET_JSON_DIR/net_bw.png (else
# the command line is printed).
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
. "$ROOT/bench/plot_lib.sh"
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
		# raw round trips again, the CQ opened with a wait fd as kinet's
		# wire opens its own by default (KINET_NET_CQ_WAIT=fd)
		pair FABRIC_BW_CQ_WAIT=fd fabric_bw "$@" -n "$N" -z 0 >"$TMP/raww.$name.$r" ||
			echo "raw with a wait fd failed (the provider may refuse FI_WAIT_FD)" >&2
		pair "" kinet_net_bw "$@" -n "$N" ${KINET_ARGS:-} >"$TMP/kin.$name.$r"
	done
}

SIZES="65536 262144 1048576 4194304"

# bw_median SIDE(raw|kin) NAME SIZE COLUMN (3: write, 4: send) and
# lat_median SIDE(raw|raww|kin) NAME: medians over the rounds' files
bw_median() {
	cat "$TMP/$1.$2".* | awk -v z="$3" -v c="$4" '$1 == "bw" && $2 == z {print $c}' | median
}
lat_median() {
	cat "$TMP/$1.$2".* | awk '$1 == "lat" {print $2}' | median
}
path_label() {
	[ "$1" = lo ] && echo loopback || echo namespaces
}

# table NAME LABEL: bandwidth rows, then latency row, from the rounds' files
table_bw() {
	local name=$1 label=$2
	for sz in $SIZES; do
		local w s k rmin rmax
		w=$(bw_median raw "$name" $sz 3)
		s=$(bw_median raw "$name" $sz 4)
		k=$(bw_median kin "$name" $sz 3)
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
	local name=$1 label=$2 r w k
	r=$(lat_median raw "$name")
	w=$(lat_median raww "$name")
	k=$(lat_median kin "$name")
	awk -v l="$label" -v r="$r" -v w="$w" -v k="$k" 'BEGIN {
		if (w == "-")
			printf "| %s | %.1f us | - | %.1f us | %+.1f us | - |\n", l, r, k, k - r
		else
			printf "| %s | %.1f us | %.1f us | %.1f us | %+.1f us | %+.1f us |\n", l, r, w, k, k - r, k - w}'
}

PATHS=(lo)
run_path lo "" "" lo lo
if [ "$(id -u)" = 0 ]; then
	net_ns kbv$$ 10.232.254
	run_path ns "ip netns exec $NSB" "ip netns exec $NSA" kbv$$b kbv$$a
	PATHS+=(ns)
fi

echo "provider ${KINET_FI_PROVIDER:-tcp;ofi_rxm}, N=$N, $REPS rounds (raw, raw with a wait fd, then kinet in each), medians; MB = 10^6 B;" \
	"libfabric $(ldd "$OUT/fabric_bw" | awk '/libfabric/ {print $3}');" \
	"pinning: server ${PIN_SRV:-none}, client ${PIN_CLI:-none}; kinet client options: ${KINET_ARGS:-none}"
echo
echo "| path | size | raw fi_write MB/s | raw fi_send MB/s | kinet write MB/s | kinet / raw write | per-round ratios |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for p in "${PATHS[@]}"; do
	table_bw "$p" "$(path_label "$p")"
done
echo
echo "| path | raw 8-byte fi_send round trip | raw, CQ with a wait fd | kinet 8-byte write, post to completion | kinet - raw | kinet - raw with a wait fd |"
echo "|---|---:|---:|---:|---:|---:|"
for p in "${PATHS[@]}"; do
	table_lat "$p" "$(path_label "$p")"
done
[ "$(id -u)" = 0 ] || echo -e "\n(namespaces skipped: needs root)"

# the medians as kinet-perf records, for kinet-plot (the programs print
# 10^6 B/s; kinet-perf's bw_avg_mbs is in 2^20 B/s)
JDIR=${NET_JSON_DIR:-$OUT}
mkdir -p "$JDIR"
rm -f "$JDIR"/net-loopback-*.json "$JDIR"/net-namespaces-*.json
# MAJOR.MINOR, as kinet-perf writes it
VER=$(awk -F'"' '/define KINET_VERSION / {split($2, v, "."); print v[1] "." v[2]}' \
	"$BUILD/gen/kinet_config.h" 2>/dev/null || true)
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
PROV=${KINET_FI_PROVIDER:-tcp;ofi_rxm}
json_side() { # json_side PATH SIDE(raw|kin) LABEL FILE
	local name=$1 side=$2 label=$3 file=$4
	: >"$file"
	for sz in $SIZES; do
		local m
		m=$(bw_median "$side" "$name" $sz 3)
		[ "$m" = - ] && continue
		awk -v z=$sz -v m="$m" -v v="${VER:-?}" -v h="$(hostname)" -v d="$DATE" -v p="$PROV" \
			-v b="$label" -v r="$REPS" -v n="$N" 'BEGIN {
			printf "{\"test\":\"write_bw\",\"kinet_version\":\"%s\",\"backend\":\"%s\",", v, b
			printf "\"provider\":\"%s\",\"host\":\"%s\",\"date\":\"%s\",\"executor\":\"host\",", p, h, d
			printf "\"processes\":2,\"bytes\":%d,\"bw_avg_mbs\":%.2f,\"bw_avg_gbps\":%.4f,", z, m * 1e6 / 1048576, m * 8 / 1e3
			printf "\"source\":\"bench/net.sh\",\"median_of_rounds\":%d,\"n\":%d}\n", r, n}' >>"$file"
	done
}
PLOT_LABELS=()
PLOT_FILES=()
for p in "${PATHS[@]}"; do
	pl=$(path_label "$p")
	json_side "$p" raw "raw fi_write" "$JDIR/net-$pl-raw.json"
	json_side "$p" kin "kinet soft" "$JDIR/net-$pl-kinet.json"
	PLOT_LABELS+=(--label "raw fi_write, $pl" --label "kinet write, $pl")
	PLOT_FILES+=("$JDIR/net-$pl-raw.json" "$JDIR/net-$pl-kinet.json")
done
echo
echo "JSON records (medians): $JDIR/net-*.json"
kplot "$JDIR/net_bw.png" "$TMP/plot.out" \
	--title "kinet write against raw fi_write: $PROV, two processes"$'\n'"bench/net.sh, medians of $REPS rounds, $(date -u +%Y-%m-%d)" \
	"${PLOT_LABELS[@]}" "${PLOT_FILES[@]}" || true

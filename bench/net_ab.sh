#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Variants of kinet's wire against raw libfabric, interleaved in one run:
# in each round, on each path (loopback, then two network namespaces joined
# by a veth pair when root), raw first, then every variant. A variant is a
# library folder (a build's src/, holding libkinet.so.0) and environment
# settings; the benchmark programs are bench/net.sh's, built once (they use
# the public API only, so one kinet_net_bw runs on every variant's library).
# Prints a markdown table: medians, and kinet/raw of the same round.
#
#   bench/net_ab.sh BUILD_DIR N REPS LABEL=LIBDIR[,VAR=VALUE...] ...
#
# A setting ARGS=OPTS (options joined by ':') passes OPTS to kinet_net_bw's
# client instead of the environment (ARGS=-p: the application thread polls
# without yielding).
#
# Measured per round: write bandwidth at SIZES (default 65536), the 8-byte
# round trip back to back, and (GAP_US, default 1000; 0: not measured) the
# round trip after GAP_US of quiet before each sample, engines napping.
# PIN_SRV / PIN_CLI as in bench/net.sh. NET_PREBUILT=1: the programs are in
# BUILD_DIR/bench already.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
N=$2
REPS=$3
shift 3
SIZES=${SIZES:-65536}
GAP_US=${GAP_US:-1000}
OUT=$BUILD/bench
mkdir -p "$OUT"
. "$ROOT/bench/net_lib.sh"
net_build
export KINET_FI_SAME_HOST=off # one provider for raw and kinet (bench/net.sh)

LABELS=()
declare -A LIB ENVS CARGS
for v in "$@"; do
	l=${v%%=*}
	rest=${v#*=}
	LABELS+=("$l")
	LIB[$l]=$(cd "${rest%%,*}" && pwd)
	ENVS[$l]=""
	CARGS[$l]=""
	if [ "$rest" != "${rest#*,}" ]; then
		for kv in $(echo "${rest#*,}" | tr ',' ' '); do
			case $kv in
			ARGS=*) CARGS[$l]=$(echo "${kv#ARGS=}" | tr ':' ' ') ;;
			*) ENVS[$l]="${ENVS[$l]} $kv" ;;
			esac
		done
	fi
	[ -e "${LIB[$l]}/libkinet.so.0" ] || { echo "net_ab.sh: no libkinet.so.0 in ${LIB[$l]}" >&2; exit 2; }
done
[ ${#LABELS[@]} -gt 0 ] || { echo "usage: bench/net_ab.sh BUILD_DIR N REPS LABEL=LIBDIR[,VAR=VALUE...] ..." >&2; exit 2; }

net_init kinet-ab

# one PATH ROUND WHO ENV CLIENT_ARGS PROG PREFIXES...: every measurement of one side
one() {
	local path=$1 r=$2 who=$3 envs=$4 cargs=$5 prog=$6
	shift 6
	local f="$TMP/$who.$path.$r"
	: >"$f"
	for sz in $SIZES; do
		pair "$envs" "$prog" "$@" $cargs -n "$N" -z "$sz" -l 0 | awk '$1 == "bw" {print "bw", $2, $3}' >>"$f"
	done
	pair "$envs" "$prog" "$@" $cargs -n 1 -z 0 -l $((N * 10)) | awk '$1 == "lat" {print "lat", $2}' >>"$f"
	if [ "$GAP_US" != 0 ]; then
		pair "$envs" "$prog" "$@" $cargs -n 1 -z 0 -l $((N / 10 + 1)) -g "$GAP_US" |
			awk '$1 == "lat" {print "gap", $2}' >>"$f"
	fi
}

run_path() {
	local path=$1
	shift
	for r in $(seq 1 "$REPS"); do
		one "$path" "$r" raw "" "" fabric_bw "$@"
		for l in "${LABELS[@]}"; do
			one "$path" "$r" "k_$l" "LD_LIBRARY_PATH=${LIB[$l]} ${ENVS[$l]}" "${CARGS[$l]}" kinet_net_bw "$@"
		done
	done
}

PATHS=(lo)
run_path lo "" "" lo lo
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
	net_ns kab$$ 10.232.253
	run_path ns "ip netns exec $NSB" "ip netns exec $NSA" kab$$b kab$$a
	PATHS+=(ns)
fi

# val FILE KEY [SIZE]
val() { awk -v k="$2" -v z="${3:-}" '$1 == k && (z == "" || $2 == z) {print $NF}' "$1"; }

echo "provider ${KINET_FI_PROVIDER:-tcp;ofi_rxm}, N=$N, $REPS rounds (raw, then each variant), medians;" \
	"libfabric $(ldd "$OUT/fabric_bw" | awk '/libfabric/ {print $3}');" \
	"pinning: server ${PIN_SRV:-none}, client ${PIN_CLI:-none}"
for l in "${LABELS[@]}"; do echo "- $l: ${LIB[$l]} ${ENVS[$l]}${CARGS[$l]:+ (client options: ${CARGS[$l]})}"; done
echo
printf "| path | measure | raw |"
for l in "${LABELS[@]}"; do printf " %s | %s / raw (per round) |" "$l" "$l"; done
echo
printf "|---|---|---:|"
for l in "${LABELS[@]}"; do printf -- "---:|---|"; done
echo
for p in "${PATHS[@]}"; do
	rows=()
	for sz in $SIZES; do rows+=("bw:$sz"); done
	rows+=("lat:")
	[ "$GAP_US" != 0 ] && rows+=("gap:")
	for row in "${rows[@]}"; do
		k=${row%%:*}
		z=${row#*:}
		case $k in
		bw) what="write $((z / 1024)) KiB, MB/s" ;;
		lat) what="8 B round trip, us" ;;
		gap) what="8 B round trip after ${GAP_US} us quiet, us" ;;
		esac
		raw=$(for r in $(seq 1 "$REPS"); do val "$TMP/raw.$p.$r" "$k" "$z"; done | median)
		printf "| %s | %s | %s |" "$([ "$p" = lo ] && echo loopback || echo namespaces)" "$what" "$raw"
		for l in "${LABELS[@]}"; do
			kin=$(for r in $(seq 1 "$REPS"); do val "$TMP/k_$l.$p.$r" "$k" "$z"; done | median)
			per=$(for r in $(seq 1 "$REPS"); do
				a=$(val "$TMP/raw.$p.$r" "$k" "$z")
				b=$(val "$TMP/k_$l.$p.$r" "$k" "$z")
				if [ "$k" = bw ]; then
					awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f\n", b / a}'
				else
					awk -v a="$a" -v b="$b" 'BEGIN {printf "%+.1f\n", b - a}'
				fi
			done)
			if [ "$k" = bw ]; then
				m=$(echo "$per" | median)
				printf " %s | %.2f (%s) |" "$kin" "$m" "$(echo "$per" | sort -g | tr '\n' ' ' | sed 's/ $//')"
			else
				m=$(echo "$per" | median)
				printf " %s | %+.1f (%s) |" "$kin" "$m" "$(echo "$per" | sort -g | tr '\n' ' ' | sed 's/ $//')"
			fi
		done
		echo
	done
done
echo
echo "(bandwidth: kinet / raw of the same round, median and all rounds; round trips: kinet - raw in us)"

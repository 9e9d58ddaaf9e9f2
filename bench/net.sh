#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The software NIC's wire against raw libfabric, in one run, on the same
# paths: loopback, then two network namespaces joined by a veth pair (made
# here and removed on exit; needs root). Prints markdown for docs/perf.md.
#
#   bench/net.sh [BUILD_DIR] [N]     (default build, N=1000: iterations scale)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
N=${2:-1000}
OUT=$BUILD/bench
mkdir -p "$OUT"
CC=${CC:-cc}
$CC -O2 -Wall -Wextra -Werror -o "$OUT/fabric_bw" "$ROOT/bench/fabric_bw.c" $(pkg-config --cflags --libs libfabric)
$CC -O2 -Wall -Wextra -Werror -I"$ROOT/include" -I"$BUILD/gen" -o "$OUT/kinet_net_bw" \
	"$ROOT/bench/kinet_net_bw.c" -L"$BUILD/src" -lkinet -Wl,-rpath,"$BUILD/src"

TMP=$(mktemp -d)
NSA=kinet-bench-a$$
NSB=kinet-bench-b$$
cleanup() {
	ip netns del "$NSA" 2>/dev/null || true
	ip netns del "$NSB" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

# pair PROG SRV_PREFIX CLI_PREFIX SRV_IFACE CLI_IFACE: server in the
# background, client in front; both bounded.
pair() {
	local prog=$1 spre=$2 cpre=$3 sif=$4 cif=$5
	rm -f "$TMP"/*
	$spre env FI_TCP_IFACE="$sif" timeout 300 "$OUT/$prog" -s "$TMP" &
	local spid=$!
	$cpre env FI_TCP_IFACE="$cif" timeout 300 "$OUT/$prog" -c "$TMP" -n "$N"
	wait $spid
}

echo "### loopback (lo)"
echo
echo "raw libfabric (${KINET_FI_PROVIDER:-tcp;ofi_rxm}):"
echo
pair fabric_bw "" "" lo lo
echo
echo "kinet (software NIC, wire):"
echo
pair kinet_net_bw "" "" lo lo

if [ "$(id -u)" != 0 ]; then
	echo
	echo "(namespaces skipped: needs root)"
	exit 0
fi
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
echo
echo "### two network namespaces (veth)"
echo
echo "raw libfabric:"
echo
pair fabric_bw "ip netns exec $NSB" "ip netns exec $NSA" kbvb$$ kbva$$
echo
echo "kinet (software NIC, wire):"
echo
pair kinet_net_bw "ip netns exec $NSB" "ip netns exec $NSA" kbvb$$ kbva$$

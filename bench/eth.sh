#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Ethernet queues of the software NIC against plain AF_XDP loops, in one run,
# on one veth pair between two network namespaces (made here and removed on
# exit; needs root):
#   - 64-byte frame rate sent by kernel-driven code (eth_bench tx: the device
#     API on a host-executor thread, the port thread serving it) against the
#     benchmark's own CPU AF_XDP sender (xsk_base tx) and xdp-trafficgen;
#     counted where they arrive (the peer interface's receive counter);
#   - 64-byte frame rate received (sent by xsk_base tx from the peer) by
#     kernel-driven code (eth_bench rx) against xsk_base rx and xdp-bench drop;
#   - UDP echo round trip of 64-byte frames from a socket client of the peer:
#     the kinet echo (examples/eth_udp_echo), the CPU AF_XDP echo (xsk_base
#     echo, same work: addresses swapped, checksums recomputed) and a plain
#     socket echo.
# kinet and the baselines alternate REPS times; the tables give medians and
# the ratio kinet / baseline. Prints markdown for docs/perf.md.
#
#   bench/eth.sh [BUILD_DIR] [N] [REPS]   (default build, N=200000 frames, REPS=3)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
N=${2:-200000}
REPS=${3:-3}
ECHOS=$((N / 100 > 500 ? N / 100 : 500))
OUT=$BUILD/bench
mkdir -p "$OUT"
CC=${CC:-cc}
# ETH_PREBUILT=1: xsk_base and eth_bench are in BUILD_DIR/bench already (a
# machine without a compiler or libxdp's headers, its libraries carried)
if [ "${ETH_PREBUILT:-0}" != 1 ]; then
	$CC -O2 -Wall -Wextra -Werror -o "$OUT/xsk_base" "$ROOT/bench/xsk_base.c" \
		$(pkg-config --cflags --libs libxdp libbpf)
	$CC -O2 -Wall -Wextra -Werror -I"$ROOT/include" -I"$BUILD/gen" -o "$OUT/eth_bench" \
		"$ROOT/bench/eth_bench.c" -L"$BUILD/src" -lkinet -Wl,-rpath,"$BUILD/src"
fi
# the echo as CUDA kernels too, where it was built (a GPU machine)
ECHO_CUDA=$BUILD/examples/eth_apps_cuda
[ -x "$ECHO_CUDA" ] && [ "${ETH_NO_CUDA:-0}" != 1 ] || ECHO_CUDA=
PEER=$BUILD/tests/net/kinet_eth_peer
ECHO=$BUILD/examples/eth_udp_echo
for b in "$PEER" "$ECHO"; do
	[ -x "$b" ] || { echo "eth.sh: $b is not built (cmake --build $BUILD)" >&2; exit 1; }
done

NSA=kinet-ebench-a$$
NSB=kinet-ebench-b$$
IFA=keba$$
IFB=kebb$$
TMP=$(mktemp -d)
cleanup() {
	ip netns del "$NSA" 2>/dev/null || true
	ip netns del "$NSB" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || true
ip netns add "$NSA"
ip netns add "$NSB"
ip link add "$IFA" type veth peer name "$IFB"
ip link set "$IFA" netns "$NSA"
ip link set "$IFB" netns "$NSB"
for ns in "$NSA" "$NSB"; do
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip -n "$ns" link set lo up
done
ip -n "$NSA" addr add 10.236.0.1/30 dev "$IFA"
ip -n "$NSB" addr add 10.236.0.2/30 dev "$IFB"
ip -n "$NSA" link set "$IFA" up
ip -n "$NSB" link set "$IFB" up
MACA=$(ip -n "$NSA" link show "$IFA" | awk '/link\/ether/{print $2}')
MACB=$(ip -n "$NSB" link show "$IFB" | awk '/link\/ether/{print $2}')
# the CPU AF_XDP loops take every frame of the queue (ARP too): fixed neighbours
ip -n "$NSA" neigh replace 10.236.0.2 lladdr "$MACB" dev "$IFA" nud permanent
ip -n "$NSB" neigh replace 10.236.0.1 lladdr "$MACA" dev "$IFB" nud permanent
ip netns exec "$NSB" "$PEER" csum-off "$IFB"

A() { ip netns exec "$NSA" "$@"; }
B() { ip netns exec "$NSB" "$@"; }
# start_a OUT PROG...: PROG in namespace a, in the background, its output in
# OUT; BGPID is the program itself (ip netns exec execs it), so a kill ends it.
start_a() {
	local out=$1
	shift
	ip netns exec "$NSA" "$@" > "$out" 2>&1 &
	BGPID=$!
}
rxb() { B cat /sys/class/net/"$IFB"/statistics/rx_packets; }
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2" | tail -1; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "n/a"}'; }

# Waits for "ready" in file $1 (a background program's output), at most 20 s.
ready() {
	for _ in $(seq 200); do
		grep -q '^ready' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "eth.sh: no ready in $1:" >&2
	cat "$1" >&2
	return 1
}

# tx NAME CMD...: a sender in A; its rate = frames the peer received / its seconds.
tx() {
	local name=$1
	shift
	local before after
	before=$(rxb)
	"$@" > "$TMP/o" 2>&1 || { echo "$name: failed" >> "$TMP/notes"; cat "$TMP/o" >&2; return 0; }
	sleep 0.2
	after=$(rxb)
	local secs
	secs=$(field seconds "$TMP/o")
	echo "$(( after - before )) $secs" | awk '{ if ($2 > 0) printf "%.0f\n", $1 / $2 }' \
		>> "$TMP/tx_$name"
}

# rx NAME PROG...: a receiver in A (prints ready); the peer sends N frames.
rx() {
	local name=$1 o=$TMP/rx.$1.$r
	shift
	start_a "$o" "$@"
	local pid=$BGPID
	ready "$o" || { kill $pid 2>/dev/null; wait $pid 2>/dev/null; return 0; }
	B "$OUT/xsk_base" tx "$IFB" "$MACA" "$N" 64 > "$TMP/s" 2>&1 || true
	wait $pid || true
	field pps "$o" >> "$TMP/rx_$name"
	field frames "$o" >> "$TMP/rxn_$name"
}

# echo_rtt NAME PROG...: an echo server in A; the socket client of B measures.
echo_rtt() {
	local name=$1 o=$TMP/echo.$1.$r
	shift
	start_a "$o" "$@"
	local pid=$BGPID
	ready "$o" || { kill $pid 2>/dev/null; wait $pid 2>/dev/null; return 0; }
	if B "$PEER" echo-client 10.236.0.1 7 "$ECHOS" 22 22 > "$TMP/c" 2>&1; then
		field rtt_p50_us "$TMP/c" >> "$TMP/p50_$name"
		field rtt_p99_us "$TMP/c" >> "$TMP/p99_$name"
		field rtt_min_us "$TMP/c" >> "$TMP/min_$name"
	else
		echo "$name echo: $(cat "$TMP/c")" >> "$TMP/notes"
	fi
	# the servers end by themselves after ECHOS; a signal ends a stuck one
	for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	kill $pid 2>/dev/null || true
	wait $pid 2>/dev/null || true
}

for r in $(seq "$REPS"); do
	tx kinet A "$OUT/eth_bench" tx "$IFA" "$MACB" "$N" 64
	tx xsk A "$OUT/xsk_base" tx "$IFA" "$MACB" "$N" 64
	rx kinet "$OUT/eth_bench" rx "$IFA" "$N"
	rx xsk "$OUT/xsk_base" rx "$IFA" "$N"
	echo_rtt kinet "$ECHO" --if "$IFA" --port 7 --count "$ECHOS"
	[ -z "$ECHO_CUDA" ] || echo_rtt cuda "$ECHO_CUDA" echo --if "$IFA" --port 7 --count "$ECHOS"
	echo_rtt xsk "$OUT/xsk_base" echo "$IFA" 7 "$ECHOS"
	echo_rtt socket "$PEER" echo-server 7 "$ECHOS"
done

# xdp-tools on the same veth (their programs may not load on this kernel)
XT="not run"
if command -v xdp-trafficgen > /dev/null; then
	before=$(rxb)
	t0=$(date +%s.%N)
	if A timeout 30 xdp-trafficgen udp -m "$MACB" -a 10.236.0.2 -A 10.236.0.1 -n "$N" "$IFA" \
		> "$TMP/xt" 2>&1; then
		t1=$(date +%s.%N)
		XT=$(echo "$(( $(rxb) - before )) $t0 $t1" | awk '{printf "%.0f pps", $1 / ($3 - $2)}')
	else
		XT="failed: $(grep -m1 -iE 'error|fail' "$TMP/xt" || tail -1 "$TMP/xt")"
	fi
fi
XB="not run"
if command -v xdp-bench > /dev/null; then
	start_a "$TMP/xb" timeout 8 xdp-bench drop -i 1 "$IFA"
	xp=$BGPID
	sleep 1
	B "$OUT/xsk_base" tx "$IFB" "$MACA" "$N" 64 > /dev/null 2>&1 || true
	wait $xp || true
	if grep -q "rx" "$TMP/xb" && ! grep -qi "failed" "$TMP/xb"; then
		XB="$(grep -iE 'receive|rx' "$TMP/xb" | tail -1 | tr -s ' ')"
	else
		XB="failed: $(grep -m1 -iE 'error|fail' "$TMP/xb" || tail -1 "$TMP/xb")"
	fi
fi

m() { [ -s "$TMP/$1" ] && median < "$TMP/$1" || echo "n/a"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
TXK=$(m tx_kinet); TXX=$(m tx_xsk); RXK=$(m rx_kinet); RXX=$(m rx_xsk)
P50K=$(m p50_kinet); P50X=$(m p50_xsk); P50S=$(m p50_socket); P50C=$(m p50_cuda)
P99C=$(m p99_cuda); MINC=$(m min_cuda)
P99K=$(m p99_kinet); P99X=$(m p99_xsk); P99S=$(m p99_socket)
MINK=$(m min_kinet); MINX=$(m min_xsk); MINS=$(m min_socket)

echo "### Ethernet, software NIC on a veth pair ($(date -u +%Y-%m-%d), $(uname -r))"
echo
echo "Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
echo "Command: \`bench/eth.sh $BUILD $N $REPS\`; medians of $REPS rounds, 64-byte frames, AF_XDP in copy mode on both sides."
echo
echo "| 64-byte frames | kinet (kernel-driven, host executor) | CPU AF_XDP loop (xsk_base) | ratio |"
echo "| --- | ---: | ---: | ---: |"
echo "| sent, frames/s arriving at the peer | $TXK | $TXX | $(ratio "$TXK" "$TXX") |"
echo "| received, frames/s | $RXK | $RXX | $(ratio "$RXK" "$RXX") |"
echo
echo "| UDP echo round trip, 64-byte frames, us | kinet | CPU AF_XDP echo | socket echo | kinet / AF_XDP |"
echo "| --- | ---: | ---: | ---: | ---: |"
echo "| p50 | $P50K | $P50X | $P50S | $(ratio "$P50K" "$P50X") |"
echo "| p99 | $P99K | $P99X | $P99S | $(ratio "$P99K" "$P99X") |"
echo "| min | $MINK | $MINX | $MINS | $(ratio "$MINK" "$MINX") |"
if [ -n "$ECHO_CUDA" ]; then
	echo
	echo "| UDP echo round trip, CUDA kernels (eth_apps_cuda echo), us | kinet, GPU | CPU AF_XDP echo | GPU / AF_XDP |"
	echo "| --- | ---: | ---: | ---: |"
	echo "| p50 | $P50C | $P50X | $(ratio "$P50C" "$P50X") |"
	echo "| p99 | $P99C | $P99X | $(ratio "$P99C" "$P99X") |"
	echo "| min | $MINC | $MINX | $(ratio "$MINC" "$MINX") |"
fi
echo
echo "xdp-trafficgen (sender, same veth): $XT"
echo
echo "xdp-bench drop (receiver, same veth): $XB"
if [ -s "$TMP/notes" ]; then
	echo
	sed 's/^/Note: /' "$TMP/notes"
fi
echo
echo "Frames received per round (of $N sent): kinet $(tr '\n' ' ' < "$TMP/rxn_kinet" 2>/dev/null), xsk_base $(tr '\n' ' ' < "$TMP/rxn_xsk" 2>/dev/null)"

# SPDX-License-Identifier: BSD-3-Clause
# Sourced by bench/net.sh and bench/net_ab.sh: the programs, the scratch
# folder and namespaces (removed on exit), the pinning prefixes, one
# server/client pair, medians. Expects ROOT, BUILD and OUT.

# fabric_bw and kinet_net_bw into $OUT, unless NET_PREBUILT=1 (a machine
# without libfabric's headers: build them elsewhere, carry them)
net_build() {
	[ "${NET_PREBUILT:-0}" = 1 ] && return 0
	local cc=${CC:-cc}
	$cc -O2 -Wall -Wextra -Werror -o "$OUT/fabric_bw" "$ROOT/bench/fabric_bw.c" $(pkg-config --cflags --libs libfabric)
	$cc -O2 -Wall -Wextra -Werror -I"$ROOT/include" -I"$BUILD/gen" -o "$OUT/kinet_net_bw" \
		"$ROOT/bench/kinet_net_bw.c" -L"$BUILD/src" -lkinet -Wl,-rpath,"$BUILD/src"
}

# net_init NAME: TMP, the namespace names NSA and NSB, their removal on exit,
# and the prefixes PS / PC of PIN_SRV / PIN_CLI (taskset -c)
net_init() {
	TMP=$(mktemp -d)
	NSA=$1-a$$
	NSB=$1-b$$
	trap net_cleanup EXIT
	PS=()
	PC=()
	[ -n "${PIN_SRV:-}" ] && PS=(taskset -c "$PIN_SRV")
	[ -n "${PIN_CLI:-}" ] && PC=(taskset -c "$PIN_CLI")
	return 0
}
net_cleanup() {
	ip netns del "$NSA" 2>/dev/null || true
	ip netns del "$NSB" 2>/dev/null || true
	rm -rf "$TMP"
}

# net_ns VETH SUBNET: NSA and NSB joined by a veth pair VETHa (SUBNET.1, in
# NSA) and VETHb (SUBNET.2, in NSB), SUBNET being three octets
net_ns() {
	local v=$1 s=$2
	ip netns add "$NSA"
	ip netns add "$NSB"
	ip link add "${v}a" type veth peer name "${v}b"
	ip link set "${v}a" netns "$NSA"
	ip link set "${v}b" netns "$NSB"
	ip -n "$NSA" addr add "$s.1/30" dev "${v}a"
	ip -n "$NSB" addr add "$s.2/30" dev "${v}b"
	for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
	ip -n "$NSA" link set "${v}a" up
	ip -n "$NSB" link set "${v}b" up
}

# pair ENV PROG SRV_PREFIX CLI_PREFIX SRV_IFACE CLI_IFACE [CLIENT OPTIONS]:
# server in the background, client in front, both with the settings ENV
# (VAR=VALUE words) and bounded. The client's lines go to stdout.
pair() {
	local envs=$1 prog=$2 spre=$3 cpre=$4 sif=$5 cif=$6
	shift 6
	rm -rf "$TMP/x"
	mkdir "$TMP/x"
	$spre env $envs FI_TCP_IFACE="$sif" timeout 300 "${PS[@]}" "$OUT/$prog" -s "$TMP/x" &
	local spid=$!
	$cpre env $envs FI_TCP_IFACE="$cif" timeout 300 "${PC[@]}" "$OUT/$prog" -c "$TMP/x" "$@"
	wait $spid
}

# median of the numbers on stdin
median() {
	sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

#!/bin/sh
# rdma-core's own utilities (Debian's ibverbs-utils), unmodified, under
# kinet-run: ibv_devices and ibv_devinfo -v list kinet0 with an active RoCE
# port (docs/verbs.md).
#   verbs_utils.sh KINET_RUN host   the host's interfaces, as they are
#   verbs_utils.sh KINET_RUN netns  a new network namespace whose one
#                                   interface has a known MAC, address and
#                                   MTU: the GIDs, the node GUID and the
#                                   active MTU must be derived from them
# Exits 77 (skipped) when the utilities are not installed, or, for netns,
# when no namespace can be made.
set -eu
if [ -n "${KINET_TEST_SANITIZED:-}" ]; then
	# the sanitizer build's libraries need the ASan runtime first in a
	# program, which the distribution's programs do not have
	echo "SKIPPED verbs_utils: the ASan build's kinet-verbs cannot be loaded into uninstrumented programs (the plain build runs this test)"
	exit 77
fi
run=$1
mode=${2:-host}
for u in ibv_devices ibv_devinfo; do
	if ! command -v "$u" >/dev/null 2>&1; then
		echo "verbs_utils: $u not installed (Debian's ibverbs-utils): skipped"
		exit 77
	fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "verbs_utils: $*" >&2
	for f in "$tmp"/*; do
		echo "---- $f" >&2
		cat "$f" >&2
	done
	exit 1
}
expect() { # file, fixed string
	grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks: $2"
}

if [ "$mode" = netns ]; then
	if [ "$(id -u)" -ne 0 ] || ! unshare -n true 2>/dev/null; then
		echo "verbs_utils: cannot make a network namespace (needs root): skipped"
		exit 77
	fi
	# one Ethernet interface up (a veth whose peer stays down), MAC 02:00:00:00:07:09, 10.201.7.9, MTU 9000
	exec unshare -n sh -c '
		set -e
		ip link set lo up
		ip link add kv0 address 02:00:00:00:07:09 mtu 9000 type veth peer name kv1
		ip addr add 10.201.7.9/24 dev kv0
		ip addr add fd77::79/64 dev kv0 nodad
		ip link set kv0 up
		exec sh "$0" "$1" netns-inside' "$0" "$run"
fi

# each bounded: a stuck utility fails the test in 30 s, with what it printed
timeout -s KILL 30 "$run" ibv_devices >"$tmp/devices" 2>"$tmp/devices.err" ||
	fail "ibv_devices failed (status $?; 137: still running after 30 s)"
timeout -s KILL 30 "$run" -- ibv_devinfo -v >"$tmp/devinfo" 2>"$tmp/devinfo.err" ||
	fail "ibv_devinfo -v failed (status $?; 137: still running after 30 s)"
n=$(grep -c '^kinet-run: ' "$tmp/devinfo.err" || true)
[ "$n" -eq 1 ] || fail "kinet-run said $n times (once expected) that it runs kinet-verbs"
expect "$tmp/devices" "kinet0"
expect "$tmp/devinfo" "hca_id:	kinet0"
expect "$tmp/devinfo" "PORT_ACTIVE (4)"
expect "$tmp/devinfo" "link_layer:		Ethernet"
expect "$tmp/devinfo" "vendor_id:			0x02c9"
grep -qE 'GID\[ *[0-9]+\]:.*, RoCE v2$' "$tmp/devinfo" || fail "no RoCE v2 GID"
# every address GID appears as RoCE v1 at an even index and v2 at the next
v1=$(grep -cE 'GID\[ *[0-9]*[02468]\]:.*, RoCE v1$' "$tmp/devinfo" || true)
v2=$(grep -cE 'GID\[ *[0-9]*[13579]\]:.*, RoCE v2$' "$tmp/devinfo" || true)
[ "$v1" -ge 1 ] && [ "$v1" -eq "$v2" ] || fail "GIDs not in v1/v2 pairs ($v1 v1, $v2 v2)"

if [ "$mode" = netns-inside ]; then
	# the default GID and node GUID: the EUI-64 of the MAC; then the addresses
	expect "$tmp/devices" "000000fffe000709"
	expect "$tmp/devinfo" "node_guid:			0000:00ff:fe00:0709"
	expect "$tmp/devinfo" "GID[  0]:		fe80:0000:0000:0000:0000:00ff:fe00:0709, RoCE v1"
	expect "$tmp/devinfo" "GID[  1]:		fe80::ff:fe00:709, RoCE v2"
	expect "$tmp/devinfo" "GID[  3]:		::ffff:10.201.7.9, RoCE v2"
	expect "$tmp/devinfo" "fd77::79, RoCE v2"
	# MTU 9000 carries 4096-byte RoCE payloads
	expect "$tmp/devinfo" "active_mtu:		4096 (5)"
	[ "$(grep -c '^hca_id:' "$tmp/devinfo")" -eq 1 ] || fail "one device expected (one interface)"
fi
echo "verbs_utils ($mode): ibv_devices and ibv_devinfo -v list kinet0 with an active RoCE v2 port"

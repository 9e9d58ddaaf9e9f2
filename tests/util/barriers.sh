#!/bin/sh
# The host build's barriers toward the NIC, checked in the generated code for
# x86-64 and aarch64: each place uses the instruction rdma-core's mlx5
# provider uses for the same purpose (util/udma_barrier.h), in that order,
# and nothing stronger or weaker:
#   ring:       aarch64 dmb oshst, dsb st, dsb st    x86-64 sfence, sfence
#   recv post:  aarch64 dmb oshst                    x86-64 (none: a compiler barrier)
#   recv poll:  aarch64 dmb oshld                    x86-64 lfence
# usage: barriers.sh <source dir> [x86-64|aarch64] (both when not given).
# aarch64 needs clang and the arm64 libc headers (libc6-dev-arm64-cross,
# which scripts/install-deps.sh installs): without them its half is skipped
# (exit 77, CTest: test_barriers.aarch64 "Skipped"), naming them.
set -eu
src=$1
arch=${2:-all}
probe=$src/tests/util/barriers_probe.c
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# barrier instructions of function $2 in assembly file $1, one per line
barriers() {
	awk -v fn="$2" '
		$0 ~ "^" fn ":" { on = 1; next }
		on && /^[A-Za-z_][A-Za-z0-9_.]*:/ && $0 !~ /^\.L/ { on = 0 }
		on && /^\t\.(cfi_endproc|size)/ { on = 0 }
		on {
			line = $0; sub(/^[ \t]+/, "", line); gsub(/[ \t]+/, " ", line)
			if (line ~ /^(dmb|dsb|isb) / || line ~ /^(mfence|lfence|sfence)$/ ||
			    line ~ /^lock /)
				print line
		}' "$1" | tr '\n' ';'
}

check() { # arch function expected actual
	if [ "$3" = "$4" ]; then
		echo "ok   $1 $2: ${4:-(no barrier instruction)}"
	else
		echo "FAIL $1 $2: expected '${3}', generated '${4}'"
		fail=1
	fi
}

cc=${CC:-cc}
if [ "$arch" != aarch64 ]; then
	"$cc" -O2 -std=gnu11 -I"$src/include" -S "$probe" -o "$tmp/x86.s"
	check x86-64 ring "sfence;sfence;" "$(barriers "$tmp/x86.s" probe_ring)"
	check x86-64 recv_post "" "$(barriers "$tmp/x86.s" probe_recv_post)"
	check x86-64 recv_poll "lfence;" "$(barriers "$tmp/x86.s" probe_recv_poll)"
	[ "$arch" = x86-64 ] && exit $fail
fi

sysinc=/usr/aarch64-linux-gnu/include
if ! command -v clang >/dev/null 2>&1 || [ ! -d "$sysinc" ]; then
	echo "SKIPPED aarch64: needs clang and $sysinc (Debian: clang libc6-dev-arm64-cross;" \
	     "scripts/install-deps.sh installs them)"
	[ "$fail" -ne 0 ] && exit 1
	exit 77
fi
clang --target=aarch64-linux-gnu -isystem "$sysinc" -O2 -std=gnu11 -I"$src/include" \
	-S "$probe" -o "$tmp/a64.s"
check aarch64 ring "dmb oshst;dsb st;dsb st;" "$(barriers "$tmp/a64.s" probe_ring)"
check aarch64 recv_post "dmb oshst;" "$(barriers "$tmp/a64.s" probe_recv_post)"
check aarch64 recv_poll "dmb oshld;" "$(barriers "$tmp/a64.s" probe_recv_poll)"

# the ring's order: record store between the first two barriers, register
# stores between the last two (aarch64: str after each barrier)
awk '/^probe_ring:/{on=1;next} on&&/^\t\.cfi_endproc/{on=0} on' "$tmp/a64.s" |
	sed 's/^[ \t]*//' | grep -E '^(dmb|dsb|str)' | awk '{print $1}' | uniq | tr '\n' ' ' >"$tmp/seq"
case "$(cat "$tmp/seq")" in
"dmb str dsb str dsb "*) echo "ok   aarch64 ring order: $(cat "$tmp/seq")" ;;
*) echo "FAIL aarch64 ring order: $(cat "$tmp/seq") (want dmb str dsb str dsb ...)"; fail=1 ;;
esac
exit $fail

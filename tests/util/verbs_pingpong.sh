#!/bin/sh
# Debian's ibv_rc_pingpong (ibverbs-utils), unmodified, between two processes
# of this host under kinet-run, with its data check (-c): the server and the
# client exchange GID, QP number and PSN over TCP, and kinet-verbs finds the
# peer's software-NIC QP from them alone (docs/verbs.md, "Addressing").
#   verbs_pingpong.sh KINET_RUN [pingpong]   ibv_rc_pingpong -c
#   verbs_pingpong.sh KINET_RUN MODE [VARIANT...]
# where MODE names one of perftest's RC programs, ib_MODE: write_bw,
# write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw, atomic_lat.
# perftest posts through extended QPs (the ibv_wr_* API, which it must say
# it used). Variants:
#   old        through ibv_post_send instead (--use_old_post_send)
#   all        every message size, 2 B .. 8 MiB (-a), a few iterations each
#   size=N     messages of N bytes (-s N)
#   op=NAME    the atomic (-A CMP_AND_SWAP or FETCH_AND_ADD)
# perftest refuses -a for its atomics (they have one size, 8 bytes, which
# size=8 runs). Both must exit 0 and print a result line for every size they
# ran; everything runs under a timeout. Exits 77 (skipped) when the program
# is not installed.
set -eu
if [ -n "${KINET_TEST_SANITIZED:-}" ]; then
	# the sanitizer build's libraries need the ASan runtime first in a
	# program, which the distribution's programs do not have
	echo "SKIPPED verbs_pingpong: the ASan build's kinet-verbs cannot be loaded into uninstrumented programs (the plain build runs this test)"
	exit 77
fi
run=$1
mode=${2:-pingpong}
shift
[ $# -eq 0 ] || shift
old= all= size= op=
for v in "$@"; do
	case $v in
	old) old=1 ;;
	all) all=1 ;;
	size=*) size=${v#size=} ;;
	op=*) op=${v#op=} ;;
	*) echo "verbs_pingpong: unknown variant $v" >&2; exit 2 ;;
	esac
done
case $mode in
pingpong) prog=ibv_rc_pingpong pkg="Debian's ibverbs-utils" ;;
write_bw | write_lat | read_bw | read_lat | send_bw | send_lat | atomic_bw | atomic_lat)
	prog=ib_$mode pkg="Debian's perftest" ;;
*) echo "verbs_pingpong: unknown mode $mode" >&2; exit 2 ;;
esac
if ! command -v "$prog" >/dev/null 2>&1; then
	echo "verbs_pingpong: $prog not installed ($pkg): skipped"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "verbs_pingpong: $*" >&2
	for f in "$tmp"/*; do
		echo "---- $f" >&2
		cat "$f" >&2
	done
	exit 1
}
# a port of our own, so that parallel tests do not meet
port=$((20000 + $$ % 20000))
n=${PINGPONG_ITERS:-200}
# the sizes the client must report: perftest's default, -s's, or all of -a's
case $mode in
*_bw) sizes=65536 ;;
atomic_lat) sizes=8 ;;
*) sizes=2 ;;
esac
[ "$mode" != atomic_bw ] || sizes=8
# each process is killed after this many seconds
limit=30
if [ -n "$all" ]; then
	# perftest spends about half a second between sizes (it measures the
	# CPU's clock again); a few iterations each keep the run short
	n=${PINGPONG_ITERS:-5}
	limit=90
	sizes=
	s=2
	while [ "$s" -le 8388608 ]; do
		sizes="$sizes $s"
		s=$((s * 2))
	done
elif [ -n "$size" ]; then
	sizes=$size
fi
if [ "$mode" = pingpong ]; then
	set -- ibv_rc_pingpong -d kinet0 -g 1 -c -p "$port" -n "$n"
else
	set -- "$prog" -d kinet0 -x 1 -p "$port" -n "$n"
	[ -z "$old" ] || set -- "$@" --use_old_post_send
	[ -z "$all" ] || set -- "$@" -a
	[ -z "$size" ] || set -- "$@" -s "$size"
	[ -z "$op" ] || set -- "$@" -A "$op"
fi
timeout -s KILL "$limit" "$run" "$@" >"$tmp/server" 2>"$tmp/server.err" &
srv=$!
# the server listens once its QP is set up; the client retries its connect
# (for at most 10 s)
ok=0
end=$(($(date +%s) + 10))
while :; do
	if timeout -s KILL "$limit" "$run" "$@" localhost >"$tmp/client" 2>"$tmp/client.err"; then
		ok=1
		break
	fi
	grep -qE "Couldn't connect to localhost|Unable to open file descriptor for socket" \
		"$tmp/client" "$tmp/client.err" || break
	[ "$(date +%s)" -lt "$end" ] || break
	sleep 0.1
done
src=0
wait "$srv" || src=$?
[ "$ok" -eq 1 ] || fail "the client failed"
[ "$src" -eq 0 ] || fail "the server exited with $src"
# a result line: the size, the iterations, then at least three numbers
result() { # file, size
	grep -qE "^ $2[[:space:]]+$n([[:space:]]+[0-9.]+){3}" "$1"
}
if [ "$mode" = pingpong ]; then
	for s in server client; do
		grep -qE "^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$" "$tmp/$s" ||
			fail "$s printed no bandwidth line"
		grep -qE "^$n iters in [0-9.]+ seconds = [0-9.]+ usec/iter$" "$tmp/$s" ||
			fail "$s printed no iteration line"
	done
else
	for s in $sizes; do
		result "$tmp/client" "$s" || fail "the client printed no result for $s bytes"
	done
	last=${sizes##* }
	case $mode in
	# both ends measure
	send_bw | send_lat | write_lat)
		for s in $sizes; do
			result "$tmp/server" "$s" || fail "the server printed no result for $s bytes"
		done
		;;
	# the server reports the last size
	write_bw | read_bw | atomic_bw)
		result "$tmp/server" "$last" || fail "the server printed no result for $last bytes"
		;;
	# read_lat, atomic_lat: the server only serves
	esac
	api=ON
	[ -z "$old" ] || api=OFF
	grep -qE "^ ibv_wr\* API[[:space:]]+: $api" "$tmp/client" ||
		fail "the client did not say ibv_wr* API: $api"
	if [ -n "$op" ]; then
		grep -qE "^[[:space:]]+Atomic $op " "$tmp/client" ||
			fail "the client did not run Atomic $op"
	fi
fi
[ "$mode" = pingpong ] || sizes=", sizes $(echo $sizes)"
[ "$mode" != pingpong ] || sizes=
echo "verbs_pingpong: $* ($n iterations$sizes): server and client passed"

#!/bin/sh
# Debian's ibv_rc_pingpong (ibverbs-utils), unmodified, between two processes
# of this host under kinet-run, with its data check (-c): the server and the
# client exchange GID, QP number and PSN over TCP, and kinet-verbs finds the
# peer's software-NIC QP from them alone (docs/verbs.md, "Addressing").
#   verbs_pingpong.sh KINET_RUN            ibv_rc_pingpong -c
#   verbs_pingpong.sh KINET_RUN write_bw   perftest's ib_write_bw
#   verbs_pingpong.sh KINET_RUN write_lat  perftest's ib_write_lat
#   verbs_pingpong.sh KINET_RUN read_bw    perftest's ib_read_bw
#   verbs_pingpong.sh KINET_RUN send_bw    perftest's ib_send_bw
# perftest posts through extended QPs (the ibv_wr_* API, which it must say
# it used); with a third argument "old", through ibv_post_send
# (--use_old_post_send).
# Both must exit 0 and print their results; everything runs under a
# timeout. Exits 77 (skipped) when the program is not installed.
set -eu
if [ -n "${KINET_TEST_SANITIZED:-}" ]; then
	# the sanitizer build's libraries need the ASan runtime first in a
	# program, which the distribution's programs do not have
	echo "SKIPPED verbs_pingpong: the ASan build's kinet-verbs cannot be loaded into uninstrumented programs (the plain build runs this test)"
	exit 77
fi
run=$1
mode=${2:-pingpong}
old=${3:-}
case $mode in
pingpong) prog=ibv_rc_pingpong pkg="Debian's ibverbs-utils" ;;
write_bw | write_lat | read_bw | send_bw) prog=ib_$mode pkg="Debian's perftest" ;;
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
if [ "$mode" = pingpong ]; then
	set -- ibv_rc_pingpong -d kinet0 -g 1 -c -p "$port" -n "$n"
else
	set -- "$prog" -d kinet0 -x 1 -p "$port" -n "$n"
	[ "$old" != old ] || set -- "$@" --use_old_post_send
fi
timeout -s KILL 30 "$run" "$@" >"$tmp/server" 2>"$tmp/server.err" &
srv=$!
# the server listens once its QP is set up; the client retries its connect
# (for at most 10 s); every process is killed after 30 s
ok=0
end=$(($(date +%s) + 10))
while :; do
	if timeout -s KILL 30 "$run" "$@" localhost >"$tmp/client" 2>"$tmp/client.err"; then
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
for s in server client; do
	case $mode in
	pingpong)
		grep -qE "^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$" "$tmp/$s" ||
			fail "$s printed no bandwidth line"
		grep -qE "^$n iters in [0-9.]+ seconds = [0-9.]+ usec/iter$" "$tmp/$s" ||
			fail "$s printed no iteration line"
		;;
	write_bw | read_bw | send_bw)
		grep -qE "^ 65536[[:space:]]+$n([[:space:]]+[0-9.]+){3}" "$tmp/$s" ||
			fail "$s printed no bandwidth line"
		;;
	write_lat)
		# the client measures; the server only serves
		[ "$s" = server ] || grep -qE "^ 2[[:space:]]+$n([[:space:]]+[0-9.]+){3}" "$tmp/$s" ||
			fail "$s printed no latency line"
		;;
	esac
done
if [ "$mode" != pingpong ]; then
	api=ON
	[ "$old" != old ] || api=OFF
	grep -qE "^ ibv_wr\* API[[:space:]]+: $api" "$tmp/client" ||
		fail "the client did not say ibv_wr* API: $api"
fi
echo "verbs_pingpong: $prog${old:+ (old post send)}, $n iterations, server and client passed"

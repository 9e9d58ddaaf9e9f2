#!/bin/sh
# Debian's ibv_rc_pingpong (ibverbs-utils), unmodified, between two processes
# of this host under kinet-run, with its data check (-c): the server and the
# client exchange GID, QP number and PSN over TCP, and kinet-verbs finds the
# peer's software-NIC QP from them alone (docs/verbs.md, "Addressing").
#   verbs_pingpong.sh KINET_RUN
# Both must exit 0 and print their bandwidth line; everything runs under a
# timeout. Exits 77 (skipped) when ibv_rc_pingpong is not installed.
set -eu
run=$1
if ! command -v ibv_rc_pingpong >/dev/null 2>&1; then
	echo "verbs_pingpong: ibv_rc_pingpong not installed (Debian's ibverbs-utils): skipped"
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
timeout -s KILL 30 "$run" ibv_rc_pingpong -d kinet0 -g 1 -c -p "$port" -n "$n" \
	>"$tmp/server" 2>"$tmp/server.err" &
srv=$!
# the server listens once its QP is set up; the client retries its connect
# (for at most 10 s); every process is killed after 30 s
ok=0
end=$(($(date +%s) + 10))
while :; do
	if timeout -s KILL 30 "$run" ibv_rc_pingpong -d kinet0 -g 1 -c -p "$port" -n "$n" \
		localhost >"$tmp/client" 2>"$tmp/client.err"; then
		ok=1
		break
	fi
	grep -q "Couldn't connect to localhost" "$tmp/client.err" || break
	[ "$(date +%s)" -lt "$end" ] || break
	sleep 0.1
done
src=0
wait "$srv" || src=$?
[ "$ok" -eq 1 ] || fail "the client failed"
[ "$src" -eq 0 ] || fail "the server exited with $src"
for s in server client; do
	grep -qE "^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$" "$tmp/$s" ||
		fail "$s printed no bandwidth line"
	grep -qE "^$n iters in [0-9.]+ seconds = [0-9.]+ usec/iter$" "$tmp/$s" ||
		fail "$s printed no iteration line"
done
echo "verbs_pingpong: ibv_rc_pingpong -c, $n iterations, server and client passed"

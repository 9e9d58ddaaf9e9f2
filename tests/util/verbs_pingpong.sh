#!/bin/sh
# Debian's ibv_rc_pingpong (ibverbs-utils), unmodified, between two processes
# of this host under kinet-run, with its data check (-c): the server and the
# client exchange GID, QP number and PSN over TCP, and kinet-verbs finds the
# peer's software-NIC QP from them alone (docs/verbs.md, "Addressing").
#   verbs_pingpong.sh KINET_RUN [pingpong]   ibv_rc_pingpong -c
#   verbs_pingpong.sh KINET_RUN srq          ibv_srq_pingpong -c: 16 RC QPs a
#                                            side, receiving through one SRQ
#   verbs_pingpong.sh KINET_RUN MODE [VARIANT...]
# where MODE names one of perftest's RC programs, ib_MODE: write_bw,
# write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw, atomic_lat.
# perftest posts through extended QPs (the ibv_wr_* API, which it must say
# it used). Variants:
#   old        through ibv_post_send instead (--use_old_post_send)
#   all        every message size, 2 B .. 8 MiB (-a), a few iterations each
#   size=N     messages of N bytes (-s N)
#   op=NAME    the atomic (-A CMP_AND_SWAP or FETCH_AND_ADD)
#   netns      the server in one network namespace, the client in another
#              (a veth pair between them, addresses only inside them), QPs
#              connected with the IPv4 GIDs (index 3); the rendezvous folder
#              (/dev/shm) is shared. Skipped (77) when no namespace can be
#              made.
#   hosts      as netns, with a rendezvous folder of its own in each
#              namespace (KINET_VERBS_RENDEZVOUS_DIR): two hosts, whose QPs
#              find each other through the rendezvous service of the other
#              (KINET_VERBS_RENDEZVOUS_PORT)
#   gid=N      with netns or hosts: the GID index (3, the IPv4 address's, by
#              default; 1: the default GID, fe80:: with the MAC's EUI-64,
#              whose host is then asked on its IPv6 link-local address)
#   takeover   as hosts, with another kinet-verbs process in the server's
#              namespace that answers lookups first and ends before the
#              client starts: the server's process takes the service over
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
old= all= size= op= netns= hosts= takeover= nsgid=3 pp=
for v in "$@"; do
	case $v in
	old) old=1 ;;
	netns) netns=1 ;;
	hosts) netns=1 hosts=1 ;;
	takeover) netns=1 hosts=1 takeover=1 ;;
	gid=*) nsgid=${v#gid=} ;;
	all) all=1 ;;
	size=*) size=${v#size=} ;;
	op=*) op=${v#op=} ;;
	*) echo "verbs_pingpong: unknown variant $v" >&2; exit 2 ;;
	esac
done
case $mode in
pingpong) prog=ibv_rc_pingpong pkg="Debian's ibverbs-utils" pp=1 ;;
srq) prog=ibv_srq_pingpong pkg="Debian's ibverbs-utils" pp=1 ;;
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
# where the server and the client run, and the address the client dials
host=localhost gid=1 srv_in= cli_in=
if [ -n "$netns" ]; then
	if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null 2>&1; then
		echo "verbs_pingpong: cannot make network namespaces (needs root and ip): skipped"
		exit 77
	fi
	nsa=kvpa$$ nsb=kvpb$$
	# 10.204.x.y/30 from the pid, so that parallel tests do not meet
	net=$(($$ % 16384))
	ipa=10.$((204 + net / 4096)).$((net / 64 % 64)).$((net % 64 * 4 + 1))
	ipb=${ipa%.*}.$((${ipa##*.} + 1))
	trap 'ip netns del $nsa 2>/dev/null; ip netns del $nsb 2>/dev/null; rm -rf "$tmp"' EXIT
	if ! { ip netns add $nsa && ip netns add $nsb &&
		ip link add kvpa$$ type veth peer name kvpb$$ &&
		ip link set kvpa$$ netns $nsa && ip link set kvpb$$ netns $nsb &&
		ip netns exec $nsa sysctl -qw net.ipv6.conf.kvpa$$.accept_dad=0 &&
		ip netns exec $nsb sysctl -qw net.ipv6.conf.kvpb$$.accept_dad=0 &&
		ip -n $nsa addr add $ipa/30 dev kvpa$$ && ip -n $nsb addr add $ipb/30 dev kvpb$$ &&
		ip -n $nsa link set lo up && ip -n $nsb link set lo up &&
		ip -n $nsa link set kvpa$$ up && ip -n $nsb link set kvpb$$ up; } 2>"$tmp/netns.err"; then
		ip link del kvpa$$ 2>/dev/null || true
		echo "verbs_pingpong: cannot make network namespaces: $(cat "$tmp/netns.err"): skipped"
		exit 77
	fi
	host=$ipa gid=$nsgid srv_in="ip netns exec $nsa" cli_in="ip netns exec $nsb"
	if [ -n "$hosts" ]; then
		srv_in="$srv_in env KINET_LOG=info KINET_VERBS_RENDEZVOUS_DIR=$tmp/rendezvous-a"
		cli_in="$cli_in env KINET_LOG=info KINET_VERBS_RENDEZVOUS_DIR=$tmp/rendezvous-b"
	fi
fi
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
if [ -n "$pp" ]; then
	set -- "$prog" -d kinet0 -g "$gid" -c -p "$port" -n "$n"
else
	set -- "$prog" -d kinet0 -x "$gid" -p "$port" -n "$n"
	[ -z "$old" ] || set -- "$@" --use_old_post_send
	[ -z "$all" ] || set -- "$@" -a
	[ -z "$size" ] || set -- "$@" -s "$size"
	[ -z "$op" ] || set -- "$@" -A "$op"
fi
# the command line (words without spaces)
cmd=$*
# One run of the server and the client, and the checks of their output:
# 0, or 1 with why in $why.
no() { why=$*; return 1; }
attempt() {
	if [ -n "$takeover" ]; then
		# the first process of the namespace with a QP (an ibv_rc_pingpong
		# server that no client comes to) answers lookups
		$srv_in timeout -s KILL 30 "$run" ibv_rc_pingpong -d kinet0 -g 3 -p $((port + 7)) \
			>"$tmp/holder" 2>"$tmp/holder.err" &
		holder=$!
		i=0
		until grep -q "answering other hosts' lookups" "$tmp/holder.err"; do
			i=$((i + 1))
			[ "$i" -lt 100 ] || no "the first process did not answer lookups within 10 s" ||
				return 1
			sleep 0.1
		done
	fi
	$srv_in timeout -s KILL "$limit" "$run" $cmd >"$tmp/server" 2>"$tmp/server.err" &
	srv=$!
	if [ -n "$takeover" ]; then
		# the server's QP is published (INIT) before it waits for the
		# client: then the first process ends, and the client's lookup
		# must be answered by the server's process, which takes over
		sleep 1
		kill "$holder" 2>/dev/null || true
		wait "$holder" || true
	fi
	# the server listens once its QP is set up; the client retries its connect
	# (for at most 10 s)
	ok=0
	end=$(($(date +%s) + 10))
	while :; do
		if $cli_in timeout -s KILL "$limit" "$run" $cmd "$host" >"$tmp/client" 2>"$tmp/client.err"; then
			ok=1
			break
		fi
		grep -qE "Couldn't connect to $host|Unable to open file descriptor for socket" \
			"$tmp/client" "$tmp/client.err" || break
		[ "$(date +%s)" -lt "$end" ] || break
		sleep 0.1
	done
	src=0
	# a client that failed may leave the server waiting: ended now
	[ "$ok" -eq 1 ] || kill "$srv" 2>/dev/null || true
	wait "$srv" || src=$?
	[ "$ok" -eq 1 ] || no "the client failed" || return 1
	[ "$src" -eq 0 ] || no "the server exited with $src" || return 1
	# a result line: the size, the iterations, then at least three numbers
	result() { # file, size
		grep -qE "^ $2[[:space:]]+$n([[:space:]]+[0-9.]+){3}" "$1"
	}
	if [ -n "$pp" ]; then
		for s in server client; do
			grep -qE "^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$" "$tmp/$s" ||
				no "$s printed no bandwidth line" || return 1
			grep -qE "^$n iters in [0-9.]+ seconds = [0-9.]+ usec/iter$" "$tmp/$s" ||
				no "$s printed no iteration line" || return 1
		done
	else
		for s in $sizes; do
			result "$tmp/client" "$s" || no "the client printed no result for $s bytes" || return 1
		done
		last=${sizes##* }
		case $mode in
		# both ends measure
		send_bw | send_lat | write_lat)
			for s in $sizes; do
				result "$tmp/server" "$s" || no "the server printed no result for $s bytes" || return 1
			done
			;;
		# the server reports the last size
		write_bw | read_bw | atomic_bw)
			result "$tmp/server" "$last" || no "the server printed no result for $last bytes" || return 1
			;;
		# read_lat, atomic_lat: the server only serves
		esac
		api=ON
		[ -z "$old" ] || api=OFF
		grep -qE "^ ibv_wr\* API[[:space:]]+: $api" "$tmp/client" ||
			no "the client did not say ibv_wr* API: $api" || return 1
		if [ -n "$op" ]; then
			grep -qE "^[[:space:]]+Atomic $op " "$tmp/client" ||
				no "the client did not run Atomic $op" || return 1
		fi
	fi
}
# perftest measures the CPU's clock before it reports (each size of -a
# again), and gives up on a machine too busy for a steady measurement
# ("Correlation coefficient r^2: ... < 0.9"): its server then produces no
# report and ends, or a latency line is left out. Such runs, and only these,
# are run again (at most 3 times in all).
tries=0
while :; do
	tries=$((tries + 1))
	attempt && break
	if [ "$tries" -lt 3 ] &&
		grep -qs "Correlation coefficient r^2" "$tmp/client.err" "$tmp/server.err"; then
		echo "verbs_pingpong: perftest could not measure the CPU clock (a busy machine): run $tries failed ($why), running again"
		# a port of its own: the last server may hold the old one a while
		port=$((port + 1))
		cmd=$(echo "$cmd" | sed "s/ -p [0-9]* / -p $port /")
		continue
	fi
	fail "$why"
done
if [ -n "$netns" ]; then
	# each side's QP has the GID of its own namespace's address, and the
	# other's as the remote one (the IPv4 GIDs)
	if [ "$gid" != 3 ]; then
		ga= gb=
	elif [ -n "$pp" ]; then
		ga="::ffff:$ipa" gb="::ffff:$ipb"
	else
		# perftest prints the 16 bytes in decimal, two digits at least
		g4() { echo "$1" | awk -F. '{printf "00:00:00:00:00:00:00:00:00:00:255:255:%02d:%02d:%02d:%02d", $1, $2, $3, $4}'; }
		ga=$(g4 "$ipa") gb=$(g4 "$ipb")
	fi
	for s in server client; do
		[ -z "$ga" ] || { grep -qF -- "$ga" "$tmp/$s" && grep -qF -- "$gb" "$tmp/$s"; } ||
			fail "$s does not show the GIDs of both namespaces ($ga, $gb)"
	done
	netns=" across two network namespaces"
	if [ -n "$hosts" ]; then
		# each side used a folder of its own, and answered the other's
		# lookup on its rendezvous service
		[ -d "$tmp/rendezvous-a" ] && [ -d "$tmp/rendezvous-b" ] ||
			fail "the namespaces' rendezvous folders were not made"
		for s in server client; do
			grep -q "answering other hosts' lookups of this host's QPs on TCP port" "$tmp/$s.err" ||
				fail "the $s's process did not answer other hosts' lookups"
		done
		netns=" across two network namespaces with folders of their own (two hosts)"
		[ -z "$takeover" ] || netns="$netns, the server's process taking over the rendezvous service"
		[ "$gid" = 3 ] || netns="$netns, GID index $gid"
	fi
fi
[ -n "$pp" ] || sizes=", sizes $(echo $sizes)"
[ -z "$pp" ] || sizes=
echo "verbs_pingpong: $cmd$netns ($n iterations$sizes): server and client passed"

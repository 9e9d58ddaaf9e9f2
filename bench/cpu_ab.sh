#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/cpu_ab.sh - two builds of kinet side by side on this machine: each
# configuration is run on build A, then on build B, REPS times (interleaved,
# so both see the same load), and the medians and the ratio B/A are printed
# as a markdown table. For "before and after" figures of one change.
#
# usage: bench/cpu_ab.sh BUILD_A BUILD_B     (env REPS=7)
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bench/cpu_ab.sh BUILD_A BUILD_B" >&2
  exit 2
fi
A=$1/tools/perf/kinet-perf
B=$2/tools/perf/kinet-perf
REPS=${REPS:-7}
for p in "$A" "$B"; do
  [ -x "$p" ] || { echo "bench/cpu_ab.sh: $p not found: build first" >&2; exit 1; }
done
declare -A va vb
keys=()
# column $2 of the first row of numbers of a kinet-perf run
col() { awk '/^ [0-9]/ {print $'"$1"'; exit}'; }
# a local run needs --loopback since kinet-perf took perftest's command line
# (no host: the server); builds from before that do not know the option
local_flag() { "$1" -h 2>/dev/null | grep -q -- '--loopback' && echo --loopback; }
LA=$(local_flag "$A")
LB=$(local_flag "$B")
add() { # name column kinet-perf-args...
  local key=$1 c=$2
  shift 2
  keys+=("$key")
  for r in $(seq "$REPS"); do
    va[$key]+="$("$A" "$@" $LA 2>/dev/null | col "$c") "
    vb[$key]+="$("$B" "$@" $LB 2>/dev/null | col "$c") "
  done
}
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g |
  awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit} print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for e in 1 2; do
  for t in 1 2 4; do
    add "write_bw -s 8 --threads $t, $e engine(s) [Mpps]" 5 write_bw -s 8 --threads "$t" -n 100000 --engine-threads "$e"
  done
done
add "write_bw -s 8 --threads 4, 4 engines [Mpps]" 5 write_bw -s 8 --threads 4 -n 100000 --engine-threads 4
add "write_bw -s 8 --threads 4, 2 engines, --poll yield [Mpps]" 5 write_bw -s 8 --threads 4 -n 100000 --engine-threads 2 --poll yield
add "write_lat -s 8, t_typical [us]" 5 write_lat -s 8 -n 20000
add "write_bw -s 1M [MB/s]" 4 write_bw -s 1M -n 2000
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg); REPS=$REPS, medians"
echo
echo "| kinet-perf | A | B | B / A |"
echo "| --- | ---: | ---: | ---: |"
for k in "${keys[@]}"; do
  awk -v k="$k" -v a="$(med "${va[$k]}")" -v b="$(med "${vb[$k]}")" \
    'BEGIN {printf "| %s | %.3f | %.3f | %.2f |\n", k, a, b, (a > 0 ? b / a : 0)}'
done

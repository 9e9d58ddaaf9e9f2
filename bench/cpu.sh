#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/cpu.sh - the CPU-only figures of the software NIC, in one run:
#   - message rate of 8-byte RDMA writes with 1, 2 and 4 initiator threads
#   - write_lat at 8 bytes
#   - write_bw from 64 KiB to 4 MiB against plain memcpy of the same sizes
#     (memcpy_bw, same threads, same buffers reuse), the ratio is the figure
# and prints them as markdown tables (docs/perf.md keeps the results).
#
# usage: bench/cpu.sh [BUILD_DIR]     (default: build; env REPS=3)
#
# Every figure is the median of REPS runs; the write/memcpy runs of a size
# are interleaved so both see the same machine load. On a shared machine,
# trust the ratios of one run more than absolute numbers.
set -euo pipefail

BUILD=${1:-${BUILD:-build}}
REPS=${REPS:-3}
PERF="$BUILD/tools/perf/kinet-perf"
if [ ! -x "$PERF" ]; then
  echo "bench/cpu.sh: $PERF not found: build first (make build), or pass the build folder" >&2
  exit 1
fi

# Rows of numbers of one kinet-perf run in this process (--loopback; perftest
# columns), one line per size.
rows() {
  local out
  if ! out=$("$PERF" "$@" --loopback); then
    echo "bench/cpu.sh: kinet-perf $* failed" >&2
    exit 1
  fi
  awk '/^ [0-9]/' <<<"$out"
}

# Median of the numbers on stdin.
median() {
  sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit} if (NR%2) print v[(NR+1)/2]; else printf "%.6f\n", (v[NR/2]+v[NR/2+1])/2}'
}

cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
echo "### CPU benchmark of the software NIC"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr)"
echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- command: bench/cpu.sh $BUILD (REPS=$REPS, median of $REPS runs each)"
echo "- kinet-perf: host executor, one QP pair per thread, 1 engine thread, doorbell mode auto"
echo

# ---- message rate, 8-byte writes ------------------------------------------
# waiting threads spin (as GPU threads do) or yield the CPU (--poll yield)
declare -A rate
for rep in $(seq "$REPS"); do
  for t in 1 2 4; do
    for p in spin yield; do
      rate[$t$p]+="$(rows write_bw -s 8 --threads "$t" -n 100000 --poll "$p" | awk '{print $5}') "
    done
  done
done
m() { tr ' ' '\n' <<<"$1" | grep . | median; }
echo "| 8-byte RDMA write, one QP per thread | Mpps, spin | vs 1 thread | Mpps, --poll yield | vs 1 thread |"
echo "| --- | ---: | ---: | ---: | ---: |"
s1=$(m "${rate[1spin]}")
y1=$(m "${rate[1yield]}")
for t in 1 2 4; do
  awk -v t="$t" -v s="$(m "${rate[${t}spin]}")" -v y="$(m "${rate[${t}yield]}")" -v s1="$s1" -v y1="$y1" \
    'BEGIN {printf "| %d initiator thread%s | %.3f | %.2f | %.3f | %.2f |\n", t, (t>1?"s":""), s, s/s1, y, y/y1}'
done
echo

# ---- latency, 8 bytes -----------------------------------------------------
lat_typ="" lat_avg="" lat_p99="" lat_min=""
for rep in $(seq "$REPS"); do
  row=$(rows write_lat -s 8 -n 20000)
  lat_min+="$(awk '{print $3}' <<<"$row") "
  lat_typ+="$(awk '{print $5}' <<<"$row") "
  lat_avg+="$(awk '{print $6}' <<<"$row") "
  lat_p99+="$(awk '{print $8}' <<<"$row") "
done
echo "| write_lat, 8 bytes (half round trip) | t_min [usec] | t_typical [usec] | t_avg [usec] | 99% [usec] |"
echo "| --- | ---: | ---: | ---: | ---: |"
awk -v a="$(m "$lat_min")" -v b="$(m "$lat_typ")" -v c="$(m "$lat_avg")" -v d="$(m "$lat_p99")" \
  'BEGIN {printf "| 1 thread, 20000 iterations | %.2f | %.2f | %.2f | %.2f |\n", a, b, c, d}'
echo

# ---- bandwidth against memcpy ---------------------------------------------
echo "| size | write_bw [MB/s] | memcpy [MB/s] | write_bw / memcpy |"
echo "| ---: | ---: | ---: | ---: |"
for size in 65536 131072 262144 524288 1048576 2097152 4194304; do
  n=$(( (1 << 30) / size )) # about 1 GiB per run
  [ "$n" -lt 256 ] && n=256
  [ "$n" -gt 20000 ] && n=20000
  w="" c=""
  for rep in $(seq "$REPS"); do
    c+="$(rows memcpy_bw -s "$size" -n "$n" | awk '{print $4}') "
    w+="$(rows write_bw -s "$size" -n "$n" | awk '{print $4}') "
  done
  awk -v s="$size" -v w="$(m "$w")" -v c="$(m "$c")" \
    'BEGIN {printf "| %d KiB | %.0f | %.0f | %.2f |\n", s/1024, w, c, w/c}'
done
echo
echo "MB = 2^20 bytes. Bandwidth is BW average (bytes / (last completion - first post))."
echo "Load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/verbs.sh - perftest, unmodified, over kinet-verbs against kinet-perf
# running the same test on the same software NIC, in one run (docs/perf.md,
# "kinet-verbs against kinet-perf"): both between two processes of this
# machine, with the same message size and iteration count. perftest posts
# through rdma-core's API (kinet-verbs builds the WQEs, the CPU rings the
# doorbell); kinet-perf through kinet's device API on CPU threads (the host
# executor). The ratio says what rdma-core's API costs on top.
#
# usage: bench/verbs.sh [BUILD_DIR] [TEST...]    (default: build; every test)
#   TEST: write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw atomic_lat
# environment: SIZE (bandwidth tests, default 65536), ITERS (default 2000)
# Prints markdown. Skipped (77) when perftest is not installed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
[ $# -gt 0 ] && shift
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw atomic_lat)
command -v ib_write_bw >/dev/null || { echo "bench/verbs.sh: perftest not installed: skipped" >&2; exit 77; }
KRUN=$BUILD/tools/run/kinet-run
KPERF=$BUILD/tools/perf/kinet-perf
[ -x "$KRUN" ] && [ -x "$KPERF" ] || { echo "bench/verbs.sh: build kinet first ($BUILD)" >&2; exit 1; }
SIZE=${SIZE:-65536}
ITERS=${ITERS:-2000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the figure of a perftest-style report: BW average (MB/s) for bandwidth
# tests, t_avg (us) for latency tests (the row whose first column is the size)
figure() { # file test
  case $2 in
  *_bw) awk '$1 ~ /^[0-9]+$/ && NF >= 5 {v = $4} END {print v}' "$1" ;;
  *) awk '$1 ~ /^[0-9]+$/ && NF >= 7 {v = $6} END {print v}' "$1" ;;
  esac
}

args_of() { # test -> perftest's size option (kinet-perf takes the same)
  case $1 in
  atomic_*) echo "" ;;
  *_bw) echo "-s $SIZE" ;;
  *) echo "-s 8" ;; # write_lat, read_lat, send_lat
  esac
}

perftest() { # test
  local t=$1 port=$((20000 + RANDOM % 20000)) a
  a=$(args_of "$t")
  # shellcheck disable=SC2086 # a is a list of options
  timeout 120 "$KRUN" "ib_$t" -d kinet0 -x 1 -p "$port" -n "$ITERS" $a >"$tmp/srv" 2>&1 &
  local srv=$!
  sleep 1
  # shellcheck disable=SC2086
  timeout 120 "$KRUN" "ib_$t" -d kinet0 -x 1 -p "$port" -n "$ITERS" $a localhost >"$tmp/cli" 2>&1
  wait $srv
  figure "$tmp/cli" "$t"
}

kperf() { # test
  local t=$1 a
  a=$(args_of "$t")
  # shellcheck disable=SC2086
  timeout 120 "$KPERF" "$t" --pair -n "$ITERS" $a >"$tmp/kp" 2>&1
  figure "$tmp/kp" "$t"
}

echo "### kinet-verbs against kinet-perf (bench/verbs.sh)"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
echo "- two processes of this machine, software NIC; $ITERS iterations; bandwidth tests $SIZE B, latency 8 B"
echo
echo "| test | perftest over kinet-verbs | kinet-perf | perftest / kinet-perf |"
echo "| --- | ---: | ---: | ---: |"
for t in "${TESTS[@]}"; do
  p=$(perftest "$t")
  k=$(kperf "$t")
  unit=MB/s
  case $t in *_lat) unit=us ;; esac
  r=$(awk -v p="${p:-0}" -v k="${k:-0}" 'BEGIN { if (p > 0 && k > 0) printf("%.2fx", p / k); else print "-" }')
  echo "| $t | ${p:-failed} $unit | ${k:-failed} $unit | $r |"
done
echo
echo "Bandwidth: a ratio below 1 is kinet-verbs slower; latency: above 1 is kinet-verbs slower."

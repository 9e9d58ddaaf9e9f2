#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/profile.sh - where the time of the software NIC goes, for 8-byte RDMA
# writes from one initiator thread (kinet-perf write_bw -s 8):
#   1. perf record (cpu-clock samples, no hardware counters needed): the
#      engine thread's samples grouped into engine loop and polling, WQE
#      parsing, protection checks, execution (placement), CQE writing;
#      and the initiator thread's samples.
#   2. valgrind --tool=callgrind: instructions per WQE of each engine step,
#      which, unlike time, do not depend on the machine's load.
# Prints markdown tables. Needs perf and/or valgrind (either part is skipped
# when its tool is missing: apt-get install linux-perf valgrind).
#
# usage: bench/profile.sh [BUILD_DIR]   (default: build; a RelWithDebInfo
#        build, so that symbols are there; env REPS=3 perf runs)
set -euo pipefail

BUILD=${1:-${BUILD:-build}}
REPS=${REPS:-3}
PERF_BIN="$BUILD/tools/perf/kinet-perf"
if [ ! -x "$PERF_BIN" ]; then
  echo "bench/profile.sh: $PERF_BIN not found: build first, or pass the build folder" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Symbol -> category of the engine thread's work.
categorize() {
  awk -F'\t' '
    function cat(s) {
      if (s ~ /^(soft_parse_wqe|parse_gather|local_seg|rd32|rd64)$/) return "WQE parsing"
      if (s ~ /^kinet_mr_check/) return "protection checks (key table, local and remote)"
      if (s ~ /^(soft_exec_local|soft_resp_|soft_copy_iov|kinet_mem_copy|count_move|accepting|tgt_|__tls_get_addr|__mem(cpy|move))/) return "execution: responder, placement of the bytes"
      if (s ~ /^(soft_req_cqe|req_cqe|cq_write|kinet_cq_(push|space|reserve)|pthread_spin_)/) return "CQE writing (and CQ space check)"
      if (s ~ /^(engine_main|serve_qp|published|proxy_ring|soft_resp_set_held|pthread_mutex_|pthread_rwlock_|__vdso_clock_gettime|clock_gettime|kn_now_ns|clock_nanosleep|nanosleep|__nanosleep)/) return "engine loop: polling doorbells, locks per pass, idle"
      if (s ~ /^\[k\]/) return "kernel (scheduling, sleeps, page faults)"
      return "other"
    }
    { pct[cat($2)] += $1; tot += $1 }
    END { for (c in pct) printf "%s\t%.1f\n", c, 100 * pct[c] / tot }' | sort -t$'\t' -k2 -gr
}

echo "### Profile: write_bw -s 8, 1 initiator thread, 1 engine thread"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
echo "- load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

if command -v perf >/dev/null && perf record -q -e cpu-clock -o "$tmp/probe" true >/dev/null 2>&1; then
  rates=""
  for rep in $(seq "$REPS"); do
    perf record -q -e cpu-clock -F 9999 -o "$tmp/perf.data" \
      "$PERF_BIN" write_bw -s 8 -n 1000000 --loopback > "$tmp/run.txt" 2>&1
    # per thread (pid column is the thread id), symbol, percentage
    perf report -i "$tmp/perf.data" --sort pid,sym --stdio 2>/dev/null |
      awk '/^ +[0-9.]+%/ {
        p = $1; sub("%", "", p); split($2, t, ":"); tid = t[1]
        sym = ""; for (i = 3; i <= NF; i++) sym = sym (i > 3 ? " " : "") $i
        sub(/^\[\.\] /, "", sym)
        print tid "\t" p "\t" sym }' > "$tmp/samples.tsv"
    eng=$(awk -F'\t' '$3 == "engine_main" {print $1; exit}' "$tmp/samples.tsv")
    rates+="$(awk '/^ [0-9]/ {printf "%.2f", $5}' "$tmp/run.txt") "
    awk -F'\t' -v e="$eng" '$1 == e {print $2 "\t" $3}' "$tmp/samples.tsv" | categorize >> "$tmp/eng.tsv"
    awk -F'\t' -v e="$eng" '$1 != e && $3 !~ /^(msort|cmp_u64|merge_runs|perf_bw_stats|\[k\])/ {print $2 "\t" $3}' \
      "$tmp/samples.tsv" >> "$tmp/init.tsv"
  done
  echo "perf record (cpu-clock samples), $REPS runs of \`kinet-perf write_bw -s 8 -n 1000000 --loopback\`;"
  echo "message rate of the runs [Mpps]: ${rates% }."
  echo
  echo "| engine thread: step | share of its time, median | range over the runs |"
  echo "| --- | ---: | ---: |"
  sort -t$'\t' -k1,1 -k2,2g "$tmp/eng.tsv" | awk -F'\t' '
    { v[$1] = v[$1] " " $2; n[$1]++ }
    END { for (c in v) { k = split(substr(v[c], 2), a, " ")
            med = (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
            printf "%s\t%.1f\t%.1f-%.1f%%\n", c, med, a[1], a[k] } }' |
    sort -t$'\t' -k2 -gr | awk -F'\t' '{printf "| %s | %.1f%% | %s |\n", $1, $2, $3}'
  echo
  echo "Initiator thread, top symbols over all runs (the statistics after the run and kernel time left out):"
  echo
  echo "| symbol | share |"
  echo "| --- | ---: |"
  awk -F'\t' '{s[$2] += $1; t += $1} END {for (k in s) printf "%s\t%.1f\n", k, 100 * s[k] / t}' \
    "$tmp/init.tsv" | sort -t$'\t' -k2 -gr | head -8 | awk -F'\t' '{printf "| %s | %.1f%% |\n", $1, $2}'
  echo
else
  echo "(perf not usable here: skipped the time profile)"
  echo
fi

if command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null; then
  N=20000
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
    "$PERF_BIN" write_bw -s 8 -n "$N" --warmup 0 --loopback > /dev/null 2>&1
  callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.out" 2>/dev/null |
    awk '/^ *[0-9,]+ +\( *[0-9.]+%\)/ {
      n = $1; gsub(",", "", n)
      f = $0; sub(/^[^)]*\) +/, "", f); sub(/ \[.*$/, "", f); sub(/^.*:/, "", f)
      sub(/[.\047].*$/, "", f)
      if (!(f in best) || n + 0 > best[f] + 0) best[f] = n
    } END { for (f in best) print f "\t" best[f] }' > "$tmp/cg.tsv"
  # instructions per WQE of the first of the named functions that exists
  ir() {
    local f
    for f in "$@"; do
      if awk -F'\t' -v f="$f" '$1 == f {found = 1} END {exit !found}' "$tmp/cg.tsv"; then
        awk -F'\t' -v f="$f" -v n="$N" '$1 == f {printf "%.0f", $2 / n}' "$tmp/cg.tsv"
        return
      fi
    done
    printf -- "-"
  }
  echo "valgrind --tool=callgrind, \`write_bw -s 8 -n $N --warmup 0\`: instructions per WQE (inclusive)."
  echo
  echo "| step | function | instructions per WQE |"
  echo "| --- | --- | ---: |"
  echo "| WQE parsing, with the local key check | soft_parse_wqe | $(ir soft_parse_wqe) |"
  echo "| execution: remote key check, placement | soft_exec_local | $(ir soft_exec_local) |"
  echo "| CQE writing | soft_req_cqe(_reserved) | $(ir soft_req_cqe_reserved soft_req_cqe) |"
  echo "| CQ space check (before each WQE) | kinet_cq_space | $(ir kinet_cq_space) |"
  echo "| one key-table check (2 per WQE) | kinet_mr_check | $(awk -F'\t' -v n="$N" '$1 == "kinet_mr_check" {printf "%.0f", $2 / n / 2}' "$tmp/cg.tsv") |"
  echo "| initiator: reserve, prepare, submit (doorbell) | perf_post | $(ir perf_post) |"
  echo
  echo "(The engine loop and the initiator's CQ polling are left out: under valgrind their"
  echo "counts measure spinning, not work. Instruction counts do not show the cost of"
  echo "cache-line transfers between the initiator and the engine, nor of locked"
  echo "instructions: the time profile does.)"
else
  echo "(valgrind not found: skipped the instruction counts)"
fi

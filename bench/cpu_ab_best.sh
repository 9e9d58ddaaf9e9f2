#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/cpu_ab_best.sh - two builds of kinet side by side, for a machine too
# busy for medians alone: each configuration runs on build A, then on build B,
# PAIRS times (interleaved), and the table gives the best run of each (highest
# rate, lowest latency: closest to an undisturbed run), the medians, and the
# geometric mean of the pairwise ratios B/A.
#
# usage: bench/cpu_ab_best.sh BUILD_A BUILD_B     (env PAIRS=11)
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bench/cpu_ab_best.sh BUILD_A BUILD_B" >&2
  exit 2
fi
A=$1/tools/perf/kinet-perf
B=$2/tools/perf/kinet-perf
PAIRS=${PAIRS:-11}
for p in "$A" "$B"; do
  [ -x "$p" ] || { echo "bench/cpu_ab_best.sh: $p not found: build first" >&2; exit 1; }
done
col() { awk '/^ [0-9]/ {print $'"$1"'; exit}'; }
tmp=$(mktemp)
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| kinet-perf | best A | best B | B / A | median A | median B | B / A | pairwise B / A |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for cfg in "write_bw -s 8 -t 1 -n 100000 --engine-threads 1:5" \
           "write_bw -s 8 -t 2 -n 100000 --engine-threads 2:5" \
           "write_lat -s 8 -n 20000:5"; do
  args=${cfg%:*}
  c=${cfg##*:}
  : >"$tmp"
  for _ in $(seq "$PAIRS"); do
    # shellcheck disable=SC2086
    echo "$("$A" $args 2>/dev/null | col "$c") $("$B" $args 2>/dev/null | col "$c")" >>"$tmp"
  done
  python3 - "$args" "$tmp" <<'PY'
import math, statistics, sys
cfg, path = sys.argv[1], sys.argv[2]
p = [tuple(map(float, l.split())) for l in open(path) if len(l.split()) == 2]
if not p:
    print("| `%s` | no result | | | | | | |" % cfg)
    sys.exit(0)
a = [x for x, _ in p]
b = [y for _, y in p]
best = min if "lat" in cfg else max
g = math.exp(sum(math.log(y / x) for x, y in p) / len(p))
ma, mb = statistics.median(a), statistics.median(b)
print("| `%s` | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f | %.2f |"
      % (cfg, best(a), best(b), best(b) / best(a), ma, mb, mb / ma, g))
PY
done
rm -f "$tmp"
echo
echo "- load average after: $(cut -d' ' -f1-3 /proc/loadavg); PAIRS=$PAIRS"

# SPDX-License-Identifier: BSD-3-Clause
# Sourced by bench/net.sh and bench/perf_curves.sh: kinet-plot where it can
# draw, else the command line that draws the same elsewhere. Expects ROOT.

# kplot PNG LOG KINET-PLOT-OPTIONS...: draws PNG, its output in LOG; prints
# the "wrote" line and returns 0, or says why not (the last line of LOG, as
# without matplotlib) with the command for another machine and returns 1
kplot() {
	local png=$1 log=$2
	shift 2
	if "$ROOT/tools/plot/kinet-plot" -o "$png" "$@" >"$log" 2>&1; then
		grep '^wrote' "$log"
		return 0
	fi
	echo "not drawn here ($(tail -1 "$log")); to draw them:" \
		"tools/plot/kinet-plot -o $(basename "$png")$(printf ' %q' "$@")"
	return 1
}

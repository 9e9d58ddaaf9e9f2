#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/util/check_summary.sh - the end of `make check`: reads the JUnit files
# that its ctest runs wrote (ctest --output-junit), lists the tests that were
# skipped, each with its reason, and those that failed, then one line:
#
#   make check: 812 passed, 0 failed, 37 skipped (skipped: see above)
#
# usage: check_summary.sh TITLE RUN=FILE...   (RUN: a name for the run, e.g.
#        plain or asan; FILE: its JUnit file)
#   RUN.rerun=FILE  the JUnit file of the run again of RUN's failed tests, one
#        at a time (Makefile: RERUN); absent when none failed. A test that
#        failed in RUN and passed there counts as passed and is listed by name
#        under "passed only when run again alone"; one that failed again
#        counts as failed.
# Exit status: 0 when every run's file is there and no test failed, else 1.
#
# A test is passed (status "run"), failed ("fail", or not run for any reason
# but a skip: a missing program, a failed fixture), or skipped: its exit
# status was its SKIP_RETURN_CODE (77) or it is DISABLED. The reason of a
# skip is the test's line "SKIPPED <name>: <reason>" (tests/util/main.c
# prints one for each skipped Criterion test; the scripts print one too),
# else its output's last line.
set -u
title=$1
shift
pass=0 fail=0 skip=0 missing=0
skipped=$(mktemp)
failed=$(mktemp)
again=$(mktemp)  # "RUN NAME" of each test that passed when run again
flaky=$(mktemp)
trap 'rm -f "$skipped" "$failed" "$again" "$flaky"' EXIT
for arg in "$@"; do
	run=${arg%%=*}
	file=${arg#*=}
	case $run in *.rerun) ;; *) continue ;; esac
	[ -s "$file" ] || continue
	awk -v run="${run%.rerun}" '
	/<testcase / && match($0, / name="[^"]*"/) { name = substr($0, RSTART + 7, RLENGTH - 8) }
	/<testcase / && / status="run"/ { print run, name }
	' "$file" >>"$again"
done
for arg in "$@"; do
	run=${arg%%=*}
	file=${arg#*=}
	case $run in *.rerun) continue ;; esac
	if [ ! -s "$file" ]; then
		echo "$title: $run: no results ($file is missing: did its ctest run end?)" >&2
		missing=1
		continue
	fi
	counts=$(awk -v run="$run" -v skipped="$skipped" -v failed="$failed" -v again="$again" \
		-v flaky="$flaky" '
	BEGIN { while ((getline l < again) > 0) passed_again[l] = 1 }
	function unxml(s) {
		gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s)
		gsub(/&apos;/, "\047", s); gsub(/&amp;/, "\\&", s)
		return s
	}
	function attr(line, name,    m) {
		if (match(line, " " name "=\"[^\"]*\"")) {
			m = substr(line, RSTART + length(name) + 3, RLENGTH - length(name) - 4)
			return unxml(m)
		}
		return ""
	}
	/<testcase / {
		name = attr($0, "name"); status = attr($0, "status"); msg = ""
		reason = ""; last = ""; out = 0; incase = 1
		next
	}
	incase && /<skipped / { msg = attr($0, "message") }
	incase && /<system-out>/ { out = 1; sub(/.*<system-out>/, "") }
	incase && out {
		line = $0
		if (sub(/<\/system-out>.*/, "", line))
			out = 0
		line = unxml(line)
		if (line ~ /^SKIPPED /) {
			sub(/^SKIPPED [^ ]*: /, "", line)
			reason = reason (reason == "" ? "" : "; ") line
		} else if (line ~ /[^ \t]/) {
			last = line
		}
		if (out)
			next
	}
	incase && /<\/testcase>/ {
		incase = 0
		if (status == "run") {
			np++
		} else if (status == "disabled" || (status == "notrun" && msg ~ /^SKIP_/)) {
			ns++
			if (status == "disabled")
				reason = "DISABLED in its CMake file"
			if (reason == "")
				reason = last == "" ? "(no output)" : last
			printf "  %-5s %s: %s\n", run, name, reason >> skipped
		} else if ((run " " name) in passed_again) {
			np++
			printf "  %-5s %s (%s%s)\n", run, name, status, msg == "" ? "" : ": " msg >> flaky
		} else {
			nf++
			printf "  %-5s %s (%s%s)\n", run, name, status, msg == "" ? "" : ": " msg >> failed
		}
	}
	END { printf "%d %d %d\n", np, nf, ns }
	' "$file")
	read -r p f s <<-EOF
	$counts
	EOF
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
if [ -s "$skipped" ]; then
	echo "$title: skipped tests, and why:"
	cat "$skipped"
fi
if [ -s "$flaky" ]; then
	echo "$title: tests that failed, then passed when run again alone (counted as passed;"
	echo "  the first run's output is above: a race or a timing assumption to mend):"
	cat "$flaky"
fi
if [ -s "$failed" ]; then
	echo "$title: FAILED tests (their output: ctest --output-on-failure above):"
	cat "$failed"
fi
note=""
[ "$skip" -gt 0 ] && note=" (skipped: see the list above)"
nflaky=$(wc -l <"$flaky")
[ "$nflaky" -gt 0 ] && note="$note ($nflaky passed only when run again: listed above)"
[ "$missing" -ne 0 ] && note="$note (some runs left no results)"
echo "$title: $pass passed, $fail failed, $skip skipped$note"
[ "$fail" -eq 0 ] && [ "$missing" -eq 0 ]

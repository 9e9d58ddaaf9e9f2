#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/util/check_summary_test.sh - check_summary.sh on JUnit files made here:
# a test that failed and passed when run again alone counts as passed and is
# named; one that failed again, or was never run again, counts as failed and
# fails the check; a rerun counts only for its own run; skips keep their
# reasons.
#
# usage: check_summary_test.sh SOURCE_DIR WORK_DIR
set -u
S=$1/tests/util/check_summary.sh
W=$2
rm -rf "$W" && mkdir -p "$W" || exit 1
bad=0
no() { echo "FAIL: $*"; bad=1; }

case_xml() { # NAME STATUS [SKIP-REASON]
	case $2 in
	run) printf '\t<testcase name="%s" classname="%s" time="0.1" status="run">\n\t\t<system-out>ok</system-out>\n\t</testcase>\n' "$1" "$1" ;;
	fail) printf '\t<testcase name="%s" classname="%s" time="0.1" status="fail">\n\t\t<failure message="Failed"/>\n\t\t<system-out>Assertion Failed\n\t\t</system-out>\n\t</testcase>\n' "$1" "$1" ;;
	skip) printf '\t<testcase name="%s" classname="%s" time="0.1" status="notrun">\n\t\t<skipped message="SKIP_RETURN_CODE=77"/>\n\t\t<system-out>SKIPPED %s: %s</system-out>\n\t</testcase>\n' "$1" "$1" "$1" "$3" ;;
	esac
}
junit() { # FILE then NAME:STATUS...
	f=$1
	shift
	{
		echo '<?xml version="1.0" encoding="UTF-8"?>'
		echo '<testsuite name="t" tests="1" failures="0" disabled="0" skipped="0" hostname="" time="1" timestamp="">'
		for c in "$@"; do case_xml "${c%%:*}" "${c#*:}" "no device here"; done
		echo '</testsuite>'
	} >"$f"
}

junit "$W/main.xml" a/ok:run b/racy:fail c/broken:fail d/gpu:skip
junit "$W/again.xml" b/racy:run c/broken:fail

out=$(sh "$S" T plain="$W/main.xml" plain.rerun="$W/again.xml")
rc=$?
[ $rc = 1 ] || no "a test failing again passed the check (rc $rc)"
echo "$out" | grep -q "T: 2 passed, 1 failed, 1 skipped" || no "counts: $out"
echo "$out" | sed -n '/passed when run again/,/FAILED/p' | grep -q "plain b/racy" ||
	no "the test that passed again is not named: $out"
echo "$out" | sed -n '/FAILED/,$p' | grep -q "plain c/broken" || no "the failed test is not named: $out"
echo "$out" | grep -q "plain d/gpu: no device here" || no "the skip's reason is lost: $out"

junit "$W/again2.xml" b/racy:run c/broken:run
out=$(sh "$S" T plain="$W/main.xml" plain.rerun="$W/again2.xml")
rc=$?
[ $rc = 0 ] || no "every failed test passed again, yet the check failed (rc $rc): $out"
echo "$out" | grep -q "T: 3 passed, 0 failed, 1 skipped" || no "counts: $out"
echo "$out" | grep -q "2 passed only when run again" || no "the reruns are not counted: $out"

# no rerun file (nothing was run again): every failure stands
out=$(sh "$S" T plain="$W/main.xml" plain.rerun="$W/none.xml")
[ $? = 1 ] || no "failures without a rerun passed the check"
echo "$out" | grep -q "T: 1 passed, 2 failed, 1 skipped" || no "counts without a rerun: $out"

# a rerun counts for its own run only
out=$(sh "$S" T plain="$W/main.xml" plain.rerun="$W/again2.xml" asan="$W/main.xml")
[ $? = 1 ] || no "asan's failures were excused by plain's rerun"
echo "$out" | grep -q "asan  b/racy (fail)" || no "asan's failure is not listed: $out"

# a missing main file fails the check
sh "$S" T plain="$W/missing.xml" >/dev/null 2>&1 && no "a missing JUnit file passed the check"

[ $bad = 0 ] && echo "check_summary_test: ok"
exit $bad

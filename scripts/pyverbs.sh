#!/bin/sh
# pyverbs.sh - rdma-core's own test suite (tests/ of its source tree, run
# with Debian's python3-pyverbs) on kinet-verbs, under kinet-run, and a
# summary of what passed, failed and was skipped, and why (docs/verbs.md,
# "rdma-core's tests").
#
#   scripts/pyverbs.sh [RDMA_CORE_SRC] [MODULE...]
#
# RDMA_CORE_SRC   rdma-core's source tree (the tag of the installed rdma-core,
#                 v44.0 on Debian 12); also taken from the environment
# MODULE          test modules to run (test_cq, ...); all test_*.py if none
# Environment:
#   KINET_RUN       kinet-run to use (default: build/tools/run/kinet-run of
#                   this tree, else kinet-run in PATH)
#   PYVERBS_DEV     device (kinet0)     PYVERBS_GID  GID index (1: RoCE v2)
#   PYVERBS_MODULE_TIMEOUT  seconds a module may run (300)
#   PYVERBS_TEST_TIMEOUT    seconds one test may run (60)
#   PYVERBS_OUT     folder for the results and logs (a temporary one)
#   PYTHON          the Python that has pyverbs (/usr/bin/python3)
# Exits 77 when the sources or pyverbs are missing, 1 when a test failed
# (or a module did not load or ran past its time), else 0.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -gt 0 ] && [ -d "$1" ]; then
	RDMA_CORE_SRC=$1
	shift
fi
src=${RDMA_CORE_SRC:-}
py=${PYTHON:-/usr/bin/python3}
dev=${PYVERBS_DEV:-kinet0}
gid=${PYVERBS_GID:-1}
mtime=${PYVERBS_MODULE_TIMEOUT:-300}
ttime=${PYVERBS_TEST_TIMEOUT:-60}
if [ -z "$src" ] || [ ! -f "$src/tests/run_tests.py" ]; then
	echo "pyverbs.sh: no rdma-core source tree (RDMA_CORE_SRC=${src:-unset}, needs tests/run_tests.py): skipped"
	exit 77
fi
src=$(cd "$src" && pwd)
if ! "$py" -c 'import pyverbs.device' >/dev/null 2>&1; then
	echo "pyverbs.sh: $py cannot import pyverbs (Debian's python3-pyverbs): skipped"
	exit 77
fi
run=${KINET_RUN:-}
if [ -z "$run" ]; then
	if [ -x "$here/build/tools/run/kinet-run" ]; then
		run=$here/build/tools/run/kinet-run
	else
		run=$(command -v kinet-run || true)
	fi
fi
if [ -z "$run" ] || [ ! -x "$run" ]; then
	echo "pyverbs.sh: no kinet-run (build it, or set KINET_RUN)" >&2
	exit 1
fi
out=${PYVERBS_OUT:-}
if [ -z "$out" ]; then
	out=$(mktemp -d /tmp/pyverbs.XXXXXX)
fi
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
if [ $# -eq 0 ]; then
	set -- $(cd "$src/tests" && ls test_*.py | sed 's/\.py$//')
fi

# The driver: loads rdma-core's tests package as run_tests.py does (its
# argument parser gets --dev and --gid), runs one module's tests and writes a
# line per test (status, id, reason) as each ends, so that a module killed
# for its time still reports what ran. Each test has PYVERBS_TEST_TIMEOUT
# seconds (an alarm that fails it, with the stack in the log).
cat > "$out/driver.py" <<'PY'
import faulthandler, importlib, os, signal, sys, unittest
src, mod, res, dev, gid, ttime = sys.argv[1:7]
ttime = int(ttime)
# the tests package through a link: src itself holds pyverbs' sources,
# which must not hide the installed pyverbs
pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'pkg')
sys.path[0:0] = [os.path.join(src, 'tests'), pkg]
from args_parser import parser
sys.argv = [sys.argv[0], '--dev', dev, '--gid', gid]
parser.parse_args()
import pyverbs.device as d
names = [x.name.decode() for x in d.get_device_list()]
if dev not in names:
    sys.exit('pyverbs.sh: %s is not in the device list %r: not kinet-verbs?' % (dev, names))
fh = open(res, 'a', buffering=1)
def note(status, test, why=''):
    why = ' '.join(str(why).split())[:300]
    fh.write('%s\t%s\t%s\n' % (status, test.id(), why))
class TestTimeout(Exception):
    pass
def alarm(signum, frame):
    raise TestTimeout('test ran past %d s' % ttime)
signal.signal(signal.SIGALRM, alarm)
def last_line(err):
    return '%s: %s' % (err[0].__name__, str(err[1]).strip().splitlines()[-1] if str(err[1]).strip() else '')
class Result(unittest.TextTestResult):
    def startTest(self, test):
        super().startTest(test)
        note('start', test)
        faulthandler.dump_traceback_later(ttime + 5, exit=True)
        signal.alarm(ttime)
    def stopTest(self, test):
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)
    def addSuccess(self, test):
        super().addSuccess(test); note('pass', test)
    def addFailure(self, test, err):
        super().addFailure(test, err); note('fail', test, last_line(err))
    def addError(self, test, err):
        super().addError(test, err); note('error', test, last_line(err))
    def addSkip(self, test, reason):
        super().addSkip(test, reason); note('skip', test, reason)
    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err); note('pass', test, 'expected failure')
    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test); note('fail', test, 'unexpected success')
try:
    m = importlib.import_module('tests.' + mod)
except Exception as e:
    fh.write('error\ttests.%s\tthe module does not load: %s: %s\n' % (mod, type(e).__name__, e))
    raise
suite = unittest.defaultTestLoader.loadTestsFromModule(m)
unittest.TextTestRunner(verbosity=2, resultclass=Result, stream=sys.stderr).run(suite)
fh.write('end\ttests.%s\t\n' % mod)
PY

mkdir -p "$out/pkg" && ln -sfn "$(cd "$src" && pwd)/tests" "$out/pkg/tests" || exit 1
export KINET_VERBS_PEER_TIMEOUT_MS=${KINET_VERBS_PEER_TIMEOUT_MS:-2000}
echo "pyverbs.sh: rdma-core's tests from $src on $dev (GID $gid) through $run; results in $out"
: > "$out/results.tsv"
bad=0
for m in "$@"; do
	res=$out/$m.tsv
	: > "$res"
	start=$(date +%s)
	# in the results' folder, where a crash report of kinet's lands
	(cd "$out" && timeout -k 10 "$mtime" "$run" "$py" "$out/driver.py" "$src" "$m" "$res" \
		"$dev" "$gid" "$ttime") > "$out/$m.log" 2>&1
	rc=$?
	end=$(date +%s)
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		printf 'error\ttests.%s\tthe module ran past %s s (killed)\n' "$m" "$mtime" >> "$res"
	elif ! grep -q '^end' "$res"; then
		# ended before its last test: a crash, a test past its time that
		# the alarm could not interrupt, or a module that does not load;
		# the test that had started and not ended is named
		last=$(awk -F'\t' '$1 == "start" { t = $2; next } $2 == t { t = "" } END { print t }' "$res")
		printf 'error\t%s\tthe module ended early with status %s%s (see %s.log)\n' \
			"${last:-tests.$m}" "$rc" "${last:+ in this test}" "$m" >> "$res"
	fi
	sed -i '/^end\t/d; /^start\t/d' "$res"
	awk -F'\t' -v m="$m" -v s="$((end - start))" '
		{ n[$1]++ }
		END { printf "%-28s %4d passed %4d failed %4d skipped  (%d s)\n", m,
			n["pass"], n["fail"] + n["error"], n["skip"], s }' "$res"
	cat "$res" >> "$out/results.tsv"
done

echo
awk -F'\t' '
	{ n[$1]++ }
	$1 == "fail" || $1 == "error" { f[++nf] = "  " $2 ": " $3 }
	END {
		printf "total: %d passed, %d failed, %d skipped\n", n["pass"], n["fail"] + n["error"], n["skip"]
		if (nf) { print "failed:"; for (i = 1; i <= nf; i++) print f[i] }
	}' "$out/results.tsv"
if grep -q '^skip' "$out/results.tsv"; then
	echo "skipped, by reason:"
	awk -F'\t' '$1 == "skip" { r[$3]++ } END { for (k in r) printf "  %4d  %s\n", r[k], k }' \
		"$out/results.tsv" | sort -rn
fi
if grep -q '^fail\|^error' "$out/results.tsv"; then
	bad=1
fi
exit $bad

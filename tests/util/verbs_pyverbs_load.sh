#!/bin/sh
# pyverbs (Debian's python3-pyverbs, rdma-core's Python bindings), unmodified,
# under kinet-run: every module of it imports (each binds all the libibverbs
# and libmlx5 symbols it names at load, so one that kinet-verbs lacks fails
# the import), the device list is kinet-verbs' (kinet0), a PD and an MR work,
# and a verb kinet-verbs refuses (ibv_import_pd) raises EOPNOTSUPP.
#   verbs_pyverbs_load.sh KINET_RUN
# Exits 77 (skipped) when pyverbs is not installed.
set -eu
if [ -n "${KINET_TEST_SANITIZED:-}" ]; then
	echo "SKIPPED verbs_pyverbs_load: the ASan build's kinet-verbs cannot be loaded into uninstrumented programs (the plain build runs this test)"
	exit 77
fi
run=$1
py=${PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import pyverbs' >/dev/null 2>&1; then
	echo "verbs_pyverbs_load: pyverbs not installed (Debian's python3-pyverbs): skipped"
	exit 77
fi
timeout 60 "$run" "$py" - <<'PY'
import errno, importlib, os, pkgutil, random, sys
import pyverbs
bad = []
n = 0
for m in pkgutil.walk_packages(pyverbs.__path__, 'pyverbs.'):
    n += 1
    try:
        importlib.import_module(m.name)
    except ImportError as e:
        bad.append('%s: %s' % (m.name, e))
if bad:
    sys.exit('verbs_pyverbs_load: modules that do not import:\n  ' + '\n  '.join(bad))
if n < 20:
    sys.exit('verbs_pyverbs_load: only %d pyverbs modules found' % n)
import pyverbs.device as d
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
names = [x.name.decode() for x in d.get_device_list()]
if not names or names[0] != 'kinet0' or any(not s.startswith('kinet') for s in names):
    sys.exit('verbs_pyverbs_load: device list %r is not kinet-verbs\'' % names)
with d.Context(name='kinet0') as ctx:
    with PD(ctx) as pd:
        size = random.randint(1, 1 << 16)
        with MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE) as mr:
            data = os.urandom(size)
            mr.write(data, size)
            if mr.read(size, 0) != data:
                sys.exit('verbs_pyverbs_load: MR contents differ')
        try:
            PD(ctx, handle=1)
        except PyverbsRDMAError as ex:
            if ex.error_code != errno.EOPNOTSUPP:
                sys.exit('verbs_pyverbs_load: ibv_import_pd: %s' % ex)
        else:
            sys.exit('verbs_pyverbs_load: ibv_import_pd was not refused')
print('verbs_pyverbs_load: %d modules imported, devices %s' % (n, names))
PY

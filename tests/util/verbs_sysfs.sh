#!/bin/sh
# kinet-run's libkinet_sysfs.so (src/verbs/sysfs.c): under kinet-run, the C
# library's realpath(3), looked up as a dlopen()ed plugin looks it up (the
# global scope: NVSHMEM's IB transports resolve the device's sysfs link this
# way), resolves /sys/class/infiniband/kinetN/device to the CPUs' sysfs
# folder, with and without a caller's buffer; every other path resolves as
# without kinet-run (an existing one to itself, a missing one to ENOENT),
# and outside kinet-run the kinet link does not exist.
#   verbs_sysfs.sh KINET_RUN
set -eu
if [ -n "${KINET_TEST_SANITIZED:-}" ]; then
	echo "SKIPPED verbs_sysfs: the sanitizer build has no libkinet_sysfs.so"
	exit 77
fi
run=$1
py=${PYTHON:-/usr/bin/python3}
cat > "${TMPDIR:-/tmp}/kinet-verbs-sysfs-$$.py" <<'PY'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
rp = libc.realpath
rp.restype = ctypes.c_void_p
rp.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
free = libc.free
free.argtypes = [ctypes.c_void_p]
def resolve(p, own_buffer):
    ctypes.set_errno(0)
    if own_buffer:
        buf = ctypes.create_string_buffer(4096)
        r = rp(p.encode(), buf)
        return (buf.value.decode() if r else None), ctypes.get_errno()
    r = rp(p.encode(), None)
    if not r:
        return None, ctypes.get_errno()
    s = ctypes.string_at(r).decode()
    free(r)
    return s, 0
under = sys.argv[1] == 'under'
cpu = os.path.realpath('/sys/devices/system/cpu')
bad = []
for own in (False, True):
    for p in ('/sys/class/infiniband/kinet0/device', '/sys/class/infiniband/kinet12//device/'):
        got, e = resolve(p, own)
        want = cpu if under else None
        if got != want or (not under and e != errno.ENOENT):
            bad.append('%s (own buffer %s): %r, errno %d; want %r' % (p, own, got, e, want))
    for p, want in (('/tmp/.', os.path.realpath('/tmp')), ('/', '/'),
                    ('/sys/class/infiniband/kinet0/devices', None),
                    ('/sys/class/infiniband/kinetx/device', None),
                    ('/nonexistent-kinet-path/x', None)):
        got, e = resolve(p, own)
        if got != want or (want is None and e != errno.ENOENT):
            bad.append('%s (own buffer %s): %r, errno %d; want %r' % (p, own, got, e, want))
if bad:
    sys.exit('verbs_sysfs (%s kinet-run):\n  ' % sys.argv[1] + '\n  '.join(bad))
print('verbs_sysfs: %s kinet-run: every path resolved as expected' % sys.argv[1])
PY
f="${TMPDIR:-/tmp}/kinet-verbs-sysfs-$$.py"
trap 'rm -f "$f"' EXIT
timeout 60 "$run" "$py" "$f" under
timeout 60 "$py" "$f" outside

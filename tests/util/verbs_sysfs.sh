#!/bin/sh
# kinet-run's libkinet_sysfs.so (src/verbs/sysfs.c): under kinet-run, the C
# library's realpath(3), looked up as a dlopen()ed plugin looks it up (the
# global scope: NVSHMEM's IB transports resolve the device's sysfs link this
# way), resolves /sys/class/infiniband/kinet0/device to the CPUs' sysfs
# folder, with and without a caller's buffer, and a device kinet-verbs does
# not have (kinet99) to ENOENT; every other path resolves as
# without kinet-run (an existing one to itself, a missing one to ENOENT),
# and outside kinet-run the kinet link does not exist. A port's
# gid_attrs/types/I opens (open(2), as NVSHMEM reads it) and says what the
# kernel would, "IB/RoCE v1" or "RoCE v2", for each GID that ibv_devinfo -v
# lists under kinet-run (with that GID's RoCE version), empty for an entry
# without a GID, ENOENT past the table's gid_tbl_len, on another port or
# device, and for writing EACCES (skipped without ibv_devinfo). Any other
# open(2) keeps its flags and its O_CREAT mode.
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
    for p in ('/sys/class/infiniband/kinet0/device', '/sys/class/infiniband/kinet0//device/',
              '/sys/class/infiniband/kinet99/device'):
        got, e = resolve(p, own)
        want = cpu if under and '99' not in p else None
        if got != want or (want is None and e != errno.ENOENT):
            bad.append('%s (own buffer %s): %r, errno %d; want %r' % (p, own, got, e, want))
    for p, want in (('/tmp/.', os.path.realpath('/tmp')), ('/', '/'),
                    ('/sys/class/infiniband/kinet0/devices', None),
                    ('/sys/class/infiniband/kinetx/device', None),
                    ('/nonexistent-kinet-path/x', None)):
        got, e = resolve(p, own)
        if got != want or (want is None and e != errno.ENOENT):
            bad.append('%s (own buffer %s): %r, errno %d; want %r' % (p, own, got, e, want))
gids = {}
for line in os.environ.get('KINET_TEST_DEVINFO', '').splitlines():
    line = line.strip()
    if line.startswith('GID['):
        i = int(line[4:line.index(']')])
        gids[i] = 2 if line.endswith('RoCE v2') else 1
def read_type(path, flags=os.O_RDONLY):
    try:
        fd = os.open(path, flags)
    except OSError as x:
        return x.errno
    try:
        return os.read(fd, 64).decode()
    finally:
        os.close(fd)
base = '/sys/class/infiniband/kinet0/ports/1/gid_attrs/types/'
if under and gids:
    tbl = int(os.environ['KINET_TEST_GID_TBL'])
    for i in list(range(tbl)):
        want = {1: 'IB/RoCE v1\n', 2: 'RoCE v2\n'}.get(gids.get(i), '')
        got = read_type(base + str(i))
        if got != want:
            bad.append('types/%d: %r, want %r' % (i, got, want))
    for p, want in ((base + str(tbl), errno.ENOENT),
                    ('/sys/class/infiniband/kinet0/ports/2/gid_attrs/types/0', errno.ENOENT),
                    ('/sys/class/infiniband/kinet99/ports/1/gid_attrs/types/0', errno.ENOENT),
                    (base + '1x', errno.ENOENT), (base + '-1', errno.ENOENT)):
        got = read_type(p)
        if got != want:
            bad.append('%s: %r, want errno %d' % (p, got, want))
    got = read_type(base + '1', os.O_WRONLY)
    if got != errno.EACCES:
        bad.append('types/1 for writing: %r, want EACCES' % (got,))
elif under:
    print('verbs_sysfs: no ibv_devinfo (ibverbs-utils): gid_attrs/types not checked')
elif read_type(base + '1') != errno.ENOENT:
    bad.append('types/1 exists outside kinet-run')
# open(2) of anything else keeps its mode argument (O_CREAT) and flags
import tempfile
os.umask(0)
d = tempfile.mkdtemp()
try:
    fd = os.open(d + '/created', os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o640)
    os.close(fd)
    m = os.stat(d + '/created').st_mode & 0o777
    if m != 0o640:
        bad.append('a file made with open(O_CREAT, 0640) has mode %o' % m)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.close(fd)
finally:
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)
if bad:
    sys.exit('verbs_sysfs (%s kinet-run):\n  ' % sys.argv[1] + '\n  '.join(bad))
print('verbs_sysfs: %s kinet-run: every path resolved as expected' % sys.argv[1])
PY
f="${TMPDIR:-/tmp}/kinet-verbs-sysfs-$$.py"
trap 'rm -f "$f"' EXIT
if command -v ibv_devinfo >/dev/null 2>&1; then
	KINET_TEST_DEVINFO=$(timeout 60 "$run" ibv_devinfo -v -d kinet0 2>/dev/null)
	KINET_TEST_GID_TBL=$(printf '%s\n' "$KINET_TEST_DEVINFO" | sed -n 's/.*gid_tbl_len:[[:space:]]*//p' | head -1)
	case "$KINET_TEST_DEVINFO" in
	*"GID[  1]"*) ;;
	*) echo "verbs_sysfs: ibv_devinfo -v -d kinet0 under kinet-run lists no GID"; exit 1 ;;
	esac
	export KINET_TEST_DEVINFO KINET_TEST_GID_TBL
fi
timeout 60 "$run" "$py" "$f" under
timeout 60 "$py" "$f" outside

#!/bin/sh
# The layering rules of docs/architecture.md ("Layers"), checked on the
# sources and on the objects of libkinet:
#  1. no object of src/core, src/gpu or src/boot refers to a symbol that an
#     object of src/nic defines, except the backend table (kinet_backends);
#  2. no source of src/core, src/gpu or src/boot includes a header of src/nic;
#  3. a backend (src/nic/<name>/) includes of the core only core/driver.h,
#     and no header of another backend;
#  4. only src/gpu and the CUDA module (src/cuda) reach the CUDA driver
#     (<cuda.h>, libcuda.so, its cu* entry points);
#  5. the rest of the software NIC reaches the wire only through
#     nic/soft/wire/wire.h;
#  6. inside the wire, calls go one way, down the order wire.c, poll.c,
#     req.c, peer.c, tgt.c, copy.c, ep.c, reg.c, shm.c: each object names
#     only what the files after it define, and every object of the wire
#     has its place in that order.
# Usage: layering.sh SOURCE_DIR OBJECT...
set -eu
src=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
say() {
	echo "layering: $1" >&2
	shift
	printf '%s\n' "$@" >&2
	fail=1
}

# 1. core, gpu and boot objects against what the nic objects define
n_nic=0
n_up=0
: >"$tmp/nic_defs"
: >"$tmp/up_refs"
for o in "$@"; do
	case "$o" in
	*/nic/*) nm --defined-only "$o" | awk '$2 ~ /[TDBRtdbr]/ {print $3}' >>"$tmp/nic_defs"; n_nic=$((n_nic + 1)) ;;
	*/core/* | */gpu/* | */boot/*) nm -u "$o" | awk -v f="$o" '{print $2, f}' >>"$tmp/up_refs"; n_up=$((n_up + 1)) ;;
	esac
done
if [ "$n_nic" -eq 0 ] || [ "$n_up" -eq 0 ]; then
	echo "layering: no objects of src/nic ($n_nic) or src/core+gpu+boot ($n_up) given" >&2
	exit 1
fi
bad=$(sort -u "$tmp/nic_defs" | grep -v '^kinet_backends$' |
	awk 'NR == FNR {d[$1] = 1; next} ($1 in d) {print}' - "$tmp/up_refs")
[ -z "$bad" ] || say "src/core, src/gpu or src/boot names what src/nic defines:" "$bad"

# 2. no nic header below the backends
inc=$(grep -rn '#include "nic/' "$src/src/core" "$src/src/gpu" "$src/src/boot" || true)
[ -z "$inc" ] || say "src/core, src/gpu or src/boot includes a header of src/nic:" "$inc"

# 3. a backend's includes: core/driver.h only, and its own headers
for b in "$src"/src/nic/*/; do
	name=$(basename "$b")
	inc=$(grep -rn '#include "' "$b" |
		grep -v '#include "core/driver.h"' |
		grep -v "#include \"nic/$name/" |
		grep -v '#include "gpu/' |
		grep -v '#include "kinet_config.h"' |
		grep -v '#include "[a-z_]*\.[ch]"' || true)
	[ -z "$inc" ] || say "backend $name includes what it may not (core/driver.h, gpu/, nic/$name/ only):" "$inc"
done
inc=$(grep -n '#include "' "$src/src/nic/backends.c" | grep -v '#include "core/driver.h"' || true)
[ -z "$inc" ] || say "src/nic/backends.c includes more than core/driver.h:" "$inc"

# 4. the CUDA driver: src/gpu and src/cuda only
cu=$(grep -rnE '#include <cuda\.h>|libcuda\.so|"cu[A-Z][A-Za-z0-9_]+"' "$src/src" \
	--include='*.c' --include='*.h' --include='*.cu' |
	grep -v "^$src/src/gpu/" | grep -v "^$src/src/cuda/" || true)
[ -z "$cu" ] || say "the CUDA driver is reached outside src/gpu and src/cuda:" "$cu"

# 5. the wire from the rest of the software NIC: wire/wire.h only
inc=$(grep -rn '#include "nic/soft/wire/' "$src/src" --include='*.c' --include='*.h' |
	grep -v "^$src/src/nic/soft/wire/" | grep -v '#include "nic/soft/wire/wire.h"' || true)
[ -z "$inc" ] || say "the wire is reached other than through nic/soft/wire/wire.h:" "$inc"

# 6. calls inside the wire go one way (the order of $order: each file may
#    name what the files after it define, never what one before it does)
order="wire poll req peer tgt copy ep reg shm"
n_wire=0
for o in "$@"; do
	case "$o" in
	*/nic/soft/wire/*.o)
		f=$(basename "$o" .c.o)
		case " $order " in
		*" $f "*) ;;
		*) say "an object of the wire has no place in the order ($order):" "$f.c" ;;
		esac
		nm --defined-only "$o" | awk -v f="$f" '$2 ~ /[TDBR]/ {print $3, f}' >>"$tmp/wire_defs"
		nm -u "$o" | awk -v f="$f" '{print $2, f}' >>"$tmp/wire_refs"
		n_wire=$((n_wire + 1))
		;;
	esac
done
if [ "$n_wire" -gt 0 ]; then
	rank=$(echo "$order" | tr ' ' '\n' | awk '{print $1, NR}')
	bad=$(echo "$rank" | awk 'FILENAME == "-" {r[$1] = $2; next}
		FILENAME ~ /wire_defs$/ {d[$1] = $2; next}
		($1 in d) && d[$1] != $2 && ($2 in r) && (d[$1] in r) && r[d[$1]] <= r[$2] && r[d[$1]] != r[$2] {
			print $2 ".c calls " $1 " of " d[$1] ".c" }' - "$tmp/wire_defs" "$tmp/wire_refs")
	[ -z "$bad" ] || say "calls inside the wire go back up ($order):" "$bad"
fi

[ "$fail" -eq 0 ] || exit 1
echo "layering: $n_up core/gpu/boot objects, $n_nic nic objects ($n_wire of the wire): clean"

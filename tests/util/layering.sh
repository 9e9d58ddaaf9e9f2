#!/bin/sh
# The layering rule of docs/architecture.md, checked on the objects of
# libkinet: no object of src/core or src/mem refers to a symbol that an
# object of src/nic defines, except the backend table (kinet_backends), and
# no source of src/core or src/mem includes a header of src/nic.
# Usage: layering.sh SOURCE_DIR OBJECT...
set -eu
src=$1
shift
nic_defs=$(mktemp)
up_refs=$(mktemp)
trap 'rm -f "$nic_defs" "$up_refs"' EXIT
n_nic=0
n_up=0
for o in "$@"; do
	case "$o" in
	*/nic/*) nm --defined-only "$o" | awk '$2 ~ /[TDBRtdbr]/ {print $3}' >>"$nic_defs"; n_nic=$((n_nic + 1)) ;;
	*/core/* | */mem/*) nm -u "$o" | awk -v f="$o" '{print $2, f}' >>"$up_refs"; n_up=$((n_up + 1)) ;;
	esac
done
if [ "$n_nic" -eq 0 ] || [ "$n_up" -eq 0 ]; then
	echo "layering: no objects of src/nic ($n_nic) or src/core+src/mem ($n_up) given" >&2
	exit 1
fi
bad=$(sort -u "$nic_defs" | grep -v '^kinet_backends$' | awk 'NR == FNR {d[$1] = 1; next} ($1 in d) {print}' - "$up_refs")
if [ -n "$bad" ]; then
	echo "layering: src/core or src/mem names what src/nic defines:" >&2
	echo "$bad" >&2
	exit 1
fi
inc=$(grep -rn '#include "nic/' "$src/src/core" "$src/src/mem" || true)
if [ -n "$inc" ]; then
	echo "layering: src/core or src/mem includes a header of src/nic:" >&2
	echo "$inc" >&2
	exit 1
fi
echo "layering: $n_up core/mem objects, $n_nic nic objects: clean"

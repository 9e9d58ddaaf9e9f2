#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tests/headers/check.sh - compiles every public header on its own, in one
# language mode, with one compiler: a translation unit that includes the
# header twice (include guards) and nothing else.
#
# usage: check.sh NAME LANG COMPILER INCLUDE_DIR OUT_DIR HEADERS -- FLAGS...
#   LANG      c, c++ or cu (nvcc)
#   COMPILER  path, or empty / *-NOTFOUND: the check is skipped (exit 77)
#   HEADERS   ;-separated file names under INCLUDE_DIR/kinet
# Exit status: 0 every header compiled, 1 one did not (its errors are
# printed), 77 skipped.
set -u
name=$1 lang=$2 cc=$3 inc=$4 out=$5 headers=$6
shift 6
[ "${1:-}" = "--" ] && shift
if [ -z "$cc" ] || [[ "$cc" == *NOTFOUND ]] || ! command -v "$cc" > /dev/null 2>&1; then
  echo "SKIPPED $name: no compiler (${cc:-none in this build: not found, or its language is off})"
  exit 77
fi
mkdir -p "$out"
case $lang in
  c) ext=c ;;
  c++) ext=cpp ;;
  cu) ext=cu ;;
  *) echo "$name: unknown language $lang" >&2; exit 2 ;;
esac
fail=0
IFS=';' read -r -a list <<< "$headers"
for h in "${list[@]}"; do
  id=${h//[.\/]/_}
  tu="$out/$id.$ext"
  printf '#include <kinet/%s>\n#include <kinet/%s>\ntypedef int kinet_header_check_%s;\n' \
    "$h" "$h" "$id" > "$tu"
  if [ "$lang" = cu ]; then
    cmd=("$cc" "$@" -I"$inc" -c "$tu" -o "$out/$id.o")
  else
    cmd=("$cc" "$@" -I"$inc" -fsyntax-only "$tu")
  fi
  if log=$("${cmd[@]}" 2>&1); then
    echo "ok    $h"
  else
    echo "FAIL  $h: ${cmd[*]}"
    echo "$log"
    fail=1
  fi
done
exit $fail

#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Regenerates the table of docs/tunables.md (between its begin and end
# markers) from a built kinet-info: scripts/tunables_md.sh BUILD_DIR
set -eu
b=${1:-build}
doc=$(dirname "$0")/../docs/tunables.md
tab=$(mktemp)
"$b/tools/info/kinet-info" --tunables-md >"$tab"
awk -v tab="$tab" '
  /<!-- tunables: begin/ {print; while ((getline l < tab) > 0) print l; skip = 1; next}
  /<!-- tunables: end/ {skip = 0}
  !skip {print}' "$doc" >"$doc.new"
mv "$doc.new" "$doc"
rm -f "$tab"

#!/usr/bin/env bash
# The committed man page (daemon/baton.1) is what scripts/gen-man.sh makes from the executable's
# help now; only the .TH line (date, version) may differ. On failure: scripts/gen-man.sh.
# usage: man_page_test.sh BATON_EXECUTABLE WORK_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
baton=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
"$ROOT/scripts/gen-man.sh" --baton "$baton" --out "$work/baton.1" >/dev/null
grep -v '^\.TH ' "$ROOT/daemon/baton.1" >"$work/committed"
grep -v '^\.TH ' "$work/baton.1" >"$work/generated"
# The page holds every command's section (a page that lost them would still "match" itself).
for cmd in run validate status history pause resume trigger drain calendar; do
  grep -qx "\.SS $cmd" "$work/generated" || { echo "no section for '$cmd' in the page"; exit 1; }
done
if ! diff -u "$work/committed" "$work/generated"; then
  echo "daemon/baton.1 is out of date: run scripts/gen-man.sh (after building build/daemon/baton)"
  exit 1
fi
echo "daemon/baton.1 matches '$baton --help' and 'baton help CMD'"

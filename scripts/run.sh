#!/usr/bin/env bash
# scripts/run.sh [ARGS...]: builds baton (incrementally, in build/) and runs the daemon on the
# quickstart config: build/daemon/baton run --config examples/quickstart.json
# With ARGS, runs build/daemon/baton ARGS instead. When the daemon was not built, runs
# build/examples/baton_handover_demo ARGS. Works from any directory (runs in the repo root).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=build

# shellcheck source=deps.sh
source "$ROOT/scripts/deps.sh"
baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}" || exit 1

# (Re)configure: cheap when nothing changed, and keeps the target list below current. The
# build type is only set on a fresh build dir (scripts/test.sh shares build/).
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "run.sh: configuring $BUILD" >&2
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
else
  cmake -S "$ROOT" -B "$BUILD" >/dev/null
fi

# Build only what is run (not the tests) when those targets exist; else everything.
jobs=$(nproc 2>/dev/null || echo 2)
targets=()
available=$(cmake --build "$BUILD" --target help 2>/dev/null || true)
available=$(sed -n 's/^\.\.\. \([^ ]*\).*/\1/p' <<<"$available")
for t in baton baton_handover_demo; do
  if grep -qx "$t" <<<"$available"; then targets+=("$t"); fi
done
echo "run.sh: building ${targets[*]:-all targets}" >&2
if ((${#targets[@]})); then
  cmake --build "$BUILD" -j "$jobs" --target "${targets[@]}" >&2
else
  cmake --build "$BUILD" -j "$jobs" >&2
fi

if [[ -x "$BUILD/daemon/baton" ]]; then
  if (($#)); then
    exec "$BUILD/daemon/baton" "$@"
  fi
  exec "$BUILD/daemon/baton" run --config examples/quickstart.json
fi
if [[ -x "$BUILD/examples/baton_handover_demo" ]]; then
  exec "$BUILD/examples/baton_handover_demo" "$@"
fi
echo "run.sh: neither $BUILD/daemon/baton nor $BUILD/examples/baton_handover_demo was built" >&2
exit 1

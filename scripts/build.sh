# shellcheck shell=bash
# The build step shared by scripts/test.sh and scripts/faults.sh. Source it, then:
#
#   baton_build WHO BUILD_DIR JOBS SANITIZE [TARGET...]
#
# configures BUILD_DIR (RelWithDebInfo, tests on, BATON_SANITIZE=SANITIZE, "" for none) and
# builds TARGETs (all when none) with JOBS parallel jobs. WHO prefixes the progress lines.
# Call baton_ensure_packages (scripts/deps.sh) first.

baton_build() {
  local who=$1 build_dir=$2 jobs=$3 sanitize=$4 root targets=()
  shift 4
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  for t in "$@"; do targets+=(--target "$t"); done
  echo "$who: configuring $build_dir${sanitize:+ (sanitize=$sanitize)}" >&2
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_BUILD_TESTS=ON \
    "-DBATON_SANITIZE=$sanitize" || return 1
  echo "$who: building with $jobs jobs${targets[*]:+ (${*})}" >&2
  cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
}

#!/usr/bin/env bash
# scripts/test.sh: builds baton with its tests, starts the test servers on loopback and runs
# every test with ctest. The official test run skips nothing: a skipped, disabled or "Not Run"
# test fails the run, and so does a run without tests.
#
# usage: scripts/test.sh [--sanitize address,undefined|thread] [--build-dir DIR] [--jobs N]
#                        [-R REGEX] [--fuzz|--no-fuzz] [--keep] [-- CTEST_ARGS...]
#
#   --sanitize S     build with -fsanitize=S (BATON_SANITIZE); default build dir becomes
#                    build-asan (address/undefined) or build-tsan (thread)
#   --build-dir DIR  build directory (default: build), relative to the repository root
#   --jobs N         parallel build jobs and parallel tests (default: nproc)
#   -R REGEX         run only the tests matching REGEX (ctest -R)
#   --fuzz, --no-fuzz  build the config fuzz test alone under ASan+UBSan (build dir build-fuzz:
#                    that test and the config library only) and run it, 10,000 cases, in the
#                    background while ctest runs (idle scheduling class; a full run prebuilds
#                    the install test's shared libraries there too); its failure fails the run.
#                    Default: on in a full run (no -R, no --sanitize; CI's), off otherwise
#   --keep           keep the scratch directory (server data and logs) after the run
#   -- ARGS          passed on to ctest
#
# Server logs of the last run are copied to BUILD_DIR/test-server-logs/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

usage() {
  sed -n '6,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() {
  echo "test.sh: $*" >&2
  exit 2
}

sanitize=""
build_dir=""
jobs=""
regex=""
fuzz=""
keep=0
ctest_extra=()
while (($#)); do
  case "$1" in
    --sanitize) (($# >= 2)) || die "--sanitize needs a value"; sanitize=$2; shift 2 ;;
    --sanitize=*) sanitize=${1#*=}; shift ;;
    --build-dir) (($# >= 2)) || die "--build-dir needs a value"; build_dir=$2; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    --jobs | -j) (($# >= 2)) || die "--jobs needs a value"; jobs=$2; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    -R) (($# >= 2)) || die "-R needs a regex"; regex=$2; shift 2 ;;
    --fuzz) fuzz=1; shift ;;
    --no-fuzz) fuzz=0; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) usage ;;
    --) shift; ctest_extra=("$@"); break ;;
    *) echo "test.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

case "$sanitize" in
  "") default_dir=build ;;
  thread) default_dir=build-tsan ;;
  address | undefined | address,undefined | undefined,address) default_dir=build-asan ;;
  *) die "--sanitize: expected 'address,undefined' or 'thread', got '$sanitize'" ;;
esac
build_dir=${build_dir:-$default_dir}
if [[ -z "$fuzz" ]]; then
  if [[ -z "$regex" && -z "$sanitize" ]]; then fuzz=1; else fuzz=0; fi
fi
jobs=${jobs:-$(nproc 2>/dev/null || echo 2)}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs: expected a positive number, got '$jobs'"

# ---------------------------------------------------------------------------------- packages
# shellcheck source=deps.sh
source "$ROOT/scripts/deps.sh"
baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}" "${BATON_TEST_PACKAGES[@]}" || exit 1

# ------------------------------------------------------------------------------------- build
# shellcheck source=build.sh
source "$ROOT/scripts/build.sh"
baton_build test.sh "$build_dir" "$jobs" "$sanitize"

# ------------------------------------------------------------------------- background builds
# Two builds that a full run needs besides the main one go in the background while ctest runs,
# at the idle scheduling class (chrt --idle; nice 19 where that is refused): the tests mostly
# wait on servers and timers, and these builds take only the CPU time the tests leave, never
# theirs. Done first, one after the other, they cost a clean CI run about 10 minutes of its 30.
#  - The shared libraries that install.shared_libraries_have_soname_and_versioned_symbols checks
#    (tests/install/run_install_test.cmake, MODE=shared-build): the test finds them built (it
#    waits on the build directory's lock should it come first).
#  - The config loader's fuzz test (tests/fuzz/) under ASan+UBSan, in a build of its own that
#    holds only what the test needs (the config library and its dependencies; no daemon, no
#    other test), at -O1 -g1 (ASan's advice), then run: it needs no server. Its wall deadline is
#    900 s here (BATON_FUZZ_SECONDS), as it runs at the idle class.
# Their output goes to BUILD_DIR/background.log and is summed up after ctest. A failure of the
# fuzz test (or of its build) fails the run; one of the shared libraries' build is the install
# test's to report (it builds them again).
fuzz_pid=""
fuzz_log="$build_dir/background.log"
if ((fuzz)); then
  if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0); else idle=(nice -n 19); fi
  shared=0
  if [[ -z "$regex" ]] && ctest --test-dir "$build_dir" -N -R '^install\.shared_libraries' 2>/dev/null |
    grep -q 'Total Tests: [1-9]'; then shared=1; fi
  what="the config fuzz test under ASan+UBSan"
  ((shared)) && what+=" and the install test's shared libraries"
  echo "test.sh: background (${idle[*]}): $what; output in $fuzz_log" >&2
  # A session of its own, so that the trap can end it together with the compilers it runs.
  setsid "${idle[@]}" bash -c '
    set -e
    root=$1 jobs=$2 build_dir=$3 shared=$4
    start=$SECONDS
    # A failed build here fails nothing: the install test builds them again and reports it.
    if ((shared)); then
      if cmake -DMODE=shared-build "-DBATON_BUILD_DIR=$root/$build_dir" \
        "-DBATON_SOURCE_DIR=$root" "-DWORK_DIR=$root/$build_dir/tests/install/shared-build" \
        -DBATON_SANITIZE= -P "$root/tests/install/run_install_test.cmake"; then
        echo "test.sh: background: shared libraries built in $((SECONDS - start)) s"
      else
        echo "test.sh: background: the shared libraries did not build (status $?);" \
          "install.shared_libraries_have_soname_and_versioned_symbols builds them again"
      fi
    fi
    start=$SECONDS
    cmake -S "$root" -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DBATON_SANITIZE=address,undefined" \
      -DBATON_BUILD_TESTS=ON -DBATON_BUILD_DAEMON=OFF -DBATON_BUILD_EXAMPLES=OFF >/dev/null
    cmake --build build-fuzz -j "$jobs" --target baton_config_fuzz
    echo "test.sh: config fuzz: running (built in $((SECONDS - start)) s)"
    BATON_FUZZ_SECONDS=${BATON_FUZZ_SECONDS:-900} ASAN_OPTIONS="halt_on_error=1:detect_leaks=1" \
      UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
      build-fuzz/tests/baton_config_fuzz
    echo "test.sh: config fuzz: done in $((SECONDS - start)) s"' \
    background "$ROOT" "$jobs" "$build_dir" "$shared" >"$fuzz_log" 2>&1 </dev/null &
  fuzz_pid=$!
fi

# Waits for the background job (if any) and reports it: sets fuzz_status.
fuzz_status=0
finish_fuzz() {
  [[ -n "$fuzz_pid" ]] || return 0
  wait "$fuzz_pid" || fuzz_status=$?
  fuzz_pid=""
  if ((fuzz_status != 0)); then
    cat "$fuzz_log" >&2
    echo "test.sh: FAILED: the config fuzz test or its build (exit status $fuzz_status)" >&2
  else
    grep -E '^test.sh: (background|config fuzz):|^\[  (PASSED|FAILED) ' "$fuzz_log" >&2 || true
  fi
}

# ---------------------------------------------------------------------------- scratch, servers
# shellcheck source=servers.sh
source "$ROOT/scripts/servers.sh"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-test.XXXXXX")
ctest_pid=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$fuzz_pid" ]]; then
    kill -TERM -- "-$fuzz_pid" 2>/dev/null || true
    wait "$fuzz_pid" 2>/dev/null || true
  fi
  if [[ -n "$ctest_pid" ]]; then
    # ctest and the tests it runs form one process group (setsid below).
    kill -TERM -- "-$ctest_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 -- "-$ctest_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$ctest_pid" 2>/dev/null || true
    wait "$ctest_pid" 2>/dev/null || true
  fi
  baton_stop_servers
  if [[ -d "$build_dir" ]]; then
    local logs="$build_dir/test-server-logs"
    rm -rf "$logs" && mkdir -p "$logs"
    for f in "$scratch"/*/*.log; do
      [[ -f "$f" ]] && cp "$f" "$logs/$(basename "$(dirname "$f")")-$(basename "$f")"
    done
  fi
  if ((keep)); then
    echo "test.sh: kept $scratch" >&2
  else
    rm -rf "$scratch" || echo "test.sh: could not remove $scratch" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "test.sh: starting test servers in $scratch" >&2
baton_start_all "$scratch" || {
  echo "test.sh: FAILED to start the test servers" >&2
  exit 1
}

# ------------------------------------------------------------------------------- sanitizers
if [[ "$sanitize" == *address* || "$sanitize" == *undefined* ]]; then
  asan="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1"
  asan+=":detect_odr_violation=2"
  export ASAN_OPTIONS="$asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  if [[ -f "$ROOT/tests/lsan.supp" ]]; then
    export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  fi
fi
if [[ "$sanitize" == thread ]]; then
  tsan="halt_on_error=1:second_deadlock_stack=1:history_size=4"
  if [[ -f "$ROOT/tests/tsan.supp" ]]; then
    tsan+=":suppressions=$ROOT/tests/tsan.supp"
  fi
  export TSAN_OPTIONS="$tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
fi

# ------------------------------------------------------------------------------------ ctest
log="$scratch/ctest.log"
ctest_args=(--test-dir "$build_dir" --output-on-failure --no-tests=error -j "$jobs"
  --timeout 900 -O "$log")
[[ -n "$regex" ]] && ctest_args+=(-R "$regex")
ctest_args+=("${ctest_extra[@]}")

echo "test.sh: ctest ${ctest_args[*]}" >&2
# In the background, so that INT/TERM reach the trap at once, and in a session of its own, so
# that the trap can end ctest together with the tests it runs.
status=0
setsid ctest "${ctest_args[@]}" &
ctest_pid=$!
wait "$ctest_pid" || status=$?
ctest_pid=""
finish_fuzz

# The official run skips nothing: ctest lists skipped, disabled and not-run tests here.
not_run=$(awk '/^The following tests did not run:/ { on = 1; next }
               on && /^[[:space:]]+[0-9]+ - / { print; next }
               on { on = 0 }' "$log")
not_run_count=$(grep -c . <<<"$not_run" || true)
total=$(sed -n -E 's/.*tests passed, [0-9]+ tests? failed out of ([0-9]+).*/\1/p' "$log" | tail -n1)

if ((status != 0)); then
  echo "test.sh: ctest failed (exit status $status)" >&2
  ((fuzz_status == 0)) || echo "test.sh: FAILED: the config fuzz test or its build (see above)" >&2
  exit "$status"
fi
if ((fuzz_status != 0)); then
  echo "test.sh: FAILED: the config fuzz test or its build (exit status $fuzz_status, see above)" >&2
  exit 1
fi
if [[ -z "$total" || "$total" -eq 0 ]]; then
  echo "test.sh: FAILED: no test ran" >&2
  exit 1
fi
if ((not_run_count > 0)); then
  echo "test.sh: FAILED: $not_run_count test(s) were skipped or not run (the official run skips nothing):" >&2
  echo "$not_run" >&2
  exit 1
fi
# Success: ctest's own summary ("100% tests passed, 0 tests failed out of N") closes the output.

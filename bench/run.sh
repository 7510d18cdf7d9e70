#!/usr/bin/env bash
# bench/run.sh: builds the benchmarks, starts the test servers (scripts/servers.sh, the same
# start-up as the tests), runs every benchmark and writes bench/results.json (one JSON record per
# line) and bench/RESULTS.md (the tables). Run by hand on a quiet machine; never in CI.
# The results.json it replaces is kept as results.previous.json, and RESULTS.md shows each of
# its figures beside this run's ("(was X)"). A full run takes about two hours on 2 CPUs.
#
# usage: bench/run.sh [--quick] [--only NAME[,NAME...]] [--backends B[,B...]] [--out DIR]
#
#   --quick          fewer samples (a smoke run; results are not for committing)
#   --only NAMES     run only these benchmarks: handover, takeover, throughput, scale,
#                    scale100k, peers, history, metrics, balance, fire, console (default: all)
#   --backends LIST  only these backends (sqlite,postgresql,mysql,redis,zookeeper)
#   --out DIR        where results.json and RESULTS.md go (default: bench/)
#   --update         merge into the results.json there instead of replacing it: this run's
#                    records replace those of the same figure, backend and subject, the others
#                    stay, and RESULTS.md names both runs ("was": the last full run). For
#                    re-measuring one backend after a change to it; a full run replaces all.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

quick=0
update=0
only="handover,takeover,throughput,scale,scale100k,peers,history,metrics,balance,fire,console"
out="$ROOT/bench"
while (($#)); do
  case "$1" in
    --quick) quick=1; shift ;;
    --only) only=$2; shift 2 ;;
    --backends) export BATON_BENCH_BACKENDS=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --update) update=1; shift ;;
    -h | --help) sed -n '6,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "bench/run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
export BATON_BENCH_QUICK=$quick
mkdir -p "$out"

# shellcheck source=../scripts/deps.sh
source "$ROOT/scripts/deps.sh"
baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}" "${BATON_TEST_PACKAGES[@]}" || exit 1

build=${BATON_BENCH_BUILD_DIR:-$ROOT/build-bench}
cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBATON_BUILD_TESTS=OFF \
  -DBATON_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
export BATON_BENCH_BIN="$build/bench"
export BATON_BENCH_DAEMON="$build/daemon/baton"
export BATON_BENCH_LUA_DIR="$ROOT/backends/redis/lua"
PY=/usr/bin/python3

# shellcheck source=../scripts/servers.sh
source "$ROOT/scripts/servers.sh"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-bench.XXXXXX")
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # Benchmarks start child processes in their own process groups; end any left over.
  pkill -TERM -f "$BATON_BENCH_BIN/" 2>/dev/null || true
  baton_stop_servers
  rm -rf "$scratch"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
baton_start_all "$scratch" || { echo "bench/run.sh: FAILED to start the servers" >&2; exit 1; }

results="$out/results.json"
: >"$results.tmp"
{
  echo "{\"figure\":\"meta\",\"backend\":\"\",\"subject\":\"run\",\"unit\":\"\",\"samples\":0,"
  echo "\"date\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"commit\":\"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo "\"cpus\":\"$(nproc)\",\"cpu_model\":\"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)\","
  echo "\"quick\":\"$quick\",\"kernel\":\"$(uname -r)\"}"
} | tr -d '\n' >>"$results.tmp"
echo >>"$results.tmp"

run() {  # run NAME COMMAND...: appends the command's JSON lines to the results
  local name=$1
  shift
  [[ ",$only," == *",$name,"* ]] || return 0
  echo "bench/run.sh: == $name: $*" >&2
  local started=$SECONDS
  if ! "$@" >>"$results.tmp"; then
    echo "bench/run.sh: $name FAILED" >&2
    echo "{\"figure\":\"error\",\"backend\":\"\",\"subject\":\"$name\",\"unit\":\"\",\"samples\":0}" >>"$results.tmp"
  fi
  echo "bench/run.sh: == $name took $((SECONDS - started)) s" >&2
}

run handover "$BATON_BENCH_BIN/baton_handover_bench"
# The same with the peers' method (release as soon as the other contender waits, no idle pause):
# subjects baton-no-pause and floor-no-pause, on the notified backends only.
run handover env BATON_BENCH_HANDOVER_NO_PAUSE=1 "$BATON_BENCH_BIN/baton_handover_bench"
run takeover "$BATON_BENCH_BIN/baton_takeover_bench"
run throughput "$BATON_BENCH_BIN/baton_throughput_bench"
run scale "$BATON_BENCH_BIN/baton_scale_bench"
# 100,000 mutexes in one process (issue 19): figure scale_mutexes_100000.
run scale100k env BATON_SCALE_MUTEXES=100000 BATON_SCALE_PARTS=mutexes \
  "$BATON_BENCH_BIN/baton_scale_bench"
run peers "$PY" "$ROOT/bench/peers/peers.py"
run history "$BATON_BENCH_BIN/baton_history_bench"
run metrics "$BATON_BENCH_BIN/baton_metrics_bench"
# Balance (issue 18): on Redis and SQLite unless --backends says otherwise; about 5 minutes with
# --quick, about 30 without.
run balance "$BATON_BENCH_BIN/baton_balance_bench"
# The web console's cost on the lease path (issue 20): SQLite, with and without a client polling
# /api/v1/schedules every 100 ms; about 2 minutes (30 s with --quick).
run console "$BATON_BENCH_BIN/baton_console_bench"
# The daemon with 10,000 schedules (issue 19): idle, then all firing every minute; about 5
# minutes per backend.
run fire "$BATON_BENCH_BIN/baton_fire_bench"

# The run replaced keeps its figures for comparison (a partial run's --only figures still compare
# with the last full run's).
previous=()
if ((update)) && [[ -s $results ]]; then
  # This run's records replace the same (figure, backend, subject) of the merged-into run; its meta
  # record becomes an "update" record that RESULTS.md names.
  # "was" stays the last full run: the results merged into become results.previous.json only
  # when they are a full run themselves (no update record yet).
  grep -q '"subject":"update"' "$results" || cp "$results" "$out/results.previous.json"
  "$PY" - "$results" "$results.tmp" "$only" >"$results.merged" <<'PYEOF'
import json, sys
old = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
new = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
def key(r):
    return (r["figure"], r.get("backend", ""), r.get("subject", ""))
fresh = {key(r) for r in new if r.get("figure") != "meta"}
# An error record names the benchmark only (subject), not the backend that failed it: a re-run of
# that benchmark clears it (and records its own error if it fails again).
rerun = set(sys.argv[3].split(","))
out = [r for r in old
       if r.get("figure") == "meta" or (key(r) not in fresh and not (
           r.get("figure") == "error" and r.get("subject") in rerun))]
ran = sorted({r.get("backend", "") for r in new if r.get("figure") != "meta"} - {""})
for r in new:
    if r.get("figure") == "meta":
        r = dict(r, subject="update", only=sys.argv[3], backends=",".join(ran))
    out.append(r)
for r in out:
    print(json.dumps(r, separators=(",", ":")))
PYEOF
  mv "$results.merged" "$results.tmp"
  previous=(--previous "$out/results.previous.json")
elif [[ -s $results ]]; then
  mv "$results" "$out/results.previous.json"
  previous=(--previous "$out/results.previous.json")
elif [[ -s $out/results.previous.json ]]; then
  previous=(--previous "$out/results.previous.json")
fi
mv "$results.tmp" "$results"
"$PY" "$ROOT/bench/report.py" "$results" "${previous[@]}" >"$out/RESULTS.md"
echo "bench/run.sh: wrote $results and $out/RESULTS.md" >&2

#!/usr/bin/env bash
# scripts/faults.sh: the fault suite. For each scenario x backend it starts the servers it needs
# (scripts/servers.sh, in a temporary directory), runs three `baton run` nodes (node1..3) on one
# schedule whose job (tests/faults/record.py) appends its start, heartbeats and end to a shared
# file, applies a fault, heals it, waits (bounded) for the schedule to run again, stops
# everything and checks the record and the nodes' logs (tests/faults/check.py). Not in CI
# because of its length (about 20 minutes); its --smoke subset is (ctest: faults_smoke).
#
# usage: scripts/faults.sh [--smoke] [--only REGEX] [--no-netns] [--build-dir DIR] [--out DIR]
#                          [--jobs N] [--keep] [--list]
#
#   --smoke          the short subset (about 2.5 minutes): kill9 on sqlite and redis, sigstop on
#                    redis, clock on sqlite, netns on redis
#   --only REGEX     only the scenarios whose "fault:backend" matches REGEX (grep -E)
#   --no-netns       leave out the network-namespace scenarios (they fail when no namespace can
#                    be created, with the reason, unless this is given)
#   --build-dir DIR  build directory (default: build); baton is built there if needed
#   --out DIR        where faults.md and faults.json go (default: docs/ for a full run, else
#                    BUILD_DIR/faults)
#   --jobs N         parallel build jobs (default: 2)
#   --baton PATH     use this baton executable and build nothing (ctest's faults_smoke does)
#   --keep           keep the scratch directory (records, node logs, server logs)
#   --list           print the scenarios that would run and exit
#
# Exit status: 0 every check passed; 1 a check failed (each failure names scenario x backend and
# the rule: see tests/faults/check.py); 2 usage error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
FAULTS_DIR=$ROOT/tests/faults
PY=/usr/bin/python3

usage() {
  sed -n '9,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() {
  echo "faults.sh: $*" >&2
  exit 2
}
say() { echo "faults.sh: $*" >&2; }

smoke=0
only=""
netns=1
build_dir=build
out=""
jobs=2
keep=0
list=0
baton_exe=""
while (($#)); do
  case "$1" in
    --smoke) smoke=1; shift ;;
    --only) (($# >= 2)) || die "--only needs a regex"; only=$2; shift 2 ;;
    --only=*) only=${1#*=}; shift ;;
    --no-netns) netns=0; shift ;;
    --build-dir) (($# >= 2)) || die "--build-dir needs a value"; build_dir=$2; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    --out) (($# >= 2)) || die "--out needs a value"; out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --jobs | -j) (($# >= 2)) || die "--jobs needs a value"; jobs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --baton) (($# >= 2)) || die "--baton needs a path"; baton_exe=$2; shift 2 ;;
    --baton=*) baton_exe=${1#*=}; shift ;;
    --list) list=1; shift ;;
    -h | --help) usage ;;
    *) echo "faults.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs: expected a positive number, got '$jobs'"
command_line=scripts/faults.sh
((smoke)) && command_line+=" --smoke"
[[ -n "$only" ]] && command_line+=" --only '$only'"
((netns)) || command_line+=" --no-netns"

# ------------------------------------------------------------------------------- scenarios
# "fault:backend". HA topologies (zk-ensemble, redis-sentinel, postgres-ha) come from
# scripts/servers.sh functions that land with issue 17's other parts; until then those rows fail
# with "topology not available: function X missing".
ALL_SCENARIOS=(
  kill9:sqlite kill9:postgresql kill9:mysql kill9:redis kill9:zookeeper
  restart:postgresql restart:mysql restart:redis restart:zookeeper
  connkill:postgresql connkill:mysql connkill:redis
  sigstop:sqlite sigstop:postgresql sigstop:mysql sigstop:redis sigstop:zookeeper
  cpu:sqlite cpu:postgresql cpu:mysql cpu:redis cpu:zookeeper
  clock:sqlite clock:postgresql clock:mysql clock:redis clock:zookeeper
  netns:redis netns:zookeeper netns:postgresql
  zk-leader-kill:zk-ensemble zk-quorum-loss:zk-ensemble
  sentinel-failover:redis-sentinel sentinel-kill-master:redis-sentinel
  pg-promote:postgres-ha
)
SMOKE_SCENARIOS=(kill9:sqlite kill9:redis sigstop:redis clock:sqlite netns:redis)

if ((smoke)); then scenarios=("${SMOKE_SCENARIOS[@]}"); else scenarios=("${ALL_SCENARIOS[@]}"); fi
selected=()
for s in "${scenarios[@]}"; do
  [[ -n "$only" ]] && ! grep -qE -- "$only" <<<"$s" && continue
  ((netns)) || [[ $s != netns:* ]] || continue
  selected+=("$s")
done
((${#selected[@]})) || die "no scenario matches${only:+ --only '$only'}"
if ((list)); then
  printf '%s\n' "${selected[@]}"
  exit 0
fi
if [[ -z "$out" ]]; then
  if ((smoke == 0)) && [[ -z "$only" ]] && ((netns)); then out=$ROOT/docs; else out=$build_dir/faults; fi
fi

# Timings (seconds). The lease is short so that a scenario takes about 30 s.
TTL=2
TRANSITION=1
PERIOD=2
JOB_SECONDS=0.8
LEASE=$((TTL + TRANSITION))
MARGIN=4
TAKEOVER_BOUND=$((LEASE + PERIOD + MARGIN)) # kill -9 / SIGSTOP -> the new leader's first run
RECOVERY_BOUND=$((LEASE + PERIOD + MARGIN)) # healed -> a run
FIRE_MATCH=1.5                              # |true start - BATON_FIRE_TIME| (clock scenarios)
STEADY=5                                    # runs before the fault
AFTER=6                                     # observed after the fault healed and a run came
FIRST_RUN_TIMEOUT=40
NETNS_SECONDS=40
((smoke)) && NETNS_SECONDS=24

# ---------------------------------------------------------------------------------- build
# shellcheck source=deps.sh
source "$ROOT/scripts/deps.sh"
baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}" "${BATON_TEST_PACKAGES[@]}" || exit 1
if [[ -n "$baton_exe" ]]; then
  [[ -x "$baton_exe" ]] || die "--baton: '$baton_exe' is not an executable"
  BATON=$(cd "$(dirname "$baton_exe")" && pwd)/$(basename "$baton_exe")
else
  # shellcheck source=build.sh
  source "$ROOT/scripts/build.sh"
  baton_build faults.sh "$build_dir" "$jobs" "" baton >/dev/null || die "building baton failed"
  BATON=$(cd "$build_dir" && pwd)/daemon/baton
  [[ -x "$BATON" ]] || die "no $BATON after the build"
fi

# ------------------------------------------------------------------------ scratch, cleanup
# shellcheck source=servers.sh
source "$ROOT/scripts/servers.sh"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-faults.XXXXXX")
chmod a+rx "$scratch"
declare -A NODE_PID=()
EXTRA_PIDS=() # proxies, stress-ng
NETNS_MADE=() # "ns:hostveth"
started_servers=" "
suite_start=$SECONDS

# stop_pids SECONDS PID...: SIGCONT (a stopped process cannot act on SIGTERM) and SIGTERM each,
# SIGKILL whatever still runs after SECONDS, and reap them.
stop_pids() {
  local grace=$1 pid deadline
  shift
  for pid in "$@"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  done
  deadline=$((SECONDS + grace))
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      say "pid $pid ($(ps -o args= -p "$pid" 2>/dev/null | cut -c1-60)) did not stop within ${grace} s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

stop_nodes() { # every node still running: SIGTERM, SIGKILL after 15 s
  stop_pids 15 "${NODE_PID[@]}"
  NODE_PID=()
}

stop_extras() { # proxies, stress-ng: SIGTERM, SIGKILL after 5 s
  stop_pids 5 "${EXTRA_PIDS[@]}"
  EXTRA_PIDS=()
}

remove_netns() {
  local e
  for e in "${NETNS_MADE[@]}"; do
    ip netns del "${e%%:*}" 2>/dev/null || true
    ip link del "${e#*:}" 2>/dev/null || true
  done
  NETNS_MADE=()
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_nodes
  stop_extras
  remove_netns
  baton_stop_servers
  if ((keep)); then
    say "kept $scratch"
  else
    rm -rf "$scratch" || say "could not remove $scratch"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }
runs_after() { "$PY" "$FAULTS_DIR/check.py" runs "$1/record.jsonl" --after "$2" ${3:+--not-node "$3"}; }
leader_of() { "$PY" "$FAULTS_DIR/check.py" leader "$1/record.jsonl"; }

# wait_run DIR AFTER TIMEOUT [NOT_NODE]: waits until a run started after AFTER (not on NOT_NODE).
wait_run() {
  local dir=$1 after=$2 timeout=$3 not=${4:-} deadline
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    (($(runs_after "$dir" "$after" "$not") > 0)) && return 0
    sleep 0.2
  done
  return 1
}

# ------------------------------------------------------------------------------- servers
# ensure_server BACKEND: starts the single server BACKEND needs, once per suite run.
ensure_server() {
  local b=$1
  [[ "$started_servers" == *" $b "* ]] && return 0
  case "$b" in
    sqlite) ;;
    postgresql) baton_start_postgres "$scratch" || return 1 ;;
    mysql) baton_start_mariadb "$scratch" || return 1 ;;
    redis) baton_start_redis "$scratch" || return 1 ;;
    zookeeper) baton_start_zookeeper "$scratch" || return 1 ;;
    *) return 1 ;;
  esac
  started_servers+="$b "
}

server_name() { # backend -> baton_server_ctl name
  case "$1" in postgresql) echo postgres ;; mysql) echo mariadb ;; *) echo "$1" ;; esac
}

# backend_json BACKEND DIR [HOST PORT]: the "backend" object (HOST:PORT: through a proxy).
backend_json() {
  local b=$1 dir=$2 host=${3:-127.0.0.1} port=${4:-}
  case "$b" in
    sqlite) printf '{"type": "sqlite", "path": "%s/baton.db"}' "$dir" ;;
    postgresql)
      printf '{"type": "postgresql", "connection": "dbname=baton_test user=postgres host=%s port=%s connect_timeout=5"%s}' \
        "$host" "${port:-$BATON_TEST_POSTGRES_PORT}" "${3:+, \"statement_timeout\": \"5s\"}" ;;
    mysql)
      printf '{"type": "mysql", "connection": "db=baton_test user=baton password=baton host=%s port=%s"}' \
        "$host" "${port:-$BATON_TEST_MYSQL_PORT}" ;;
    redis)
      printf '{"type": "redis", "url": "redis://%s:%s"%s}' "$host" "${port:-$BATON_TEST_REDIS_PORT}" \
        "${3:+, \"command_timeout\": \"3s\", \"connect_timeout\": \"3s\"}" ;;
    zookeeper)
      # Through the proxy: the longest session the test server allows (10 s, tickTime 500 ms).
      local session=3s
      [[ -n "$port" ]] && session=10s
      printf '{"type": "zookeeper", "hosts": "%s:%s", "session_timeout": "%s"}' "$host" \
        "${port:-$BATON_TEST_ZOOKEEPER_PORT}" "$session" ;;
  esac
}

# write_config DIR NODE BACKEND_JSON LEASE_JSON TRIGGER_JSON: DIR/NODE.json
write_config() {
  local dir=$1 node=$2 backend=$3 lease=$4 trigger=$5 lease_line=""
  [[ -n "$lease" ]] && lease_line="\"lease\": $lease,"
  cat >"$dir/$node.json" <<EOF
{
  "backend": $backend,
  $lease_line
  "log_format": "json",
  "stop_timeout": "10s",
  "history": 0,
  "schedules": [
    { "name": "$SCHEDULE", $trigger,
      "command": ["/usr/bin/env", "-u", "LD_PRELOAD", "-u", "FAKETIME", "$PY", "-S",
                  "$FAULTS_DIR/record.py", "$dir/record.jsonl", "$node", "$JOB_SECONDS"] }
  ]
}
EOF
}

# start_node DIR NODE [PREFIX...]: runs `baton run` for NODE (PREFIX: env/ip netns exec).
start_node() {
  local dir=$1 node=$2
  shift 2
  setsid "$@" "$BATON" run --config "$dir/$node.json" </dev/null >"$dir/$node.out" 2>"$dir/$node.log" &
  NODE_PID[$node]=$!
}

# ------------------------------------------------------------------------- network namespace
NETNS_REASON=""
# make_netns IDX: sets NS, NS_HOST_IP, NS_IP; a veth pair with private addresses and the loss
# rule inside. Returns 1 with NETNS_REASON set when it cannot.
make_netns() {
  local idx=$1 hv nv out
  NS="baton-f$$-$idx"
  hv="bf$$h$idx"
  nv="bf$$n$idx"
  NS_HOST_IP="10.213.$((idx % 250)).1"
  NS_IP="10.213.$((idx % 250)).2"
  out=$(ip netns add "$NS" 2>&1) || {
    NETNS_REASON="ip netns add $NS: $out"
    return 1
  }
  NETNS_MADE+=("$NS:$hv")
  out=$({ ip link add "$hv" type veth peer name "$nv" &&
    ip link set "$nv" netns "$NS" &&
    ip addr add "$NS_HOST_IP/24" dev "$hv" && ip link set "$hv" up &&
    ip netns exec "$NS" ip addr add "$NS_IP/24" dev "$nv" &&
    ip netns exec "$NS" ip link set "$nv" up &&
    ip netns exec "$NS" ip link set lo up; } 2>&1) || {
    NETNS_REASON="veth pair in $NS: $out"
    return 1
  }
  out=$(ip netns exec "$NS" nft -f - 2>&1 <<EOF
table inet baton_loss {
  chain in { type filter hook input priority 0; policy accept; iifname "$nv" numgen random mod 100 < 10 drop; }
  chain out { type filter hook output priority 0; policy accept; oifname "$nv" numgen random mod 100 < 10 drop; }
}
EOF
  ) || {
    NETNS_REASON="nftables loss rule in $NS: $out"
    return 1
  }
}

# start_proxy DIR TARGET_PORT: a delay proxy on NS_HOST_IP; sets PROXY_PORT.
start_proxy() {
  local dir=$1 target=$2
  _baton_pick_port || return 1
  PROXY_PORT=$_BATON_PORT
  setsid "$PY" "$FAULTS_DIR/delay_proxy.py" "$NS_HOST_IP" "$PROXY_PORT" 127.0.0.1 "$target" 200 \
    </dev/null >"$dir/proxy.log" 2>&1 &
  EXTRA_PIDS+=($!)
  for _ in $(seq 1 100); do
    grep -q delay_proxy "$dir/proxy.log" 2>/dev/null && return 0
    sleep 0.1
  done
  say "delay proxy did not start: $(cat "$dir/proxy.log")"
  return 1
}

target_port() {
  case "$1" in
    postgresql) echo "$BATON_TEST_POSTGRES_PORT" ;;
    redis) echo "$BATON_TEST_REDIS_PORT" ;;
    zookeeper) echo "$BATON_TEST_ZOOKEEPER_PORT" ;;
  esac
}

# kill_connections BACKEND: the server ends every client connection.
kill_connections() {
  case "$1" in
    postgresql)
      "$(_baton_pg_bin)/psql" -X -q -h 127.0.0.1 -p "$BATON_TEST_POSTGRES_PORT" -U postgres -d postgres \
        -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'baton_test' AND pid <> pg_backend_pid()" >/dev/null ;;
    mysql)
      local ids
      ids=$(_baton_mariadb_client "$BATON_TEST_MYSQL_DIR" -N -B -e \
        "SELECT id FROM information_schema.processlist WHERE user = 'baton'") || return 1
      for id in $ids; do _baton_mariadb_client "$BATON_TEST_MYSQL_DIR" -e "KILL $id" 2>/dev/null || true; done ;;
    redis) redis-cli -h 127.0.0.1 -p "$BATON_TEST_REDIS_PORT" CLIENT KILL TYPE normal >/dev/null &&
      redis-cli -h 127.0.0.1 -p "$BATON_TEST_REDIS_PORT" CLIENT KILL TYPE pubsub >/dev/null ;;
  esac
}

# ------------------------------------------------------------------------------- scenario
results=$scratch/results.jsonl
: >"$results"
failures=()
scenario_index=0

# fail_row SCENARIO BACKEND RULE DETAIL: a result line for a scenario that could not run.
fail_row() {
  "$PY" - "$1" "$2" "$3" "$4" >>"$results" <<'PY'
import json, sys
print(json.dumps({"scenario": sys.argv[1], "backend": sys.argv[2], "runs": None, "overlaps": None,
                  "fenced_overlaps": None, "fire_twice": None, "max_takeover_s": None,
                  "recovery_s": None, "lease_losses": None, "step_downs": None,
                  "stalls_logged": None, "worst_fire_offset_s": None, "result": "fail",
                  "violations": [{"rule": sys.argv[3], "detail": sys.argv[4]}]}))
PY
  failures+=("$1 x $2: $3: $4")
  say "FAIL $1 x $2: $3: $4"
}

run_scenario() {
  local fault=$1 backend=$2 dir node leader t_fault="" healed="" killed=() stall="null"
  local takeover_bound=null recovery_bound=$RECOVERY_BOUND fire_match=null strict=false
  local lease="{\"ttl\": \"${TTL}s\", \"transition\": \"${TRANSITION}s\"}"
  local trigger="\"every\": \"${PERIOD}s\"" period=$PERIOD prefix=()
  local -A node_prefix=()
  scenario_index=$((scenario_index + 1))
  dir=$scratch/$fault-$backend
  mkdir -p "$dir"
  chmod a+rwx "$dir"
  SCHEDULE="f-$fault-$scenario_index"
  say "---- $fault x $backend ($(((SECONDS - suite_start) / 60)) min into the suite)"

  case "$backend" in
    zk-ensemble | redis-sentinel | postgres-ha)
      local fn
      case "$backend" in
        zk-ensemble) fn=baton_start_zookeeper_ensemble ;;
        redis-sentinel) fn=baton_start_redis_sentinel ;;
        postgres-ha) fn=baton_start_postgres_ha ;;
      esac
      if ! declare -F "$fn" >/dev/null; then
        fail_row "$fault" "$backend" topology "topology not available: function $fn missing (scripts/servers.sh)"
        return
      fi
      run_ha_scenario "$fault" "$backend" "$dir"
      return
      ;;
  esac

  ensure_server "$backend" || {
    fail_row "$fault" "$backend" server "the $backend server did not start"
    return
  }
  local backend_cfg
  backend_cfg=$(backend_json "$backend" "$dir")
  # ZooKeeper's lease comes from its session timeout (3 s: ttl 1 s, transition 2 s).
  [[ $backend == zookeeper ]] && lease=""

  case "$fault" in
    clock)
      trigger="\"cron\": \"*/${PERIOD} * * * * *\", \"misfire\": \"skip\""
      fire_match=$FIRE_MATCH
      local faketime=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
      # ASan (a sanitizer build's baton) refuses to start when a preloaded library comes first.
      local asan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
      node_prefix[node1]="env LD_PRELOAD=$faketime $asan FAKETIME=+1h FAKETIME_DONT_FAKE_MONOTONIC=1"
      node_prefix[node2]="env LD_PRELOAD=$faketime $asan FAKETIME=-2m FAKETIME_DONT_FAKE_MONOTONIC=1"
      ;;
    netns)
      strict=true
      make_netns "$scenario_index" || {
        fail_row "$fault" "$backend" netns "cannot create a network namespace: $NETNS_REASON (run with --no-netns to leave these scenarios out)"
        return
      }
      start_proxy "$dir" "$(target_port "$backend")" || {
        fail_row "$fault" "$backend" netns "the delay proxy did not start"
        return
      }
      backend_cfg=$(backend_json "$backend" "$dir" "$NS_HOST_IP" "$PROXY_PORT")
      # 200 ms each way and 10% loss: a lease long enough for retransmissions.
      # PostgreSQL's first requests (connect, check and create the tables) take several round
      # trips each: statement_timeout 5 s and a longer lease.
      case "$backend" in
        redis) lease='{"ttl": "6s", "transition": "5s"}' ;;
        postgresql) lease='{"ttl": "8s", "transition": "8s"}' ;;
      esac
      recovery_bound=25
      for node in node1 node2 node3; do node_prefix[$node]="ip netns exec $NS"; done
      ;;
  esac

  for node in node1 node2 node3; do
    write_config "$dir" "$node" "$backend_cfg" "$lease" "$trigger"
  done
  local t_start
  t_start=$(now)
  for node in node1 node2 node3; do
    # shellcheck disable=SC2086
    start_node "$dir" "$node" ${node_prefix[$node]:-}
  done
  if ! wait_run "$dir" "$t_start" "$FIRST_RUN_TIMEOUT"; then
    say "no run within ${FIRST_RUN_TIMEOUT}s of the start"
  fi
  [[ $fault == netns ]] || sleep "$STEADY"
  # Every node must be running before the fault (a node that could not start, e.g. under a
  # preloaded library, would leave the row testing fewer nodes than it claims).
  local dead=""
  for node in node1 node2 node3; do kill -0 "${NODE_PID[$node]}" 2>/dev/null || dead+=" $node"; done
  if [[ -n "$dead" ]]; then
    stop_nodes
    stop_extras
    remove_netns
    fail_row "$fault" "$backend" nodes "node(s)$dead exited before the fault (their logs: $dir)"
    return
  fi
  leader=$(leader_of "$dir")

  case "$fault" in
    kill9 | clock)
      takeover_bound=$TAKEOVER_BOUND
      t_fault=$(now)
      if [[ -n "$leader" ]]; then
        kill -KILL "${NODE_PID[$leader]}" 2>/dev/null || true
        wait "${NODE_PID[$leader]}" 2>/dev/null || true
        unset "NODE_PID[$leader]"
        killed+=("$leader")
      fi
      healed=$t_fault
      wait_run "$dir" "$t_fault" $((takeover_bound + 15)) "$leader" || say "no takeover"
      ;;
    restart)
      recovery_bound=$((RECOVERY_BOUND + 3))
      t_fault=$(now)
      baton_server_ctl restart "$(server_name "$backend")" || say "the $backend server did not restart"
      healed=$(now)
      wait_run "$dir" "$healed" $((recovery_bound + 15)) || say "no run after the restart"
      ;;
    connkill)
      t_fault=$(now)
      kill_connections "$backend" || say "killing the $backend connections failed"
      healed=$(now)
      wait_run "$dir" "$healed" $((recovery_bound + 15)) || say "no run after the connections were killed"
      ;;
    sigstop)
      takeover_bound=$TAKEOVER_BOUND
      t_fault=$(now)
      if [[ -n "$leader" ]]; then
        kill -STOP "${NODE_PID[$leader]}"
        sleep $((2 * LEASE)) # the fault's length, not a wait for a condition
        kill -CONT "${NODE_PID[$leader]}"
        stall="{\"node\": \"$leader\", \"min_ms\": $((2 * LEASE * 1000 - 1000))}"
      fi
      healed=$(now)
      wait_run "$dir" "$healed" $((recovery_bound + 15)) || say "no run after SIGCONT"
      ;;
    cpu)
      t_fault=$(now)
      if [[ -n "$leader" ]]; then
        local all_cpus
        all_cpus="0-$(($(nproc) - 1))"
        taskset -a -p -c 0 "${NODE_PID[$leader]}" >/dev/null
        taskset -c 0 stress-ng --cpu 4 --timeout 10s --quiet >"$dir/stress.log" 2>&1 || say "stress-ng failed: $(tail -n 3 "$dir/stress.log")"
        taskset -a -p -c "$all_cpus" "${NODE_PID[$leader]}" >/dev/null 2>&1 || true
      fi
      healed=$(now)
      wait_run "$dir" "$healed" $((recovery_bound + 15)) || say "no run after the CPU load"
      ;;
    netns)
      t_fault=$t_start
      healed=$t_start
      sleep "$NETNS_SECONDS" # the observation under delay and loss
      ;;
  esac
  [[ $fault == netns ]] || sleep "$AFTER"
  local t_end
  t_end=$(now)
  stop_nodes
  stop_extras
  remove_netns
  judge "$fault" "$backend" "$dir" "$t_fault" "$healed" "$t_end" "$takeover_bound" \
    "$recovery_bound" "$fire_match" "$strict" "$stall" "$period" "${leader:-}" "${killed[*]:-}"
}

# judge ...: writes DIR/meta.json and runs the checker on it.
judge() {
  local fault=$1 backend=$2 dir=$3 t_fault=$4 healed=$5 t_end=$6 tb=$7 rb=$8 fm=$9 strict=${10}
  local stall=${11} period=${12} leader=${13} killed=${14} line
  "$PY" - "$dir/meta.json" <<PY
import json, sys
killed = "$killed".split()
meta = {"scenario": "$fault", "backend": "$backend", "schedule": "$SCHEDULE",
        "record": "record.jsonl",
        "logs": {n: n + ".log" for n in ("node1", "node2", "node3")},
        "period": $period,
        "fault": {"kind": "$fault", "node": "$leader" or None,
                  "t": float("${t_fault:-0}") or None, "healed": float("${healed:-0}") or None},
        "end": $t_end,
        "bounds": {"takeover": json.loads("$tb"), "recovery": json.loads("$rb"),
                   "fire_match": json.loads("$fm")},
        "strict": $( [[ $strict == true ]] && echo True || echo False ),
        "stall": json.loads('''$stall'''),
        "skew": {"node1": 3600.0, "node2": -120.0} if "$fault" == "clock" else {},
        "killed": killed}
json.dump(meta, open(sys.argv[1], "w"), indent=1)
PY
  if line=$("$PY" "$FAULTS_DIR/check.py" check "$dir/meta.json"); then
    say "pass $fault x $backend: $line"
  else
    say "FAIL $fault x $backend: $line"
    local rules
    rules=$("$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); print("; ".join(v["rule"]+": "+v["detail"] for v in r["violations"]))' "$line" 2>/dev/null || echo "checker error")
    failures+=("$fault x $backend: $rules")
  fi
  [[ -n "$line" ]] && echo "$line" >>"$results"
  return 0
}

# --------------------------------------------------------------------------- HA topologies
# Written against the names of issue 17's topology parts (scripts/servers.sh on main after
# they land): baton_start_zookeeper_ensemble DIR -> BATON_TEST_ZOOKEEPER_ENSEMBLE, members
# zookeeper-1..3, baton_zookeeper_ensemble_leader; baton_start_redis_sentinel DIR ->
# BATON_TEST_REDIS_SENTINELS, BATON_TEST_REDIS_SENTINEL_MASTER, members redis-primary,
# redis-replica, sentinel-1..3, baton_redis_sentinel_master; baton_start_postgres_ha DIR ->
# BATON_TEST_POSTGRES_HA, members postgres-primary, postgres-standby, baton_postgres_ha_promote.
ha_started=" "
run_ha_scenario() {
  local fault=$1 topo=$2 dir=$3 node backend_cfg lease="" t_start t_fault healed leader
  local takeover_bound=null recovery_bound=$RECOVERY_BOUND fn
  if [[ "$ha_started" != *" $topo "* ]]; then
    case "$topo" in
      zk-ensemble) baton_start_zookeeper_ensemble "$scratch" ;;
      redis-sentinel) baton_start_redis_sentinel "$scratch" ;;
      postgres-ha) baton_start_postgres_ha "$scratch" ;;
    esac || {
      fail_row "$fault" "$topo" server "the $topo topology did not start"
      return
    }
    ha_started+="$topo "
  fi
  for fn in baton_zookeeper_ensemble_leader baton_redis_sentinel_master baton_postgres_ha_promote; do
    case "$topo:$fn" in
      zk-ensemble:baton_zookeeper_ensemble_leader | redis-sentinel:baton_redis_sentinel_master | \
        postgres-ha:baton_postgres_ha_promote)
        declare -F "$fn" >/dev/null || {
          fail_row "$fault" "$topo" topology "topology not available: function $fn missing (scripts/servers.sh)"
          return
        } ;;
    esac
  done
  case "$topo" in
    zk-ensemble)
      backend_cfg="{\"type\": \"zookeeper\", \"hosts\": \"$BATON_TEST_ZOOKEEPER_ENSEMBLE\", \"session_timeout\": \"4s\"}" ;;
    redis-sentinel)
      backend_cfg="{\"type\": \"redis\", \"sentinels\": \"$BATON_TEST_REDIS_SENTINELS\", \"master\": \"$BATON_TEST_REDIS_SENTINEL_MASTER\"}"
      lease="{\"ttl\": \"${TTL}s\", \"transition\": \"${TRANSITION}s\"}" ;;
    postgres-ha)
      backend_cfg="{\"type\": \"postgresql\", \"connection\": \"$BATON_TEST_POSTGRES_HA connect_timeout=2\"}"
      lease="{\"ttl\": \"${TTL}s\", \"transition\": \"${TRANSITION}s\"}" ;;
  esac
  for node in node1 node2 node3; do
    write_config "$dir" "$node" "$backend_cfg" "$lease" "\"every\": \"${PERIOD}s\""
  done
  t_start=$(now)
  for node in node1 node2 node3; do start_node "$dir" "$node"; done
  wait_run "$dir" "$t_start" "$FIRST_RUN_TIMEOUT" || say "no run within ${FIRST_RUN_TIMEOUT}s of the start"
  sleep "$STEADY"
  leader=$(leader_of "$dir")
  t_fault=$(now)
  case "$fault" in
    zk-leader-kill)
      baton_server_ctl kill "zookeeper-$(baton_zookeeper_ensemble_leader)" || say "killing the ZooKeeper leader failed"
      healed=$(now)
      ;;
    zk-quorum-loss)
      local l others=()
      l=$(baton_zookeeper_ensemble_leader)
      for i in 1 2 3; do [[ $i == "$l" ]] || others+=("$i"); done
      baton_server_ctl kill "zookeeper-$l" || true
      baton_server_ctl kill "zookeeper-${others[0]}" || true
      sleep 8 # longer than the 4 s session timeout: the fault's length
      # Both at once: a member counts as started when it serves, which needs a quorum (one
      # started alone beside the survivor was seen to take over 90 s here).
      local p1 p2
      baton_server_ctl start "zookeeper-$l" &
      p1=$!
      baton_server_ctl start "zookeeper-${others[0]}" &
      p2=$!
      wait "$p1" || say "zookeeper-$l did not come back"
      wait "$p2" || say "zookeeper-${others[0]} did not come back"
      healed=$(now)
      recovery_bound=$((4 + PERIOD + MARGIN + 4))
      ;;
    sentinel-failover)
      local s1
      s1=${BATON_TEST_REDIS_SENTINELS%%,*}
      redis-cli -h "${s1%:*}" -p "${s1##*:}" SENTINEL FAILOVER "$BATON_TEST_REDIS_SENTINEL_MASTER" >/dev/null || say "SENTINEL FAILOVER failed"
      healed=$t_fault
      recovery_bound=20
      ;;
    sentinel-kill-master)
      local master
      master=$(baton_redis_sentinel_master)
      # The process listening on the master's port (redis-primary, or redis-replica after an
      # earlier failover), by its socket: no member name needed.
      local mpid
      mpid=$(ss -Htlnp "sport = :${master##*:}" | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2)
      if [[ -n "$mpid" ]]; then kill -KILL "$mpid"; else say "no process listens on the master $master"; fi
      healed=$t_fault
      recovery_bound=30
      ;;
    pg-promote)
      baton_server_ctl stop postgres-primary || say "stopping the primary failed"
      baton_postgres_ha_promote || say "promoting the standby failed"
      healed=$(now)
      recovery_bound=20
      ;;
  esac
  wait_run "$dir" "$healed" $((recovery_bound + 15)) || say "no run after the fault"
  sleep "$AFTER"
  local t_end
  t_end=$(now)
  stop_nodes
  judge "$fault" "$topo" "$dir" "$t_fault" "$healed" "$t_end" "$takeover_bound" \
    "$recovery_bound" null false null "$PERIOD" "$leader" ""
}

# ------------------------------------------------------------------------------------ run
say "${#selected[@]} scenario(s): ${selected[*]}; scratch $scratch"
for s in "${selected[@]}"; do
  run_scenario "${s%%:*}" "${s#*:}"
done
wall=$((SECONDS - suite_start))
mkdir -p "$out"
"$PY" "$FAULTS_DIR/report.py" "$results" "$out" "$command_line" "$wall"
say "results: $out/faults.md, $out/faults.json ($wall s)"
if ((${#failures[@]})); then
  say "FAILED: ${#failures[@]} of ${#selected[@]} scenario x backend row(s):"
  printf '  %s\n' "${failures[@]}" >&2
  exit 1
fi
say "all ${#selected[@]} scenario x backend row(s) passed"

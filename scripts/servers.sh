# shellcheck shell=bash
# Test servers on loopback: PostgreSQL, MariaDB, Redis (plain, with auth, and a Sentinel topology)
# and ZooKeeper.
# Source this file, then:
#
#   baton_start_postgres DIR     baton_start_mariadb DIR     baton_start_redis DIR
#   baton_start_redis_auth DIR   baton_start_zookeeper DIR   baton_start_all DIR
#   baton_start_redis_sentinel DIR   (one master, one replica, three sentinels; see below)
#   baton_redis_sentinel_master  (prints host:port of the master the sentinels name now)
#   baton_start_zookeeper_ensemble DIR   (three QuorumPeerMain members, started in parallel)
#   baton_zookeeper_ensemble_leader      (prints 1..3: the member whose srvr says Mode: leader)
#   baton_stop_servers           (stops everything started from this shell; idempotent)
#   baton_server_ctl ACTION SERVER   (what scripts/server-ctl.sh runs)
#   baton_restart_postgres
#   baton_start_postgres_ha DIR      a PostgreSQL primary + streaming standby (DIR/postgres-ha)
#   baton_postgres_ha_promote        pg_ctl promote of the standby; waits until it takes writes
#   baton_postgres_ha_reset          a fresh primary + standby on the same ports (after a test)
#
# DIR is a scratch directory owned by the caller (e.g. from mktemp -d); each server gets a
# subdirectory DIR/<server> with its config, data, pid file and log. Every server listens on
# 127.0.0.1 on a free port and runs as a plain background process in its own session, with
# stdin/stdout/stderr redirected (to /dev/null and its log) and no other inherited descriptor.
#
# Each start function waits for readiness with a deadline, prints the log tail and returns 1
# when the server does not come up, and exports:
#
#   BATON_TEST_POSTGRES          "dbname=baton_test user=postgres host=127.0.0.1 port=PORT"
#   BATON_TEST_POSTGRES_PORT, BATON_TEST_POSTGRES_DATADIR, BATON_TEST_POSTGRES_DIR
#   BATON_TEST_POSTGRES_HA       "dbname=baton_test user=postgres host=127.0.0.1,127.0.0.1
#                                 port=P1,P2 target_session_attrs=read-write"  (libpq multi-host:
#                                 the first member that takes writes; P1 primary, P2 standby)
#   BATON_TEST_POSTGRES_HA_DIR, BATON_TEST_POSTGRES_HA_PRIMARY_PORT, ..._STANDBY_PORT
#                                (primary: wal_level=replica, replication trusted on 127.0.0.1;
#                                 standby: pg_basebackup -R, hot_standby=on, asynchronous)
#   BATON_TEST_MYSQL             "db=baton_test user=baton password=baton host=127.0.0.1 port=PORT"
#   BATON_TEST_MYSQL_PORT, BATON_TEST_MYSQL_SOCKET, BATON_TEST_MYSQL_DATADIR, BATON_TEST_MYSQL_DIR
#   BATON_TEST_REDIS_URL         "redis://127.0.0.1:PORT"
#   BATON_TEST_REDIS_PORT, BATON_TEST_REDIS_DIR
#   BATON_TEST_REDIS_AUTH_URL    "redis://:secret@127.0.0.1:PORT2"   (requirepass secret)
#   BATON_TEST_REDIS_ACL_URL     "redis://baton:secret2@127.0.0.1:PORT2"   (ACL user baton)
#   BATON_TEST_REDIS_AUTH_PORT, BATON_TEST_REDIS_AUTH_DIR
#   BATON_TEST_REDIS_SENTINELS   "127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3"
#   BATON_TEST_REDIS_SENTINEL_MASTER  "mymaster"
#   BATON_TEST_REDIS_SENTINEL_DIR     DIR/redis-sentinel (members in redis-primary/,
#                                redis-replica/, sentinel-1/ .. sentinel-3/)
#   BATON_TEST_ZOOKEEPER         "127.0.0.1:PORT"
#   BATON_TEST_ZOOKEEPER_PORT, BATON_TEST_ZOOKEEPER_DATADIR, BATON_TEST_ZOOKEEPER_DIR
#   BATON_TEST_ZOOKEEPER_ENSEMBLE "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"  (members 1, 2, 3)
#   BATON_TEST_ZOOKEEPER_ENSEMBLE_DIR   (members in DIR/zk1..zk3: zoo.cfg, data/myid, logs)
#
# The ensemble: tickTime 500 ms (sessions of 1 s to 10 s), admin server off, 4lw ruok, srvr,
# stat, cons, mntr; each member has its own client, peer and election port. A member counts as
# ready when it serves (srvr: Mode leader or follower), so starting one member of a stopped
# ensemble waits until a quorum forms. Stop, kill (SIGKILL) or start one member with
# `baton_server_ctl ACTION zookeeper-N` (N = 1..3, the position in BATON_TEST_ZOOKEEPER_ENSEMBLE).
#
# Users whose passwords hold the characters connection strings must quote or encode (for the
# no-secret-is-printed tests, tests/integration/daemon_test.cpp, daemon_secrets), each allowed
# only with its password:
#   PostgreSQL  baton_secret / Pg'Zq9 \x@:/     (superuser; scram-sha-256 on 127.0.0.1)
#   MariaDB     baton_secret / My'Zq8 \x@:/     (ALL on baton_test%)
#   Redis auth  baton_secret / Rd/Zq6@x:y       (ACL user, all commands and keys)
#
# scripts/server-ctl.sh ACTION SERVER (ACTION: stop|start|restart|kill|status; SERVER:
# postgres|postgres-primary|postgres-standby|mariadb|redis|redis-auth|zookeeper, and the Sentinel topology's members by their
# original roles: redis-primary|redis-replica|sentinel-1|sentinel-2|sentinel-3; the ZooKeeper
# ensemble's members zookeeper-1|zookeeper-2|zookeeper-3) finds a server
# through BATON_TEST_<X>_DIR, so it works from any process that inherited these variables (e.g. a
# test run by ctest). `status redis-sentinel` is true when the topology is healthy: all sentinels
# name one master, it has one replica online, each sentinel knows the replica and the two others.
#
# Redis Sentinel: redis-primary starts as master, redis-replica with `replicaof` it, and three
# sentinels (`redis-server sentinel.conf --sentinel`, each with its own file, which sentinels
# rewrite) monitor it as "mymaster" (quorum 2, down-after-milliseconds 1000, failover-timeout
# 4000). After a failover the roles are swapped: baton_redis_sentinel_master says which is master.
# A killed master restarted with `start` comes back empty (no persistence) and the sentinels make
# it a replica of the new master.
#
# postgres-primary and postgres-standby are the members as started (after a promotion the standby
# is the primary). scripts/server-ctl.sh also takes the single words postgres-ha-promote and
# postgres-ha-reset for the two functions above.

BATON_SCRIPTS_DIR=${BATON_SCRIPTS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}

# Deadlines (seconds) for a server to become ready and to stop.
: "${BATON_START_TIMEOUT:=60}"
: "${BATON_ZOOKEEPER_START_TIMEOUT:=90}"
: "${BATON_STOP_TIMEOUT:=30}"

# Servers started from this shell, as "kind:dir", in start order.
_BATON_SERVERS=()
# Ports handed out by baton_free_port in this shell.
_BATON_PORTS_USED=" "

_baton_msg() { echo "baton-servers: $*" >&2; }

_baton_now() { date +%s.%N; }
_baton_elapsed() { awk -v a="$1" -v b="$(_baton_now)" 'BEGIN { printf "%.1f", b - a }'; }

_baton_pg_bin() {
  local dir
  if [[ -n "${BATON_PG_BIN:-}" ]]; then
    echo "$BATON_PG_BIN"
    return
  fi
  # shellcheck disable=SC2012
  for dir in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    if [[ -x "$dir/postgres" ]]; then
      echo "$dir"
      return
    fi
  done
  _baton_msg "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (package postgresql)"
  return 1
}

_baton_python() {
  if [[ -x /usr/bin/python3 ]]; then echo /usr/bin/python3; else command -v python3; fi
}

# _baton_pick_port: sets _BATON_PORT to a TCP port on 127.0.0.1 that is free now and was not
# handed out before in this shell. Picks from 20000-32767, below Linux's ephemeral range
# (32768-60999), so an outgoing connection does not take it between the pick and the bind.
_baton_pick_port() {
  local python port
  python=$(_baton_python) || true
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 12768))
    [[ "$_BATON_PORTS_USED" == *" $port "* ]] && continue
    if [[ -n "$python" ]]; then
      "$python" - "$port" <<'PY' 2>/dev/null || continue
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.close()
PY
    else
      # No Python: a port nobody listens on refuses the connection.
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
    fi
    _BATON_PORTS_USED+="$port "
    _BATON_PORT=$port
    return 0
  done
  _baton_msg "no free TCP port found on 127.0.0.1"
  return 1
}

# baton_free_port: prints a free port (see _baton_pick_port; call it in the current shell, not
# in $(...), when several ports are needed: the shell remembers those it handed out).
baton_free_port() { _baton_pick_port && echo "$_BATON_PORT"; }

# _baton_alive PID: true while PID runs. A zombie is dead, unless only its main thread has
# exited while other threads still run (a JVM shutting down looks like that).
_baton_alive() {
  local pid=$1 stat tasks
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat:0:1}" != Z ]] && return 0
  tasks=(/proc/"$pid"/task/*)
  ((${#tasks[@]} > 1))
}

_baton_read_pid() { [[ -s "$1" ]] && head -n1 "$1" 2>/dev/null | tr -dc 0-9; }

_baton_tail() {
  local file
  for file in "$@"; do
    if [[ -s "$file" ]]; then
      echo "----- last lines of $file -----" >&2
      tail -n 40 "$file" >&2
      echo "-----" >&2
    fi
  done
}

# _baton_spawn DIR LOG CMD...: starts CMD in a new session, detached from the caller: stdin from
# /dev/null, stdout+stderr appended to LOG, every other inherited descriptor closed (a test's
# sockets must not live on in a server it restarts). DIR/server.pid gets the process id (CMD is
# exec'd, so it is the server's own pid and process group).
_baton_spawn() {
  local dir=$1 log=$2
  shift 2
  rm -f "$dir/server.pid"
  (
    cd "$dir" || exit 1
    # shellcheck disable=SC2016
    setsid -f bash -c '
      for fd in /proc/$$/fd/*; do
        fd=${fd##*/}
        if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null; fi
      done
      echo $$ >"$0"
      exec "$@"' "$dir/server.pid" "$@" </dev/null >>"$log" 2>&1
  )
}

# _baton_signal_stop DIR SIGNAL: sends SIGNAL to the server in DIR and waits until it exits;
# after BATON_STOP_TIMEOUT seconds kills its process group. True when nothing is left running.
_baton_signal_stop() {
  local dir=$1 signal=$2 pid deadline
  pid=$(_baton_read_pid "$dir/server.pid") || true
  if [[ -z "$pid" ]] || ! _baton_alive "$pid"; then
    rm -f "$dir/server.pid"
    return 0
  fi
  kill -s "$signal" "$pid" 2>/dev/null || true
  deadline=$((SECONDS + BATON_STOP_TIMEOUT))
  while _baton_alive "$pid"; do
    if ((SECONDS >= deadline)); then
      _baton_msg "$(basename "$dir") (pid $pid) did not stop within ${BATON_STOP_TIMEOUT}s: SIGKILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
      break
    fi
    sleep 0.05
  done
  rm -f "$dir/server.pid"
  ! _baton_alive "$pid"
}

_baton_register() {
  local entry="$1:$2" e
  for e in "${_BATON_SERVERS[@]}"; do
    [[ "$e" == "$entry" ]] && return 0
  done
  _BATON_SERVERS+=("$entry")
}

_baton_prepare_dir() { # DIR NAME OWNER -> prints DIR/NAME
  local base=$1 name=$2 owner=$3 dir
  if [[ -z "$base" || ! -d "$base" ]]; then
    _baton_msg "start $name: directory '$base' does not exist"
    return 1
  fi
  base=$(cd "$base" && pwd)
  dir="$base/$name"
  if [[ -e "$dir" ]]; then
    _baton_msg "start $name: $dir already exists (one $name per DIR)"
    return 1
  fi
  mkdir -p "$dir"
  if [[ -n "$owner" && $(id -u) -eq 0 ]]; then
    # The server's user must be able to reach its directory through DIR (mktemp -d is 0700).
    chmod a+x "$base"
    chown "$owner:" "$dir"
  fi
  echo "$dir"
}

# _baton_wait_ready KIND DIR TIMEOUT: polls _baton_<kind>_ready until it succeeds, the server
# dies, or the deadline passes. Returns 0 ready, 1 failed, 2 failed because the port was taken.
_baton_wait_ready() {
  local kind=$1 dir=$2 timeout=$3 start deadline pid
  start=$(_baton_now)
  deadline=$((SECONDS + timeout))
  while true; do
    pid=$(_baton_read_pid "$dir/server.pid") || true
    if [[ -n "$pid" ]] && ! _baton_alive "$pid"; then
      _baton_msg "$kind exited during startup (pid $pid, after $(_baton_elapsed "$start")s)"
      break
    fi
    if "_baton_${kind}_ready" "$dir" 2>/dev/null; then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      _baton_msg "$kind not ready after ${timeout}s"
      break
    fi
    sleep 0.1
  done
  _baton_tail "$dir"/"$kind"*.log
  if grep -qi 'address already in use' "$dir"/"$kind"*.log 2>/dev/null; then
    return 2
  fi
  return 1
}

# _baton_start_loop KIND DIR TIMEOUT: (re)configures the port, launches and waits; on a port
# taken in the meantime, picks another port (3 tries).
_baton_start_loop() {
  local kind=$1 dir=$2 timeout=$3 try rc port log
  for try in 1 2 3; do
    _baton_pick_port || return 1
    port=$_BATON_PORT
    "_baton_${kind}_configure" "$dir" "$port" || return 1
    "_baton_${kind}_launch" "$dir" || {
      _baton_tail "$dir"/"$kind"*.log
      return 1
    }
    rc=0
    _baton_wait_ready "$kind" "$dir" "$timeout" || rc=$?
    ((rc == 0)) && return 0
    "_baton_${kind}_stop" "$dir" >/dev/null 2>&1 || true
    ((rc == 2)) || break
    _baton_msg "$kind: port $port taken, retrying with another port"
    for log in "$dir"/"$kind"*.log; do mv "$log" "$log.try$try" 2>/dev/null || true; done
  done
  _baton_msg "FAILED to start $kind in $dir"
  return 1
}

_baton_conf_get() { # FILE KEY: value of "KEY=VALUE" / "KEY VALUE" lines
  sed -n -E "s/^[[:space:]]*$2[[:space:]]*[= ][[:space:]]*'?([^' ]*)'?.*$/\1/p" "$1" | tail -n1
}

# ------------------------------------------------------------------------------ PostgreSQL

_baton_postgres_run_as() { # CMD...: as the postgres user when root
  if [[ $(id -u) -eq 0 ]]; then
    setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
  else
    "$@"
  fi
}

_baton_postgres_configure() { # DIR PORT
  local dir=$1 port=$2 bin
  bin=$(_baton_pg_bin) || return 1
  if [[ ! -s "$dir/data/PG_VERSION" ]]; then
    (cd "$dir" && _baton_postgres_run_as "$bin/initdb" -D "$dir/data" --auth=trust \
      --username=postgres --encoding=UTF8 --locale=C.UTF-8 --no-sync) \
      >"$dir/initdb.log" 2>&1 || {
      _baton_msg "initdb failed"
      _baton_tail "$dir/initdb.log"
      return 1
    }
  fi
  # baton_secret logs in with its password only (first matching line wins; the rest trust).
  if ! grep -q '^host all baton_secret' "$dir/data/pg_hba.conf"; then
    { echo "host all baton_secret 127.0.0.1/32 scram-sha-256" && cat "$dir/data/pg_hba.conf"; } \
      >"$dir/data/pg_hba.conf.new" && mv "$dir/data/pg_hba.conf.new" "$dir/data/pg_hba.conf"
  fi
  # Last setting wins: appending again on a retry is fine.
  cat >>"$dir/data/postgresql.conf" <<EOF
# baton test server
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
logging_collector = off
log_min_messages = warning
EOF
}

_baton_postgres_launch() {
  local dir=$1 bin
  bin=$(_baton_pg_bin) || return 1
  if [[ $(id -u) -eq 0 ]]; then
    _baton_spawn "$dir" "$dir/postgres.log" \
      setpriv --reuid=postgres --regid=postgres --init-groups -- "$bin/postgres" -D "$dir/data"
  else
    _baton_spawn "$dir" "$dir/postgres.log" "$bin/postgres" -D "$dir/data"
  fi
}

_baton_postgres_port() { _baton_conf_get "$1/data/postgresql.conf" port; }

_baton_postgres_ready() {
  local dir=$1 bin
  bin=$(_baton_pg_bin) || return 1
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$(_baton_postgres_port "$dir")" -U postgres -d postgres -t 1
}

# SIGINT is PostgreSQL's "fast" shutdown (disconnects clients), SIGQUIT its "immediate" one.
_baton_postgres_stop() { _baton_signal_stop "$1" INT; }
_baton_postgres_kill() { _baton_signal_stop "$1" QUIT; }

_baton_postgres_export() {
  local dir=$1 port
  port=$(_baton_postgres_port "$dir")
  export BATON_TEST_POSTGRES_DIR="$dir"
  export BATON_TEST_POSTGRES_DATADIR="$dir/data"
  export BATON_TEST_POSTGRES_PORT="$port"
  export BATON_TEST_POSTGRES="dbname=baton_test user=postgres host=127.0.0.1 port=$port"
}

baton_start_postgres() {
  local dir start bin
  start=$(_baton_now)
  bin=$(_baton_pg_bin) || return 1
  dir=$(_baton_prepare_dir "${1:-}" postgres postgres) || return 1
  _baton_register postgres "$dir"
  _baton_start_loop postgres "$dir" "$BATON_START_TIMEOUT" || return 1
  "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(_baton_postgres_port "$dir")" \
    -U postgres -d postgres >>"$dir/setup.log" 2>&1 <<'EOF' || {
CREATE DATABASE baton_test;
CREATE ROLE baton_secret LOGIN SUPERUSER PASSWORD 'Pg''Zq9 \x@:/';
EOF
    _baton_msg "PostgreSQL: creating database baton_test / role baton_secret failed"
    _baton_tail "$dir/setup.log" "$dir/postgres.log"
    return 1
  }
  _baton_postgres_export "$dir"
  _baton_msg "PostgreSQL ready on 127.0.0.1:$BATON_TEST_POSTGRES_PORT in $(_baton_elapsed "$start")s"
}

baton_restart_postgres() { baton_server_ctl restart postgres; }

# ------------------------------------------------------------- PostgreSQL primary + standby

# DIR/postgres-ha/{primary,standby}: each a member directory like DIR/postgres (data/, log, pid
# file), so the _baton_postgres_* functions serve both. The standby streams from the primary
# (asynchronous replication, hot_standby) and was made by pg_basebackup -R.

_baton_psql_value() { # PORT SQL: one value from the database postgres
  "$(_baton_pg_bin)/psql" -X -A -t -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2" 2>/dev/null
}

# _baton_postgres_ha_init HADIR PORT1 PORT2: a fresh primary on PORT1 (database baton_test) and a
# streaming standby of it on PORT2, both running. Member data directories must not exist.
_baton_postgres_ha_init() {
  local ha=$1 p1=$2 p2=$3 bin primary=$1/primary standby=$1/standby deadline
  bin=$(_baton_pg_bin) || return 1
  _baton_postgres_run_as mkdir -p "$primary" "$standby" || return 1
  _baton_postgres_configure "$primary" "$p1" || return 1
  printf '%s\n' "wal_level = replica" "max_wal_senders = 10" "wal_keep_size = 256MB" \
    "hot_standby = on" >>"$primary/data/postgresql.conf"
  if ! grep -q '^host replication all 127.0.0.1/32 trust' "$primary/data/pg_hba.conf"; then
    echo "host replication all 127.0.0.1/32 trust" >>"$primary/data/pg_hba.conf"
  fi
  _baton_postgres_launch "$primary" || return 1
  _baton_wait_ready postgres "$primary" "$BATON_START_TIMEOUT" || return 1
  "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$p1" -U postgres -d postgres \
    -c 'CREATE DATABASE baton_test' >>"$ha/setup.log" 2>&1 || {
    _baton_msg "PostgreSQL HA: creating database baton_test failed"
    _baton_tail "$ha/setup.log" "$primary/postgres.log"
    return 1
  }
  # The standby: a base backup with the replication settings (-R: standby.signal and
  # primary_conninfo), then its own port and socket directory (the last setting wins).
  _baton_postgres_run_as "$bin/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres \
    -D "$standby/data" -R -X stream --checkpoint=fast --no-sync >>"$ha/setup.log" 2>&1 || {
    _baton_msg "PostgreSQL HA: pg_basebackup of the standby failed"
    _baton_tail "$ha/setup.log" "$primary/postgres.log"
    return 1
  }
  printf '%s\n' "# baton test standby" "port = $p2" "unix_socket_directories = '$standby'" \
    "hot_standby = on" >>"$standby/data/postgresql.conf"
  _baton_postgres_launch "$standby" || return 1
  _baton_wait_ready postgres "$standby" "$BATON_START_TIMEOUT" || return 1
  # Streaming, not only running: the primary lists the standby's WAL sender as streaming.
  deadline=$((SECONDS + BATON_START_TIMEOUT))
  until [[ "$(_baton_psql_value "$p1" \
    "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" == 1 ]]; do
    if ((SECONDS >= deadline)); then
      _baton_msg "PostgreSQL HA: the standby does not stream from the primary"
      _baton_tail "$standby/postgres.log" "$primary/postgres.log"
      return 1
    fi
    sleep 0.1
  done
}

_baton_postgres_ha_export() {
  local ha=$1 p1 p2
  p1=$(_baton_postgres_port "$ha/primary")
  p2=$(_baton_postgres_port "$ha/standby")
  export BATON_TEST_POSTGRES_HA_DIR="$ha"
  export BATON_TEST_POSTGRES_HA_PRIMARY_PORT="$p1"
  export BATON_TEST_POSTGRES_HA_STANDBY_PORT="$p2"
  export BATON_TEST_POSTGRES_HA="dbname=baton_test user=postgres host=127.0.0.1,127.0.0.1 port=$p1,$p2 target_session_attrs=read-write"
}

# baton_start_postgres_ha DIR: a primary and a streaming standby in DIR/postgres-ha (see the
# header for what it exports).
baton_start_postgres_ha() {
  local ha start p1 p2
  start=$(_baton_now)
  _baton_pg_bin >/dev/null || return 1
  ha=$(_baton_prepare_dir "${1:-}" postgres-ha postgres) || return 1
  _baton_register postgres "$ha/primary"
  _baton_register postgres "$ha/standby"
  _baton_pick_port || return 1
  p1=$_BATON_PORT
  _baton_pick_port || return 1
  p2=$_BATON_PORT
  _baton_postgres_ha_init "$ha" "$p1" "$p2" || {
    _baton_msg "FAILED to start the PostgreSQL primary and standby in $ha"
    return 1
  }
  _baton_postgres_ha_export "$ha"
  _baton_msg "PostgreSQL primary 127.0.0.1:$p1 + standby 127.0.0.1:$p2 ready in $(_baton_elapsed "$start")s"
}

# baton_postgres_ha_promote: promotes the standby (pg_ctl promote) and waits until it accepts
# writes. The primary is left as it is (stop it first for a failover).
baton_postgres_ha_promote() {
  local ha=${BATON_TEST_POSTGRES_HA_DIR:-} bin port deadline
  if [[ -z "$ha" || ! -d "$ha/standby" ]]; then
    _baton_msg "baton_postgres_ha_promote: BATON_TEST_POSTGRES_HA_DIR is unset or not a directory"
    return 2
  fi
  bin=$(_baton_pg_bin) || return 1
  port=$(_baton_postgres_port "$ha/standby")
  _baton_postgres_run_as "$bin/pg_ctl" promote -w -t "$BATON_START_TIMEOUT" \
    -D "$ha/standby/data" >>"$ha/setup.log" 2>&1 || {
    _baton_msg "pg_ctl promote failed"
    _baton_tail "$ha/setup.log" "$ha/standby/postgres.log"
    return 1
  }
  deadline=$((SECONDS + BATON_START_TIMEOUT))
  until [[ "$(_baton_psql_value "$port" 'SELECT pg_is_in_recovery()')" == f ]]; do
    if ((SECONDS >= deadline)); then
      _baton_msg "the promoted standby does not accept writes"
      _baton_tail "$ha/standby/postgres.log"
      return 1
    fi
    sleep 0.05
  done
}

# baton_postgres_ha_reset: stops both members and builds the pair again from scratch on the same
# ports (a fresh primary and standby; every table is gone), so tests can run one after another.
baton_postgres_ha_reset() {
  local ha=${BATON_TEST_POSTGRES_HA_DIR:-} p1 p2 member log
  if [[ -z "$ha" || ! -d "$ha/primary" ]]; then
    _baton_msg "baton_postgres_ha_reset: BATON_TEST_POSTGRES_HA_DIR is unset or not a directory"
    return 2
  fi
  p1=${BATON_TEST_POSTGRES_HA_PRIMARY_PORT:-$(_baton_postgres_port "$ha/primary")}
  p2=${BATON_TEST_POSTGRES_HA_STANDBY_PORT:-$(_baton_postgres_port "$ha/standby")}
  for member in standby primary; do
    _baton_postgres_kill "$ha/$member" || return 1
    rm -rf "${ha:?}/${member:?}/data"
    for log in "$ha/$member"/*.log; do
      if [[ -f "$log" ]]; then cat "$log" >>"$log.old" && rm -f "$log"; fi
    done
  done
  _baton_postgres_ha_init "$ha" "$p1" "$p2"
}

# -------------------------------------------------------------------------------- MariaDB

_baton_mariadb_admin_user() { if [[ $(id -u) -eq 0 ]]; then echo root; else id -un; fi; }

_baton_mariadb_configure() { # DIR PORT
  local dir=$1 port=$2 user_line=""
  [[ $(id -u) -eq 0 ]] && user_line="user = mysql"
  cat >"$dir/my.cnf" <<EOF
[mariadbd]
$user_line
datadir = $dir/data
port = $port
bind-address = 127.0.0.1
socket = $dir/mariadb.sock
pid-file = $dir/mariadbd.pid
skip-name-resolve
skip-log-bin
max-connections = 500
innodb-buffer-pool-size = 128M
innodb-log-file-size = 64M
innodb-flush-log-at-trx-commit = 2
innodb-doublewrite = 0
log-warnings = 1
EOF
  if [[ ! -d "$dir/data/mysql" ]]; then
    local args=(--no-defaults "--datadir=$dir/data" --auth-root-authentication-method=socket
      --skip-test-db --skip-name-resolve "--auth-root-socket-user=$(_baton_mariadb_admin_user)")
    if [[ $(id -u) -eq 0 ]]; then
      args+=(--user=mysql)
    fi
    (cd "$dir" && mariadb-install-db "${args[@]}") >"$dir/install-db.log" 2>&1 || {
      _baton_msg "mariadb-install-db failed"
      _baton_tail "$dir/install-db.log"
      return 1
    }
  fi
}

_baton_mariadb_launch() {
  local dir=$1
  _baton_spawn "$dir" "$dir/mariadb.log" mariadbd "--defaults-file=$dir/my.cnf"
}

_baton_mariadb_port() { _baton_conf_get "$1/my.cnf" port; }

_baton_mariadb_client() { # DIR ARGS...: the mariadb client as the admin user, through the socket
  local dir=$1
  shift
  mariadb --no-defaults "--socket=$dir/mariadb.sock" -u "$(_baton_mariadb_admin_user)" "$@"
}

_baton_mariadb_ready() {
  local dir=$1
  [[ -S "$dir/mariadb.sock" ]] || return 1
  _baton_mariadb_client "$dir" --connect-timeout=2 -N -B -e 'SELECT 1' >/dev/null 2>&1
}

_baton_mariadb_stop() { _baton_signal_stop "$1" TERM; }
_baton_mariadb_kill() { _baton_signal_stop "$1" KILL; }

_baton_mariadb_export() {
  local dir=$1 port
  port=$(_baton_mariadb_port "$dir")
  export BATON_TEST_MYSQL_DIR="$dir"
  export BATON_TEST_MYSQL_DATADIR="$dir/data"
  export BATON_TEST_MYSQL_PORT="$port"
  export BATON_TEST_MYSQL_SOCKET="$dir/mariadb.sock"
  export BATON_TEST_MYSQL="db=baton_test user=baton password=baton host=127.0.0.1 port=$port"
}

baton_start_mariadb() {
  local dir start
  start=$(_baton_now)
  dir=$(_baton_prepare_dir "${1:-}" mariadb mysql) || return 1
  _baton_register mariadb "$dir"
  _baton_start_loop mariadb "$dir" "$BATON_START_TIMEOUT" || return 1
  # A user can always KILL its own connections, so ALL on the test databases is enough.
  _baton_mariadb_client "$dir" >>"$dir/setup.log" 2>&1 <<'EOF' || {
CREATE DATABASE IF NOT EXISTS baton_test;
CREATE USER IF NOT EXISTS 'baton'@'127.0.0.1' IDENTIFIED BY 'baton';
CREATE USER IF NOT EXISTS 'baton'@'localhost' IDENTIFIED BY 'baton';
GRANT ALL PRIVILEGES ON `baton_test%`.* TO 'baton'@'127.0.0.1';
GRANT ALL PRIVILEGES ON `baton_test%`.* TO 'baton'@'localhost';
CREATE USER IF NOT EXISTS 'baton_secret'@'127.0.0.1' IDENTIFIED BY 'My\'Zq8 \\x@:/';
GRANT ALL PRIVILEGES ON `baton_test%`.* TO 'baton_secret'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF
    _baton_msg "MariaDB: creating database baton_test / users baton, baton_secret failed"
    _baton_tail "$dir/setup.log" "$dir/mariadb.log"
    return 1
  }
  _baton_mariadb_export "$dir"
  _baton_msg "MariaDB ready on 127.0.0.1:$BATON_TEST_MYSQL_PORT in $(_baton_elapsed "$start")s"
}

# ---------------------------------------------------------------------------------- Redis

_baton_redis_configure() { # DIR PORT  (DIR/auth.conf, when present, is included)
  local dir=$1 port=$2
  cat >"$dir/redis.conf" <<EOF
port $port
bind 127.0.0.1
protected-mode yes
daemonize no
save ""
appendonly no
dir $dir
logfile ""
loglevel notice
databases 16
enable-debug-command local
EOF
  if [[ -f "$dir/auth.conf" ]]; then
    echo "include $dir/auth.conf" >>"$dir/redis.conf"
  fi
  # A replica (Sentinel topology): DIR/replicaof holds "HOST PORT" of its master.
  if [[ -f "$dir/replicaof" ]]; then
    echo "replicaof $(cat "$dir/replicaof")" >>"$dir/redis.conf"
  fi
}

_baton_redis_launch() {
  local dir=$1
  _baton_spawn "$dir" "$dir/redis.log" redis-server "$dir/redis.conf"
}

_baton_redis_port() { _baton_conf_get "$1/redis.conf" port; }

_baton_redis_cli() { # DIR ARGS...
  local dir=$1 password
  shift
  password=""
  [[ -f "$dir/auth.conf" ]] && password=$(_baton_conf_get "$dir/auth.conf" requirepass)
  if [[ -n "$password" ]]; then
    REDISCLI_AUTH="$password" redis-cli -h 127.0.0.1 -p "$(_baton_redis_port "$dir")" "$@"
  else
    redis-cli -h 127.0.0.1 -p "$(_baton_redis_port "$dir")" "$@"
  fi
}

_baton_redis_ready() {
  local dir=$1 env=()
  [[ -f "$dir/auth.conf" ]] && env=("REDISCLI_AUTH=$(_baton_conf_get "$dir/auth.conf" requirepass)")
  [[ "$(env "${env[@]}" timeout 2 redis-cli -h 127.0.0.1 -p "$(_baton_redis_port "$dir")" \
    ping 2>/dev/null)" == PONG ]]
}

_baton_redis_stop() { _baton_signal_stop "$1" TERM; }
_baton_redis_kill() { _baton_signal_stop "$1" KILL; }

_baton_redis_export() {
  local dir=$1 port
  port=$(_baton_redis_port "$dir")
  export BATON_TEST_REDIS_DIR="$dir"
  export BATON_TEST_REDIS_PORT="$port"
  export BATON_TEST_REDIS_URL="redis://127.0.0.1:$port"
}

_baton_redis_auth_export() {
  local dir=$1 port
  port=$(_baton_redis_port "$dir")
  export BATON_TEST_REDIS_AUTH_DIR="$dir"
  export BATON_TEST_REDIS_AUTH_PORT="$port"
  export BATON_TEST_REDIS_AUTH_URL="redis://:secret@127.0.0.1:$port"
  export BATON_TEST_REDIS_ACL_URL="redis://baton:secret2@127.0.0.1:$port"
}

baton_start_redis() {
  local dir start
  start=$(_baton_now)
  dir=$(_baton_prepare_dir "${1:-}" redis "") || return 1
  _baton_register redis "$dir"
  _baton_start_loop redis "$dir" "$BATON_START_TIMEOUT" || return 1
  _baton_redis_export "$dir"
  _baton_msg "Redis ready on 127.0.0.1:$BATON_TEST_REDIS_PORT in $(_baton_elapsed "$start")s"
}

# A second Redis with `requirepass secret` (default user), ACL users baton / secret2 and
# baton_secret / Rd/Zq6@x:y.
baton_start_redis_auth() {
  local dir start
  start=$(_baton_now)
  dir=$(_baton_prepare_dir "${1:-}" redis-auth "") || return 1
  cat >"$dir/auth.conf" <<'EOF'
requirepass secret
user baton on >secret2 ~* &* +@all
user baton_secret on >Rd/Zq6@x:y ~* &* +@all
EOF
  _baton_register redis "$dir"
  _baton_start_loop redis "$dir" "$BATON_START_TIMEOUT" || return 1
  _baton_redis_auth_export "$dir"
  _baton_msg "Redis (auth) ready on 127.0.0.1:$BATON_TEST_REDIS_AUTH_PORT in $(_baton_elapsed "$start")s"
}

# ------------------------------------------------------------------------- Redis Sentinel
# DIR/redis-sentinel/: redis-primary (a master), redis-replica (replicaof the primary) and
# sentinel-1..3 (redis-server sentinel.conf --sentinel; each its own config file, which the
# sentinel rewrites), monitoring "mymaster" with quorum 2, down-after 1 s, failover-timeout 4 s.
# baton_server_ctl names the members by their original roles, whichever is master now.

_BATON_SENTINEL_MASTER=mymaster

_baton_sentinel_configure() { # DIR PORT (the primary is DIR/../redis-primary)
  local dir=$1 port=$2 primary
  primary=$(_baton_redis_port "$dir/../redis-primary") || return 1
  cat >"$dir/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
daemonize no
dir $dir
logfile ""
sentinel resolve-hostnames no
sentinel monitor $_BATON_SENTINEL_MASTER 127.0.0.1 $primary 2
sentinel down-after-milliseconds $_BATON_SENTINEL_MASTER 1000
sentinel failover-timeout $_BATON_SENTINEL_MASTER 4000
sentinel parallel-syncs $_BATON_SENTINEL_MASTER 1
EOF
}

_baton_sentinel_launch() {
  local dir=$1
  _baton_spawn "$dir" "$dir/sentinel.log" redis-server "$dir/sentinel.conf" --sentinel
}

_baton_sentinel_port() { _baton_conf_get "$1/sentinel.conf" port; }

_baton_sentinel_cli() { # DIR ARGS...
  local dir=$1
  shift
  timeout 2 redis-cli -h 127.0.0.1 -p "$(_baton_sentinel_port "$dir")" "$@"
}

_baton_sentinel_ready() {
  [[ "$(_baton_sentinel_cli "$1" ping 2>/dev/null)" == PONG ]] &&
    [[ -n "$(_baton_sentinel_cli "$1" sentinel get-master-addr-by-name \
      "$_BATON_SENTINEL_MASTER" 2>/dev/null)" ]]
}

_baton_sentinel_stop() { _baton_signal_stop "$1" TERM; }
_baton_sentinel_kill() { _baton_signal_stop "$1" KILL; }

# baton_redis_sentinel_master: prints host:port of the master the first answering sentinel names.
baton_redis_sentinel_master() {
  local base=${BATON_TEST_REDIS_SENTINEL_DIR:-} i answer
  for i in 1 2 3; do
    answer=$(_baton_sentinel_cli "$base/sentinel-$i" sentinel get-master-addr-by-name \
      "$_BATON_SENTINEL_MASTER" 2>/dev/null | paste -sd:) || continue
    if [[ "$answer" =~ ^[^:]+:[0-9]+$ ]]; then
      echo "$answer"
      return 0
    fi
  done
  _baton_msg "no sentinel names master $_BATON_SENTINEL_MASTER"
  return 1
}

# _baton_redis_sentinel_healthy: true when every sentinel names the same master, that master
# says role:master with one replica online, and each sentinel knows a replica that is not down
# and the two other sentinels: a failover can start from here.
_baton_redis_sentinel_healthy() {
  local base=${BATON_TEST_REDIS_SENTINEL_DIR:-} i master="" answer host port
  [[ -d "$base" ]] || return 1
  for i in 1 2 3; do
    answer=$(_baton_sentinel_cli "$base/sentinel-$i" sentinel get-master-addr-by-name \
      "$_BATON_SENTINEL_MASTER" 2>/dev/null | paste -sd:) || return 1
    [[ -n "$answer" ]] || return 1
    [[ -z "$master" || "$master" == "$answer" ]] || return 1
    master=$answer
    [[ "$(_baton_sentinel_cli "$base/sentinel-$i" sentinel sentinels \
      "$_BATON_SENTINEL_MASTER" 2>/dev/null | grep -cx name)" == 2 ]] || return 1
    _baton_sentinel_cli "$base/sentinel-$i" sentinel replicas "$_BATON_SENTINEL_MASTER" \
      2>/dev/null | paste -sd' ' | grep -Eq 'flags slave( |$)' || return 1
  done
  host=${master%:*}
  port=${master##*:}
  answer=$(timeout 2 redis-cli -h "$host" -p "$port" info replication 2>/dev/null | tr -d '\r')
  grep -qx 'role:master' <<<"$answer" || return 1
  grep -qx 'connected_slaves:1' <<<"$answer" || return 1
  grep -Eq '^slave0:.*state=online' <<<"$answer"
}

baton_start_redis_sentinel() {
  local base dir start member i sentinels=""
  start=$(_baton_now)
  base=$(_baton_prepare_dir "${1:-}" redis-sentinel "") || return 1
  dir=$(_baton_prepare_dir "$base" redis-primary "") || return 1
  _baton_register redis "$dir"
  _baton_start_loop redis "$dir" "$BATON_START_TIMEOUT" || return 1
  dir=$(_baton_prepare_dir "$base" redis-replica "") || return 1
  echo "127.0.0.1 $(_baton_redis_port "$base/redis-primary")" >"$dir/replicaof"
  _baton_register redis "$dir"
  _baton_start_loop redis "$dir" "$BATON_START_TIMEOUT" || return 1
  for i in 1 2 3; do
    member=$(_baton_prepare_dir "$base" "sentinel-$i" "") || return 1
    _baton_register sentinel "$member"
    _baton_start_loop sentinel "$member" "$BATON_START_TIMEOUT" || return 1
    sentinels+="${sentinels:+,}127.0.0.1:$(_baton_sentinel_port "$member")"
  done
  export BATON_TEST_REDIS_SENTINEL_DIR="$base"
  export BATON_TEST_REDIS_SENTINELS="$sentinels"
  export BATON_TEST_REDIS_SENTINEL_MASTER="$_BATON_SENTINEL_MASTER"
  # The sentinels find the replica and each other through the master (hello messages, ~2 s).
  local deadline=$((SECONDS + BATON_START_TIMEOUT))
  until _baton_redis_sentinel_healthy; do
    if ((SECONDS >= deadline)); then
      _baton_msg "Redis Sentinel topology not healthy after ${BATON_START_TIMEOUT}s"
      _baton_tail "$base"/*/*.log
      return 1
    fi
    sleep 0.2
  done
  _baton_msg "Redis Sentinel ready (master 127.0.0.1:$(_baton_redis_port "$base/redis-primary"), sentinels $sentinels) in $(_baton_elapsed "$start")s"
}

# ------------------------------------------------------------------------------ ZooKeeper

_baton_zookeeper_classpath() {
  local cp jar
  cp="$1:/usr/share/java/zookeeper.jar"
  # zookeeper.jar's manifest brings slf4j-api and the rest; add a binding and log4j 1.2.
  for jar in /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do
    if [[ -f "$jar" ]]; then cp+=":$jar"; fi
  done
  echo "$cp"
}

# _baton_zookeeper_write_config DIR PORT [EXTRA_LINES]: zoo.cfg and log4j.properties of one
# server (a single server, or an ensemble member when EXTRA_LINES carry its server.N lines).
_baton_zookeeper_write_config() {
  local dir=$1 port=$2 extra=${3:-}
  mkdir -p "$dir/data"
  # tickTime 500 ms: the server accepts session timeouts from 1 s to 10 s; initLimit and
  # syncLimit count ticks.
  cat >"$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,cons,mntr
forceSync=no
autopurge.purgeInterval=0
$extra
EOF
  cat >"$dir/log4j.properties" <<EOF
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$dir/zookeeper.log
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
EOF
}

_baton_zookeeper_configure() { _baton_zookeeper_write_config "$1" "$2"; } # DIR PORT

# _baton_zookeeper_spawn DIR MAIN_CLASS HEAP: one ZooKeeper JVM in the background.
_baton_zookeeper_spawn() {
  local dir=$1 main=$2 heap=$3 java
  java=$(command -v java) || {
    _baton_msg "java not found (package zookeeper depends on default-jre)"
    return 1
  }
  # stdout/stderr (JVM messages; the server logs to zookeeper.log) go to zookeeper-out.log.
  _baton_spawn "$dir" "$dir/zookeeper-out.log" "$java" \
    -Xms32m "-Xmx$heap" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Djava.awt.headless=true \
    "-Dzookeeper.log.dir=$dir" "-Dlog4j.configuration=file:$dir/log4j.properties" \
    -Dzookeeper.jmx.log4j.disable=true -Dzookeeper.admin.enableServer=false \
    -cp "$(_baton_zookeeper_classpath "$dir")" "$main" "$dir/zoo.cfg"
}

_baton_zookeeper_launch() {
  _baton_zookeeper_spawn "$1" org.apache.zookeeper.server.ZooKeeperServerMain 512m
}

_baton_zookeeper_port() { _baton_conf_get "$1/zoo.cfg" clientPort; }

# _baton_zookeeper_4lw PORT WORD: sends a four-letter word, prints the answer.
_baton_zookeeper_4lw() {
  # shellcheck disable=SC2016
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1; printf %s "$1" >&3; cat <&3' \
    "$1" "$2" 2>/dev/null
}

_baton_zookeeper_ready() {
  local port
  port=$(_baton_zookeeper_port "$1")
  [[ "$(_baton_zookeeper_4lw "$port" ruok)" == imok ]] || return 1
  _baton_zookeeper_4lw "$port" srvr | grep -q '^Mode: standalone'
}

_baton_zookeeper_stop() { _baton_signal_stop "$1" TERM; }
_baton_zookeeper_kill() { _baton_signal_stop "$1" KILL; }

_baton_zookeeper_export() {
  local dir=$1 port
  port=$(_baton_zookeeper_port "$dir")
  export BATON_TEST_ZOOKEEPER_DIR="$dir"
  export BATON_TEST_ZOOKEEPER_DATADIR="$dir/data"
  export BATON_TEST_ZOOKEEPER_PORT="$port"
  export BATON_TEST_ZOOKEEPER="127.0.0.1:$port"
}

baton_start_zookeeper() {
  local dir start
  start=$(_baton_now)
  dir=$(_baton_prepare_dir "${1:-}" zookeeper "") || return 1
  _baton_register zookeeper "$dir"
  _baton_start_loop zookeeper "$dir" "$BATON_ZOOKEEPER_START_TIMEOUT" || return 1
  _baton_zookeeper_export "$dir"
  _baton_msg "ZooKeeper ready on 127.0.0.1:$BATON_TEST_ZOOKEEPER_PORT in $(_baton_elapsed "$start")s"
}

# --------------------------------------------------------------------- ZooKeeper ensemble
# Three QuorumPeerMain servers on loopback: DIR/zookeeper-ensemble/zk1..zk3, each with its own
# client, peer and election port, data dir with myid, zoo.cfg, log4j.properties, server.pid and
# zookeeper.log. A member is "ready" when its srvr answer says Mode: leader or follower (it
# serves clients), so starting one member alone waits for a quorum to form.

_baton_zookeeper_member_configure() { # DIR N CLIENT_PORT SERVER_LINES
  local dir=$1 n=$2 port=$3 servers=$4
  _baton_zookeeper_write_config "$dir" "$port" "cnxTimeout=1000
$servers" || return 1
  echo "$n" >"$dir/data/myid"
}

_baton_zookeeper_member_launch() {
  _baton_zookeeper_spawn "$1" org.apache.zookeeper.server.quorum.QuorumPeerMain 256m
}

_baton_zookeeper_member_ready() {
  _baton_zookeeper_4lw "$(_baton_zookeeper_port "$1")" srvr | grep -q -E '^Mode: (leader|follower)'
}

_baton_zookeeper_member_stop() { _baton_signal_stop "$1" TERM; }
_baton_zookeeper_member_kill() { _baton_signal_stop "$1" KILL; }

_baton_zookeeper_ensemble_export() {
  local base=$1 n hosts=""
  for n in 1 2 3; do
    hosts+="${hosts:+,}127.0.0.1:$(_baton_zookeeper_port "$base/zk$n")"
  done
  export BATON_TEST_ZOOKEEPER_ENSEMBLE_DIR="$base"
  export BATON_TEST_ZOOKEEPER_ENSEMBLE="$hosts"
}

# baton_start_zookeeper_ensemble DIR: configures the three members, launches them in parallel
# and waits (one deadline for the three) until all serve. On a port taken meanwhile, it picks
# new ports (3 tries).
baton_start_zookeeper_ensemble() {
  local base start deadline try n rc servers ports dir f
  start=$(_baton_now)
  base=$(_baton_prepare_dir "${1:-}" zookeeper-ensemble "") || return 1
  for n in 1 2 3; do
    mkdir -p "$base/zk$n"
    _baton_register zookeeper_member "$base/zk$n"
  done
  for try in 1 2 3; do
    ports=()
    for n in 1 2 3 4 5 6 7 8 9; do
      _baton_pick_port || return 1
      ports+=("$_BATON_PORT")
    done
    # ports: client 0..2, peer 3..5, election 6..8
    servers=""
    for n in 1 2 3; do
      servers+="server.$n=127.0.0.1:${ports[n + 2]}:${ports[n + 5]}"$'\n'
    done
    for n in 1 2 3; do
      _baton_zookeeper_member_configure "$base/zk$n" "$n" "${ports[n - 1]}" "$servers" || return 1
    done
    for n in 1 2 3; do
      _baton_zookeeper_member_launch "$base/zk$n" || return 1
    done
    rc=0
    deadline=$((SECONDS + BATON_ZOOKEEPER_START_TIMEOUT))
    for n in 1 2 3; do
      _baton_wait_ready zookeeper_member "$base/zk$n" $((deadline > SECONDS ? deadline - SECONDS : 1)) ||
        rc=$?
      ((rc == 0)) || break
    done
    ((rc == 0)) && break
    for n in 1 2 3; do _baton_zookeeper_member_kill "$base/zk$n" >/dev/null 2>&1 || true; done
    grep -qi 'address already in use' "$base"/zk*/zookeeper*.log 2>/dev/null || break
    _baton_msg "ZooKeeper ensemble: a port was taken, retrying with other ports"
    for dir in "$base"/zk*; do
      for f in "$dir"/zookeeper*.log; do mv "$f" "$f.try$try" 2>/dev/null || true; done
      rm -rf "$dir/data"
    done
  done
  if ((rc != 0)); then
    _baton_tail "$base"/zk*/zookeeper.log
    _baton_msg "FAILED to start the ZooKeeper ensemble in $base"
    return 1
  fi
  _baton_zookeeper_ensemble_export "$base"
  _baton_msg "ZooKeeper ensemble ready on $BATON_TEST_ZOOKEEPER_ENSEMBLE (leader:" \
    "zookeeper-$(baton_zookeeper_ensemble_leader)) in $(_baton_elapsed "$start")s"
}

# baton_zookeeper_ensemble_leader: prints the number (1..3) of the member whose srvr says
# "Mode: leader"; returns 1 when none does (no quorum), 2 without an ensemble.
baton_zookeeper_ensemble_leader() {
  local base=${BATON_TEST_ZOOKEEPER_ENSEMBLE_DIR:-} n
  [[ -d "$base" ]] || {
    _baton_msg "BATON_TEST_ZOOKEEPER_ENSEMBLE_DIR is unset or not a directory"
    return 2
  }
  for n in 1 2 3; do
    if _baton_zookeeper_4lw "$(_baton_zookeeper_port "$base/zk$n")" srvr |
      grep -q '^Mode: leader'; then
      echo "$n"
      return 0
    fi
  done
  return 1
}

# ------------------------------------------------------------------------------- all / stop

# baton_start_all DIR: every server the tests use; also exports BATON_TEST_TMPDIR=DIR (SQLite
# files go there).
baton_start_all() {
  local base=${1:-}
  [[ -d "$base" ]] || {
    _baton_msg "baton_start_all: '$base' is not a directory"
    return 1
  }
  export BATON_TEST_TMPDIR
  BATON_TEST_TMPDIR=$(cd "$base" && pwd)
  baton_start_zookeeper "$base" &&
    baton_start_zookeeper_ensemble "$base" &&
    baton_start_postgres "$base" &&
    baton_start_postgres_ha "$base" &&
    baton_start_mariadb "$base" &&
    baton_start_redis "$base" &&
    baton_start_redis_auth "$base" &&
    baton_start_redis_sentinel "$base"
}

# baton_stop_servers: stops every server started from this shell (also ones restarted since
# by scripts/server-ctl.sh: it goes by their pid files). Idempotent; never fails.
baton_stop_servers() {
  local i entry kind dir
  for ((i = ${#_BATON_SERVERS[@]} - 1; i >= 0; i--)); do
    entry=${_BATON_SERVERS[i]}
    kind=${entry%%:*}
    dir=${entry#*:}
    if [[ -f "$dir/server.pid" ]]; then
      "_baton_${kind}_stop" "$dir" || _baton_msg "could not stop $kind in $dir"
    fi
  done
  return 0
}

# ------------------------------------------------------------------------------ server ctl

# _baton_server_locate SERVER: prints "KIND DIR" for a server name, from BATON_TEST_*_DIR.
_baton_server_locate() {
  case "$1" in
    postgres | postgresql) echo "postgres ${BATON_TEST_POSTGRES_DIR:-}" ;;
    postgres-primary | postgres-standby)
      echo "postgres ${BATON_TEST_POSTGRES_HA_DIR:+$BATON_TEST_POSTGRES_HA_DIR/${1#postgres-}}"
      ;;
    mariadb | mysql) echo "mariadb ${BATON_TEST_MYSQL_DIR:-}" ;;
    redis) echo "redis ${BATON_TEST_REDIS_DIR:-}" ;;
    redis-auth) echo "redis ${BATON_TEST_REDIS_AUTH_DIR:-}" ;;
    zookeeper) echo "zookeeper ${BATON_TEST_ZOOKEEPER_DIR:-}" ;;
    redis-primary | redis-replica) echo "redis ${BATON_TEST_REDIS_SENTINEL_DIR:-}/$1" ;;
    sentinel-1 | sentinel-2 | sentinel-3) echo "sentinel ${BATON_TEST_REDIS_SENTINEL_DIR:-}/$1" ;;
    redis-sentinel) echo "redis-sentinel ${BATON_TEST_REDIS_SENTINEL_DIR:-}" ;;
    zookeeper-[123]) echo "zookeeper_member ${BATON_TEST_ZOOKEEPER_ENSEMBLE_DIR:+$BATON_TEST_ZOOKEEPER_ENSEMBLE_DIR/zk${1#zookeeper-}}" ;;
    *) return 1 ;;
  esac
}

# baton_server_ctl ACTION SERVER
#   stop     clean shutdown (PostgreSQL: fast shutdown, clients are disconnected), waits for exit
#   kill     crash: SIGKILL (PostgreSQL: immediate shutdown, SIGQUIT), waits for exit
#   start    starts it again on the same port and data; waits until ready; no-op when running
#   restart  stop, then start
#   status   exit 0 when running and ready
baton_server_ctl() {
  local action=${1:-} server=${2:-} kind dir located pid
  located=$(_baton_server_locate "$server") || {
    _baton_msg "unknown server '$server' (postgres|postgres-primary|postgres-standby|mariadb|redis|redis-auth|zookeeper|zookeeper-1|zookeeper-2|zookeeper-3|redis-primary|redis-replica|sentinel-1|sentinel-2|sentinel-3|redis-sentinel)"
    return 2
  }
  read -r kind dir <<<"$located"
  if [[ $kind == redis-sentinel ]]; then
    # The whole topology: only "status" (healthy: see _baton_redis_sentinel_healthy).
    if [[ $action != status ]]; then
      _baton_msg "redis-sentinel: only 'status' (act on redis-primary, redis-replica, sentinel-N)"
      return 2
    fi
    _baton_redis_sentinel_healthy
    return
  fi
  if [[ -z "$dir" || ! -d "$dir" ]]; then
    _baton_msg "$server: its BATON_TEST_*_DIR variable is unset or not a directory (start the servers with scripts/test.sh or scripts/servers.sh)"
    return 2
  fi
  local timeout=$BATON_START_TIMEOUT
  [[ $kind == zookeeper* ]] && timeout=$BATON_ZOOKEEPER_START_TIMEOUT
  case "$action" in
    stop) "_baton_${kind}_stop" "$dir" ;;
    kill) "_baton_${kind}_kill" "$dir" ;;
    start | restart)
      if [[ $action == restart ]]; then
        "_baton_${kind}_stop" "$dir" || return 1
      fi
      pid=$(_baton_read_pid "$dir/server.pid") || true
      if [[ -n "$pid" ]] && _baton_alive "$pid"; then
        _baton_wait_ready "$kind" "$dir" "$timeout" >/dev/null
        return
      fi
      "_baton_${kind}_launch" "$dir" || return 1
      _baton_wait_ready "$kind" "$dir" "$timeout" || {
        _baton_msg "$server did not come back"
        return 1
      }
      ;;
    status)
      pid=$(_baton_read_pid "$dir/server.pid") || true
      [[ -n "$pid" ]] && _baton_alive "$pid" && "_baton_${kind}_ready" "$dir" 2>/dev/null
      ;;
    *)
      _baton_msg "unknown action '$action' (stop|start|restart|kill|status)"
      return 2
      ;;
  esac
}

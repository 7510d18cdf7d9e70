#!/usr/bin/env bash
# scripts/server-ctl.sh ACTION SERVER
#
# Stops, crashes, starts or restarts one of the test servers that scripts/test.sh (through
# scripts/servers.sh) started, on the same port and data directory. Tests call it, e.g.
#   std::system(BATON_SOURCE_DIR "/scripts/server-ctl.sh restart postgres")
# It finds the server through the BATON_TEST_<X>_DIR variables the test inherited.
#
# ACTION:  stop     clean shutdown (PostgreSQL: "fast", clients disconnected); waits for exit
#          kill     crash (SIGKILL; PostgreSQL: "immediate" shutdown); waits for exit
#          start    start again, wait until it accepts clients (no-op when running)
#          restart  stop, then start
#          status   exit 0 when running and answering
# SERVER:  postgres | postgres-primary | postgres-standby | mariadb | redis | redis-auth |
#          zookeeper | redis-primary | redis-replica |
#          sentinel-1 | sentinel-2 | sentinel-3 (the Sentinel topology, by original role) |
#          redis-sentinel (status only: the whole topology healthy) |
#          zookeeper-1 | zookeeper-2 | zookeeper-3   (members of the ensemble; a member is ready
#          when it serves, so a start waits for a quorum)
#
# scripts/server-ctl.sh postgres-ha-promote   promote the standby, wait until it takes writes
# scripts/server-ctl.sh postgres-ha-reset     a fresh primary + standby on the same ports
#
# Exit status: 0 done, 1 failed (the server's log tail is printed), 2 usage error.
set -euo pipefail

usage() {
  sed -n '2,24p' "$0" >&2
  exit 2
}

# shellcheck source=servers.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/servers.sh"
if (($# == 1)); then
  case "$1" in
    postgres-ha-promote) baton_postgres_ha_promote ;;
    postgres-ha-reset) baton_postgres_ha_reset ;;
    *) usage ;;
  esac
  exit
fi
(($# == 2)) || usage
baton_server_ctl "$1" "$2"

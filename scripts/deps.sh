#!/usr/bin/env bash
# Debian 12 packages that baton needs, and a function that installs the missing ones.
#
# Sourced:  . scripts/deps.sh; baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}"
# Run:      scripts/deps.sh [--build|--test|--all]   (default --all: build + test servers)
#
# baton_ensure_packages PKG...: does nothing when every package is installed; as root runs
# `apt-get update` and `apt-get install -y --no-install-recommends` for the missing ones;
# otherwise prints the sudo command to run and returns 1.

# Compiler, CMake and the libraries the C++ code builds against.
BATON_BUILD_PACKAGES=(
  build-essential cmake pkg-config
  libboost-dev libboost-system-dev
  libsoci-dev libsoci-sqlite3-4.0 libsoci-postgresql4.0 libsoci-mysql4.0
  libsqlite3-dev libpq-dev libmariadb-dev libzookeeper-mt-dev libhiredis-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev libspdlog-dev libhowardhinnant-date-dev tzdata
  libsystemd-dev
)

# libsystemd-dev: sd_notify (READY/RELOADING/STOPPING, the watchdog) for `Type=notify` units.

# Servers the tests run against (started on loopback by scripts/servers.sh) and test tools.
# `prometheus` ships `promtool check metrics` (the /metrics exposition is checked with it; the
# package's service is not started: there is no systemd in the test machines), `help2man` keeps
# the man page in sync with --help, `systemd` gives `systemd-analyze verify` for the unit files.
# The fault suite (scripts/faults.sh, its smoke subset in CI): `faketime` skews one node's wall
# clock (libfaketime), `stress-ng` saturates the leader's CPU, `nftables` drops packets inside a
# network namespace the suite creates (the kernel has no sch_netem, so delay is a userspace proxy).
# The web console's browser test (tests/console/) drives headless `chromium` through
# `chromium-driver` (chromedriver's WebDriver API, spoken with Python's urllib: no client library).
# `zookeeper` depends on default-jre (a JRE), log4j 1.2 and the slf4j bindings, so
# --no-install-recommends is enough; `postgresql` brings the postgres user and
# /usr/lib/postgresql/15/bin, `mariadb-server` the mysql user and the mariadb client.
BATON_TEST_PACKAGES=(
  redis-server zookeeper mariadb-server postgresql
  python3-croniter python3-kazoo python3-redis procps iproute2 sqlite3
  prometheus help2man systemd
  faketime stress-ng nftables
  chromium chromium-driver
)

# Prints the packages among "$@" that are not installed, one per line.
baton_missing_packages() {
  local pkg status
  for pkg in "$@"; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != ii* ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

baton_ensure_packages() {
  if (($# == 0)); then
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "baton: dpkg-query not found: these scripts expect Debian 12 (bookworm)" >&2
    return 1
  fi
  local missing=()
  mapfile -t missing < <(baton_missing_packages "$@")
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  echo "baton: missing packages: ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then
    echo "baton: not root; install them with:" >&2
    echo "  sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
    return 1
  fi
  echo "baton: installing ${missing[*]}" >&2
  apt-get update || {
    echo "baton: apt-get update failed" >&2
    return 1
  }
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" || {
    echo "baton: apt-get install failed for: ${missing[*]}" >&2
    return 1
  }
  mapfile -t missing < <(baton_missing_packages "$@")
  if ((${#missing[@]} != 0)); then
    echo "baton: still missing after apt-get install: ${missing[*]}" >&2
    return 1
  fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  case "${1:---all}" in
    --build) baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}" ;;
    --test) baton_ensure_packages "${BATON_TEST_PACKAGES[@]}" ;;
    --all) baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}" "${BATON_TEST_PACKAGES[@]}" ;;
    -h | --help)
      sed -n '2,10p' "$0"
      exit 0
      ;;
    *)
      echo "usage: $0 [--build|--test|--all]" >&2
      exit 2
      ;;
  esac
  echo "baton: all required packages are installed" >&2
fi

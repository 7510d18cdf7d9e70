#!/usr/bin/env bash
# verify_units.sh BATON UNIT_DIR: `systemd-analyze verify` on daemon/systemd/baton.service and
# on an instance of baton@.service (baton@example.service), with ExecStart's /usr/bin/baton
# replaced by BATON (the build's: verify needs the binary to exist). Fails on a non-zero exit
# status and on any message (verify reports unknown keys and bad values but still exits 0).
set -euo pipefail
baton=$1
units=$2
command -v systemd-analyze >/dev/null || { echo "verify_units: systemd-analyze not found (package systemd)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|/usr/bin/baton|$baton|g" "$units/baton.service" >"$tmp/baton.service"
sed "s|/usr/bin/baton|$baton|g" "$units/baton@.service" >"$tmp/baton@example.service"
grep -q "^ExecStart=$baton run --config /etc/baton/baton.json\$" "$tmp/baton.service"
grep -q "^ExecStart=$baton run --config /etc/baton/%i.json\$" "$tmp/baton@example.service"
status=0
for unit in "$tmp/baton.service" "$tmp/baton@example.service"; do
  out=$(systemd-analyze verify --man=no "$unit" 2>&1) || { echo "verify failed: $unit" >&2; status=1; }
  if [[ -n "$out" ]]; then
    echo "systemd-analyze verify $(basename "$unit"):" >&2
    echo "$out" >&2
    status=1
  fi
done
# The settings the daemon relies on (README "Running under systemd").
for unit in "$units/baton.service" "$units/baton@.service"; do
  for want in Type=notify NotifyAccess=main KillMode=mixed Delegate=yes Restart=on-failure \
    WatchdogSec= 'ExecReload=/bin/kill -HUP $MAINPID' StateDirectory=baton \
    WorkingDirectory=/var/lib/baton ConfigurationDirectory=baton User=baton Group=baton; do
    grep -qF -- "$want" "$unit" || { echo "$(basename "$unit"): missing $want" >&2; status=1; }
  done
  if grep -qE '^(ProtectControlGroups|NoNewPrivileges)=' "$unit"; then
    echo "$(basename "$unit"): ProtectControlGroups/NoNewPrivileges break Delegate= or jobs" >&2
    status=1
  fi
done
[[ $status == 0 ]] && echo "verify_units: baton.service and baton@example.service verify"
exit $status

#!/usr/bin/env bash
# scripts/gen-man.sh: writes the man page baton.1 from the executable's own help with help2man:
# `baton --help` and `baton --version` give NAME, SYNOPSIS and DESCRIPTION; a section COMMANDS
# holds `baton help CMD` for every command `baton --help` lists. Re-run it after changing the
# command line (daemon/cli.cpp); tests/packaging fails while daemon/baton.1 is out of date.
#
# usage: scripts/gen-man.sh [--baton PATH] [--out FILE]
#
#   --baton PATH  the executable (default: build/daemon/baton, built by scripts/test.sh or
#                 `cmake --build build --target baton`); build it with every backend, since
#                 `baton --help` lists the backends of the build
#   --out FILE    where to write (default: daemon/baton.1, the committed page)
#
# The page's date is the last commit's (SOURCE_DATE_EPOCH), so regenerating an unchanged page
# changes nothing.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
baton="$ROOT/build/daemon/baton"
out="$ROOT/daemon/baton.1"
die() {
  echo "gen-man.sh: $*" >&2
  exit 2
}
while (($#)); do
  case "$1" in
    --baton) (($# >= 2)) || die "--baton needs a path"; baton=$2; shift 2 ;;
    --out) (($# >= 2)) || die "--out needs a file"; out=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -x "$baton" ]] || die "$baton: no such executable (build it: cmake --build build --target baton)"
command -v help2man >/dev/null || die "help2man is not installed (apt-get install help2man)"

work=$(mktemp -d "${TMPDIR:-/tmp}/baton-man.XXXXXX")
trap 'rm -rf "$work"' EXIT

# roff for a block of preformatted text: backslashes escaped, a leading '.' or "'" protected,
# '-' as \- (so that options can be copied from the page).
roff_block() {
  sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" -e 's/-/\\-/g'
}

commands=$("$baton" --help | sed -n -E 's/^  baton ([a-z][a-z-]*)( .*)?$/\1/p')
[[ -n "$commands" ]] || die "'$baton --help' lists no commands"
{
  echo "[NAME]"
  echo "baton \\- singleton periodic jobs across a cluster (a cluster-wide cron)"
  echo
  echo "[COMMANDS]"
  for cmd in $commands; do
    [[ "$cmd" == help ]] && continue
    echo ".SS $cmd"
    echo ".nf"
    "$baton" help "$cmd" | roff_block
    echo ".fi"
  done
  cat <<'ROFF'

[FILES]
.TP
.I /etc/baton/baton.json
the config of the baton.service unit (the .deb installs an example; also in
.IR /usr/share/doc/baton/examples/baton.json )
.TP
.I /etc/baton/NAME.json
the config of the unit instance baton@NAME.service
.TP
.I /var/lib/baton
the state directory of the units (the example config keeps its SQLite database there)

[SEE ALSO]
.BR crontab (5),
.BR systemd.service (5).
The project's README.md and daemon/README.md describe the config format, the backends and the
signals.
ROFF
} >"$work/baton.h2m"

# help2man reads GNU-style help: "Usage: ..." / "  or:  ..." lines for the SYNOPSIS, headings
# ending in ':'. A wrapper named baton reshapes `baton --help` so (text unchanged otherwise):
# the usage block becomes the synopsis plus a "Commands:" list of the one-line summaries, and the
# backends' heading line becomes a heading "Backends:" over the same sentence.
cat >"$work/baton" <<WRAPPER
#!/usr/bin/env bash
set -euo pipefail
[[ "\$*" == --help ]] || exec "$baton" "\$@"
"$baton" --help | awk '
  NR == 1 { next }                                   # "baton - ...": the NAME section
  /^Usage:\$/ { usage = 1; next }
  usage && /^  baton / { sub(/^  /, ""); syn[++n] = \$0; next }
  usage && /^      / { sub(/^ +/, ""); sum[n] = \$0; next }
  usage && /^\$/ {
    usage = 0
    for (i = 1; i <= n; ++i) print (i == 1 ? "Usage: " : "  or:  ") syn[i]
    print ""; print "Commands:"
    for (i = 1; i <= n; ++i) {
      split(syn[i], w, " ")
      if (w[2] ~ /^-/) continue
      printf "  %-10s %s\n", w[2], sum[i]
    }
    print ""; next
  }
  /^Backends of this build/ { print "Backends:"; sub(/:\$/, "."); print; next }
  { print }'
WRAPPER
chmod +x "$work/baton"

epoch=$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)
SOURCE_DATE_EPOCH=$epoch help2man --no-info --section 1 --include "$work/baton.h2m" \
  --output "$work/baton.1" "$work/baton"
mv "$work/baton.1" "$out"
echo "$out"

#!/usr/bin/env bash
# The bash completion (daemon/completion/baton.bash) offers every command `baton --help` lists
# and, after a command, every option `baton help CMD` lists (also after options with values given
# before the command); after --config it offers .json files.
# usage: completion_test.sh BATON_EXECUTABLE COMPLETION_FILE
set -euo pipefail
baton=$1
# shellcheck source=/dev/null
source "$2"
fail() {
  echo "completion: $*" >&2
  exit 1
}
# complete WORD...: what the completion offers for the last word of the command line.
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _baton
  printf '%s\n' "${COMPREPLY[@]}"
}
# The commands and options, read here from the help text's layout (independently of the
# completion's own parsing): the usage block's "  baton CMD" lines, each CMD's "Options:" block.
# (awk reads to the end: an early exit would kill the writer with SIGPIPE, failing the pipe.)
commands=$("$baton" --help | awk '/^Usage:/ { u = 1; next } u && /^$/ { u = 0 }
  u && /^  baton [a-z]/ { print $2 }')
(($(wc -w <<<"$commands") >= 8)) || fail "'baton --help' lists too few commands: $commands"
offered=$(complete_words "$baton" "")
for cmd in $commands; do
  grep -qx -- "$cmd" <<<"$offered" || fail "'baton <TAB>' does not offer '$cmd' (offers: $offered)"
done
checked=0
for cmd in $commands; do
  options=$("$baton" help "$cmd" | awk '/^Options:/ { o = 1; next } o && /^$/ { o = 0 }
    o && $1 ~ /^--/ { print $1 }')
  [[ -n "$options" || "$cmd" == help ]] || fail "'baton help $cmd' lists no options"
  offered=$(complete_words "$baton" "$cmd" "--")
  for option in $options; do
    grep -qx -- "$option" <<<"$offered" ||
      fail "'baton $cmd --<TAB>' does not offer '$option' (offers: $offered)"
    checked=$((checked + 1))
  done
done
((checked >= 16)) || fail "only $checked options checked"
# The command is found after an option with a value: its options are offered, and nothing is
# offered for an option's value.
offered=$(complete_words "$baton" --log-level debug run --)
grep -qx -- --config <<<"$offered" || fail "'baton --log-level debug run --<TAB>' offers: $offered"
offered=$(complete_words "$baton" calendar --count "")
[[ -z "$offered" ]] || fail "'baton calendar --count <TAB>' offers: $offered"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
touch "$dir/cluster.json" "$dir/notes.txt"
offered=$(cd "$dir" && complete_words "$baton" run --config "")
grep -qx cluster.json <<<"$offered" || fail "'run --config <TAB>' does not offer cluster.json"
! grep -qx notes.txt <<<"$offered" || fail "'run --config <TAB>' offers notes.txt"
echo "completion offers $(wc -w <<<"$commands") commands and $checked command options"

# bash completion for baton (installed as share/bash-completion/completions/baton).
# Commands and options come from the executable itself (`baton --help`, `baton help CMD`), so
# the completion never falls behind the command line.

# _baton_help_options PROG CMD: the options `PROG help CMD` lists ("  --name ..." lines).
_baton_help_options() {
  "$1" help "$2" 2>/dev/null | sed -n -E 's/^  (--[a-z][a-z-]*).*/\1/p'
}

# _baton_commands PROG: the commands `PROG --help` lists ("  baton CMD ..." lines).
_baton_commands() {
  "$1" --help 2>/dev/null | sed -n -E 's/^  baton ([a-z][a-z-]*)( .*)?$/\1/p'
}

# _baton_value_options PROG: the options that take a value, of every command ("  --name VALUE").
_baton_value_options() {
  local c
  for c in $(_baton_commands "$1"); do
    "$1" help "$c" 2>/dev/null | sed -n -E 's/^  (--[a-z][a-z-]*) [A-Z].*/\1/p'
  done | sort -u
}

_baton() {
  local cur prev prog cmd i valued
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  prog=${COMP_WORDS[0]}
  valued=" -c $(_baton_value_options "$prog" | tr '\n' ' ') "
  # The command: the first word after the program that is not an option or an option's value.
  cmd=""
  for ((i = 1; i < COMP_CWORD; ++i)); do
    if [[ "$valued" == *" ${COMP_WORDS[i]} "* ]]; then
      ((++i))
    elif [[ "${COMP_WORDS[i]}" != -* ]]; then
      cmd=${COMP_WORDS[i]}
      break
    fi
  done

  case "$prev" in
    --config | -c)
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -- "$cur"))
      return ;;
    --log-level)
      COMPREPLY=($(compgen -W "trace debug info warn error" -- "$cur"))
      return ;;
    --time-zone)
      COMPREPLY=($(compgen -W "UTC $(cd /usr/share/zoneinfo 2>/dev/null &&
        find . -type f -name '[A-Z]*' 2>/dev/null | sed 's|^\./||' | grep -v '^posix/\|^right/')" \
        -- "$cur"))
      return ;;
  esac
  # Any other option's value (--from TIME, --count N, ...): nothing to offer.
  [[ "$valued" == *" $prev "* ]] && return

  if [[ -z "$cmd" ]]; then
    if [[ "$cur" == -* ]]; then
      COMPREPLY=($(compgen -W "--help --version --log-level" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$(_baton_commands "$prog")" -- "$cur"))
    fi
    return
  fi
  if [[ "$cmd" == help ]]; then
    COMPREPLY=($(compgen -W "$(_baton_commands "$prog")" -- "$cur"))
    return
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_baton_help_options "$prog" "$cmd") --help" -- "$cur"))
  fi
}
complete -F _baton baton

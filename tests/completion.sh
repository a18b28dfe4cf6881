#!/usr/bin/env bash
# bash completion (completion/shmsched) driven in a real bash as bash-completion drives it
# (COMP_WORDS, COMP_CWORD, then the function; COMPREPLY checked): the commands and each
# command's long options are exactly those of `shmsched --help` and `shmsched CMD --help`;
# segment names are the shmsched segments of $SHMSCHED_DIR, or /dev/shm, and nothing else
# there; class names are the segment's own (lease classes for run, worker classes for
# submit); tenants and teams its tenant table's; a few options' values; a command after run's
# "--"; and bash itself completing command lines typed on a terminal (tmux).
# Usage: tests/completion.sh SOURCE_DIR SHMSCHED. Exits 77 (skipped) without bash-completion.
set -euo pipefail
umask 022 # the scratch directories are ours alone to write, whatever umask the caller runs with
src=$(realpath "$1") bin=$(realpath "$2")
bc=/usr/share/bash-completion/bash_completion
if [ ! -r "$bc" ]; then
  echo "completion: bash-completion is not installed (scripts/setup.sh installs it): skipped" >&2
  exit 77
fi
work=$(mktemp -d)
shmseg=shmst-comp-$$
trap 'SHMSCHED_DIR= "$bin" destroy "$shmseg" --force >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
fail() {
  echo "completion: $*" >&2
  exit 1
}

# shellcheck disable=SC1090
source "$bc"
# shellcheck disable=SC1091
source "$src/completion/shmsched"
# compopt works only while bash itself runs a completion; here its options would change nothing.
compopt() { :; }

# complete WORD... : complete the last word of `shmsched WORD...` (an empty last word completes
# from nothing), or with AT=N set the Nth word, the cursor at its end; prints COMPREPLY, sorted,
# one per line.
complete_line() {
  COMP_WORDS=("$bin" "$@")
  COMP_CWORD=${AT:-$((${#COMP_WORDS[@]} - 1))}
  COMP_LINE="${COMP_WORDS[*]}"
  local before=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
  COMP_POINT=${#before[*]}
  before="${before[*]}"
  COMP_POINT=${#before}
  COMPREPLY=()
  set +e # as in an interactive shell
  _shmsched
  set -e
  ((${#COMPREPLY[@]} == 0)) || printf '%s\n' "${COMPREPLY[@]}" | sort
}
# expect "WANT" WORD... : the completions, space-separated and sorted, are exactly WANT.
expect() {
  local want=$1 got
  shift
  got=$(complete_line "$@" | tr '\n' ' ' | sed 's/ $//')
  [ "$got" = "$want" ] || fail "shmsched $* <TAB>: got '$got', want '$want'"
}
# The long options of a --help's Options block, sorted, space-separated.
help_options() {
  "$bin" "$@" --help | awk '/^Options:$/ {on = 1; next} on && /^$/ {exit} on' |
    grep -oE '^ +(-[A-Za-z0-9], +)?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+' | sort -u |
    tr '\n' ' ' | sed 's/ $//'
}

# Commands, and each command's options, both ways.
commands=$("$bin" --help | awk '/^Commands:$/ {on = 1; next} on && /^$/ {exit} on' |
  awk '/^  [a-z]/ {print $1}' | sort | tr '\n' ' ' | sed 's/ $//')
[ -n "$commands" ] || fail "no commands in shmsched --help"
expect "$commands" ''
expect "--help --version" -
for c in $commands; do
  [ "$c" = help ] && continue
  # The whole page first: head closing the pipe early would fail a long page's write.
  page=$("$bin" "$c" --help)
  if [[ $page == "Usage: shmsched $c "* ]]; then
    expect "$(help_options "$c")" "$c" --
  else # its help is another command's page (resume: drain's): only the options it takes
    [ "$(complete_line "$c" --)" = --help ] || fail "shmsched $c -- <TAB>: $(complete_line "$c" --)"
  fi
done
expect "cancel check create" c

# Segment names: the shmsched segments of $SHMSCHED_DIR, not its other files.
export SHMSCHED_DIR=$work/segs
mkdir "$SHMSCHED_DIR"
"$bin" create farm --class standard:cells=2,queue=8 \
  --class small:cells=1,queue=4,mode=worker >/dev/null
"$bin" create fleet --class large:cells=1,queue=2 >/dev/null
printf 'SHMSCHEDnot-really' >"$SHMSCHED_DIR/fake-short" && truncate -s 4 "$SHMSCHED_DIR/fake-short"
echo 'not a segment' >"$SHMSCHED_DIR/notes"
ln -s farm "$SHMSCHED_DIR/link"
mkdir "$SHMSCHED_DIR/dir"
expect "farm fleet" status ''
expect "farm fleet" top f
expect "farm" destroy fa
expect "" create fa                      # create names a new segment
expect "farm fleet" metrics farm ''      # metrics takes several segments
expect "" status farm ''                 # one segment is enough
expect "farm fleet" top -d 0.5 f          # an option's value is no operand
expect "farm" run --class=standard fa    # nor is one joined to its option
# A path: files, as any path completes.
expect "$SHMSCHED_DIR/dir" status "$SHMSCHED_DIR/di"

# Class names: the segment's own, as status lists them; run takes lease classes, submit and
# worker worker classes, top any.
expect "small standard" top farm -c ''
expect "small standard" top farm --class ''
expect "small standard" top farm --class=   # --opt=value
expect "standard" run farm --class=st
expect "standard" run farm --class ''
expect "standard" jobserver farm -c s
expect "small" submit farm -c ''
AT=3 expect "small" worker --class s farm # the segment may come after the cursor
expect "" worker -c ''           # no segment yet: nothing to read
expect "large" repair fleet --class ''
expect "large" events fleet -c l

# Event kinds: exactly the library's (core/report.c), each one events --kind takes.
want=$(grep -oE '^ +\[SHMS_EVENT_[A-Z_]+\] = "[a-z-]+"' "$src/core/report.c" | grep -oE '"[a-z-]+"' |
  tr -d '"' | sort | tr '\n' ' ' | sed 's/ $//')
[ -n "$want" ] || fail "no event kinds found in core/report.c"
expect "$want" events farm --kind ''
for k in $want; do
  "$bin" events farm --kind "$k" >/dev/null || fail "events --kind $k: refused"
done
expect "granted,rejected granted,request-owner-lost granted,resumed granted,revoked" events farm -k granted,re

# Tenants and teams: the segment's tenant table, as policy lists it.
"$bin" run farm -c standard -t alice -- true
"$bin" policy farm --tenant bob --weight 2 >/dev/null
"$bin" policy farm --tenant carol --team research >/dev/null
expect "alice bob carol" run farm --tenant ''
expect "bob" submit farm -c small -t b
expect "research" policy farm --team ''
expect "" status farm -t ''      # status -t is --tenants: no value
expect "farm fleet" metrics -t f # nor is metrics -t

# Values, and what follows an option that takes one.
expect "grants name queued wait" top farm --sort ''
expect "auto fifo pipe" jobserver farm --style ''
expect "standard:" create x --class stan
expect "--delay" top farm --del
expect "" top farm --delay ''
# supervise --create: create's options follow.
expect "--config" supervise farm --create --class standard:cells=1,queue=1 --conf
# After run's "--": a command.
[[ " $(complete_line run farm -c standard -t ci -- mkdi | tr '\n' ' ') " == *" mkdir "* ]] ||
  fail "run farm ... -- mkdi <TAB>: mkdir is not offered"
expect "" run farm -c standard -t ci -- mkdir --cla # its options are not run's
expect "top" help to

# /dev/shm when SHMSCHED_DIR is unset: a segment there is offered.
unset SHMSCHED_DIR
"$bin" create "$shmseg" --class tiny:cells=1,queue=1 >/dev/null
expect "$shmseg" status "$shmseg"
expect "tiny" top "$shmseg" -c ''
# And bash itself, on a terminal (tmux): Tab after a prefix completes the command line.
if command -v tmux >/dev/null 2>&1; then
  sock=shmst-comp-$$
  trap 'tmux -L "$sock" kill-server 2>/dev/null || true
        rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$sock"
        SHMSCHED_DIR= "$bin" destroy "$shmseg" --force >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
  mkdir "$work/bin"
  ln -s "$bin" "$work/bin/shmsched"
  cat >"$work/rc" <<RC
source $bc
source $src/completion/shmsched
PATH=$work/bin:\$PATH
export SHMSCHED_DIR=$work/segs
PS1='$ '
RC
  SHMSCHED_DIR=$work/segs "$bin" create jobs9 --class standard:cells=1,queue=1 >/dev/null
  tmux -L "$sock" new-session -d -s comp -x 150 -y 20 "bash --noprofile --rcfile '$work/rc' -i"
  # The screen, once it shows pattern $1 (a look every 50 ms; what ends the wait is the screen).
  wait_screen() {
    local deadline=$((SECONDS + 30)) screen
    while ((SECONDS < deadline)); do
      screen=$(tmux -L "$sock" capture-pane -p -t comp 2>/dev/null) || screen=
      grep -Eq -- "$1" <<<"$screen" && return 0
      sleep 0.05
    done
    fail "the terminal never showed '$1': $screen"
  }
  wait_screen '^\$$' # (trailing blanks are not captured)
  tmux -L "$sock" send-keys -t comp 'shmsched to' Tab 'jobs' Tab '--cla' Tab 'st' Tab
  wait_screen '^\$ shmsched top jobs9 --class standard$'
  tmux -L "$sock" send-keys -t comp C-u 'shmsched top jobs9 -d 0.5 --sor' Tab 'q' Tab
  wait_screen '^\$ shmsched top jobs9 -d 0.5 --sort queued$'
fi
echo "completion: commands, options, segments, classes and values complete as they should"

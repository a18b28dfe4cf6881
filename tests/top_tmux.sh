#!/usr/bin/env bash
# `shmsched top` driven in a real terminal: tmux runs it against a known load (two holders of
# the two cells of class standard, two requests of tenant carol and one of dave queued behind
# them), the test reads the screen with capture-pane, sends keys (switch class, help, sort and
# reverse it, leases, pause, quit) and resizes the window from 120x40 to 80x24, checking the
# columns each width keeps; then the batch and JSON forms: `top -b -n 2 | cat`, top on a pipe
# and top with TERM=dumb on a terminal print no escape byte and no keys, --json prints one
# object per frame. Last the segment is destroyed and created again under its name: the screen
# says it is gone, then shows the new one; batch and JSON followers do the same, and the one
# stopped while the segment is gone exits 1.
# Synchronisation: FIFOs for the load, `tmux wait-for` for top's exit, and what top shows: the
# test waits until the pane (or a follower's output) shows what it expects (or fails after
# 30 s), never for a time.
# Usage: top_tmux.sh BUILD_DIR
set -euo pipefail
B=$1/bin/shmsched
command -v tmux >/dev/null || { echo "tmux is missing: run scripts/setup.sh" >&2; exit 1; }
name=shmst-top-$$
sock=shmst-top-$$
dir=$(mktemp -d)
pids=()
fail() {
  echo "top_tmux: FAILED: $*" >&2
  [ -n "${screen:-}" ] && printf '%s\n' "--- the screen:" "$screen" >&2
  exit 1
}
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$B" destroy "$name" --force >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

"$B" create "$name" --class standard:cells=2,queue=8 --class small:cells=1,queue=4 >/dev/null
mkfifo "$dir/ready" "$dir/go" "$dir/t1" "$dir/t2" "$dir/t3" "$dir/t4"
# Read and write (Linux): never blocks to open, never reads an end between the holders' lines.
exec {ready}<>"$dir/ready"
for t in alice bob; do
  "$B" run "$name" -c standard -t "$t" -- sh -c "echo held > '$dir/ready'; read x < '$dir/go' || true" &
  pids+=($!)
  read -r line <&$ready
done
# A request of tenant $1 queued, its ticket read from FIFO $2 (the ticket is printed once the
# request is in the queue).
queue() {
  "$B" run "$name" -c standard -t "$1" --print-ticket -- true 2>"$2" &
  pids+=($!)
  exec {fd}<"$2" # kept open: the run may write to stderr again
  read -r ticket <&$fd
}
queue carol "$dir/t1"
queue carol "$dir/t2"
queue dave "$dir/t3"

# The screen, once it shows every pattern given (extended regular expressions), into $screen.
wait_screen() {
  local deadline=$((SECONDS + 30)) p ok
  while ((SECONDS < deadline)); do
    screen=$(tmux -L "$sock" capture-pane -p -t top 2>/dev/null) || screen=
    ok=1
    for p in "$@"; do grep -Eq -- "$p" <<<"$screen" || { ok=0; break; }; done
    ((ok)) && return 0
    sleep 0.05 # between two looks at the screen; what ends the wait is what it shows
  done
  fail "the screen never showed: $*"
}
# File $1, once it holds every pattern after it.
wait_file() {
  local f=$1 deadline=$((SECONDS + 30)) p ok
  shift
  while ((SECONDS < deadline)); do
    ok=1
    for p in "$@"; do grep -Eq -- "$p" "$f" 2>/dev/null || { ok=0; break; }; done
    ((ok)) && return 0
    sleep 0.05 # between two looks at the file; what ends the wait is what it holds
  done
  fail "$f never showed: $* ($(tail -c 2000 "$f" 2>/dev/null))"
}
# Whether text $1 has a line matching $2 above one matching $3.
above() {
  awk -v a="$2" -v b="$3" '!ia && $0 ~ a { ia = NR } !ib && $0 ~ b { ib = NR }
    END { exit !(ia && ib && ia < ib) }' <<<"$1"
}
# The screen's lines fit a window of $1 columns and $2 lines.
fits() {
  local long
  long=$(awk -v w="$1" 'length($0) > w' <<<"$screen")
  [ -z "$long" ] || fail "lines wider than the $1-column window: $long"
  [ "$(wc -l <<<"$screen")" -le "$2" ] || fail "more lines than the $2-line window"
}
keys() { tmux -L "$sock" send-keys -t top "$@"; }

# 120 columns: every column but EXP/s, the classes in the order of --class above (standard
# before small).
# exit-empty off: the server outlives top's session, so that the wait for top-done below finds
# it (and the signal, which tmux keeps for a later waiter) however late it comes.
tmux -L "$sock" new-session -d -s top -x 120 -y 40 \
  "'$B' top '$name' -d 100ms -c standard 2>'$dir/top.err'; echo \$? >'$dir/top.status'; tmux -L '$sock' wait-for -S top-done" \; \
  set-option -g exit-empty off
wait_screen '^shmsched top: '"$name"' +state active .* processes 5 +supervisor none' \
  '^CLASS +CELLS +LSD +GRT +AVL +QRN +OFF +QUEUE +GRANT/s +REJ/s +CANC/s +WAIT +WAITMAX +OLDEST$' \
  '^standard +\[#{12}\] +2 +0 +0 +0 +0 +3/8 ' \
  '^small +\[\.{12}\] +0 +0 +1 +0 +0 +0/4 ' \
  '^TENANTS of standard: 4 +\(fair share 50%\) +sort: grants/s +keys: \? help' \
  '^TENANT +QUEUED +ACTIVE +GRANT/s +SHARE +WAIT +WAITMAX +W +TIME +ENTIT +TEAM$' \
  '^carol +2 +0 +0\.0 ' '^dave +1 +0 +0\.0 ' '^alice +0 +0 +0\.0 ' '^bob +0 +0 +0\.0 '
# (alice and bob are tenants of the class as well: their leases, taken at once, are counted.)
fits 120 40
grep -q 'EXP/s' <<<"$screen" && fail "EXP/s, the first column to go, is shown in 120 columns"
above "$screen" '^standard ' '^small ' || fail "the classes are not in configuration order"
keys c
wait_screen '^TENANTS of small: 0 '
keys C
wait_screen '^TENANTS of standard: 4 ' '^carol +2 '
# ? shows the keys; any key goes back to the view (and does nothing else).
keys '?'
wait_screen '^shmsched top: keys$' '^  r +reverse the sort order$' '^  Space, p +pause' \
  '^  \?, h +this help$' '^Any key returns to the view\.$'
keys c
wait_screen '^TENANTS of standard: 4 '
# s: by queued (carol 2, dave 1); r reverses it, and again back.
keys s
wait_screen 'sort: queued +keys:' '^carol +2 ' '^dave +1 '
above "$screen" '^carol ' '^dave ' || fail "sort by queued: carol (2) is not above dave (1)"
keys r
wait_screen 'sort: queued reversed +keys:' '^carol +2 ' '^dave +1 '
above "$screen" '^dave ' '^carol ' || fail "sort by queued reversed: dave (1) is not above carol (2)"
keys r
wait_screen 'sort: queued +keys:'
above "$screen" '^carol ' '^dave ' || fail "r again: carol is not back above dave"
# l: the class's leases, whose each is (the holders ran as this user), and back to the tenants.
me=$(id -un)
keys l
wait_screen '^LEASES of standard: 2 ' '^ CELL STATE +AGE +PID HOLDER +USER +TENANT$' \
  "^ +0 leased +[0-9.]+(us|ms|s) +[0-9]+ running $me +(alice|bob)\$" \
  "^ +1 leased +[0-9.]+(us|ms|s) +[0-9]+ running $me +(alice|bob)\$"
keys l
wait_screen '^TENANTS of standard: 4 ' '^carol +2 '

# -d: seconds as top(1) takes them, or a duration with a unit; a bad one is a usage error.
for bad in 0 -1 abc 0.0001 1.5s; do
  rc=0
  "$B" top "$name" -b -n 1 -d "$bad" >/dev/null 2>"$dir/bad.err" || rc=$?
  [ "$rc" = 2 ] && grep -q "^shmsched: invalid-argument: top: --delay: .*'$bad'" "$dir/bad.err" ||
    fail "top -d $bad: exit $rc, $(cat "$dir/bad.err")"
done

# Batch: plain frames, no escape byte, no keys; automatic on a pipe, and with TERM=dumb on a
# terminal.
"$B" top "$name" -b -n 2 -d 50ms | cat >"$dir/batch"
"$B" top "$name" -n 2 -d 0.05 >"$dir/pipe" # top(1)'s seconds
TERM=dumb script -qec "'$B' top '$name' -n 2 -d 50ms" /dev/null >"$dir/dumb" </dev/null
"$B" top "$name" -b -n 1 -d 50ms -c standard --leases >"$dir/leases"
[ "$(grep -cE "^ +[01] leased .* running $me +(alice|bob)\$" "$dir/leases")" = 2 ] ||
  fail "top --leases: $(cat "$dir/leases")"
awk 'length($0) > 80 && !/^(CLASS|standard|small|shmsched top)/' "$dir/leases" | grep -q . &&
  fail "a leases line wider than 80 columns: $(cat "$dir/leases")"
for f in batch pipe dumb; do
  ! grep -q $'\x1b' "$dir/$f" || fail "escape bytes in the $f output: $(cat -v "$dir/$f")"
  ! grep -q 'keys' "$dir/$f" || fail "keys named in the $f output: $(cat "$dir/$f")"
  [ "$(grep -c '^shmsched top: ' "$dir/$f")" = 2 ] || fail "not 2 frames in $f: $(cat "$dir/$f")"
  grep -Eq '^standard +\[#{12}\] +2 +0 +0 +0 +0 +3/8 ' "$dir/$f" || fail "$f: $(cat "$dir/$f")"
  grep -q 'EXP/s' "$dir/$f" || fail "$f: batch frames have no width, yet a column is missing"
done
"$B" top "$name" -b -n 1 -d 50ms -c standard -s queued -r >"$dir/reverse"
grep -q '^TENANTS of standard: 4 .* sort: queued reversed$' "$dir/reverse" &&
  above "$(cat "$dir/reverse")" '^dave ' '^carol ' || fail "-s queued -r: $(cat "$dir/reverse")"
# JSON: one object per frame.
"$B" top "$name" --json -n 2 -d 50ms >"$dir/json"
/usr/bin/python3 - "$dir/json" <<'PY' || fail "--json: $(cat "$dir/json")"
import json, sys
frames = [json.loads(line) for line in open(sys.argv[1])]
assert len(frames) == 2, frames
std = frames[1]["classes"]["standard"]
assert (std["cells_leased"], std["queue_depth"], std["queue_capacity"]) == (2, 3, 8), std
assert [(t["name"], t["queued"]) for t in std["tenants"] if t["queued"]] == [("carol", 2), ("dave", 1)], std
assert sorted(t["name"] for t in std["tenants"] if not t["queued"]) == ["alice", "bob"], std
assert frames[1]["supervisor_pid"] is None and frames[1]["live_processes"] == 5, frames[1]
assert list(frames[1]["classes"]) == ["standard", "small"], frames[1]["classes"].keys()
assert len(frames[1]["incarnation"]) == 16, frames[1]
import os, pwd
me = pwd.getpwuid(os.geteuid())
leases = std["leases"]
assert [l["cell"] for l in leases] == [0, 1], leases
assert all(l["state"] == "leased" and l["uid"] == me.pw_uid and l["user"] == me.pw_name
           for l in leases), leases
assert sorted(l["tenant"] for l in leases) == ["alice", "bob"], leases
PY

# Space pauses: the header says so and the display stays as it was while erin's request joins
# the queue. A batch top of the same delay sees it two intervals later: by then a top that was
# not paused would have drawn it. p resumes, and the next frame shows it.
keys Space
wait_screen '^shmsched top: '"$name"'  paused  state active' '^standard +\[#{12}\] .* 3/8 '
queue erin "$dir/t4"
"$B" top "$name" -b -n 2 -d 100ms >"$dir/paused"
grep -Eq '^standard +\[#{12}\] .* 4/8 ' "$dir/paused" || fail "erin not queued: $(cat "$dir/paused")"
wait_screen '  paused  ' '^standard +\[#{12}\] .* 3/8 '
keys p
wait_screen '^shmsched top: '"$name"'  state active' '^standard +\[#{12}\] .* 4/8 ' '^erin +1 '

# 80x24: the waits, the queue and the grant rate stay, the per-state counts and rarer rates go;
# the tenants keep their share and waits.
tmux -L "$sock" resize-window -t top -x 80 -y 24
wait_screen '^CLASS +CELLS +QUEUE +GRANT/s +WAIT +WAITMAX +OLDEST$' \
  '^standard +\[#{12}\] +4/8 +[0-9.]+ ' '^small +\[\.{12}\] +0/4 ' \
  '^TENANT +QUEUED +SHARE +WAIT +WAITMAX +TIME$' '^carol +2 ' '^dave +1 ' '^erin +1 '
fits 80 24
keys '?'
wait_screen '^shmsched top: keys$' '^  q +quit$' '^Any key returns to the view\.$'
fits 80 24
keys x
wait_screen '^TENANT +QUEUED +SHARE +WAIT +WAITMAX +TIME$'
keys Space
wait_screen '^shmsched top: '"$name"'  paused  state active'
keys Space
wait_screen '^shmsched top: '"$name"'  state active'
# The old width test: at 60 columns, as the narrowest terminals.
tmux -L "$sock" resize-window -t top -x 60 -y 20
wait_screen '^CLASS +QUEUE +GRANT/s +WAIT +WAITMAX$' '^standard +4/8 ' '^TENANT +SHARE +WAIT +WAITMAX$'
fits 60 20
tmux -L "$sock" resize-window -t top -x 80 -y 24
wait_screen '^CLASS +CELLS +QUEUE +GRANT/s +WAIT +WAITMAX +OLDEST$'

# Let the load go: the holders end, the queued runs get the cells and end.
exec {go}>"$dir/go"
exec {go}>&-
for p in "${pids[@]}"; do wait "$p" || fail "a run of the load exited $?"; done
pids=()

# Destroyed and created again under the name. Two followers: batch text, stopped while the
# segment is gone (exit 1), and JSON, stopped once the new one is followed (exit 0).
"$B" top "$name" -b -d 50ms >"$dir/follow" 2>"$dir/follow.err" &
follow=$!
pids+=($follow)
"$B" top "$name" --json -d 50ms >"$dir/follow.json" &
follow_json=$!
pids+=($follow_json)
wait_file "$dir/follow" '^standard '
wait_file "$dir/follow.json" '"state": "active"'
"$B" destroy "$name" --force >/dev/null
wait_screen '^shmsched top: '"$name"'  state gone ' \
  "^segment '$name' \\(incarnation [0-9a-f]{16}\\) was destroyed\$"
grep -q '^standard ' <<<"$screen" && fail "the destroyed segment's classes are still shown"
wait_file "$dir/follow" '^shmsched top: '"$name"'  state gone ' "^segment '$name' .* was destroyed"
wait_file "$dir/follow.json" '"state": "gone"'
kill -TERM "$follow"
st=0
wait "$follow" || st=$?
[ "$st" = 1 ] || fail "top -b stopped while its segment was gone exited $st"
grep -q "^shmsched: not-found: top: segment '$name' was destroyed\$" "$dir/follow.err" ||
  fail "top -b: $(cat "$dir/follow.err")"
"$B" create "$name" --class large:cells=3,queue=5 >/dev/null
wait_screen '^shmsched top: '"$name"'  state active' '^large +\[\.{12}\] +0/5 ' \
  '^TENANTS of large: 0 '
grep -Eq '^(standard|small) ' <<<"$screen" && fail "classes of the destroyed segment are shown"
wait_file "$dir/follow.json" '"large": '
kill -TERM "$follow_json"
wait "$follow_json" || fail "top --json stopped while following the new segment exited $?"
pids=()
/usr/bin/python3 - "$dir/follow.json" <<'PY' || fail "--json across destroy and create: $(cat "$dir/follow.json")"
import json, sys
frames = [json.loads(line) for line in open(sys.argv[1])]
states = [f["state"] for f in frames]
first, last = frames[0], frames[-1]
assert first["state"] == "active" and "standard" in first["classes"], first
assert last["state"] == "active" and list(last["classes"]) == ["large"], last
assert first["incarnation"] != last["incarnation"], (first, last)
gone = [f for f in frames if f["state"] == "gone"]
assert gone, states
assert all(f["incarnation"] == first["incarnation"] and f["classes"] == {} for f in gone), gone
# Before it is gone the segment may be seen `destroying` for a frame or two: destroy marks
# the state before it unlinks the name.
i = states.index("gone")
before = states[:i]
j = before.index("destroying") if "destroying" in before else i
assert all(s == "active" for s in before[:j]), states
assert all(s == "destroying" for s in before[j:]), states
assert "active" in states[i:], states
PY
keys q
timeout 30 tmux -L "$sock" wait-for top-done || fail "q did not end top"
[ "$(cat "$dir/top.status")" = 0 ] || fail "top exited $(cat "$dir/top.status"): $(cat "$dir/top.err")"
echo "top_tmux: the screen at 120x40, 80x24 and 60x20, the keys (help, sort reversed, leases, pause), batch and JSON frames, and a segment destroyed and created again all as expected"

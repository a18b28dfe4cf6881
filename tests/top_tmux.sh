#!/usr/bin/env bash
# `shmsched top` driven in a real terminal: tmux runs it against a known load (two holders of
# the two cells of class standard, two requests of tenant carol queued behind them), the test
# reads the screen with capture-pane, sends keys (switch class, sort, quit) and resizes the
# window; then the batch and JSON forms: `top -b -n 2 | cat`, top on a pipe and top with
# TERM=dumb on a terminal print no escape byte, --json prints one object per frame.
# Synchronisation: FIFOs for the load, `tmux wait-for` for top's exit, and the screen itself:
# the test waits until the pane shows what it expects (or fails after 30 s), never for a time.
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
mkfifo "$dir/ready" "$dir/go" "$dir/t1" "$dir/t2"
# Read and write (Linux): never blocks to open, never reads an end between the holders' lines.
exec {ready}<>"$dir/ready"
for t in alice bob; do
  "$B" run "$name" -c standard -t "$t" -- sh -c "echo held > '$dir/ready'; read x < '$dir/go' || true" &
  pids+=($!)
  read -r line <&$ready
done
for i in 1 2; do
  "$B" run "$name" -c standard -t carol --print-ticket -- true 2>"$dir/t$i" &
  pids+=($!)
  exec {fd}<"$dir/t$i" # kept open: carol's run may write to stderr again
  read -r ticket <&$fd
done

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

# exit-empty off: the server outlives top's session, so that the wait for top-done below finds
# it (and the signal, which tmux keeps for a later waiter) however late it comes.
tmux -L "$sock" new-session -d -s top -x 150 -y 30 \
  "'$B' top '$name' -d 100ms -c standard 2>'$dir/top.err'; echo \$? >'$dir/top.status'; tmux -L '$sock' wait-for -S top-done" \; \
  set-option -g exit-empty off
wait_screen '^shmsched top: '"$name"' +state active .* processes 4 +supervisor none' \
  '^standard +\[#{12}\] +2 +0 +0 +0 +0 +2/8 ' \
  '^small +\[\.{12}\] +0 +0 +1 +0 +0 +0/4 ' \
  '^TENANTS of standard: 1 +\(fair share 100%\) +sort: grants/s' \
  '^carol +2 +0 +0\.0 '
tmux -L "$sock" send-keys -t top c
wait_screen '^TENANTS of small: 0 '
tmux -L "$sock" send-keys -t top C
wait_screen '^TENANTS of standard: 1 ' '^carol +2 '
tmux -L "$sock" send-keys -t top s
wait_screen 'sort: queued'
# l: the class's leases, whose each is (the holders ran as this user), and back to the tenants.
me=$(id -un)
tmux -L "$sock" send-keys -t top l
wait_screen '^LEASES of standard: 2 ' '^ CELL STATE +AGE +PID HOLDER +USER +TENANT$' \
  "^ +0 leased +[0-9.]+(us|ms|s) +[0-9]+ running $me +(alice|bob)\$" \
  "^ +1 leased +[0-9.]+(us|ms|s) +[0-9]+ running $me +(alice|bob)\$"
tmux -L "$sock" send-keys -t top l
wait_screen '^TENANTS of standard: 1 ' '^carol +2 '
# A resize: everything is drawn again within the new width, nothing left of the old frame.
tmux -L "$sock" resize-window -t top -x 60 -y 20
wait_screen '^shmsched top: '"$name"' +state active' '^standard +\[#{12}\] +2 ' '^carol +2 '
long=$(awk 'length($0) > 60' <<<"$screen")
[ -z "$long" ] || fail "lines wider than the 60-column window: $long"
[ "$(wc -l <<<"$screen")" -le 20 ] || fail "more lines than the 20-line window"
grep -q 'EXP/s' <<<"$screen" && fail "a column past the new width is still shown"
tmux -L "$sock" send-keys -t top q
timeout 30 tmux -L "$sock" wait-for top-done || fail "q did not end top"
[ "$(cat "$dir/top.status")" = 0 ] || fail "top exited $(cat "$dir/top.status"): $(cat "$dir/top.err")"

# Batch: plain frames, no escape byte; automatic on a pipe, and with TERM=dumb on a terminal.
"$B" top "$name" -b -n 2 -d 50ms | cat >"$dir/batch"
"$B" top "$name" -n 2 -d 50ms >"$dir/pipe"
TERM=dumb script -qec "'$B' top '$name' -n 2 -d 50ms" /dev/null >"$dir/dumb" </dev/null
"$B" top "$name" -b -n 1 -d 50ms -c standard --leases >"$dir/leases"
[ "$(grep -cE "^ +[01] leased .* running $me +(alice|bob)\$" "$dir/leases")" = 2 ] ||
  fail "top --leases: $(cat "$dir/leases")"
awk 'length($0) > 80 && !/^(CLASS|standard|small|shmsched top)/' "$dir/leases" | grep -q . &&
  fail "a leases line wider than 80 columns: $(cat "$dir/leases")"
for f in batch pipe dumb; do
  ! grep -q $'\x1b' "$dir/$f" || fail "escape bytes in the $f output: $(cat -v "$dir/$f")"
  [ "$(grep -c '^shmsched top: ' "$dir/$f")" = 2 ] || fail "not 2 frames in $f: $(cat "$dir/$f")"
  grep -Eq '^standard +\[#{12}\] +2 +0 +0 +0 +0 +2/8 ' "$dir/$f" || fail "$f: $(cat "$dir/$f")"
done
# JSON: one object per frame.
"$B" top "$name" --json -n 2 -d 50ms >"$dir/json"
/usr/bin/python3 - "$dir/json" <<'PY' || fail "--json: $(cat "$dir/json")"
import json, sys
frames = [json.loads(line) for line in open(sys.argv[1])]
assert len(frames) == 2, frames
std = frames[1]["classes"]["standard"]
assert (std["cells_leased"], std["queue_depth"], std["queue_capacity"]) == (2, 2, 8), std
assert [t["name"] for t in std["tenants"]] == ["carol"] and std["tenants"][0]["queued"] == 2, std
assert frames[1]["supervisor_pid"] is None and frames[1]["live_processes"] == 4, frames[1]
import os, pwd
me = pwd.getpwuid(os.geteuid())
leases = std["leases"]
assert [l["cell"] for l in leases] == [0, 1], leases
assert all(l["state"] == "leased" and l["uid"] == me.pw_uid and l["user"] == me.pw_name
           for l in leases), leases
assert sorted(l["tenant"] for l in leases) == ["alice", "bob"], leases
PY

# Let the load go: the holders end, carol's runs get the cells and end.
exec {go}>"$dir/go"
exec {go}>&-
for p in "${pids[@]}"; do wait "$p" || fail "a run of the load exited $?"; done
pids=()
echo "top_tmux: the screen, the keys, the leases panel, a resize, batch and JSON frames all as expected"

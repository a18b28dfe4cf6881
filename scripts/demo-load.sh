#!/usr/bin/env bash
# Offer very different loads from several tenants at once through `shmsched run`.
#
# Usage: scripts/demo-load.sh BIN NAME DIR TENANT:JOBS [TENANT:JOBS]...
#
# Every job is `BIN run NAME --class standard --tenant TENANT -- sh -c JOB`, started in
# the background; JOB appends "start TENANT I NS" and "end TENANT I NS" (CLOCK_REALTIME
# nanoseconds) to DIR/log around a short busy loop. So that every tenant is backlogged
# from the same instant, two "gate" runs first hold both cells of the class (it must
# have 2), the tenants' jobs are queued in the order given (all of the first tenant's
# before any of the second's), and then the gate lets go: its time is DIR/t0.
# Waits for every job; exits 1 if one failed. BIN status must be usable meanwhile.
set -euo pipefail

if (($# < 4)); then
  echo "usage: $0 BIN NAME DIR TENANT:JOBS..." >&2
  exit 2
fi
bin=$1 name=$2 dir=$3
shift 3
work=${DEMO_WORK:-30000} # busy-loop iterations per job: a few tens of milliseconds

# The value of one "key: value" line of `status NAME`.
figure() { "$bin" status "$name" | awk -F': ' -v k="$1" '$1 == k { print $2; exit }'; }

# Wait (polling status, at most ~10s) until figure $1 reaches $2.
wait_figure() {
  local i
  for ((i = 0; i < 500; i++)); do
    (($(figure "$1") >= $2)) && return 0
    sleep 0.02
  done
  echo "demo-load: $1 never reached $2" >&2
  return 1
}

# However this ends, no run of ours is left waiting (SIGTERM cancels a queued request).
stop_all() {
  local left
  mapfile -t left < <(jobs -p)
  ((${#left[@]} == 0)) || kill "${left[@]}" 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 130' INT # so that the EXIT trap runs on ^C or kill
trap 'exit 143' TERM

# The gate: two runs hold both cells until DIR/gate, a FIFO we keep open, is closed.
mkfifo "$dir/gate"
exec {gate}<>"$dir/gate"
for i in 1 2; do
  "$bin" run "$name" --class standard --tenant gate --release-on-signal -- sh -c 'read -r x; exit 0' \
    <"$dir/gate" {gate}>&- &
done
wait_figure cells_leased 2

# shellcheck disable=SC2016 # expanded by the job's shell, not here
job='printf "start %s %s %s\n" "$1" "$2" "$(date +%s%N)" >>"$3"
i=0; while [ $i -lt "$4" ]; do i=$((i + 1)); done
printf "end %s %s %s\n" "$1" "$2" "$(date +%s%N)" >>"$3"'
pids=()
queued=0
for spec in "$@"; do
  tenant=${spec%%:*} jobs=${spec#*:}
  for ((i = 1; i <= jobs; i++)); do
    "$bin" run "$name" --class standard --tenant "$tenant" -- \
      sh -c "$job" job "$tenant" "$i" "$dir/log" "$work" {gate}>&- &
    pids+=($!)
  done
  queued=$((queued + jobs))
  wait_figure queue_depth "$queued" # this tenant's jobs all queued before the next one's
done

"$bin" status "$name" --tenants | grep '^tenant\.' | sed 's/^/  /' >"$dir/tenants"
date +%s%N >"$dir/t0"
exec {gate}>&- # the gate runs read EOF, end, and release both cells
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=$((failed + 1))
done
wait # the gate runs
if ((failed > 0)); then
  echo "demo-load: $failed job(s) failed" >&2
  exit 1
fi

#!/usr/bin/env bash
# Set up, build, and show shmsched's main job: three tenants with very different
# offered load share one class of 2 cells, and the one that floods it does not
# crowd out the others — first with leases (`shmsched run`), then in worker mode
# (`shmsched worker` + `shmsched submit`).
#
# Leases: "flood" queues 60 jobs, then "steady" 12, then "light" 4 (in that order, all
# at once, behind a gate holding both cells), each job `shmsched run ... -- sh -c
# <a few tens of milliseconds of busy loop>`. Then the gate lets go. Tenants take
# round-robin turns, so light's jobs start among the first grants although they
# were queued last, where a FIFO semaphore would have run them after all 72 others.
#
# Workers: two `shmsched worker`s serve a worker class of 2 cells, each job a real
# sha256sum of its payload after 20 ms of pretend work. For 8 seconds "flood" keeps 24
# jobs in flight (24 client loops of `shmsched submit --wait`), "steady" 4 and "light" 1.
# Each tenant's submit-to-result latency shows that light's jobs do not wait behind
# flood's, where one FIFO queue would have made every job wait for all 29 in flight.
# Takes about 15 seconds. The segment is destroyed however the demo ends.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh >/dev/null
bin=build/bin/shmsched
name=shmsched-demo-$$
wname=shmsched-demo-worker-$$
dir=$(mktemp -d /tmp/shmsched-demo.XXXXXX)
cleanup() {
  local pids
  mapfile -t pids < <(jobs -p)
  ((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  "$bin" destroy "$name" --force >/dev/null 2>&1 || true
  "$bin" destroy "$wname" --force >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT # so that the EXIT trap runs on ^C or kill
trap 'exit 143' TERM

run() { printf '\n$ %s\n' "$*"; "$@"; }
# Run a load script as a background job and wait for it: a signal then interrupts the wait, and
# the cleanup stops the script (a foreground child would hold the trap back until it ended).
load() {
  "$@" &
  wait $!
}
loads=(flood:60 steady:12 light:4)

run "$bin" create "$name" --class standard:cells=2,queue=256
printf '\n$ scripts/demo-load.sh %s %s %s %s\n' "$bin" "$name" "$dir" "${loads[*]}"
printf '(each job: shmsched run %s --class standard --tenant TENANT -- sh -c <busy loop>)\n' \
  "$name"
load scripts/demo-load.sh "$bin" "$name" "$dir" "${loads[@]}"
printf '\nJust before the gate let go, every tenant was backlogged (status --tenants):\n'
cat "$dir/tenants"
printf '\n'
sort -k4,4n "$dir/log" |
  awk -v t0="$(cat "$dir/t0")" -v order="${loads[*]%%:*}" -v cells=2 -f scripts/demo-report.awk

printf '\nThe class afterwards:\n'
"$bin" status "$name" | grep -E '^(cells_available|granted|total_wait_ns|max_wait_ns):' |
  sed 's/^/  /'
run "$bin" destroy "$name"

printf '\n==== Worker mode ====\n'
wloads=(flood:24 steady:4 light:1)
wsecs=8
run "$bin" create "$wname" --class small:cells=2,queue=128,mode=worker,payload=4096
printf '\n$ %s worker %s --class small -- sh -c %s &   # twice: one per cell\n' "$bin" "$wname" \
  "'sleep 0.02; sha256sum'"
printf '$ scripts/demo-worker.sh %s %s %s %s %s\n' "$bin" "$wname" "$dir" "$wsecs" "${wloads[*]}"
printf '(each client loop: shmsched submit %s --class small --tenant TENANT --payload ... --wait)\n' \
  "$wname"
load scripts/demo-worker.sh "$bin" "$wname" "$dir" "$wsecs" "${wloads[@]}"
printf '\nHalf-way through, every tenant had jobs queued (status --tenants, class small):\n'
cat "$dir/wtenants"
printf '\nSubmit-to-result latency per tenant, and share of the jobs run:\n'
awk '{ print $1, ($3 - $2) / 1000, $4 }' "$dir/wlog" | sort -k1,1 -k2,2n |
  awk -v order="${wloads[*]%%:*}" -v clients="${wloads[*]#*:}" -v secs="$wsecs" \
    -f scripts/demo-worker-report.awk
run "$bin" destroy "$wname"
trap - EXIT
rm -rf "$dir"

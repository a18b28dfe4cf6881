#!/usr/bin/env bash
# Set up, build, and show shmsched's main job: three tenants with very different
# offered load share one class of 2 cells, and the one that floods it does not
# crowd out the others.
#
# "flood" queues 60 jobs, then "steady" 12, then "light" 4 (in that order, all at
# once, behind a gate holding both cells), each job `shmsched run ... -- sh -c
# <a few tens of milliseconds of busy loop>`. Then the gate lets go. Tenants take
# round-robin turns, so light's jobs start among the first grants although they
# were queued last, where a FIFO semaphore would have run them after all 72 others.
# Takes a few seconds. The segment is destroyed however the demo ends.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh >/dev/null
bin=build/bin/shmsched
name=shmsched-demo-$$
dir=$(mktemp -d /tmp/shmsched-demo.XXXXXX)
cleanup() {
  local pids
  mapfile -t pids < <(jobs -p)
  ((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  "$bin" destroy "$name" --force >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT # so that the EXIT trap runs on ^C or kill
trap 'exit 143' TERM

run() { printf '\n$ %s\n' "$*"; "$@"; }
loads=(flood:60 steady:12 light:4)

run "$bin" create "$name" --class standard:cells=2,queue=256
printf '\n$ scripts/demo-load.sh %s %s %s %s\n' "$bin" "$name" "$dir" "${loads[*]}"
printf '(each job: shmsched run %s --class standard --tenant TENANT -- sh -c <busy loop>)\n' \
  "$name"
scripts/demo-load.sh "$bin" "$name" "$dir" "${loads[@]}"
printf '\nJust before the gate let go, every tenant was backlogged (status --tenants):\n'
cat "$dir/tenants"
printf '\n'
sort -k4,4n "$dir/log" |
  awk -v t0="$(cat "$dir/t0")" -v order="${loads[*]%%:*}" -v cells=2 -f scripts/demo-report.awk

printf '\nThe class afterwards:\n'
"$bin" status "$name" | grep -E '^(cells_available|granted|total_wait_ns|max_wait_ns):' |
  sed 's/^/  /'
run "$bin" destroy "$name"
trap - EXIT
rm -rf "$dir"

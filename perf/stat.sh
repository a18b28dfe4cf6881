#!/usr/bin/env bash
# Count events with `perf stat` for each benchmark, run by shmsched and by its main
# baseline: the software counters (task-clock, context switches, CPU migrations, page
# faults) and the hardware ones (cycles, instructions, cache misses, branch misses) where
# the machine exposes them. Where perf says an event is not supported (as in this KVM
# guest, which exposes no hardware counters), the table says "not supported on this
# machine" instead of a number.
#
# Writes perf/results/stat.txt (the table, also printed) and stat.csv
# (bench,system,event,value,unit; unsupported events are left out).
#
# Usage: perf/stat.sh [BENCH...]   (default: every bench; names as perf/record.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
. perf/bench_cmd.sh

if ! command -v perf >/dev/null; then
  echo "stat: perf is missing: apt-get install linux-perf" >&2
  exit 1
fi
read -r -a benches <<<"${*:-$(bench_names)}"
for b in "${benches[@]}"; do bench_cmd "$b" >/dev/null; done # reject unknown names early
bench_build

events=task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions,cache-misses,branch-misses
out=perf/results
mkdir -p "$out"
csv=$out/stat.csv
echo "bench,system,event,value,unit" >"$csv"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

baseline_of() {
  case $1 in
  worker-roundtrip) echo posix-mq ;;
  scaling) echo "" ;;
  handoff) echo futex ;;
  *) echo posix-sem ;;
  esac
}

{
  printf '%-17s %-10s %-17s %22s  %s\n' bench system event value unit
  for b in "${benches[@]}"; do
    for sys in shmsched $(baseline_of "$b"); do
      bench_cmd "$b" "$sys"
      # -x, : CSV lines "value,unit,event,run time,percentage,...".
      if ! perf stat -x, -e "$events" -o "$tmp" -- timeout --kill-after=5 300 "${cmd[@]}" \
        >/dev/null; then
        printf '%-17s %-10s %s\n' "$b" "$sys" "FAILED or hung (no figures)"
        continue
      fi
      while IFS=, read -r value unit event _; do
        [ -n "$event" ] || continue
        case $value in
        "<not supported>" | "<not counted>")
          printf '%-17s %-10s %-17s %22s\n' "$b" "$sys" "$event" "not supported on this machine"
          ;;
        *)
          unit=${unit:-count}
          printf '%-17s %-10s %-17s %22s  %s\n' "$b" "$sys" "$event" "$value" "$unit"
          echo "$b,$sys,$event,$value,$unit" >>"$csv"
          ;;
        esac
      done < <(grep -v '^#' "$tmp" | grep -v '^$')
    done
  done
} | tee "$out/stat.txt"
echo "stat: wrote $out/stat.txt and $csv (counts are for the whole run of each benchmark)" >&2

#!/usr/bin/env bash
# Build the benchmarks in Release mode (build-perf/) and run every benchmark with its
# baselines in one run, several repeats each, interleaved (repeat 1 of everything, then
# repeat 2, ...) so that a burst of noise hits every system alike. Prints one table of
# medians and of shmsched's ratio to each baseline, then the project's targets (for
# information: nothing here fails on a figure).
#
# Writes perf/results/ (git-ignored):
#   latest.csv    medians, header bench,system,metric,value,unit
#   raw.csv       every run's rows, with its repeat number
#   table.txt     the table printed
#   *.png         plots (gnuplot): latency distributions, scaling curves, throughput
#   samples/      the last repeat's latency samples behind the distributions
#
# Usage: perf/run.sh [--quick] [--repeats N]
#   --quick   a few seconds: tiny iteration counts, one repeat. CI runs it only to
#             prove the suite still works; its figures mean little.
# Needs: cmake and a C compiler; strace (for syscalls_per_op) and gnuplot (plots) are
# used when present and skipped with a message when not (scripts/setup.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
repeats=5
while (($# > 0)); do
  case $1 in
  --quick) quick=1 repeats=1 ;;
  --repeats)
    repeats=${2:?--repeats wants a number}
    shift
    ;;
  *)
    echo "usage: perf/run.sh [--quick] [--repeats N]" >&2
    exit 2
    ;;
  esac
  shift
done

build=build-perf
out=perf/results
bin=$build/bin
benches=(bench_acquire bench_handoff bench_contended bench_worker bench_scaling bench_fairness
  bench_share bench_memory bench_client bench_idle bench_events bench_freeze bench_stalls)

echo "perf: building Release into $build/ ..." >&2
# -g only adds debug information (for perf/record.sh); the code is the Release code.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHMS_BUILD_TESTS=OFF -DCMAKE_C_FLAGS=-g \
  >/dev/null
# shmsched itself too: client-cost runs `shmsched run -- true` as a whole process.
cmake --build "$build" -j 2 --target "${benches[@]}" shmsched_cli_main >/dev/null

mkdir -p "$out/samples"
rm -f "$out"/*.png "$out"/samples/*
raw=$out/raw.csv
echo "bench,system,metric,value,unit,repeat" >"$raw"

# Remove segments a crashed benchmark of this run left behind (their owner pid is gone).
cleanup() {
  local f pid
  for f in /dev/shm/shms-bench-*; do
    [ -e "$f" ] || continue
    pid=$(basename "$f" | grep -o '[0-9]\+' | head -n 1)
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && rm -f "$f"
  done
  return 0
}
trap cleanup EXIT

if ((quick)); then
  acq_iters=100000 handoff_rounds=100 cont_ms=50 worker_rounds=100 worker_ms=50 stall_ms=50
  scaling_ops=500 fair_ms=100 fair_warmup=50 client_rounds=3 idle_ms=1200 idle_settle=100
  share_ms=300 share_warmup=100
else
  acq_iters=2000000 handoff_rounds=2000 cont_ms=500 worker_rounds=2000 worker_ms=500 stall_ms=2000
  scaling_ops=20000 fair_ms=1000 fair_warmup=200 client_rounds=20 idle_ms=2000 idle_settle=500
  share_ms=4000 share_warmup=500
fi
lock_systems=(shmsched posix-sem sysv-sem-undo jobserver-pipe futex posix-mq robust-mutex)

# Run one benchmark, appending its rows (tagged with the repeat) to raw.csv. A benchmark
# that fails or outlives its time limit (a hang is a finding too) is reported, the run
# goes on without its rows, and perf/run.sh exits 1 at the end.
failures=()
limit=${PERF_TIMEOUT:-60}
run() {
  local rep=$1
  shift
  local rows rc=0
  rows=$(timeout --kill-after=5 "$limit" "$bin/$1" "${@:2}") || rc=$?
  if ((rc != 0)); then
    local why="exit status $rc"
    ((rc == 124 || rc == 137)) && why="no result within ${limit}s (hung?)"
    echo "perf: FAILED: $* ($why)" >&2
    failures+=("$* ($why)")
    return 0
  fi
  [ -n "$rows" ] && printf '%s\n' "$rows" | sed "s/\$/,$rep/" >>"$raw"
  return 0
}

for ((rep = 1; rep <= repeats; rep++)); do
  echo "perf: repeat $rep of $repeats ..." >&2
  for s in "${lock_systems[@]}" shmsched-try shmsched-prepared shmsched-prepared-grants \
    shmsched-quota shmsched-user shmsched-noevents shmsched-grants harness; do
    run "$rep" bench_acquire --system "$s" --iters "$acq_iters"
  done
  run "$rep" bench_events --iters "$acq_iters"
  for m in plain locked; do # a freeze with plain (membarrier) or locked operation marks
    run "$rep" bench_freeze --marks "$m" --others 2
  done
  for s in "${lock_systems[@]}" shmsched-noevents; do
    run "$rep" bench_handoff --system "$s" --rounds "$handoff_rounds" \
      --samples "$out/samples/handoff-$s.txt"
    # The holder releases after a short fixed hold, the waiter not asleep first (a spin may
    # take it); and a hold longer than any spin window (spinning must back off, not burn CPU).
    run "$rep" bench_handoff --system "$s" --rounds "$handoff_rounds" --hold-us 5 \
      --samples "$out/samples/handoff-hold-5us-$s.txt"
  done
  for s in shmsched futex; do
    run "$rep" bench_handoff --system "$s" --rounds "$handoff_rounds" --hold-us 200
  done
  for s in "${lock_systems[@]}" shmsched-noevents; do
    for p in 1 2 4 8; do
      run "$rep" bench_contended --system "$s" --procs "$p" --cells 2 --ms "$cont_ms"
    done
  done
  # What the machine itself takes from a running process (its daemons, interrupts, the
  # hypervisor): the floor under every longest wait below.
  run "$rep" bench_stalls --ms "$stall_ms"
  # Strict hand-off (overtake=0) beside the default bound: bounded overtaking's before/after;
  # and the prepared acquire, the path the contended throughput targets are judged on.
  for p in 4 8; do
    run "$rep" bench_contended --system shmsched-strict --procs "$p" --cells 2 --ms "$cont_ms"
  done
  for p in 2 4 8; do
    run "$rep" bench_contended --system shmsched-prepared --procs "$p" --cells 2 --ms "$cont_ms"
  done
  for s in shmsched posix-mq; do
    run "$rep" bench_worker --system "$s" --rounds "$worker_rounds" --ms "$worker_ms" \
      --samples "$out/samples/worker-roundtrip-$s.txt"
  done
  run "$rep" bench_scaling --ops "$scaling_ops"
  # What each of a cold cancel's lines costs it, at the size of the cold-cancel target.
  run "$rep" bench_scaling --ops "$scaling_ops" --lines 100000:10000
  # The event recorder's cost on a grant and a cancel (each records one event), side by side.
  run "$rep" bench_scaling --ops "$scaling_ops" --events 0 10:1 1000:100
  for s in shmsched shmsched-strict posix-sem; do
    run "$rep" bench_fairness --system "$s" --ms "$fair_ms" --warmup-ms "$fair_warmup"
  done
  # Cell-time shares of tenants whose leases last 40 ms and 2 ms (sleeping holds), by grants,
  # by time, and with a semaphore; by time, weights 3:1 and 1:2:4, heavy-tailed holds, and a team
  # of three tenants beside one tenant alone.
  for s in shmsched shmsched-grants posix-sem; do
    run "$rep" bench_share --system "$s" --holds 40:2 --ms "$share_ms" --warmup-ms "$share_warmup"
  done
  run "$rep" bench_share --system shmsched --holds 40:2 --weights 3:1 --ms "$share_ms" \
    --warmup-ms "$share_warmup" --label share-3to1
  run "$rep" bench_share --system shmsched --holds 10:4:20 --weights 1:2:4 --cells 3 \
    --ms "$share_ms" --warmup-ms "$share_warmup" --label share-1to2to4
  run "$rep" bench_share --system shmsched --holds p10:4 --ms "$share_ms" \
    --warmup-ms "$share_warmup" --label share-pareto
  run "$rep" bench_share --system shmsched --holds 40:10:20:30 --teams 1:1:1:0 --procs 3 \
    --ms "$share_ms" --warmup-ms "$share_warmup" --label share-teams
  # A tenant whose leases hold two cells at once (one process) under a flood of one-cell leases
  # (six processes each of two tenants) on four cells: its share, and its longest wait, beside
  # SysV's semop taking two units at once. (posix-sem's one sem_wait after another is left out:
  # processes each holding one unit and waiting for a second deadlock.)
  for s in shmsched sysv-sem-undo; do
    run "$rep" bench_share --system "$s" --cells 4 --procs 1:6:6 --holds 40:5:5 --widths 2:1:1 \
      --ms "$share_ms" --warmup-ms "$share_warmup" --label share-widths
  done
  for q in 64 1048576; do
    run "$rep" bench_client --queue "$q" --rounds "$client_rounds" --cli "$bin/shmsched"
  done
  for s in shmsched posix-sem jobserver-pipe; do
    run "$rep" bench_idle --system "$s" --waiters 100 --ms "$idle_ms" --settle-ms "$idle_settle"
  done
done
run 1 bench_memory

# System calls per acquire+release: bench_acquire under strace -f -c at two iteration
# counts; the difference in calls over the difference in pairs (bench_acquire runs
# --iters pairs twice: warm-up and timed) cancels start-up and teardown.
syscalls_total() {
  local tmp
  tmp=$(mktemp)
  strace -f -c -o "$tmp" "$bin/bench_acquire" --system "$1" --iters "$2" --quiet 1 >/dev/null
  awk '$NF == "total" { print $4 }' "$tmp"
  rm -f "$tmp"
}
if command -v strace >/dev/null && strace -f -c -o /dev/null true 2>/dev/null; then
  n1=1000 n2=11000
  for s in "${lock_systems[@]}" shmsched-try shmsched-prepared; do
    c1=$(syscalls_total "$s" "$n1")
    c2=$(syscalls_total "$s" "$n2")
    metric=syscalls_per_op system=$s
    [ "$s" = shmsched-try ] && metric=syscalls_per_op_try system=shmsched
    awk -v s="$system" -v m="$metric" -v c1="$c1" -v c2="$c2" -v d=$((2 * (n2 - n1))) \
      'BEGIN { v = (c2 - c1) / d; if (v < 0) v = 0; printf "acquire-release,%s,%s,%.2f,calls,1\n", s, m, v }' \
      >>"$raw"
  done
else
  echo "perf: strace is missing or cannot trace here: no syscalls_per_op (scripts/setup.sh installs it)" >&2
fi

((quick)) && echo "perf: --quick: one short repeat; these figures only show that the suite runs" >&2
awk -F, -v csv="$out/latest.csv" -f perf/summarize.awk "$raw" | tee "$out/table.txt"

if command -v gnuplot >/dev/null; then
  perf/plot.sh "$out"
else
  echo "perf: gnuplot is missing: no plots (scripts/setup.sh installs gnuplot-nox)" >&2
fi
echo "perf: wrote $out/latest.csv, $out/table.txt and the plots beside them" >&2
if ((${#failures[@]} > 0)); then
  printf 'perf: %d benchmark run(s) failed:\n' "${#failures[@]}" >&2
  printf '  %s\n' "${failures[@]}" >&2
  exit 1
fi

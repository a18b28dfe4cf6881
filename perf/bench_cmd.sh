#!/usr/bin/env bash
# Sourced by perf/record.sh and perf/stat.sh: build the benchmarks (Release, with debug
# information) into build-perf/ and map a bench name to the command that runs it alone,
# long enough to profile.
#
#   bench_build                     build every benchmark
#   bench_cmd BENCH [SYSTEM]        fill the array `cmd` for BENCH run as SYSTEM
#   bench_names                     the names bench_cmd knows

bench_bin=build-perf/bin

bench_build() {
  cmake -S . -B build-perf -DCMAKE_BUILD_TYPE=Release -DSHMS_BUILD_TESTS=OFF -DCMAKE_C_FLAGS=-g \
    >/dev/null
  cmake --build build-perf -j 2 --target bench_acquire bench_handoff bench_contended \
    bench_worker bench_scaling bench_fairness bench_memory >/dev/null
}

bench_names() { echo "acquire-release handoff contended worker-roundtrip scaling fairness"; }

bench_cmd() {
  local bench=$1 sys=${2:-shmsched}
  case $bench in
  acquire-release) cmd=("$bench_bin/bench_acquire" --system "$sys" --iters 5000000) ;;
  handoff) cmd=("$bench_bin/bench_handoff" --system "$sys" --rounds 3000) ;;
  contended) cmd=("$bench_bin/bench_contended" --system "$sys" --procs 4 --ms 2000) ;;
  worker-roundtrip) cmd=("$bench_bin/bench_worker" --system "$sys" --rounds 5000 --ms 1000) ;;
  scaling) cmd=("$bench_bin/bench_scaling" --ops 200000 10:1 100000:10000) ;;
  fairness) cmd=("$bench_bin/bench_fairness" --system "$sys" --ms 2000) ;;
  *)
    echo "unknown bench '$bench' (one of: $(bench_names))" >&2
    return 2
    ;;
  esac
}

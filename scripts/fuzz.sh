#!/usr/bin/env bash
# Build the libFuzzer targets (clang; ASan + UBSan; build-fuzz/) and fuzz each one for
# SECONDS (default 60), one after the other on one core. Inputs that add coverage are
# merged into the committed corpus, tests/fuzz/corpus/<target>/, which the ordinary test
# run replays (docs/testing.md, "Fuzzing").
#
# Usage: scripts/fuzz.sh [--no-merge] [SECONDS] [TARGET...]
#   --no-merge  leave tests/fuzz/corpus alone (CI); new inputs stay in build-fuzz/corpus
#   TARGET      cli_values config_file config_struct segment segment_mutate (default: all)
#
# A crash, a broken contract (an abort with "fuzz: broken contract"), a leak or a hang
# (10 s on one input) stops that target; the input is kept in build-fuzz/artifacts/TARGET/,
# and the script exits 1 after running the rest. Reproduce one with
#   build-fuzz/fuzz/fuzz_TARGET build-fuzz/artifacts/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

merge=1
if [ "${1:-}" = "--no-merge" ]; then
  merge=0
  shift
fi
seconds=60
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=("$@")
((${#targets[@]} > 0)) || targets=(cli_values config_file config_struct segment segment_mutate)

scripts/setup.sh
dir=build-fuzz
# Everything instrumented for coverage and checked by ASan and UBSan; the fuzz targets add
# libFuzzer's main. jemalloc is left out (SHMS_ASAN), as in every sanitizer build.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DSHMS_ASAN=ON -DSHMS_UBSAN=ON -DSHMS_FUZZ=ON \
  "-DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link" >/dev/null
cmake --build "$dir" -j 2 --target fuzz_make_seeds "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The committed corpus becomes its named seeds plus one minimal set of inputs (named by their
# SHA-1) covering every edge it and the new inputs reach (edges, not hit counts, to keep it
# small): it grows only with coverage.
merge_corpus() {
  local t=$1 work=$2 committed=tests/fuzz/corpus/$1 fresh=$dir/merged/$1 f
  rm -rf "$fresh"
  mkdir -p "$fresh"
  "$dir/fuzz/fuzz_$t" -merge=1 -use_counters=0 -max_len=16384 -timeout=10 \
    "$fresh" "$committed" "$work" 2>"$dir/merge-$t.log"
  local before seeds
  before=$(find "$committed" -type f | wc -l)
  find "$committed" -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -delete
  seeds=$(find "$committed" -type f -exec sha1sum {} + | cut -d' ' -f1)
  for f in "$fresh"/*; do
    grep -qx "$(basename "$f")" <<<"$seeds" || cp "$f" "$committed/"
  done
  echo "fuzz: $t: tests/fuzz/corpus/$t has $(find "$committed" -type f | wc -l) inputs" \
    "(was $before), $(du -sk --apparent-size "$committed" | cut -f1) KB"
}

failed=()
for t in "${targets[@]}"; do
  work=$dir/corpus/$t
  artifacts=$dir/artifacts/$t
  mkdir -p "$work" "$artifacts"
  case $t in
  segment | segment_mutate | config_struct) "$dir/tests/fuzz/fuzz_make_seeds" "$t" "$work" ;;
  esac
  echo "fuzz: $t for ${seconds}s (corpus $work + tests/fuzz/corpus/$t)"
  # New inputs go to the first directory; the committed corpus is read as seeds.
  if ! "$dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "tests/fuzz/corpus/$t" 2>"$dir/fuzz-$t.log"; then
    tail -n 60 "$dir/fuzz-$t.log"
    failed+=("$t")
    continue
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)" "$dir/fuzz-$t.log" || true
  if ((merge)); then
    merge_corpus "$t" "$work"
  fi
done
# Segments of inputs that crashed before removing theirs.
find /dev/shm -maxdepth 1 -name 'shms-fuzz-*' -user "$(id -u)" -delete 2>/dev/null || true

if ((${#failed[@]} > 0)); then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $dir/artifacts/, logs in $dir/fuzz-*.log)" >&2
  exit 1
fi
echo "fuzz: no failure in ${targets[*]}"

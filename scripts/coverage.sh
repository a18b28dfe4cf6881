#!/usr/bin/env bash
# Line and branch coverage of the library (shm/ core/ client/ worker/: not the tests, not the
# CLI) by the default suite, measured with gcov and lcov in build-cov/ (docs/testing.md).
# Usage: scripts/coverage.sh [--chaos] [--files] [--html]
#   --chaos  also run the long chaos run (label chaos, 3 minutes)
#   --files  print each file's figures too
#   --html   write an HTML report to build-cov/coverage/html/index.html
set -euo pipefail
cd "$(dirname "$0")/.."

chaos=0 files=0 html=0
for arg in "$@"; do
  case $arg in
  --chaos) chaos=1 ;;
  --files) files=1 ;;
  --html) html=1 ;;
  *) echo "usage: scripts/coverage.sh [--chaos] [--files] [--html]" >&2 && exit 2 ;;
  esac
done

scripts/setup.sh
dir=build-cov
# -O0 and no SHMS_DEBUG: every branch is the source's, none an optimiser's or an assertion's.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="-O0 -g" -DSHMS_COVERAGE=ON >/dev/null
cmake --build "$dir" -j "$(nproc)"

objs=$dir/CMakeFiles/shmsched_obj.dir
out=$dir/coverage
rm -rf "$out" && mkdir -p "$out"
find "$objs" -name '*.gcda' -delete
# lcov 1.16 as Debian ships it warns of its own redefined subroutines: not ours to show.
quiet_lcov() { lcov --rc lcov_branch_coverage=1 "$@" 2>&1 | { grep -v '^Subroutine .* redefined at ' || true; }; }
# The zero baseline: a library file that no test reaches still counts, at 0%.
quiet_lcov --quiet --capture --initial --directory "$objs" --output-file "$out/base.info"

# A test runs the CLI as user nobody (test_cli_sched's process limit): its counts must be
# writable by it too, or libgcov's complaints fill the stderr the test reads.
find "$objs" -type d -exec chmod a+rwx {} +
umask 000
# The model checks run no library code: left out. Every other test of the default suite runs.
ctest --test-dir "$dir" --output-on-failure -L unit -LE model -j "$(nproc)"
if ((chaos)); then ctest --test-dir "$dir" --output-on-failure -L chaos; fi

quiet_lcov --quiet --capture --directory "$objs" --output-file "$out/run.info"
quiet_lcov --quiet --add-tracefile "$out/base.info" --add-tracefile "$out/run.info" \
  --output-file "$out/all.info"
quiet_lcov --quiet --extract "$out/all.info" "$PWD/shm/*" "$PWD/core/*" "$PWD/client/*" \
  "$PWD/worker/*" --output-file "$out/library.info"

if ((files)); then quiet_lcov --list "$out/library.info"; fi
if ((html)); then
  genhtml --quiet --branch-coverage --output-directory "$out/html" "$out/library.info"
  echo "coverage: HTML report in $out/html/index.html"
fi
# "  lines......: 89.1% (4095 of 4598 lines)" and so on -> one line, branches first.
quiet_lcov --summary "$out/library.info" | awk '
  /^  (lines|functions|branches)\.*:/ {
    name = $1; sub(/\.*:$/, "", name); fig[name] = sprintf("%s %s (%s of %s)", name, $2, substr($3, 2), $5)
  }
  END {
    if (!("branches" in fig)) exit 1
    printf "coverage: library (shm/ core/ client/ worker/): %s, %s, %s\n", fig["branches"], fig["lines"], fig["functions"]
  }'

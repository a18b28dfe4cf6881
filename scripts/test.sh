#!/usr/bin/env bash
# Set up, build and run the whole test suite (the default `unit` label).
# Usage: scripts/test.sh [--sanitize | --tsan | --valgrind]
#   --sanitize  the same suite under ASan + UBSan (build-san/)
#   --tsan      the process and thread suites under ThreadSanitizer (build-tsan/, label tsan)
#   --valgrind  the single-process suites under valgrind (build/, label valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
dir=build label=unit
case "${1:-}" in
--sanitize) dir=build-san ;;
--tsan) dir=build-tsan label=tsan ;;
--valgrind) label=valgrind ;;
esac
if [ "${1:-}" = "--valgrind" ]; then scripts/build.sh; else scripts/build.sh "$@"; fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:suppressions=$PWD/tests/tsan.supp}
ctest --test-dir "$dir" --output-on-failure -L "$label" -j "$(nproc)"

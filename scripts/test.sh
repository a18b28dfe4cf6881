#!/usr/bin/env bash
# Set up, build and run the whole test suite (the default `unit` label).
# Usage: scripts/test.sh [--sanitize]   (--sanitize: the same suite under ASan + UBSan)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh "$@"
dir=build
[ "${1:-}" = "--sanitize" ] && dir=build-san
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$dir" --output-on-failure -L unit -j "$(nproc)"

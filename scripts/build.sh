#!/usr/bin/env bash
# Configure and build into build/, or with --sanitize into build-san/ (ASan + UBSan), or with
# --tsan into build-tsan/ (ThreadSanitizer).
# Usage: scripts/build.sh [--sanitize | --tsan] [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."

dir=build
opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
case "${1:-}" in
--sanitize)
  shift
  dir=build-san
  opts=(-DCMAKE_BUILD_TYPE=Debug -DSHMS_ASAN=ON -DSHMS_UBSAN=ON)
  ;;
--tsan)
  shift
  dir=build-tsan
  opts=(-DCMAKE_BUILD_TYPE=Debug -DSHMS_TSAN=ON)
  ;;
esac
cmake -S . -B "$dir" "${opts[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"

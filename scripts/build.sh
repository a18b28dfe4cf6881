#!/usr/bin/env bash
# Configure and build into build/ (or build-san/ with --sanitize: ASan + UBSan).
# Usage: scripts/build.sh [--sanitize] [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."

dir=build
opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${1:-}" = "--sanitize" ]; then
  shift
  dir=build-san
  opts=(-DCMAKE_BUILD_TYPE=Debug -DSHMS_ASAN=ON -DSHMS_UBSAN=ON)
fi
cmake -S . -B "$dir" "${opts[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"

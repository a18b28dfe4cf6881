#!/usr/bin/env bash
# clang-tidy with the committed .clang-tidy over the library (shm/ core/ client/ worker/), the
# CLI (supervisor/) and the Slurm plugin (slurm/), from build/compile_commands.json. Any warning
# fails (CI runs it).
# Usage: scripts/tidy.sh [build-dir]   (default build/, configured by scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:-build}
[ -f "$dir/compile_commands.json" ] || scripts/build.sh >/dev/null
mapfile -t files < <(ls shm/*.c core/*.c client/*.c worker/*.c supervisor/*/*.c slurm/*.c)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# One clang-tidy per core; each prints its findings, the summary lines go to stderr.
printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -n 4 clang-tidy --quiet -p "$dir" >"$out" 2>/dev/null || true
if grep -E ': (warning|error):' "$out" >/dev/null; then
  cat "$out"
  echo "tidy: $(grep -cE ': (warning|error):' "$out") finding(s) in ${#files[@]} files" >&2
  exit 1
fi
echo "tidy: ${#files[@]} files clean"

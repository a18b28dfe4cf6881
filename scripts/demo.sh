#!/usr/bin/env bash
# Set up, build, and show shmsched's main job on a demo segment: create a
# segment with two classes, show its status, destroy it.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh >/dev/null
bin=build/bin/shmsched
name=shmsched-demo-$$
trap '$bin destroy "$name" --force >/dev/null 2>&1 || true' EXIT

run() { printf '\n$ %s\n' "$*"; "$@"; }
run $bin create "$name" --class standard:cells=4,queue=64 \
  --class large:cells=1,queue=8,mode=worker,payload=4096 --starvation-after 2s
run $bin status "$name"
run $bin status "$name" --json
run $bin destroy "$name"
trap - EXIT

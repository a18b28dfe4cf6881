#!/usr/bin/env bash
# docs/cli.md's "Start here" runs as written: its sh blocks, in order, in one shell, with this
# build's shmsched first on PATH, in a scratch directory and SHMSCHED_DIR of their own (the
# page says to give SHMSCHED_DIR a directory of one's own). Only the metrics example's port is
# changed, to one this run picks, so that parallel runs do not collide. Every command must
# succeed (the cancelled run's 75 is in the background and not checked), and the outputs the
# page names must appear.
# Usage: doc_cli_start.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
umask 022 # the scratch directories are ours alone to write, whatever umask the caller runs with
src=$1 build=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
awk '
  /^## Start here/ {inside = 1; next}
  inside && /^## / {exit}
  inside && /^```sh$/ {sh = 1; next}
  sh && /^```$/ {sh = 0; next}
  sh {print}
' "$src/docs/cli.md" >"$dir/examples.sh"
[ -s "$dir/examples.sh" ] || { echo "docs/cli.md: no sh blocks under '## Start here'" >&2; exit 1; }
grep -q 127.0.0.1:9464 "$dir/examples.sh" || { echo "docs/cli.md: the metrics example moved" >&2; exit 1; }
port=$((20000 + $$ % 20000))
sed -i "s/127.0.0.1:9464/127.0.0.1:$port/" "$dir/examples.sh"
mkdir "$dir/seg" "$dir/cwd"
cd "$dir/cwd"
# A process group of their own (set -m), so that what a failed example left running in the
# background (a worker, a supervisor) is ended with it.
status=0
set -m
PATH="$build/bin:$PATH" SHMSCHED_DIR="$dir/seg" timeout --kill-after=5 60 \
  bash -e "$dir/examples.sh" >"$dir/out" 2>"$dir/err" &
group=$!
wait "$group" || status=$?
set +m
kill -TERM -- "-$group" 2>/dev/null || true
for _ in 1 2 3 4 5 6 7 8 9 10; do
  kill -0 -- "-$group" 2>/dev/null || break
  sleep 0.2
done
kill -KILL -- "-$group" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
  echo "docs/cli.md's start examples failed (exit $status); stdout then stderr:" >&2
  cat "$dir/out" "$dir/err" >&2
  exit 1
fi
for want in "created segment 'jobs'" hello "backup done" "cells 0,1" "HELLO, WORLD" \
  "blocked_by: no-cell" "cancelled request" "tenant alice: weight 3" "ok: every invariant holds" \
  "shmsched_up" "destroyed segment 'jobs'"; do
  grep -qF "$want" "$dir/out" || {
    echo "docs/cli.md's start examples: '$want' not in their output:" >&2
    cat "$dir/out" "$dir/err" >&2
    exit 1
  }
done
[ ! -e "$dir/seg/jobs" ] || { echo "the examples left their segment behind" >&2; exit 1; }
echo "doc_cli_start: docs/cli.md's ten tasks run as written"

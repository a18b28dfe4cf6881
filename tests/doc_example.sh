#!/usr/bin/env bash
# Compile the first C block of a documentation page against the build tree, run it, and (if the
# page shows the output in the next plain block after "It prints:") compare what it prints.
# Usage: doc_example.sh SOURCE_DIR BUILD_DIR PAGE.md
set -euo pipefail
src=$1 build=$2 page=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' "$src/$page" >"$work/example.c"
[ -s "$work/example.c" ] || { echo "doc_example: no C block in $page" >&2; exit 1; }
# LDFLAGS: what the build's own programs link with besides (a coverage build: --coverage).
# shellcheck disable=SC2046,SC2086
cc -Wall -Wextra -Werror -I"$src/include" -o "$work/example" "$work/example.c" \
  "$build/lib/libshmsched.a" $(pkg-config --libs ck) -lpthread -lrt ${LDFLAGS:-}
"$work/example" >"$work/out"
awk '/^It prints:$/ {want = 1; next} want && /^```$/ {if (on) exit; on = 1; next} on' \
  "$src/$page" >"$work/want"
if [ -s "$work/want" ] && ! diff -u "$work/want" "$work/out"; then
  echo "doc_example: $page's example printed something else than the page says" >&2
  exit 1
fi
echo "doc_example: $page's example compiled, ran and printed what the page says"

#!/usr/bin/env bash
# The man pages pass `mandoc -Tlint` without a message, style included, but for references to
# pages this machine has not installed (shmsched(1) naming shmsched(3) before installation):
# those depend on the machine, not the page.
# Usage: tests/man_lint.sh SOURCE_DIR. Exits 77 (skipped) without mandoc.
set -euo pipefail
src=$1
if ! command -v mandoc >/dev/null 2>&1; then
  echo "man_lint: mandoc is not installed (scripts/setup.sh installs it): skipped" >&2
  exit 77
fi
pages=("$src"/man/*.[0-9])
[ ${#pages[@]} -eq 3 ] || { echo "man_lint: expected 3 pages, found ${#pages[@]}" >&2; exit 1; }
status=0
out=$(cd "$src" && mandoc -Tlint "${pages[@]}" 2>&1) || status=$?
messages=$(grep -v -e 'STYLE: referenced manual not found' -e 'mandoc\.db' <<<"$out" || true)
if [ -n "$messages" ]; then
  echo "$messages" >&2
  echo "man_lint: mandoc -Tlint: the messages above (exit $status)" >&2
  exit 1
fi
# Each page renders, and says what it is called.
for page in "$src"/man/*.[0-9]; do
  text=$(mandoc -Tascii "$page" | sed 's/.\x08//g')
  grep -q '^NAME' <<<"$text" || { echo "man_lint: $page renders no NAME" >&2; exit 1; }
done
echo "man_lint: ${#pages[@]} pages clean"

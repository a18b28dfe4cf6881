#!/usr/bin/env bash
# The systemd units: `systemd-analyze verify` accepts each, without a word of warning (its
# ExecStart paths pointing at this build's binary, which must exist), and `cmake --install`
# puts them under lib/systemd/system below the prefix, their ExecStart paths the prefix's bindir.
# Skipped (77) only where systemd-analyze is missing (CI installs it: scripts/setup.sh).
# Usage: units_verify.sh BUILD_DIR INSTALL_BINDIR
set -euo pipefail
build=$1 bindir=$2
fail() {
  echo "units_verify: $*" >&2
  exit 1
}
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "units_verify: no systemd-analyze (the systemd package): skipped" >&2
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

units=("$build"/systemd/build/*.service)
[ -e "${units[0]}" ] || fail "no unit in $build/systemd/build"
for unit in "${units[@]}"; do
  # No man page is installed in a build tree: the Documentation= check is the package test's.
  if ! out=$(systemd-analyze verify --man=no "$unit" 2>&1) || [ -n "$out" ]; then
    fail "systemd-analyze verify $unit: ${out:-failed}"
  fi
done

DESTDIR=$work/stage cmake --install "$build" >/dev/null
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
for unit in "${units[@]}"; do
  installed=$work/stage$prefix/lib/systemd/system/$(basename "$unit")
  [ -f "$installed" ] || fail "cmake --install did not install $installed"
  grep -q "^ExecStart=$bindir/shmsched supervise " "$installed" ||
    fail "$installed: ExecStart is not $bindir/shmsched: $(grep '^ExecStart=' "$installed")"
done
echo "units_verify: ${#units[@]} unit(s) verified, installed under $prefix/lib/systemd/system"

#!/usr/bin/env bash
# The Debian packages end to end (a CI step of its own: the package build compiles everything
# once more, for minutes): scripts/package.sh builds them, lintian finds no error in them,
# apt-get installs them, `shmsched version` runs from /usr/bin, the unit verifies as installed,
# the library links by pkg-config, the Python module imports; then they are removed and purged
# and leave no file behind. As root, on a Debian machine where shmsched is not installed.
# Usage: tests/package_e2e.sh [--no-build]   (--no-build: use the .deb files in build-deb/)
set -euo pipefail
cd "$(dirname "$0")/.."
fail() {
  echo "package_e2e: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "run as root: it installs and removes packages"
packages=(shmsched libshmsched0 libshmsched-dev python3-shmsched)
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
    fail "$p is installed already: this test installs and purges it"
  fi
done
[ "${1:-}" = --no-build ] || scripts/package.sh
debs=()
for p in "${packages[@]}"; do
  deb=$(ls build-deb/"${p}"_*.deb 2>/dev/null) || fail "build-deb/ has no ${p}_*.deb"
  debs+=("$deb")
done

# lintian: no error (warnings, such as a missing man page, are printed, not failed on).
out=$(lintian --tag-display-limit 0 build-deb/*.deb 2>&1 || true)
[ -z "$out" ] || printf '%s\n' "$out"
if grep -q '^E: ' <<<"$out"; then
  fail "lintian found errors"
fi

# Every path the packages hold that is not on the machine yet: none may be left after the purge.
work=$(mktemp -d)
for deb in "${debs[@]}"; do
  dpkg-deb -c "$deb" | awk '{ sub(/^[^.]*\./, ""); sub(/ -> .*/, ""); sub(/\/$/, ""); print }'
done | sort -u | while IFS= read -r f; do
  [ -z "$f" ] || [ -e "$f" ] || [ -L "$f" ] || printf '%s\n' "$f"
done >"$work/new-paths"
[ -s "$work/new-paths" ] || fail "the packages hold no path that is new here"
cleanup() {
  rm -rf "$work"
  # On a failure, leave the machine as it was found.
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends "${debs[@]/#/./}" >/dev/null

# What each package put where.
got=$(/usr/bin/shmsched version)
[[ $got == "shmsched "* ]] || fail "/usr/bin/shmsched version: '$got'"
unit=$(dpkg -L shmsched | grep '/systemd/system/shmsched@\.service$') ||
  fail "shmsched has no shmsched@.service"
grep -q '^ExecStart=/usr/bin/shmsched supervise %i$' "$unit" || fail "$unit: ExecStart"
if command -v systemd-analyze >/dev/null 2>&1; then
  man=--man=no
  ! man -w shmsched >/dev/null 2>&1 || man=--man=yes
  out=$(systemd-analyze verify "$man" "$unit" 2>&1) || fail "systemd-analyze verify $unit: $out"
  [ -z "$out" ] || fail "systemd-analyze verify $unit: $out"
fi
cat >"$work/tiny.c" <<'C'
#include <shmsched.h>
#include <stdio.h>
int main(void) { return puts(shms_strerror(SHMS_ETIMEDOUT)) < 0; }
C
# shellcheck disable=SC2046
cc -o "$work/tiny" "$work/tiny.c" $(pkg-config --cflags --libs shmsched)
"$work/tiny" >/dev/null || fail "a program linked with the installed library failed"
ldd "$work/tiny" | grep -q "libshmsched.so.0 => /" || fail "not linked with libshmsched0"
got=$(cd "$work" && /usr/bin/python3 -c 'import shmsched; print(shmsched.__file__)') ||
  fail "Debian's python3 cannot import shmsched"
[[ $got == /usr/lib/python3/dist-packages/shmsched/* ]] || fail "python3 imported $got"

# A segment made, compared and refused through the installed CLI and a config file.
name=shmst-pkg-$$
printf '[class small]\ncells = 2\nqueue = 4\n' >"$work/a.conf"
printf '[class small]\ncells = 4\nqueue = 4\n' >"$work/b.conf"
shmsched create "$name" --config "$work/a.conf" --if-missing >/dev/null
shmsched create "$name" --config "$work/a.conf" --if-missing >/dev/null
if err=$(shmsched create "$name" --config "$work/b.conf" --if-missing 2>&1); then
  fail "a differing configuration was accepted"
fi
[[ $err == *"class small: cells is 2 in the segment, 4 in $work/b.conf" ]] || fail "$err"
shmsched destroy "$name" >/dev/null

# Removed, then purged: nothing left of any package.
apt-get remove -y -qq "${packages[@]}" >/dev/null
# dpkg still knows a removed package only if it left config files: purge those.
dpkg --purge "${packages[@]}" >"$work/purge.log" 2>&1 || fail "dpkg --purge: $(cat "$work/purge.log")"
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed\|config-files"; then
    fail "$p is still known to dpkg after the purge"
  fi
done
left=()
while IFS= read -r f; do
  if [ -e "$f" ] || [ -L "$f" ]; then left+=("$f"); fi
done <"$work/new-paths"
((${#left[@]} == 0)) || fail "left behind after the purge: ${left[*]}"
[ ! -e /etc/shmsched ] || fail "/etc/shmsched left behind after the purge"
echo "package_e2e: built, lintian finds no error, installed, used, removed and purged leaving nothing ($(wc -l <"$work/new-paths") paths)"

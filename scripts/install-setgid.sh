#!/usr/bin/env bash
# Install the shmsched CLI as the front end that gives users who are not trusted with a segment
# a real boundary (docs/security.md, "A real boundary: the setgid front end"): owned by root and
# a dedicated group, mode 2755. Segments for those users are then created
# `--mode 0660 --group GROUP`; the users must not be members of GROUP.
#
# Usage: scripts/install-setgid.sh [--group GROUP] [--binary PATH] DEST
#   --group GROUP   the dedicated group, made (a system group) if missing (default shmsched)
#   --binary PATH   the CLI to install (default: build/bin/shmsched)
#   DEST            where to install it, e.g. /usr/local/bin/shmsched
# Run as root. Exit status: 0 installed and checked, 1 failed, 2 usage error.
set -euo pipefail
group=shmsched
binary=build/bin/shmsched
usage() {
  echo "usage: $0 [--group GROUP] [--binary PATH] DEST" >&2
  exit 2
}
while (($# > 1)); do
  case $1 in
  --group) group=${2:?}; shift 2 ;;
  --binary) binary=${2:?}; shift 2 ;;
  *) usage ;;
  esac
done
(($# == 1)) || usage
dest=$1
die() {
  echo "install-setgid: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "run it as root (it makes a group and installs a setgid file)"
[ -x "$binary" ] || die "no CLI at '$binary' (build it first, or give --binary)"
getent group "$group" >/dev/null || groupadd --system "$group" || die "cannot make group '$group'"
members=$(getent group "$group" | cut -d: -f4)
[ -z "$members" ] || echo "install-setgid: warning: group '$group' has members ($members): they" \
  "can open its segments directly, past every check; remove them unless you trust them" >&2
install -o root -g "$group" -m 2755 "$binary" "$dest"
# What the kernel will do with it: the set-group-ID bit kept (a nosuid mount would ignore it).
[ "$(stat -c '%a %U %G' "$dest")" = "2755 root $group" ] || die "'$dest' is not root:$group 2755"
if findmnt -no OPTIONS --target "$dest" 2>/dev/null | grep -qw nosuid; then
  die "'$dest' is on a nosuid mount: the set-group-ID bit would be ignored"
fi
echo "installed $dest (root:$group, 2755); create shared segments with" \
  "'$dest create NAME ... --mode 0660 --group $group'"

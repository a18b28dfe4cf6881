#!/usr/bin/env bash
# Install into a scratch prefix, then build and run docs/api.md's complete example against the
# installed header, library and pkg-config file: proves `cmake --install` and the example both work.
# Usage: install_smoke.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(find "$work/prefix" -name shmsched.pc)
[ -n "$pc" ] || { echo "install_smoke: shmsched.pc was not installed" >&2; exit 1; }
[ -x "$work/prefix/bin/shmsched" ] || { echo "install_smoke: the CLI was not installed" >&2; exit 1; }
# The first C block of docs/api.md is the complete example.
awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' "$src/docs/api.md" >"$work/example.c"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
# A name of its own, so parallel runs never collide.
sed -i "s/\"example\"/\"shmst-example-$$\"/g" "$work/example.c"
# --define-prefix: the .pc names the configured prefix; we installed somewhere else.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/example" "$work/example.c" \
  $(pkg-config --define-prefix --cflags --libs shmsched)
LD_LIBRARY_PATH=$(dirname "$(find "$work/prefix" -name 'libshmsched.so' | head -n 1)") "$work/example"
echo "install_smoke: installed, compiled the api.md example, and ran it"

#!/usr/bin/env bash
# Install into a scratch prefix, then build and run docs/api.md's complete example against the
# installed header, library and pkg-config file: proves `cmake --install` and the example both work.
# shmsched.pc must describe the prefix installed to (not the configured one), also when the
# install is staged with DESTDIR.
# Usage: install_smoke.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "install_smoke: $*" >&2
  exit 1
}
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name shmsched.pc)
[ -n "$pc" ] || fail "shmsched.pc was not installed"
[ -x "$prefix/bin/shmsched" ] || fail "the CLI was not installed"
libdir=$(dirname "$(dirname "$pc")")
# The man pages (a link per C call to shmsched(3)) and bash completion.
for f in share/man/man1/shmsched.1 share/man/man5/shmsched.conf.5 share/man/man3/shmsched.3 \
  share/man/man3/shms_acquire.3 share/bash-completion/completions/shmsched; do
  [ -s "$prefix/$f" ] || fail "$f was not installed"
done
[ "$(readlink "$prefix/share/man/man3/shms_attach.3")" = shmsched.3 ] ||
  fail "share/man/man3/shms_attach.3 is not a link to shmsched.3"
# bash-completion finds the completion where it was installed, by the command's name.
bc=/usr/share/bash-completion/bash_completion
if [ -r "$bc" ]; then
  XDG_DATA_DIRS=$prefix/share bash -c 'source "$1" && __load_completion shmsched && complete -p shmsched' \
    _ "$bc" | grep -q -- '-F _shmsched shmsched$' ||
    fail "bash-completion does not load share/bash-completion/completions/shmsched"
fi
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
got=$(pkg-config --variable=prefix shmsched)
[ "$got" = "$prefix" ] || fail "shmsched.pc: prefix=$got, installed to $prefix"
# (Concurrency Kit's own flags, which its .pc adds, may come too.)
got=" $(pkg-config --cflags shmsched) "
[[ $got == *" -I$prefix/include "* ]] || fail "pkg-config --cflags shmsched: '$got' (installed to $prefix)"
got=" $(pkg-config --libs shmsched) "
[[ $got == *" -L$libdir -lshmsched "* ]] || fail "pkg-config --libs shmsched: '$got' (installed to $prefix)"

# A tiny program, compiled and linked by what pkg-config says alone, run against the library.
cat >"$work/tiny.c" <<'C'
#include <shmsched.h>
#include <stdio.h>
int main(void) {
  printf("shmsched %s: %s\n", SHMS_VERSION_STRING, shms_strerror(SHMS_ETIMEDOUT));
  return shms_name_check("tiny") != SHMS_OK;
}
C
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/tiny" "$work/tiny.c" $(pkg-config --cflags --libs shmsched)
LD_LIBRARY_PATH=$libdir "$work/tiny" >/dev/null || fail "the tiny program failed"

# The first C block of docs/api.md is the complete example.
awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' "$src/docs/api.md" >"$work/example.c"
# A name of its own, so parallel runs never collide.
sed -i "s/\"example\"/\"shmst-example-$$\"/g" "$work/example.c"
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/example" "$work/example.c" $(pkg-config --cflags --libs shmsched)
LD_LIBRARY_PATH=$libdir "$work/example"

# Staged (DESTDIR): the file names the final prefix, not the staging directory.
DESTDIR=$work/stage cmake --install "$build" --prefix /opt/shmsched >/dev/null
staged=$(find "$work/stage" -name shmsched.pc)
[ -n "$staged" ] || fail "shmsched.pc was not installed under DESTDIR"
got=$(PKG_CONFIG_PATH=$(dirname "$staged") pkg-config --variable=prefix shmsched)
[ "$got" = /opt/shmsched ] || fail "shmsched.pc under DESTDIR: prefix=$got, want /opt/shmsched"
[ -L "$work/stage/opt/shmsched/share/man/man3/shms_release.3" ] ||
  fail "the man page links were not installed under DESTDIR"
echo "install_smoke: installed, pkg-config names the prefix, compiled a program and the api.md example, and ran them"

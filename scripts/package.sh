#!/usr/bin/env bash
# Build the Debian packages (shmsched, libshmsched0, libshmsched-dev, python3-shmsched) with
# dpkg-buildpackage and debhelper, from packaging/debian/, into build-deb/*.deb. Installs its
# own build tools with apt-get (as scripts/setup.sh does); runs no test suite (nocheck).
# The tree as it is (tracked and untracked files git does not ignore) is copied into
# build-deb/src/, so that the build leaves the checkout as it was. docs/operations.md,
# "Installing".
# Usage: scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-deb

tools=(build-essential debhelper dh-python cmake pkg-config libck-dev libinih-dev libjansson-dev
  libjemalloc-dev libncurses-dev python3-dev lintian)
scripts/apt-ensure.sh package "${tools[@]}"

version=$(sed -n 's/^project(shmsched VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)
[ -n "$version" ] || {
  echo "package: no version in CMakeLists.txt's project()" >&2
  exit 1
}
src=$out/src/shmsched-$version
rm -rf "$out"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f" # a file deleted but not yet committed is not copied
done | tar --null -T - -cf - | tar -xf - -C "$src"
cp -r packaging/debian "$src/debian"
# The changelog dpkg reads the version from: the project's, one entry.
cat >"$src/debian/changelog" <<CHANGELOG
shmsched ($version) unstable; urgency=medium

  * Built from the shmsched source tree by scripts/package.sh.

 -- shmsched developers <shmsched-devel@example.org>  $(date -R)
CHANGELOG

(cd "$src" && DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" \
  dpkg-buildpackage -b -us -uc -j"$(nproc)")
mv "$out"/src/*.deb "$out"/src/*.changes "$out"/src/*.buildinfo "$out"/
rm -rf "$out/src"
ls "$out"/*.deb

#!/usr/bin/env bash
# Install the Debian packages named that are not installed yet (apt-get, non-interactive; sudo
# unless root). Usage: scripts/apt-ensure.sh WHO PACKAGE... (WHO prefixes what it says).
set -euo pipefail
who=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} > 0)) || exit 0
echo "$who: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

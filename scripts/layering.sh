#!/usr/bin/env bash
# Check that the library's layers only call down (docs/architecture.md, "Layers").
# Usage: scripts/layering.sh [BUILD_DIR]   (default build/; the library's objects must be built)
#
# Layers, lowest first: include/ <- shm/ <- core/ <- client/, worker/ <- supervisor/.
# A file's layer is its top directory's: supervisor/'s rooms (supervisor/cli/, supervisor/run/...)
# are all supervisor/.
# Within core/, files are ordered too (CORE_ORDER below, lowest first).
# An edge goes up when a file includes a header of a higher directory, or when a library object
# calls (has undefined) a symbol that an object of a higher directory or later core/ file
# defines (nm). Every upward edge fails the check unless scripts/layering.allow lists it as
# "from to"; an allowed edge that no longer exists fails it too, so the list only shrinks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
objs=$build/CMakeFiles/shmsched_obj.dir
allow=scripts/layering.allow

# Lowest first; a core/ file not listed here fails the check (every file has its place).
CORE_ORDER="quiesce tree order account tally fair tenant quota cell report slot gather index overtake owned held revoke workcell dispatch
joined pending recover repair recover_dead audit observe cellview tenantview"

declare -A dir_rank=([include]=0 [shm]=1 [core]=2 [client]=3 [worker]=3 [supervisor]=4)
declare -A core_rank=()
n=0
for f in $CORE_ORDER; do core_rank[core/$f.c]=$n && n=$((n + 1)); done

fail=0
for f in core/*.c; do
  if [ -z "${core_rank[$f]:-}" ]; then
    echo "layering: $f has no place in CORE_ORDER (scripts/layering.sh)" >&2
    fail=1
  fi
done

# Edges "from to" that go up, one per line.
up_edges() {
  # Includes: a quoted include resolved against the including file's directory (one awk pass,
  # no process per line: the check runs in the test suite, often on a loaded machine).
  awk '
    function norm(p,   n, part, out, i, k, s) {
      n = split(p, part, "/"); k = 0
      for (i = 1; i <= n; i++)
        if (part[i] == "..") k--; else if (part[i] != "." && part[i] != "") out[++k] = part[i]
      s = out[1]; for (i = 2; i <= k; i++) s = s "/" out[i]
      return s
    }
    /^#include "/ { inc = $2; gsub(/"/, "", inc); d = FILENAME; sub(/\/[^\/]*$/, "", d)
                    print FILENAME, norm(d "/" inc), inc }
  ' shm/*.[ch] core/*.[ch] client/*.[ch] worker/*.[ch] supervisor/*/*.[ch] |
    while read -r src to inc; do
      [ -e "$to" ] || to=include/$inc # "shmsched.h" comes through the include path
      from_dir=${src%%/*} to_dir=${to%%/*}
      if [ "${dir_rank[$to_dir]:-9}" -gt "${dir_rank[$from_dir]:-9}" ]; then echo "$src $to"; fi
    done
  # Calls: which object defines each symbol another one needs.
  local defs
  defs=$(mktemp)
  for src in shm/*.c core/*.c client/*.c worker/*.c; do
    [ -e "$objs/$src.o" ] || { echo "layering: $objs/$src.o is missing: build first" >&2 && exit 2; }
    nm --defined-only -g "$objs/$src.o" | awk -v f="$src" 'NF == 3 && $2 ~ /[TDBRCV]/ {print $3, f}'
  done | sort -k1,1 >"$defs"
  for src in shm/*.c core/*.c client/*.c worker/*.c; do
    nm -u "$objs/$src.o" | awk '{print $NF}' | sort -u | join - "$defs" | while read -r _ to; do
      [ "$to" = "$src" ] && continue
      from_dir=${src%%/*} to_dir=${to%%/*}
      rf=${dir_rank[$from_dir]:-9} rt=${dir_rank[$to_dir]:-9}
      if [ "$rt" -gt "$rf" ]; then
        echo "$src $to"
      elif [ "$from_dir" = core ] && [ "$to_dir" = core ] &&
        [ "${core_rank[$to]:-0}" -gt "${core_rank[$src]:-0}" ]; then
        echo "$src $to"
      fi
    done
  done
  rm -f "$defs"
}

found=$(up_edges | sort -u)
listed=$({ grep -v '^#' "$allow" || true; } | sed '/^$/d' | sort -u)
new=$(comm -23 <(echo "$found") <(echo "$listed") | sed '/^$/d')
gone=$(comm -13 <(echo "$found") <(echo "$listed") | sed '/^$/d')
if [ -n "$new" ]; then
  echo "layering: these edges go up (docs/architecture.md, \"Layers\"):" >&2
  echo "$new" | sed 's/^/  /' >&2
  fail=1
fi
if [ -n "$gone" ]; then
  echo "layering: $allow lists edges that no longer exist: remove them" >&2
  echo "$gone" | sed 's/^/  /' >&2
  fail=1
fi
if [ "$fail" = 0 ]; then
  n=$(echo "$listed" | sed '/^$/d' | wc -l)
  if [ "$n" = 0 ]; then
    echo "layering: every edge goes down"
  else
    echo "layering: every edge goes down but the $n listed in $allow"
  fi
fi
exit "$fail"

#!/usr/bin/env bash
# Check a Promela model of shmsched with spin, as a ctest test.
#
# Usage: run_spin.sh [--cycles] [--expect TEXT] [--workdir DIR] [--keep] [--cc CC] MODEL.pml
#                    [-DNAME[=V]]...
#
#   (default)      safety: pan -DSAFETY (assertions, invalid end states)
#   --cycles       pan -DNP -l with no progress labels: any cycle at all is an error
#   --expect TEXT  the model variant must FAIL: pan must report errors and TEXT
#                  ("invalid end state", "assertion violated"); the trail is printed
#   --workdir DIR  where pan is generated and built: a fresh directory under DIR for each
#                  run, so that concurrent runs never share one, kept when the check fails
#                  (default: under $TMPDIR or /tmp)
#   --keep         keep that directory (pan, the trail) even when the check passes
#   --cc CC        the C compiler for pan (default: cc)
#
# Exits 0 when the expectation holds, 1 when it does not (any error in a model that must
# pass, an incomplete search, a build failure), 77 when spin or the compiler is missing
# (ctest reports the test as skipped; scripts/setup.sh installs spin).
set -euo pipefail

cycles=0 expect="" workdir="" cc=cc keep=0
while (($# > 0)); do
  case $1 in
  --cycles) cycles=1 ;;
  --expect) expect=$2 && shift ;;
  --workdir) workdir=$2 && shift ;;
  --keep) keep=1 ;;
  --cc) cc=$2 && shift ;;
  -*) echo "run_spin: unknown option $1" >&2 && exit 2 ;;
  *) break ;;
  esac
  shift
done
if (($# < 1)); then
  echo "usage: $0 [--cycles] [--expect TEXT] [--workdir DIR] [--keep] [--cc CC] MODEL.pml [-D...]" >&2
  exit 2
fi
model=$(realpath "$1")
shift
defs=("$@")

for tool in spin "$cc"; do
  if ! command -v "$tool" >/dev/null; then
    echo "run_spin: $tool is not installed (scripts/setup.sh installs it): skipped" >&2
    exit 77
  fi
done

mkdir -p "${workdir:=${TMPDIR:-/tmp}}"
workdir=$(mktemp -d "$workdir/spin.XXXXXX")
# Removed when the expectation holds (unless --keep); kept, with the trail, when it does not.
trap 'rc=$?; if ((rc == 0 && !keep)); then rm -rf "$workdir"; else echo "run_spin: kept $workdir" >&2; fi' EXIT
cd "$workdir"

echo "model: $(basename "$model") ${defs[*]}"
if ! spin "${defs[@]}" -a "$model" >spin.out 2>&1; then
  cat spin.out
  echo "run_spin: spin -a failed" >&2
  exit 1
fi
if grep -qi "error" spin.out; then
  cat spin.out
  echo "run_spin: spin reported errors in the model" >&2
  exit 1
fi

# Exhaustive, compressed (COLLAPSE) state storage; no never claim unless -DNP adds its own.
# A variant that must fail stops at its first error: compiling pan fast matters more there.
opt=-O2
[ -n "$expect" ] && opt=-O0
cflags=("$opt" -w -DNOCLAIM -DCOLLAPSE)
run=(./pan -m400000)
if ((cycles)); then
  cflags+=(-DNP)
  run+=(-l)
  echo "check: cycles (pan -DNP -l: any cycle is a livelock)"
else
  cflags+=(-DSAFETY)
  echo "check: safety (pan -DSAFETY: assertions, invariants, invalid end states)"
fi
if ! "$cc" "${cflags[@]}" -o pan pan.c >cc.out 2>&1; then
  cat cc.out
  echo "run_spin: building pan failed" >&2
  exit 1
fi

status=0
"${run[@]}" >pan.out 2>&1 || status=$?
errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out | tail -n 1)
grep -E "^pan:|State-vector|states, stored|total actual memory|elapsed time" pan.out || true
if [ -z "$errors" ]; then
  cat pan.out
  echo "run_spin: pan gave no verdict (exit status $status)" >&2
  exit 1
fi

if [ -n "$expect" ]; then
  if ((errors == 0)); then
    echo "run_spin: expected spin to find '$expect' in this variant, it found nothing" >&2
    exit 1
  fi
  if ! grep -q "$expect" pan.out; then
    echo "run_spin: expected '$expect', pan reported something else" >&2
    exit 1
  fi
  echo "--- the counterexample (spin -t), last steps:"
  spin "${defs[@]}" -t -k "$(basename "$model").trail" -p "$model" 2>&1 | grep -E "^ *[0-9]+:.*proc" | tail -n 40 || true
  echo "ok: spin finds '$expect' in this variant, as it must"
  exit 0
fi

if ((errors != 0)); then
  echo "run_spin: pan reports errors: $errors; the counterexample:" >&2
  spin "${defs[@]}" -t -k "$(basename "$model").trail" -p "$model" 2>&1 | grep -E "^ *[0-9]+:.*proc|assert|invalid" | tail -n 80 || true
  exit 1
fi
if grep -qE "search depth too small|max search depth|Search not completed" pan.out; then
  cat pan.out
  echo "run_spin: the search was not exhaustive" >&2
  exit 1
fi
echo "ok: errors: 0, exhaustive"

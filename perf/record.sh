#!/usr/bin/env bash
# Profile one benchmark: run it under `perf record -e cpu-clock` with call graphs and
# write, in perf/results/profile/BENCH-SYSTEM/:
#   perf.data        the samples
#   report.txt       `perf report --stdio`: a flat profile by symbol, then the call graphs
#   flamegraph.html  perf's own `perf script report flamegraph` (open it in a browser)
#
# Usage: perf/record.sh BENCH [SYSTEM]
#   BENCH: acquire-release handoff contended worker-roundtrip scaling fairness
#   SYSTEM: shmsched (default) or a baseline (posix-sem, futex, ...), to compare profiles
#
# cpu-clock, a software event, because this VM exposes no hardware counters. Call graphs
# are taken with DWARF unwinding (PERF_CALLGRAPH=dwarf, the default): `-g` alone means
# frame pointers, which the Release build and Debian's libc omit, so its stacks stop at
# the first libc frame. PERF_CALLGRAPH=fp gives plain -g.
#
# The flame graph's template comes from the npm package d3-flame-graph 4.1.3 (5.x no
# longer ships templates; Debian packages none), installed on first use into
# perf/.node_modules (git-ignored). Without npm, the report is still written.
set -euo pipefail
cd "$(dirname "$0")/.."
. perf/bench_cmd.sh

if (($# < 1 || $# > 2)); then
  echo "usage: perf/record.sh BENCH [SYSTEM]   (BENCH: $(bench_names))" >&2
  exit 2
fi
bench=$1 sys=${2:-shmsched}
bench_cmd "$bench" "$sys"
if ! command -v perf >/dev/null; then
  echo "record: perf is missing: apt-get install linux-perf" >&2
  exit 1
fi
bench_build

out=perf/results/profile/$bench-$sys
mkdir -p "$out"
echo "record: ${cmd[*]}" >&2
# timeout: a benchmark that hangs (a lost wake-up is a finding too) ends after 5 minutes.
perf record -q -e cpu-clock --call-graph "${PERF_CALLGRAPH:-dwarf}" -o "$out/perf.data" \
  -- timeout --kill-after=5 300 "${cmd[@]}" >"$out/bench.csv"
cat "$out/bench.csv"
{
  echo "# ${cmd[*]}"
  echo "# flat profile (self time, cpu-clock samples)"
  perf report -q -i "$out/perf.data" --stdio --no-children -g none --percent-limit 0.5
  echo
  echo "# call graphs (callers below each symbol)"
  perf report -q -i "$out/perf.data" --stdio --no-children --percent-limit 2
} >"$out/report.txt" 2>/dev/null
echo "record: wrote $out/report.txt" >&2

template=perf/.node_modules/node_modules/d3-flame-graph/dist/templates/d3-flamegraph-base.html
if [ ! -f "$template" ] && command -v npm >/dev/null; then
  echo "record: installing d3-flame-graph@4.1.3 (the flame graph template) into perf/.node_modules" >&2
  npm install --silent --no-save --no-audit --no-fund --prefix perf/.node_modules \
    d3-flame-graph@4.1.3 >/dev/null
fi
if [ -f "$template" ]; then
  # The report script reads the header of ./perf.data: run it beside the data.
  (cd "$out" && perf script report flamegraph --template "$OLDPWD/$template" \
    -o flamegraph.html >/dev/null 2>&1)
  echo "record: wrote $out/flamegraph.html" >&2
else
  echo "record: no flame graph: npm is missing (the template comes from d3-flame-graph)" >&2
fi

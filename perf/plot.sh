#!/usr/bin/env bash
# Draw perf/run.sh's plots (gnuplot, PNG) from DIR/latest.csv and DIR/samples/:
#   acquire-release.png   uncontended acquire+release, ns per pair, per system
#   handoff.png           distribution (CDF) of release-to-waiter-running latency
#   handoff-hold-5us.png  the same when the holder releases 5 µs after the waiter starts waiting
#   worker-roundtrip.png  distribution (CDF) of submit-to-result latency
#   contended.png         throughput against the number of processes
#   scaling.png           grant and cancel cost (random and same-tenant) against queued requests,
#                         beside one cache miss's cost at each size
# Usage: perf/plot.sh DIR
set -euo pipefail
dir=${1:?usage: perf/plot.sh DIR}
csv=$dir/latest.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

term='set terminal pngcairo size 900,560 noenhanced font ",10"'
gnuplot -e 'set terminal pngcairo' 2>/dev/null || term='set terminal png size 900,560 noenhanced'

# A CDF file per sample file: "latency_us fraction", sorted.
cdf() {
  sort -n "$1" | awk '{ v[NR] = $1 } END { for (i = 1; i <= NR; i++) print v[i] / 1000, i / NR }'
}

# plot_cdf NAME TITLE: DIR/NAME.png from DIR/samples/NAME-*.txt
plot_cdf() {
  local name=$1 title=$2 f sys plots=()
  for f in "$dir/samples/$name"-*.txt; do
    [ -s "$f" ] || continue
    sys=$(basename "$f" .txt)
    sys=${sys#"$name"-}
    [[ $sys == hold-* ]] && continue # handoff-hold-*: a plot of its own
    cdf "$f" >"$work/$name-$sys.cdf"
    plots+=("'$work/$name-$sys.cdf' using 1:2 with lines lw 2 title '$sys'")
  done
  ((${#plots[@]} > 0)) || return 0
  gnuplot <<EOF
$term
set output '$dir/$name.png'
set title '$title'
set xlabel 'latency (µs, log scale)'
set ylabel 'fraction of samples at or below'
set logscale x
set grid
set key bottom right
plot $(IFS=,; echo "${plots[*]}")
EOF
}

plot_cdf handoff "handoff: release in process A until the sleeping waiter in B returns from acquire"
plot_cdf handoff-hold-5us "handoff-hold-5us: A releases 5 µs after B starts waiting (B not asleep first)"
plot_cdf worker-roundtrip "worker-roundtrip: submit to result (client and worker on different CPUs)"

# acquire-release: one bar per system (shmsched's try_acquire as "shmsched-try").
awk -F, '$1 == "acquire-release" && $3 == "ns_per_op" { print $2, $4 }
         $1 == "acquire-release" && $3 == "ns_per_op_try" { print "shmsched-try", $4 }' \
  "$csv" >"$work/acq.dat"
if [ -s "$work/acq.dat" ]; then
  gnuplot <<EOF
$term
set output '$dir/acquire-release.png'
set title 'acquire-release: uncontended acquire + release in one process (median)'
set ylabel 'ns per pair (log scale)'
set logscale y
set style fill solid 0.6
set boxwidth 0.6
set grid y
set xtics rotate by -30
plot '$work/acq.dat' using 0:2:xtic(1) with boxes notitle, \
     '' using 0:2:(sprintf("%.1f", \$2)) with labels offset 0,0.7 notitle
EOF
fi

# contended: ops/s against processes, one line per system.
awk -F, '$1 == "contended" { p = $3; sub(/.*_p/, "", p); print $2, p, $4 }' "$csv" |
  sort -k1,1 -k2,2n >"$work/cont.dat"
if [ -s "$work/cont.dat" ]; then
  plots=()
  for s in $(cut -d' ' -f1 "$work/cont.dat" | uniq); do
    awk -v s="$s" '$1 == s { print $2, $3 }' "$work/cont.dat" >"$work/cont-$s.dat"
    plots+=("'$work/cont-$s.dat' using 1:2 with linespoints lw 2 title '$s'")
  done
  gnuplot <<EOF
$term
set output '$dir/contended.png'
set title 'contended: acquire + release on one class of 2 cells (2 CPUs)'
set xlabel 'processes'
set ylabel 'operations per second (log scale)'
set logscale y
set xtics (1, 2, 4, 8)
set grid
set key outside right
plot $(IFS=,; echo "${plots[*]}")
EOF
fi

# scaling: grant_ns, cancel_ns and cancelhot_ns against queued requests, one line per tenant count;
# and memory's load_ns, what one cache miss costs at that size, for reference.
awk -F, '$1 == "scaling" { split($3, a, "_"); q = substr(a[3], 2); t = substr(a[4], 2)
                           print a[1], t, q, $4 }' "$csv" | sort -k1,1 -k2,2n -k3,3n >"$work/scal.dat"
if [ -s "$work/scal.dat" ]; then
  plots=()
  for kind in grant cancel cancelhot load; do
    for t in $(awk -v k="$kind" '$1 == k { print $2 }' "$work/scal.dat" | uniq); do
      awk -v k="$kind" -v t="$t" '$1 == k && $2 == t { print $3, $4 }' "$work/scal.dat" \
        >"$work/scal-$kind-$t.dat"
      dash=1
      [ "$kind" = cancel ] && dash=2
      [ "$kind" = cancelhot ] && dash=3
      [ "$kind" = load ] && dash=4
      plots+=("'$work/scal-$kind-$t.dat' using 1:2 with linespoints lw 2 dt $dash title '${kind}_ns, $t tenants'")
    done
  done
  gnuplot <<EOF
$term
set output '$dir/scaling.png'
set title 'scaling: cost of one grant and one cancel (median) against queued requests'
set xlabel 'queued requests (log scale)'
set ylabel 'ns'
set logscale x
set yrange [0:*]
set grid
set key outside right
plot $(IFS=,; echo "${plots[*]}")
EOF
fi

# Report on a demo-load.sh run: reads its DIR/log sorted by time
# ("start|end TENANT I NS" lines), with -v t0=NS (the gate's release) and
# -v order="T1 T2 ..." (the tenants in the order their jobs were queued).
# Prints the grant order, each tenant's share of grants while all were
# backlogged, and per-tenant waits (from t0 to the job's start).
function ms(ns) { return sprintf("%.0fms", ns / 1e6) }
function pct(a, b) { return b ? sprintf("%3.0f%%", 100 * a / b) : "  -" }

$1 == "start" {
  n++
  who[n] = $2
  jobs[$2]++
  last[$2] = n
  wait = $4 - t0
  if (wait < 0) wait = 0
  sum[$2] += wait
  if (wait > max[$2]) max[$2] = wait
  if (!($2 in first)) first[$2] = wait
  started[$2, $3] = $4
}
$1 == "end" {
  ran += $4 - started[$2, $3]
  ends++
  finish[$2] = $4 - t0
}
END {
  nt = split(order, tenant, " ")
  printf "Grant order (each letter one job starting, in order):\n  "
  for (i = 1; i <= n; i++) printf "%s%s", substr(who[i], 1, 1), (i % 60 == 0 && i < n) ? "\n  " : ""
  printf "\n(two cells start jobs at nearly the same moment, so neighbours may appear swapped)\n\n"
  # Phases: from one tenant running out of queued work to the next.
  for (i = 1; i <= nt; i++) alive[tenant[i]] = 1
  from = 1
  for (phase = nt; phase >= 1; phase--) {
    upto = n + 1
    for (i = 1; i <= nt; i++) if (alive[tenant[i]] && last[tenant[i]] < upto) { upto = last[tenant[i]]; gone = tenant[i] }
    if (upto > n) break
    delete got
    for (i = from; i <= upto; i++) got[who[i]]++
    printf "Grants %d-%d, while %s backlogged:\n", from, upto, phase == nt ? "all " nt " tenants were" : (phase == 1 ? "only " gone " was" : phase " tenants were")
    for (i = 1; i <= nt; i++) if (alive[tenant[i]]) printf "  %-8s %3d grants %s\n", tenant[i], got[tenant[i]], pct(got[tenant[i]], upto - from + 1)
    alive[gone] = 0
    from = upto + 1
  }
  printf "\n%-8s %5s  %-14s %11s %11s %11s %11s\n", "tenant", "jobs", "queued", "first start", "mean wait", "max wait", "all done"
  queued = 0
  for (i = 1; i <= nt; i++) {
    t = tenant[i]
    printf "%-8s %5d  %-14s %11s %11s %11s %11s\n", t, jobs[t], (i == 1 ? "first" : i == nt ? "last" : "next") " (" queued + 1 "-" queued + jobs[t] ")", ms(first[t]), ms(sum[t] / jobs[t]), ms(max[t]), ms(finish[t])
    queued += jobs[t]
  }
  # What one FIFO queue over the same cells (a counting semaphore) would have done to the
  # tenant queued last: start it only after every job queued before it.
  t = tenant[nt]
  ahead = n - jobs[t]
  if (ends > 0 && cells > 0)
    printf "\nA FIFO queue (a semaphore) would have started %s's first job after the %d jobs\n" \
      "queued before it: about %s in (%d jobs x %s mean run / %d cells).\n" \
      "shmsched started it after %s, and finished all of %s's jobs after %s.\n",
      t, ahead, ms(ahead * (ran / ends) / cells), ahead, ms(ran / ends), cells, ms(first[t]), t, ms(finish[t])
}

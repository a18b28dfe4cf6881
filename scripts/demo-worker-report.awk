# Report on a demo-worker.sh run. Input: "TENANT LATENCY_MS STATUS" lines sorted by tenant,
# then latency (numerically). -v order="T1 T2 ..." and -v clients="C1 C2 ..." (each
# tenant's client loops, in that order), -v secs=N (the run's length).
# Prints each tenant's jobs, its share of all jobs, its rate, and percentiles of the
# submit-to-result latency; then what one FIFO queue would have given everybody.
function pct(p, t,   i) { i = int(p * n[t] + 0.999999); if (i < 1) i = 1; return lat[t, i] }

{
  t = $1
  n[t]++
  lat[t, n[t]] = $2
  sum[t] += $2
  if ($3 != 0) failed[t]++
  total++
}
END {
  nt = split(order, tenant, " ")
  split(clients, nc, " ")
  printf "%-8s %7s %6s %6s %7s %8s %8s %8s %8s\n", "tenant", "clients", "jobs", "share", "jobs/s", "p50", "p90", "p99", "max"
  for (i = 1; i <= nt; i++) {
    t = tenant[i]
    if (n[t] == 0) { printf "%-8s %7d %6d\n", t, nc[i], 0; continue }
    printf "%-8s %7d %6d %5.0f%% %7.1f %6.0fms %6.0fms %6.0fms %6.0fms%s\n", t, nc[i], n[t],
      100 * n[t] / total, n[t] / secs, pct(0.50, t), pct(0.90, t), pct(0.99, t), lat[t, n[t]],
      failed[t] ? sprintf("  (%d failed)", failed[t]) : ""
    outstanding += nc[i]
    mean += sum[t]
  }
  # Little's law: one FIFO queue holding every client's job would make each wait about
  # (jobs outstanding) / (throughput), whoever offered them.
  if (total > 0)
    printf "\n%d jobs in %ds: %.0f jobs/s through 2 workers. One FIFO queue over the same two\n" \
      "workers (a semaphore) would have kept every tenant's jobs about %.0fms from submit to\n" \
      "result (%d jobs outstanding / %.0f jobs/s), the light tenant's as much as the flood's.\n",
      total, secs, total / secs, 1000 * outstanding / (total / secs), outstanding, total / secs
}

/*
 * contended: throughput of acquire + release from P processes hammering one
 * class of C cells (default 2) with no work in between, for a fixed time.
 * Process i is pinned to CPU i % ncpus, so with P > ncpus several share a
 * CPU and a waiter must sleep and be woken: the figure then measures the cost
 * of blocking, not of the fast path.
 *
 * Output: `contended,SYSTEM,ops_per_s_pP,V,ops/s` (total over all processes), `jain_procs_pP`
 * (Jain's index of the processes' counts) and, for shmsched, `max_wait_us_pP` and
 * `mean_wait_us_pP` (the queue's waits, shms_observe) and `overtake_us_pP` (the class's bound,
 * 0 for strict hand-off: what perf/summarize.awk judges the longest wait against). With
 * --latency 1 every acquire is timed too (two clock reads per operation, so the throughput is
 * not comparable): `max_acquire_us_pP` is the longest any process saw, `p99_acquire_us_pP` and
 * `p9999_acquire_us_pP` the 99th and 99.99th percentiles over all acquires (within a fifth):
 * the caller's view, its own preemption inside the call included (design/overtaking.md, "The
 * longest wait against the bound"); perf/run.sh does not run it.
 * Usage: bench_contended --system NAME [--procs P] [--cells C] [--ms MS] [--latency 1]
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_locks.h"
#include "bench_util.h"

#define MAX_PROCS 64
/* Acquire times in buckets a quarter of a power of two wide (bucket_of): 2^48 ns at most. */
#define BUCKETS (48 * 4)

struct shared {
  uint32_t ready __attribute__((aligned(64))); /* processes attached */
  uint32_t go __attribute__((aligned(64)));    /* 1: start; 2: stop */
  uint64_t ops[MAX_PROCS];
  uint64_t max_acquire_ns[MAX_PROCS];      /* --latency: each process's longest acquire */
  uint64_t acquire_ns[MAX_PROCS][BUCKETS]; /* --latency: each process's acquire times */
};

/* ns's bucket: its power of two and the two bits below the leading one. */
static unsigned bucket_of(uint64_t ns) {
  if (ns < 4)
    return (unsigned)ns;
  unsigned lg = 63u - (unsigned)__builtin_clzll(ns);
  unsigned b = lg * 4 + (unsigned)((ns >> (lg - 2)) & 3);
  return b < BUCKETS ? b : BUCKETS - 1;
}

/* The upper end of bucket b in ns. */
static double bucket_top(unsigned b) {
  return b < 4 ? b : (double)(1ull << (b / 4)) * (1.0 + (b % 4 + 1) / 4.0);
}

/* The q-quantile of all processes' acquire times (the top of its bucket), in us. */
static double quantile_us(const struct shared *s, long procs, double q) {
  uint64_t all = 0, seen = 0;
  for (long i = 0; i < procs; i++)
    for (unsigned b = 0; b < BUCKETS; b++)
      all += s->acquire_ns[i][b];
  for (unsigned b = 0; b < BUCKETS; b++) {
    for (long i = 0; i < procs; i++)
      seen += s->acquire_ns[i][b];
    if ((double)seen >= q * (double)all)
      return bucket_top(b) / 1e3;
  }
  return 0;
}

static int latency; /* --latency 1: time every acquire (costs two clock reads per operation) */

static void worker(bl_shared *sh, struct shared *s, int i) {
  bu_pin(i);
  char tenant[16];
  snprintf(tenant, sizeof tenant, "p%d", i);
  bl_proc p;
  bl_open(&p, sh, tenant);
  __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
  while (bu_load32(&s->go) == 0) /* not "until 1": a late starter may see 2 (stop) first */
    __builtin_ia32_pause();
  uint64_t n = 0, longest = 0;
  while (bu_load32(&s->go) == 1) {
    uint64_t t0 = latency ? bu_now_ns() : 0;
    bl_acquire(&p);
    if (latency) {
      uint64_t took = bu_now_ns() - t0;
      longest = took > longest ? took : longest;
      s->acquire_ns[i][bucket_of(took)]++;
    }
    bl_release(&p);
    n++;
  }
  s->ops[i] = n;
  s->max_acquire_ns[i] = longest;
  bl_close(&p);
  _exit(0);
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "--system NAME [--procs P] [--cells C] [--ms MS] [--latency 1]");
  const char *name = bu_arg_str("system", "shmsched");
  long procs = bu_arg_long("procs", 2), cells = bu_arg_long("cells", 2);
  long ms = bu_arg_long("ms", 500);
  latency = (int)bu_arg_long("latency", 0);
  bu_args_done();
  const struct bl_system *sys = bl_find(name);
  if (!sys || procs < 1 || procs > MAX_PROCS || cells < 1)
    bu_die("unknown system '%s' (one of: %s), or --procs not 1..%d, or --cells < 1", name,
           bl_names(), MAX_PROCS);

  struct shared *s = bu_shared(sizeof *s);
  bl_shared *sh = bl_create(sys, (unsigned)cells);
  pid_t pids[MAX_PROCS];
  for (int i = 0; i < procs; i++) {
    if ((pids[i] = fork()) < 0)
      bu_die("fork failed");
    if (pids[i] == 0)
      worker(sh, s, i);
  }
  while (bu_load32(&s->ready) < (uint32_t)procs)
    usleep(1000);
  uint64_t t0 = bu_now_ns();
  bu_store32(&s->go, 1);
  usleep((useconds_t)ms * 1000);
  bu_store32(&s->go, 2);
  uint64_t dt = bu_now_ns() - t0;
  int failed = 0;
  for (int i = 0; i < procs; i++) {
    int status;
    waitpid(pids[i], &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  uint64_t max_wait = 0, mean_wait = 0, bound = bl_overtake_ns(sh);
  int waits = bl_wait_stats(sh, &max_wait, &mean_wait);
  bl_destroy(sh);
  if (failed)
    bu_die("a worker process failed");
  uint64_t total = 0;
  for (int i = 0; i < procs; i++)
    total += s->ops[i];
  char metric[32];
  snprintf(metric, sizeof metric, "ops_per_s_p%ld", procs);
  bu_row("contended", name, metric, (double)(uint64_t)((double)total * 1e9 / (double)dt), "ops/s");
  /* How evenly the processes shared the cells (Jain's index of their counts: 1 even), and for
   * shmsched the longest and mean wait of a request in the queue (bounded overtaking's bound). */
  double sum = 0, sumsq = 0;
  for (int i = 0; i < procs; i++) {
    sum += (double)s->ops[i];
    sumsq += (double)s->ops[i] * (double)s->ops[i];
  }
  snprintf(metric, sizeof metric, "jain_procs_p%ld", procs);
  bu_row("contended", name, metric, sumsq > 0 ? sum * sum / ((double)procs * sumsq) : 0, "index");
  if (latency) {
    uint64_t longest = 0;
    for (int i = 0; i < procs; i++)
      longest = s->max_acquire_ns[i] > longest ? s->max_acquire_ns[i] : longest;
    snprintf(metric, sizeof metric, "max_acquire_us_p%ld", procs);
    bu_row("contended", name, metric, (double)longest / 1e3, "us");
    snprintf(metric, sizeof metric, "p99_acquire_us_p%ld", procs);
    bu_row("contended", name, metric, quantile_us(s, procs, 0.99), "us");
    snprintf(metric, sizeof metric, "p9999_acquire_us_p%ld", procs);
    bu_row("contended", name, metric, quantile_us(s, procs, 0.9999), "us");
  }
  if (waits) {
    snprintf(metric, sizeof metric, "max_wait_us_p%ld", procs);
    bu_row("contended", name, metric, (double)max_wait / 1e3, "us");
    snprintf(metric, sizeof metric, "mean_wait_us_p%ld", procs);
    bu_row("contended", name, metric, (double)mean_wait / 1e3, "us");
    snprintf(metric, sizeof metric, "overtake_us_p%ld", procs); /* the bound the waits answer to */
    bu_row("contended", name, metric, (double)bound / 1e3, "us");
  }
  return 0;
}

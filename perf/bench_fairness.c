/*
 * fairness: three tenants offer 100:10:1 load to one saturated cell. Tenant
 * "heavy" runs 200 processes, "medium" 20 and "light" 2 (--procs); each
 * process loops acquire -> --work-us of busy work -> release, as tenant of
 * its group. Two processes at least per tenant keep even the lightest one
 * backlogged: while one of its processes holds the cell or is on its way back
 * to acquire, the other is queued. After a warm-up,
 * grants are counted per tenant over a window of --ms, and the Jain index of
 * the three shares is reported: 1.0 when they are equal, 1/3 when one tenant
 * takes everything. shmsched takes round-robin turns between tenants
 * (expected ~1.0); a semaphore knows no tenants, so shares follow the number
 * of processes asking (~0.4 for 100:10:1 if wake-ups were FIFO).
 *
 * Processes are not pinned: the 222 of them share the CPUs.
 *
 * Output: `fairness,SYSTEM,jain_index,V,index` and share_heavy, share_medium,
 * share_light (fractions of the grants in the window); for shmsched max_wait_us and
 * mean_wait_us (the queue's waits, warm-up included: shms_observe).
 * Usage: bench_fairness --system NAME [--ms MS] [--warmup-ms MS] [--work-us US]
 *                       [--procs HEAVY:MEDIUM:LIGHT]
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_locks.h"
#include "bench_util.h"

#define TENANTS   3
#define MAX_PROCS 512

static const char *const tenant_names[TENANTS] = {"heavy", "medium", "light"};

struct shared {
  uint32_t ready __attribute__((aligned(64)));
  uint32_t phase __attribute__((aligned(64))); /* 0 wait, 1 warm-up, 2 count, 3 stop */
  uint64_t grants[TENANTS][8];                 /* one cache line per tenant */
};

static void member(bl_shared *sh, struct shared *s, int t, uint64_t work_ns) {
  bl_proc p;
  bl_open(&p, sh, tenant_names[t]);
  __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
  while (bu_load32(&s->phase) == 0)
    usleep(1000);
  for (;;) {
    bl_acquire(&p);
    uint32_t phase = bu_load32(&s->phase);
    if (phase == 2)
      __atomic_add_fetch(&s->grants[t][0], 1, __ATOMIC_RELAXED);
    bu_busy_ns(work_ns);
    bl_release(&p);
    if (phase == 3)
      break;
  }
  bl_close(&p);
  _exit(0);
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv,
               "--system NAME [--ms MS] [--warmup-ms MS] [--work-us US] [--procs H:M:L]");
  const char *name = bu_arg_str("system", "shmsched");
  long ms = bu_arg_long("ms", 1000), warmup = bu_arg_long("warmup-ms", 200);
  long work_us = bu_arg_long("work-us", 20);
  const char *spec = bu_arg_str("procs", "200:20:2");
  bu_args_done();
  const struct bl_system *sys = bl_find(name);
  if (!sys)
    bu_die("unknown system '%s' (one of: %s)", name, bl_names());
  int tenant_procs[TENANTS];
  if (sscanf(spec, "%d:%d:%d", &tenant_procs[0], &tenant_procs[1], &tenant_procs[2]) != 3 ||
      tenant_procs[0] < 1 || tenant_procs[1] < 1 || tenant_procs[2] < 1 ||
      tenant_procs[0] + tenant_procs[1] + tenant_procs[2] > MAX_PROCS)
    bu_die("--procs wants H:M:L, each at least 1, %d in all at most", MAX_PROCS);

  struct shared *s = bu_shared(sizeof *s);
  bl_shared *sh = bl_create(sys, 1);
  pid_t pids[MAX_PROCS];
  int n = 0;
  for (int t = 0; t < TENANTS; t++)
    for (int i = 0; i < tenant_procs[t]; i++, n++) {
      if ((pids[n] = fork()) < 0)
        bu_die("fork failed");
      if (pids[n] == 0)
        member(sh, s, t, (uint64_t)work_us * 1000);
    }
  while (bu_load32(&s->ready) < (uint32_t)n)
    usleep(1000);
  bu_store32(&s->phase, 1);
  usleep((useconds_t)warmup * 1000);
  bu_store32(&s->phase, 2);
  usleep((useconds_t)ms * 1000);
  bu_store32(&s->phase, 3);
  int failed = 0;
  for (int i = 0; i < n; i++) {
    int status;
    waitpid(pids[i], &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  uint64_t max_wait = 0, mean_wait = 0;
  int waits = bl_wait_stats(sh, &max_wait, &mean_wait);
  bl_destroy(sh);
  if (failed)
    bu_die("a tenant process failed");

  double x[TENANTS], sum = 0, sumsq = 0;
  for (int t = 0; t < TENANTS; t++) {
    x[t] = (double)s->grants[t][0];
    sum += x[t];
    sumsq += x[t] * x[t];
  }
  if (sum == 0)
    bu_die("no grant in the window");
  bu_row("fairness", name, "jain_index", sum * sum / (TENANTS * sumsq), "index");
  for (int t = 0; t < TENANTS; t++) {
    char metric[32];
    snprintf(metric, sizeof metric, "share_%s", tenant_names[t]);
    bu_row("fairness", name, metric, x[t] / sum, "fraction");
  }
  if (waits) {
    bu_row("fairness", name, "max_wait_us", (double)max_wait / 1e3, "us");
    bu_row("fairness", name, "mean_wait_us", (double)mean_wait / 1e3, "us");
  }
  return 0;
}

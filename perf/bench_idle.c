/*
 * idle-waiters: what waiters cost while nothing happens. One cell, held by
 * the parent for the whole run; --waiters processes each block in acquire
 * behind it. Once all of them are asleep and --settle-ms has passed, the
 * parent reads each waiter's CPU time (/proc/PID/schedstat, ns; /proc/PID/stat
 * ticks where schedstat is missing) and context switches (/proc/PID/status),
 * waits --ms, and reads them again. Nobody enqueues, releases or cancels in
 * between: every wake-up in the window is the system's own.
 *
 * Output: `idle-waiters,SYSTEM,cpu_s_per_s,V,s/s` (CPU seconds per second of
 * all waiters together), `wakeups_per_waiter_s,V,1/s` (voluntary switches:
 * the process slept, then ran) and `involuntary_per_waiter_s`.
 * Usage: bench_idle --system NAME [--waiters N] [--ms MS] [--settle-ms MS]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_locks.h"
#include "bench_util.h"

struct usage {
  uint64_t cpu_ns;
  uint64_t voluntary, involuntary;
};

/* CPU time of pid in ns: schedstat's first field, else utime+stime ticks from stat. */
static uint64_t cpu_ns(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
  FILE *f = fopen(path, "r");
  unsigned long long ns = 0;
  if (f != NULL) {
    int ok = fscanf(f, "%llu", &ns) == 1;
    fclose(f);
    if (ok)
      return ns;
  }
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if ((f = fopen(path, "r")) == NULL)
    bu_die("cannot read %s", path);
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  unsigned long ut = 0, st = 0;
  char *p = strrchr(buf, ')');
  if (p == NULL ||
      sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    bu_die("cannot parse %s", path);
  return (uint64_t)(ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

static struct usage usage_of(pid_t pid) {
  struct usage u = {.cpu_ns = cpu_ns(pid)};
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    bu_die("cannot read %s", path);
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long long v;
    if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1)
      u.voluntary = v;
    else if (sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
      u.involuntary = v;
  }
  fclose(f);
  return u;
}

/* Wait (up to 10 s) until pid sleeps; dies if it never does: a waiter that spins is a finding. */
static void wait_asleep(pid_t pid) {
  uint64_t end = bu_now_ns() + 10000000000ull;
  while (bu_proc_state(pid) != 'S')
    if (bu_now_ns() > end)
      bu_die("waiter %d never went to sleep", (int)pid);
    else
      usleep(1000);
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "--system NAME [--waiters N] [--ms MS] [--settle-ms MS]");
  const char *name = bu_arg_str("system", "shmsched");
  long waiters = bu_arg_long("waiters", 100);
  long ms = bu_arg_long("ms", 5000);
  long settle_ms = bu_arg_long("settle-ms", 500);
  bu_args_done();
  const struct bl_system *sys = bl_find(name);
  if (!sys || waiters < 1 || ms < 1 || settle_ms < 0)
    bu_die("unknown system '%s' (one of: %s), or --waiters/--ms < 1", name, bl_names());

  bl_shared *sh = bl_create(sys, 1);
  bl_proc holder;
  bl_open(&holder, sh, "holder");
  bl_acquire(&holder);
  pid_t *pids = calloc((size_t)waiters, sizeof *pids);
  struct usage *before = calloc((size_t)waiters, sizeof *before);
  if (pids == NULL || before == NULL)
    bu_die("out of memory");
  for (long i = 0; i < waiters; i++) {
    if ((pids[i] = fork()) < 0)
      bu_die("fork failed");
    if (pids[i] == 0) {
      char tenant[16];
      snprintf(tenant, sizeof tenant, "w%ld", i % 8);
      bl_proc p;
      bl_open(&p, sh, tenant);
      bl_acquire(&p); /* never granted: the parent holds the only unit until it kills us */
      _exit(1);
    }
  }
  for (long i = 0; i < waiters; i++)
    wait_asleep(pids[i]);
  usleep((useconds_t)settle_ms * 1000);
  uint64_t t0 = bu_now_ns();
  for (long i = 0; i < waiters; i++)
    before[i] = usage_of(pids[i]);
  usleep((useconds_t)ms * 1000);
  uint64_t cpu = 0, vol = 0, invol = 0;
  for (long i = 0; i < waiters; i++) {
    struct usage after = usage_of(pids[i]);
    cpu += after.cpu_ns - before[i].cpu_ns;
    vol += after.voluntary - before[i].voluntary;
    invol += after.involuntary - before[i].involuntary;
  }
  double window_s = (double)(bu_now_ns() - t0) / 1e9;
  for (long i = 0; i < waiters; i++)
    kill(pids[i], SIGKILL);
  for (long i = 0; i < waiters; i++)
    waitpid(pids[i], NULL, 0);
  bl_close(&holder);
  bl_destroy(sh);

  bu_row("idle-waiters", name, "cpu_s_per_s", (double)cpu / 1e9 / window_s, "s/s");
  bu_row("idle-waiters", name, "wakeups_per_waiter_s", (double)vol / (double)waiters / window_s,
         "1/s");
  bu_row("idle-waiters", name, "involuntary_per_waiter_s",
         (double)invol / (double)waiters / window_s, "1/s");
  free(pids);
  free(before);
  return 0;
}

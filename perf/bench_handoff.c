/*
 * handoff: how long a release in one process takes to wake the waiter it
 * hands the cell to in another. One cell; process A (pinned to CPU 0) holds
 * it, process B (pinned to CPU 1) calls acquire and blocks. Once /proc shows
 * B asleep ('S'), A stores a timestamp in shared memory and releases; B takes
 * the time when its acquire returns. The sample is the difference. Then B
 * releases, A takes the cell back, and the next round starts.
 *
 * Waiting until B sleeps measures the wake-up of a sleeping waiter, the usual
 * case when holders hold for longer than a few microseconds, the same way for
 * every system. (A system that spins before sleeping would look better if A
 * released at once; that is not what this figure is.) A then waits --gap-us
 * more (default 1000) before releasing: how fast a sleeping vCPU wakes depends
 * on how long it has been idle (the host polls a halted vCPU for a while
 * before descheduling it), so without a fixed gap the figure would follow
 * how quickly A happened to look at /proc, not the system measured.
 *
 * With --hold-us H (H > 0) the figure is the other case: A holds the cell for
 * H microseconds after B starts to wait and then releases, without waiting
 * for B to sleep first, so a waiter that spins briefly before sleeping may
 * take the cell without being woken at all (the bench is then handoff-hold-Hus).
 *
 * Both report the CPU time B spends in acquire per hand-off
 * (CLOCK_THREAD_CPUTIME_ID around the call, the mean over the rounds): what a
 * spinning waiter pays for its spin, or a sleeping one for its wake-up.
 *
 * Output: `handoff,SYSTEM,p50_ns,V,ns`, p99_ns and waiter_cpu_ns (`handoff-hold-Hus`
 * with --hold-us H); with --samples FILE every sample, one per line (the plots'
 * latency distributions).
 * Usage: bench_handoff --system NAME [--rounds N] [--gap-us US] [--hold-us US] [--samples FILE]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_locks.h"
#include "bench_util.h"

struct shared {
  uint32_t phase __attribute__((aligned(64))); /* 2r+1: A holds for round r; 2r+2: B done */
  uint64_t t_release __attribute__((aligned(64)));
  uint32_t awake_rounds; /* rounds where B never showed as asleep (diagnostic) */
  uint64_t *cpu;         /* B's CPU time in each acquire (after the samples) */
  uint64_t samples[];
};

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* B: wait for A to hold, block in acquire, time the return, give the cell back. */
static void waiter(bl_shared *sh, struct shared *s, long rounds) {
  bu_pin(1);
  bl_proc p;
  bl_open(&p, sh, "waiter");
  for (long r = 0; r < rounds; r++) {
    bu_spin_until(&s->phase, (uint32_t)(2 * r + 1));
    uint64_t c0 = thread_cpu_ns();
    bl_acquire(&p);
    uint64_t t1 = bu_now_ns();
    s->cpu[r] = thread_cpu_ns() - c0;
    s->samples[r] = t1 - bu_load64(&s->t_release);
    bl_release(&p);
    bu_store32(&s->phase, (uint32_t)(2 * r + 2));
  }
  bl_close(&p);
  _exit(0);
}

/* Wait (up to ~50 ms) for pid to be asleep; 0 if it never was. */
static int wait_asleep(pid_t pid) {
  uint64_t end = bu_now_ns() + 50000000ull;
  while (bu_now_ns() < end)
    if (bu_proc_state(pid) == 'S')
      return 1;
  return 0;
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv,
               "--system NAME [--rounds N] [--gap-us US] [--hold-us US] [--samples FILE]");
  const char *name = bu_arg_str("system", "shmsched");
  long rounds = bu_arg_long("rounds", 2000);
  uint64_t gap_ns = (uint64_t)bu_arg_long("gap-us", 1000) * 1000;
  long hold_us = bu_arg_long("hold-us", 0);
  const char *samples = bu_arg_str("samples", NULL);
  bu_args_done();
  const struct bl_system *sys = bl_find(name);
  if (!sys || rounds < 1 || hold_us < 0)
    bu_die("unknown system '%s' (one of: %s), --rounds < 1 or --hold-us < 0", name, bl_names());

  struct shared *s = bu_shared(sizeof *s + 2 * sizeof(uint64_t) * (size_t)rounds);
  s->cpu = s->samples + rounds;
  bl_shared *sh = bl_create(sys, 1);
  pid_t pid = fork();
  if (pid < 0)
    bu_die("fork failed");
  if (pid == 0)
    waiter(sh, s, rounds);

  bu_pin(0);
  bl_proc p;
  bl_open(&p, sh, "holder");
  for (long r = 0; r < rounds; r++) {
    bl_acquire(&p);
    bu_store32(&s->phase, (uint32_t)(2 * r + 1));
    if (hold_us > 0) {
      bu_busy_ns((uint64_t)hold_us * 1000); /* a short hold: B is waiting, maybe spinning */
    } else {
      if (!wait_asleep(pid))
        s->awake_rounds++;
      bu_busy_ns(gap_ns); /* busy: A's own CPU stays awake, only B's idles */
    }
    bu_store64(&s->t_release, bu_now_ns());
    bl_release(&p);
    bu_spin_until(&s->phase, (uint32_t)(2 * r + 2));
  }
  int status;
  waitpid(pid, &status, 0);
  bl_close(&p);
  bl_destroy(sh);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    bu_die("the waiter failed");
  if (s->awake_rounds > 0)
    fprintf(stderr, "%s: %s: in %u of %ld rounds the waiter never showed as asleep\n", bu_prog,
            name, s->awake_rounds, rounds);
  if (samples)
    bu_write_samples(samples, s->samples, (size_t)rounds);
  char bench[64] = "handoff";
  if (hold_us > 0)
    snprintf(bench, sizeof bench, "handoff-hold-%ldus", hold_us);
  bu_row(bench, name, "p50_ns", (double)bu_quantile(s->samples, (size_t)rounds, 0.50), "ns");
  bu_row(bench, name, "p99_ns", (double)bu_quantile(s->samples, (size_t)rounds, 0.99), "ns");
  uint64_t cpu = 0;
  for (long r = 0; r < rounds; r++)
    cpu += s->cpu[r];
  bu_row(bench, name, "waiter_cpu_ns", (double)(cpu / (uint64_t)rounds), "ns");
  return 0;
}

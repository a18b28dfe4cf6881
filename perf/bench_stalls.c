/*
 * stalls: how long this machine takes a CPU away from a running process, with nothing of ours
 * to blame. One process per CPU, each pinned, reads the clock in a loop for --ms and counts the
 * gaps between two reads: every gap is time the CPU ran something else (a kernel thread, the
 * platform's agent, an interrupt, the hypervisor). A queued request waits at least as long as a
 * holder its grant waits for is kept off its CPU, whatever the queueing rule, so perf/run.sh
 * prints this beside the contended longest waits (design/benchmarking.md, "Why absolute
 * figures move").
 *
 * Output: `stalls,machine,gaps_over_2ms_per_s,V,1/s` (over all CPUs), `gaps_over_500us_per_s`
 * and `longest_gap_us` (the longest on any CPU).
 * Usage: bench_stalls [--ms MS]
 */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define MAX_CPUS 64

struct per_cpu {
  uint64_t over_500us, over_2ms, longest;
} __attribute__((aligned(64)));

static void watch(struct per_cpu *out, int cpu, uint64_t ns) {
  bu_pin(cpu);
  uint64_t prev = bu_now_ns(), end = prev + ns;
  struct per_cpu r = {0};
  while (prev < end) {
    uint64_t t = bu_now_ns(), gap = t - prev;
    r.over_500us += gap > 500000;
    r.over_2ms += gap > 2000000;
    r.longest = gap > r.longest ? gap : r.longest;
    prev = t;
  }
  *out = r;
  _exit(0);
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "[--ms MS]");
  long ms = bu_arg_long("ms", 1000);
  bu_args_done();
  if (ms < 1)
    bu_die("--ms must be at least 1");
  int cpus = bu_ncpus() < MAX_CPUS ? bu_ncpus() : MAX_CPUS;
  struct per_cpu *r = bu_shared(sizeof *r * (size_t)cpus);
  pid_t pids[MAX_CPUS];
  for (int c = 0; c < cpus; c++) {
    if ((pids[c] = fork()) < 0)
      bu_die("fork failed");
    if (pids[c] == 0)
      watch(&r[c], c, (uint64_t)ms * 1000000ull);
  }
  int failed = 0;
  for (int c = 0; c < cpus; c++) {
    int status;
    waitpid(pids[c], &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (failed)
    bu_die("a watcher process failed");
  uint64_t over_500us = 0, over_2ms = 0, longest = 0;
  for (int c = 0; c < cpus; c++) {
    over_500us += r[c].over_500us;
    over_2ms += r[c].over_2ms;
    longest = r[c].longest > longest ? r[c].longest : longest;
  }
  double secs = (double)ms / 1e3;
  bu_row("stalls", "machine", "gaps_over_2ms_per_s", (double)over_2ms / secs, "1/s");
  bu_row("stalls", "machine", "gaps_over_500us_per_s", (double)over_500us / secs, "1/s");
  bu_row("stalls", "machine", "longest_gap_us", (double)longest / 1e3, "us");
  return 0;
}

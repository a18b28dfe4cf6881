/*
 * acquire-release: the cost of one uncontended acquire + release in one
 * process (one cell, nobody else attached), pinned to one CPU.
 *
 * Output: `acquire-release,SYSTEM,ns_per_op,V,ns` — the mean over --iters
 * pairs after a warm-up of the same length. shmsched-try reports as system
 * shmsched, metric ns_per_op_try; shmsched-prepared (the request prepared once,
 * shms_acquire_prepared) as itself. perf/run.sh counts this program's system
 * calls under strace at two iteration counts to get syscalls_per_op.
 *
 * Usage: bench_acquire --system NAME [--iters N] [--quiet 1]
 *   --quiet 1: print nothing (the strace runs only want the system calls)
 */
#include <stdio.h>
#include <string.h>

#include "bench_locks.h"
#include "bench_util.h"

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "--system NAME [--iters N] [--quiet 1]");
  const char *name = bu_arg_str("system", "shmsched");
  long iters = bu_arg_long("iters", 2000000);
  int quiet = (int)bu_arg_long("quiet", 0);
  bu_args_done();
  const struct bl_system *sys = bl_find(name);
  if (!sys || iters < 1)
    bu_die("unknown system '%s' (one of: %s) or --iters < 1", name, bl_names());

  bu_pin(0);
  bl_shared *sh = bl_create(sys, 1);
  bl_proc p;
  bl_open(&p, sh, "bench");
  for (long i = 0; i < iters; i++) { /* warm-up: caches, page faults, branch history */
    bl_acquire(&p);
    bl_release(&p);
  }
  uint64_t t0 = bu_now_ns();
  for (long i = 0; i < iters; i++) {
    bl_acquire(&p);
    bl_release(&p);
  }
  uint64_t dt = bu_now_ns() - t0;
  bl_close(&p);
  bl_destroy(sh);
  if (!quiet) {
    int try = strcmp(name, "shmsched-try") == 0;
    bu_row("acquire-release", try ? "shmsched" : name, try ? "ns_per_op_try" : "ns_per_op",
           (double)dt / (double)iters, "ns");
  }
  return 0;
}

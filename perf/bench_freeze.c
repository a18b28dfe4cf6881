/*
 * freeze: what one freeze and unfreeze of a class costs its freezer (recovery, the audit),
 * with --others processes attached and idle, all marking their operations --marks plain
 * (registered for membarrier: the freezer issues MEMBARRIER_CMD_GLOBAL_EXPEDITED) or locked
 * (SHMSCHED_MEMBARRIER=0: no barrier); and, beside it, one membarrier call alone.
 *
 * Output: `freeze,marks-MARKS,ns_per_freeze,V,ns` and, with plain marks,
 * `freeze,membarrier,ns_per_call,V,ns`: means over --iters after a warm-up of the same length.
 * Usage: bench_freeze [--iters N] [--marks plain|locked] [--others N]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/sched.h"
#include "shm/atomic.h"
#include "shm/handle.h"
#include "shm/membarrier.h"

static void freeze_many(shms_t *h, long iters) {
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  for (long i = 0; i < iters; i++) {
    shms__freeze(h, k);
    shms__unfreeze(k, shms__load_64(&k->ctl->fast));
  }
}

/* A process attached and idle (until killed), which says so on fd. */
static pid_t idle_member(const char *name, int fd) {
  pid_t pid = fork();
  if (pid < 0)
    bu_die("fork");
  if (pid == 0) {
    shms_t *h;
    if (shms_attach(name, 0, &h) != SHMS_OK || write(fd, "r", 1) != 1)
      _exit(1);
    for (;;)
      pause();
  }
  return pid;
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "[--iters N] [--marks plain|locked] [--others N]");
  long iters = bu_arg_long("iters", 20000);
  const char *marks = bu_arg_str("marks", "plain");
  long others = bu_arg_long("others", 1);
  bu_args_done();
  if (strcmp(marks, "plain") != 0 && strcmp(marks, "locked") != 0)
    bu_die("--marks: plain or locked, got %s", marks);
  setenv("SHMSCHED_MEMBARRIER", strcmp(marks, "plain") == 0 ? "1" : "0", 1);
  bu_pin(0);
  char name[64], row[32];
  snprintf(name, sizeof name, "shms-bench-freeze-%d", (int)getpid());
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){.configured = 1, .cells = 1, .queue = 1};
  shms_t *h;
  int rc = shms_create(name, &cfg);
  if (rc != SHMS_OK || (rc = shms_attach(name, 0, &h)) != SHMS_OK)
    bu_die_shms("create/attach", rc);
  if ((strcmp(marks, "plain") == 0) != (int)h->marks_plain)
    bu_die("this process cannot mark %s (membarrier)", marks);
  int ready[2];
  if (pipe(ready) != 0)
    bu_die("pipe");
  pid_t *kids = calloc((size_t)others + 1, sizeof *kids);
  for (long i = 0; i < others; i++) {
    char b;
    kids[i] = idle_member(name, ready[1]);
    if (read(ready[0], &b, 1) != 1)
      bu_die("member %ld did not attach", i);
  }
  freeze_many(h, iters); /* warm-up */
  uint64_t t0 = bu_now_ns();
  freeze_many(h, iters);
  double per_freeze = (double)(bu_now_ns() - t0) / (double)iters;
  snprintf(row, sizeof row, "marks-%s", marks);
  bu_row("freeze", row, "ns_per_freeze", per_freeze, "ns");
  if (h->marks_plain) {
    t0 = bu_now_ns();
    for (long i = 0; i < iters; i++)
      shms__membarrier_global();
    bu_row("freeze", "membarrier", "ns_per_call", (double)(bu_now_ns() - t0) / (double)iters, "ns");
  }
  for (long i = 0; i < others; i++)
    kill(kids[i], SIGKILL);
  for (long i = 0; i < others; i++)
    waitpid(kids[i], NULL, 0);
  free(kids);
  shms_detach(h);
  shms_destroy(name, SHMS_DESTROY_FORCE);
  return 0;
}

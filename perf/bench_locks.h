/*
 * The systems compared, behind one interface: a counting lock of `cells`
 * units shared by processes. acquire takes one unit (blocking), release gives
 * it back. The benchmarks (acquire-release, handoff, contended, fairness) are
 * written once against it, so every system runs the same loop.
 *
 *   shmsched        shms_acquire / shms_release on class standard (fair by time, the default)
 *   shmsched-strict shms_acquire / shms_release on a class with overtake=0 (strict hand-off);
 *   shmsched-grants the same on a class fair by grants (fairness=grants);
 *                   "shmsched" and "shmsched-grants" take BENCH_OVERTAKE_US (0: strict) when
 *                   set, else the default
 *   shmsched-try    shms_try_acquire (spinning on would-block) / shms_release
 *   shmsched-prepared shms_acquire_prepared (the request prepared once, at open) / shms_release
 *   shmsched-prepared-grants the same on a class fair by grants
 *   posix-sem       process-shared sem_t: sem_wait / sem_post
 *   sysv-sem-undo   semop(-1, SEM_UNDO) / semop(+1, SEM_UNDO)
 *   jobserver-pipe  read one byte from a pipe / write it back
 *   futex           a counting semaphore on a raw shared futex word (CAS; FUTEX_WAIT
 *                   when empty; FUTEX_WAKE only when a waiter announced itself)
 *   posix-mq        mq_receive a token message / mq_send it back (at most 10 fit)
 *   robust-mutex    process-shared robust mutex + condvar guarding a count
 *   harness         no lock: the cost of the benchmark's own loop and indirect calls
 *                   (acquire-release only; it never blocks, so it is no lock at all)
 *
 * Lifecycle: bl_create in the parent (before fork), bl_open in every process
 * that takes part (after fork: a shmsched handle does not survive fork),
 * bl_close, then bl_destroy in the parent.
 */
#ifndef SHMS_BENCH_LOCKS_H
#define SHMS_BENCH_LOCKS_H

#include "shmsched.h"

typedef struct bl_shared bl_shared;

typedef struct {
  const struct bl_system *sys;
  bl_shared *sh;
  shms_t *h;
  shms_lease lease;
  shms_prepared prepared; /* shmsched-prepared */
  char tenant[SHMS_TENANT_MAX + 1];
  /* Units each acquire takes at once (0 or 1: one), set after bl_open: shmsched and shmsched-grants
   * ask for a lease of that many cells, sysv-sem-undo takes them in one semop, posix-sem
   * takes them one sem_wait after another (what a semaphore allows: not all or nothing). */
  unsigned width;
} bl_proc;

struct bl_system {
  const char *name;
  void (*create)(bl_shared *sh, unsigned cells);
  void (*open)(bl_proc *p);
  void (*acquire)(bl_proc *p);
  void (*release)(bl_proc *p);
  void (*close)(bl_proc *p);
  void (*destroy)(bl_shared *sh);
};

/* Whether sys takes several units at once (bl_proc.width). */
int bl_takes_width(const struct bl_system *sys);

/* The system named name, or NULL. */
const struct bl_system *bl_find(const char *name);
/* The names of every system, space-separated (for usage lines). */
const char *bl_names(void);

/* Set up the shared state of sys with cells units, in memory shared with later children. */
bl_shared *bl_create(const struct bl_system *sys, unsigned cells);
/* Join from this process, as tenant (used by shmsched only; others ignore it). */
void bl_open(bl_proc *p, bl_shared *sh, const char *tenant);
void bl_close(bl_proc *p);
void bl_destroy(bl_shared *sh);

/* shmsched systems: the tenants' weights (shms_policy_tenant) and teams (team1, team2, ...;
 * 0: none), from the parent before fork. */
void bl_set_policy(bl_shared *sh, const char *const *tenants, const double *weights,
                   const double *teams, int n);

/* shmsched systems: the class's longest and mean queue wait so far (shms_observe), before
 * bl_destroy; 1 if read, 0 for another system. */
int bl_wait_stats(const bl_shared *sh, uint64_t *max_ns, uint64_t *mean_ns);
/* shmsched systems: the overtake bound the class was made with, in force (0: strict hand-off);
 * 0 for another system. */
uint64_t bl_overtake_ns(const bl_shared *sh);

static inline void bl_acquire(bl_proc *p) { p->sys->acquire(p); }
static inline void bl_release(bl_proc *p) { p->sys->release(p); }

#endif

/* Recorded pids translated to the viewer's pid namespace, with one cached /proc walk. */
#include "pidview.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "procfs.h"

/* One process of a namespace below ours, as the last walk found it. */
struct seen {
  uint64_t ino;
  uint64_t start;
  int32_t own; /* its number in its own namespace */
  int32_t here;
};

/*
 * The last two walks: every process below our namespace then. A recovery names a dead process
 * from them (it cannot be found once dead), so one that died since the walk before the last is
 * still named; rows of a process gone longer are dropped. A row never names another process:
 * a number given again comes with another start time.
 */
struct walked {
  struct seen *rows;
  size_t n, cap;
};
static struct {
  pthread_mutex_t lock;
  struct walked now, before;
  uint64_t began_unix_ns; /* of the last walk; 0: never walked */
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int keep(const struct shms__pidns_proc *p, void *ctx) {
  struct walked *w = ctx;
  if (w->n == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 256;
    struct seen *rows = realloc(w->rows, cap * sizeof *rows);
    if (rows == NULL)
      return 1; /* what is kept so far is still true; the rest reads as not found */
    w->rows = rows;
    w->cap = cap;
  }
  w->rows[w->n++] = (struct seen){.ino = p->ino,
                                  .start = shms__proc_start_time((pid_t)p->pid[0]),
                                  .own = (int32_t)p->pid[p->n - 1],
                                  .here = (int32_t)p->pid[0]};
  return 0;
}

static void walk(void) {
  struct walked old = cache.before;
  cache.before = cache.now;
  cache.now = old;
  cache.now.n = 0;
  cache.began_unix_ns = realtime_ns();
  shms__pidns_scan(keep, &cache.now); /* what cannot be read is not found: of another namespace */
}

/* The process of namespace ino numbered own there with start time start, in the last walk; and
 * whether that namespace's init started at init_start (a namespace given a dead one's inode is
 * another). */
static int32_t find_in(const struct walked *w, uint64_t ino, int32_t own, uint64_t start,
                       uint64_t init_start) {
  int32_t here = 0;
  int init_ok = 0;
  for (size_t i = 0; i < w->n; i++) {
    const struct seen *s = &w->rows[i];
    if (s->ino != ino)
      continue;
    if (s->own == 1)
      init_ok = s->start == init_start;
    if (s->own == own && s->start == start)
      here = s->here;
  }
  return init_ok ? here : 0;
}

static int32_t find(uint64_t ino, int32_t own, uint64_t start, uint64_t init_start) {
  int32_t here = find_in(&cache.now, ino, own, start, init_start);
  return here != 0 ? here : find_in(&cache.before, ino, own, start, init_start);
}

int32_t shms__pid_here(const struct shms__pidref *ref, int may_walk) {
  if (ref->pid <= 0 || ref->ns.ino == 0 || ref->ns.init_start == 0)
    return 0; /* recorded where /proc was not its own namespace's: nothing proves it */
  struct shms__pidns me;
  shms__pidns_self(&me);
  if (me.init_start == 0)
    return 0; /* our /proc is not our namespace's: neither its numbers nor its states are ours */
  if (ref->ns.ino == me.ino)
    return ref->ns.init_start == me.init_start ? ref->pid : 0;
  pthread_mutex_lock(&cache.lock);
  int32_t here = 0;
  if (cache.began_unix_ns != 0)
    here = find(ref->ns.ino, ref->pid, ref->start_time, ref->ns.init_start);
  /* Not found: walk again only if it may have started since the last walk; one that attached
   * before it began and was not found is not visible from here. */
  if (here == 0 && may_walk &&
      (cache.began_unix_ns == 0 || ref->attached_unix_ns >= cache.began_unix_ns)) {
    walk();
    here = find(ref->ns.ino, ref->pid, ref->start_time, ref->ns.init_start);
  }
  pthread_mutex_unlock(&cache.lock);
  return here;
}

void shms__pid_show(const struct shms__pidref *ref, int may_walk, struct shms__pidshown *out) {
  out->own = ref->pid;
  out->ns = ref->pid > 0 ? ref->ns.ino : 0;
  out->here = shms__pid_here(ref, may_walk);
  out->foreign = ref->pid > 0 && out->here == 0;
}

void shms__pid_show_into(const struct shms__pidref *ref, int may_walk, int32_t *pid,
                         int32_t *ns_pid, uint32_t *foreign, uint64_t *pidns) {
  struct shms__pidshown shown;
  shms__pid_show(ref, may_walk, &shown);
  *pid = shown.here;
  *ns_pid = shown.own;
  *foreign = shown.foreign;
  *pidns = shown.ns;
}

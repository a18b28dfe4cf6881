/*
 * Quiescence for recovery (docs/protocol.md, "Recovery"). Every operation
 * that changes a class runs between shms__op_enter and shms__op_leave, which
 * count it in the process's own entry. Recovery sets the FROZEN bit in the
 * class's fast word and waits until no live process has an operation under
 * way: then the state words stand still and every count and index can be
 * recomputed from them exactly, whatever a dead process left half done.
 *
 * Why this is enough (a Dekker pair): enter sets its mark, then reads FROZEN;
 * freeze sets FROZEN with a locked instruction, then reads the marks. One of
 * the two sees the other, if each side is fenced between its write and its
 * read: a process that registered for membarrier (shm/membarrier.h) marks
 * with a plain store and a compiler barrier, and the freezer fences for it
 * with membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED); any other process marks
 * with a locked instruction (docs/protocol.md, "Plain marks").
 */
#include <ck_pr.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "../shm/atomic.h"
#include "../shm/backoff.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/events.h"
#include "../shm/membarrier.h"
#include "../shm/pidview.h"
#include "../shm/proc.h"
#include "../shm/procfs.h"
#include "sched.h"

/*
 * Each thread marks its operations with plain stores in a word of its own in
 * the process entry (a mark): cheap, and a freezer reads every mark. The
 * first SHMS__MARKS threads of a process (per segment) get one; others count
 * in the entry's shared per-class counters, with locked instructions.
 * Brackets nest on one thread: only the outermost one marks.
 */
/* A thread's mark belongs to one registration of its process: an entry's address alone may name
 * the next registration too (a detach, and an attach mapped at the same address), whose marks
 * are claimed afresh, so the owner id is kept beside it. */
struct thread_op {
  uint32_t depth;
  uint32_t owner;          /* the registration: h->owner */
  struct shms__proc *proc; /* the entry word belongs to */
  uint32_t *word;          /* our mark, or NULL: we count in ops[] instead */
};
static SHMS__TLS struct thread_op cur[SHMS_CLASS_COUNT];
/* Classes this thread holds frozen (bit c): its steps there are a freezer's, which a dead
 * freezer's successor finishes, so they need no mark. */
static SHMS__TLS uint32_t frozen_by_me;

/* This thread's mark in h's process entry, claimed on first use; NULL if none is left. */
static uint32_t *thread_mark(struct shms *h) {
  static SHMS__TLS struct {
    struct shms__proc *proc;
    uint32_t owner;
    uint32_t *word;
  } cache[4];
  for (int i = 0; i < 4; i++)
    if (cache[i].proc == h->proc && cache[i].owner == h->owner)
      return cache[i].word;
  uint32_t used = shms__load_32(&h->proc->marks_used), bit;
  do {
    if ((used & SHMS__MARKS_CLAIMED) == SHMS__MARKS_CLAIMED)
      return NULL;
    bit = (uint32_t)__builtin_ctz(~used);
  } while (!ck_pr_cas_32_value(&h->proc->marks_used, used, used | (1u << bit), &used));
  for (int i = 0; i < 4; i++)
    if (cache[i].proc == NULL || cache[i].proc == h->proc) { /* free, or a past registration's */
      cache[i].proc = h->proc;
      cache[i].owner = h->owner;
      cache[i].word = &h->proc->marks[bit];
      return cache[i].word;
    }
  return NULL; /* more segments than the cache holds: counting will do (the mark stays unused) */
}

/*
 * Wait while k is frozen; if its freezer died, finish its job (recovery is idempotent) with the
 * handle's h->finish: recovery lies above every operation it waits out, so the layer above
 * hands it down at attach (shm/handle.h) instead of this file calling up into it. Asleep once a
 * few yields have not seen the thaw (shm/backoff.h): a freezer that is stopped, or slow, costs
 * its waiters no CPU. 0 once thawed; -1 if until_real (0: never) came first.
 */
static int wait_unfrozen(struct shms *h, const struct shms__cls *k, uint64_t until_real) {
  uint32_t orphaned = 0;
  struct shms__backoff b = {0};
  for (uint32_t turn = 0; shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN; turn++) {
    if (until_real != 0 && shms__real_now_ns() >= until_real)
      return -1;
    if (turn % 16 == 15) {
      uint32_t freezer = shms__load_32(&k->ctl->freezer);
      /* A freeze records its freezer before FROZEN and clears it after, so FROZEN read after
       * a freezer of 0 is corruption, unless a freeze began between the two loads: it must be
       * seen at two checks running before recovery is called for. */
      int orphan = freezer == 0 && (shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN);
      orphaned = orphan ? orphaned + 1 : 0;
      if (orphaned >= 2 || (freezer != 0 && shms__owner_dead(h, freezer))) {
        orphaned = 0;
        SHMS__ASSERT(h->finish != NULL); /* only members enter operations */
        h->finish(h, k);
        continue;
      }
    }
    shms__backoff_pause(&b);
  }
  return 0;
}

/* Mark (or count) an operation on k as under way; fence: whether the caller fences after. */
static void mark(struct shms *h, const struct shms__cls *k, struct thread_op *t, int fence) {
  if (t->word == NULL) {
    ck_pr_inc_32(&h->proc->ops[k->id]); /* locked: a fence too */
    return;
  }
  uint32_t v = *t->word | (1u << k->id);
  if (!fence) {
    shms__store_32(t->word, v);
  } else if (h->marks_plain) {
    /* Our process registered for membarrier: the store may still sit in this CPU's store
     * buffer when we look for FROZEN, but a freezer issues a barrier on every running thread
     * of ours between its FROZEN and its look at our mark, so either our mark is visible to it
     * or our look sees FROZEN. The compiler must keep the two in order: the barrier is the
     * CPU's only. */
    shms__store_32(t->word, v);
    ck_pr_barrier();
  } else {
    shms__fas_32(t->word, v); /* a locked exchange: the mark is visible before we look for FROZEN
                                 (cheaper here than a store and an mfence) */
  }
}

static void unmark(struct shms *h, const struct shms__cls *k, struct thread_op *t) {
  if (t->word == NULL)
    ck_pr_dec_32(&h->proc->ops[k->id]);
  else
    shms__store_32(t->word, *t->word & ~(1u << k->id));
}

/* The outermost enter's rare steps, out of line so that the common one needs no frame: this
 * thread's first operation on h (its mark claimed), or FROZEN found set (waited out, until
 * until_real if not 0). 0 once marked; -1, unmarked, if the class stayed frozen until then. */
__attribute__((noinline, cold)) static int enter_slow(struct shms *h, const struct shms__cls *k,
                                                      struct thread_op *t, uint64_t until_real) {
  if (t->proc != h->proc || t->owner != h->owner) {
    t->proc = h->proc;
    t->owner = h->owner;
    t->word = thread_mark(h);
  }
  for (;;) {
    mark(h, k, t, 1);
    if (!(shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN))
      return 0;
    unmark(h, k, t);
    /* Outside any operation while it waits: a recovery it runs brackets its own operations,
     * which must be marked like anyone's (a depth left raised here once made the dispatch
     * after such a recovery run unmarked, under the next freezer's audit). */
    if (wait_unfrozen(h, k, until_real) != 0)
      return -1;
  }
}

/* The outermost enter's common step: marked, and the class not frozen. 0 if the rare steps
 * are needed (enter_slow). */
static inline int enter_fast(struct shms *h, const struct shms__cls *k, struct thread_op *t) {
  if (__builtin_expect(t->proc == h->proc && t->owner == h->owner, 1)) {
    mark(h, k, t, 1);
    if (!(shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN)) {
      t->depth = 1;
      return 1;
    }
    unmark(h, k, t);
  }
  return 0;
}

void shms__op_enter(struct shms *h, const struct shms__cls *k) {
  struct thread_op *t = &cur[k->id];
  if (t->depth > 0) {
    t->depth++;
    return;
  }
  if (enter_fast(h, k, t))
    return;
  enter_slow(h, k, t, 0);
  t->depth = 1;
}

/* The pid of k's freezer now, as the caller's pid namespace numbers it (0 if none, or if it
 * cannot be told from here). */
static int freezer_pid(const struct shms *h, const struct shms__cls *k) {
  struct shms__pidref ref;
  uint32_t f = shms__load_32(&k->ctl->freezer);
  return f != 0 && shms__owner_ref(h, f, &ref) ? shms__pid_here(&ref, 1) : 0;
}

int shms__op_enter_until(struct shms *h, const struct shms__cls *k, uint64_t until_real) {
  struct thread_op *t = &cur[k->id];
  if (t->depth > 0) {
    t->depth++;
    return SHMS_OK;
  }
  if (enter_slow(h, k, t, until_real) != 0)
    return shms__fail(SHMS_ETIMEDOUT, "class %s is held still by process %d (recovery or check)",
                      shms_class_name(k->id), freezer_pid(h, k));
  t->depth = 1;
  return SHMS_OK;
}

int shms__op_enter_within(struct shms *h, const struct shms__cls *k, uint64_t patience_ns) {
  struct thread_op *t = &cur[k->id];
  if (t->depth == 0 && enter_fast(h, k, t))
    return SHMS_OK; /* the clock is read only if the class is found frozen */
  return shms__op_enter_until(h, k, shms__real_now_ns() + patience_ns);
}

int shms__op_enter_fast(struct shms *h, const struct shms__cls *k) {
  struct thread_op *t = &cur[k->id];
  if (t->depth++ > 0)
    return 0;
  if (t->proc != h->proc || t->owner != h->owner) {
    t->proc = h->proc;
    t->owner = h->owner;
    t->word = thread_mark(h);
  }
  mark(h, k, t, 0); /* the caller's first step is a locked CAS that checks FROZEN */
  return 1;
}

void shms__op_leave(struct shms *h, const struct shms__cls *k) {
  struct thread_op *t = &cur[k->id];
  if (--t->depth == 0)
    unmark(h, k, t);
}

int shms__in_op(const struct shms__cls *k) {
  return cur[k->id].depth > 0 || (frozen_by_me & (1u << k->id)) != 0;
}

int shms__index_owned(const struct shms__cls *k) {
  return shms__load_64(&k->ctl->baton) != 0 || (frozen_by_me & (1u << k->id)) != 0;
}

int shms__test_op_marked(void) {
  if (frozen_by_me != 0)
    return 1;
  int inside = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct thread_op *t = &cur[c];
    if (t->depth == 0)
      continue;
    inside = 1;
    uint32_t seen =
        t->word != NULL ? shms__load_32(t->word) & (1u << c) : shms__load_32(&t->proc->ops[c]);
    if (seen == 0)
      return 0;
  }
  return inside;
}

int shms__proc_busy(const struct shms__proc *p, int c) {
  if (shms__load_32((uint32_t *)&p->ops[c]) != 0)
    return 1;
  for (int t = 0; t < SHMS__MARKS; t++)
    if (shms__load_32((uint32_t *)&p->marks[t]) & (1u << c))
      return 1;
  return 0;
}

/* Whether entry i's process is inside an operation on k, by a live process (or another thread of
 * ours: this thread has none under way on k, a freeze is never called from inside one). */
static int busy_alive(struct shms *h, const struct shms__cls *k, uint32_t i) {
  /* Only the lock says whether a count belongs to a live process. */
  return shms__proc_busy(shms__proc_at(h, i), k->id) &&
         shms__proc_alive(h, h->fd, i, shms__self_index(h)) == 1;
}

/* The first entry with an operation under way on k by a live process, or -1. */
static int64_t others_busy(struct shms *h, const struct shms__cls *k) {
  for (uint32_t i = 0; i < h->layout.procs_count; i++)
    if (busy_alive(h, k, i))
      return i;
  return -1;
}

/*
 * Before FROZEN: wait until every live process seen inside an operation on k has been seen out
 * of it, until until_real. Returns the entry that never was, or -1. A word that says "under way"
 * for good (corrupt) or a process stopped inside an operation is so found without freezing the
 * class, which would hold up every other process for as long.
 */
static int64_t settle_first(struct shms *h, const struct shms__cls *k, uint64_t until_real) {
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    struct shms__backoff b = {0};
    while (busy_alive(h, k, i)) {
      if (shms__real_now_ns() >= until_real)
        return i;
      shms__backoff_pause(&b);
    }
  }
  return -1;
}

/* Entry p's process: its pid as the caller's pid namespace numbers it (0: it cannot be told
 * from here), and in *state its state letter (/proc/PID/stat), '?' when unknown. */
static int32_t pid_here(const struct shms__proc *p, char *state) {
  struct shms__pidref ref;
  shms__proc_ref(p, &ref);
  int32_t pid = shms__pid_here(&ref, 1);
  struct shms__proc_stat st;
  *state = pid != 0 && shms__proc_stat_read(pid, &st) == 0 && st.start_time == ref.start_time
               ? st.state
               : '?';
  return pid;
}

/* The word of entry p that says it is inside an operation on class c, in words. */
static void busy_word(const struct shms__proc *p, int c, char *out, size_t cap) {
  uint32_t ops = shms__load_32((uint32_t *)&p->ops[c]);
  snprintf(out, cap, "its count of operations under way, ops[%d], is %u", c, ops);
  for (int t = 0; ops == 0 && t < SHMS__MARKS; t++) {
    uint32_t m = shms__load_32((uint32_t *)&p->marks[t]);
    if (m & (1u << c)) {
      snprintf(out, cap, "its operation mark marks[%d] is 0x%x", t, m);
      break;
    }
  }
}

/* Give up freezing k: entry i held it up for SHMS__PATIENCE_NS, inside an operation or (freezer) as
 * the freezer at work. Fails with why: busy if the process is stopped, else the word. */
static int held_up(struct shms *h, const struct shms__cls *k, uint32_t i, int freezer) {
  const struct shms__proc *p = shms__proc_at(h, i);
  char st;
  int pid = (int)pid_here(p, &st);
  const char *name = shms_class_name(k->id);
  const char *state = st == 'T' || st == 't' ? "stopped"
                      : st == '?'            ? "state unknown here"
                                             : "alive, not stopped";
  if (freezer)
    return shms__fail(SHMS_EBUSY,
                      "class %s is held still by process %d (entry %u, %s) for over 1 s, a "
                      "recovery or a check: try again once it is done, continued or killed",
                      name, pid, i, state);
  if (st == 'T' || st == 't')
    return shms__fail(SHMS_EBUSY,
                      "class %s: process %d (entry %u) is stopped inside an operation: recovery "
                      "and check of the class wait until it is continued or killed",
                      name, pid, i);
  char word[96];
  busy_word(p, k->id, word, sizeof word);
  return shms__fail(SHMS_EVIOLATION,
                    "class %s: process %d (entry %u, %s) has shown an operation under way for "
                    "over 1 s: %s (a corrupt word, or a process stuck inside shmsched)",
                    name, pid, i, state, word);
}

/* Whether some entry in use belongs to a process that marks plainly; live: and is alive (by its
 * lock: a dead process's stores are all visible, whatever its marks say). */
static int plain_markers(struct shms *h, int live) {
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    const struct shms__proc *p = shms__proc_at(h, i);
    /* The state first: an entry read FREE was claimed, if at all, after our FROZEN, and its
     * process's first look at FROZEN comes after its claim (docs/protocol.md, "Plain marks"). */
    if (shms__load_32((uint32_t *)&p->state) != SHMS__PROC_FREE &&
        (shms__load_32((uint32_t *)&p->marks_used) & SHMS__MARKS_PLAIN) &&
        (!live || shms__proc_alive(h, h->fd, i, shms__self_index(h)) == 1))
      return 1;
  }
  return 0;
}

/* Said once per process (the pid that said it: a forked child says it again): a barrier
 * failed, and freezes wait for plain markers to leave. */
static uint32_t barrier_failure_told;

/*
 * With FROZEN set, make every plain mark set before it visible: a barrier on every running
 * thread of every registered process, if some process in the table marks plainly. 0 when that
 * is done (or needless), 1 when it could not be (the first failure of the process is recorded
 * in the event ring).
 */
static int barrier_plain(struct shms *h, const struct shms__cls *k) {
  if (!plain_markers(h, 0))
    return 0;
  int e = shms__membarrier_global();
  if (e == 0 || !plain_markers(h, 1))
    return 0;
  if (shms__fas_32(&barrier_failure_told, (uint32_t)h->pid) != (uint32_t)h->pid)
    shms__ev_put(&h->events, &(struct shms__ev){.kind = SHMS_EVENT_MEMBARRIER_FAILED,
                                                .cls = k->id,
                                                .cell = -1,
                                                .pid = h->pid,
                                                .reason = shms__from_errno(e),
                                                .value = (uint64_t)e});
  return 1;
}

/*
 * Claim the right to freeze k and set FROZEN. *previous is the freezer we took over (a dead one,
 * or 0), and *inherited 1 when FROZEN was set already: a dead freezer's recovery, half done,
 * which only a recovery may let go of. -1, nothing changed, if a live freezer held the right
 * until until_real (*previous is then that freezer).
 */
static int stop(struct shms *h, const struct shms__cls *k, uint32_t *previous, int *inherited,
                uint64_t until_real) {
  uint32_t me = h->owner, f;
  struct shms__backoff b = {0};
  /* First the right to freeze, recorded before anything stops: a freezer that dies at any point
   * is then known, and the next one finishes its work. */
  for (;;) {
    f = shms__load_32(&k->ctl->freezer);
    if (f == me)
      break;
    if (f != 0 && !shms__owner_dead(h, f)) {
      if (shms__real_now_ns() >= until_real) {
        *previous = f;
        return -1;
      }
      shms__backoff_pause(&b);
      continue;
    }
    if (ck_pr_cas_32(&k->ctl->freezer, f, me))
      break;
  }
  uint64_t w = shms__load_64(&k->ctl->fast);
  *inherited = (w & SHMS__FAST_FROZEN) != 0;
  while (!(w & SHMS__FAST_FROZEN) &&
         !ck_pr_cas_64_value(&k->ctl->fast, w, w | SHMS__FAST_FROZEN, &w))
    ;
  *previous = f;
  return 0;
}

/*
 * Undo stop before anything was changed. A class we froze goes again: operations that entered
 * go on changing the fast word, so FROZEN is cleared by an atomic and, not stored over it; then
 * the freezer, so that nobody reads FROZEN with no freezer recorded (wait_unfrozen's sign of
 * corruption). A class a dead freezer left frozen stays so, and goes back to that freezer: the
 * next operation or freezer that finds it dead finishes its recovery (one that can issue the
 * barrier, if it marks plainly itself).
 */
static void back_off(const struct shms__cls *k, uint32_t previous, int inherited) {
  if (!inherited)
    ck_pr_and_64(&k->ctl->fast, ~SHMS__FAST_FROZEN);
  shms__store_32(&k->ctl->freezer, inherited ? previous : 0);
}

int shms__freeze(struct shms *h, const struct shms__cls *k) {
  SHMS__ASSERT(cur[k->id].depth == 0); /* never from inside an operation on k */
  int64_t stuck = settle_first(h, k, shms__real_now_ns() + SHMS__PATIENCE_NS);
  if (stuck >= 0)
    return held_up(h, k, (uint32_t)stuck, 0);
  /* Plain marks are read only after a barrier that made them visible. A freezer that cannot
   * issue one cannot tell a live process that marks plainly from one at rest: it lets the
   * class go again (such a process may need it to finish what it does, or to detach) and tries
   * again later, until the barrier works or no such process is left. */
  uint32_t previous;
  int inherited;
  for (long pause_ns = 20000;; pause_ns = pause_ns < 5000000 ? pause_ns * 2 : pause_ns) {
    if (stop(h, k, &previous, &inherited, shms__real_now_ns() + SHMS__PATIENCE_NS) != 0)
      return held_up(h, k, SHMS__OWNER_INDEX(previous), 1);
    if (barrier_plain(h, k) == 0)
      break;
    back_off(k, previous, inherited);
    /* Asleep, and longer each time (20 us up to 5 ms): the plain markers may live for hours,
     * and a retry that came round at once would burn a CPU and keep freezing the class under
     * the operations they need to run, their detach's among them. */
    nanosleep(&(struct timespec){.tv_nsec = pause_ns}, NULL);
  }
  /* Those who entered before FROZEN finish their operation: a step of a few stores, unless
   * their process was stopped or its word corrupted right then; after SHMS__PATIENCE_NS the class
   * goes again, and the caller learns who held it up. */
  uint64_t until = shms__real_now_ns() + SHMS__PATIENCE_NS;
  struct shms__backoff b = {0};
  for (int64_t busy; (busy = others_busy(h, k)) >= 0; shms__backoff_pause(&b))
    if (shms__real_now_ns() >= until) {
      back_off(k, previous, inherited);
      return held_up(h, k, (uint32_t)busy, 0);
    }
  frozen_by_me |= 1u << k->id;
  return SHMS_OK;
}

void shms__unfreeze(const struct shms__cls *k, uint64_t fast) {
  ck_pr_fence_store(); /* everything recomputed is visible before operations resume */
  shms__store_64(&k->ctl->fast, fast & ~SHMS__FAST_FROZEN);
  shms__store_32(&k->ctl->freezer, 0);
  frozen_by_me &= ~(1u << k->id);
}

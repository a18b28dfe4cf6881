/*
 * Single-flight by key (docs/protocol.md, "Keyed jobs"): who waits for a
 * keyed job. Its slot's waiters word counts them: its submitter (OWNER) and
 * the joiners, each of whom also records its share in its process entry
 * (joins[]). The word is changed only by CAS, checked against the job's
 * sequence, and only inside an operation on the class; the records are the
 * truth a frozen recovery counts the joiners from again, so a process that
 * dies between its record and its CAS leaves nothing wrong behind. Whoever
 * takes the last share ends the job as nobody waits for it
 * (shms__job_abandon).
 */
#include <ck_pr.h>
#include <pthread.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/proc.h"
#include "report.h"
#include "sched.h"

_Static_assert(SHMS__JOINS == SHMS_KEY_JOINS_MAX, "the public bound is the table's size");

/* The process's threads share one table: a lock of the process, as for the owned list. */
static pthread_mutex_t joins_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t joins_once = PTHREAD_ONCE_INIT;

static void joins_prepare(void) { pthread_mutex_lock(&joins_lock); }
static void joins_release(void) { pthread_mutex_unlock(&joins_lock); }
static void joins_init(void) { pthread_atfork(joins_prepare, joins_release, joins_release); }

static void lock(void) {
  pthread_once(&joins_once, joins_init);
  pthread_mutex_lock(&joins_lock);
}
static void unlock(void) { pthread_mutex_unlock(&joins_lock); }

static uint64_t *table(const struct shms *h) {
  return shms__proc_at(h, shms__self_index(h))->joins;
}

uint64_t shms__waiters_first(uint64_t seq, unsigned options) {
  return (options & SHMS__OPT_KEYED) ? SHMS__WAITERS(seq, SHMS__WAIT_OWNER) : 0;
}

/* Whether word w names a job someone waits for: its submitter or a joiner. */
static int waited_for(uint64_t w, uint64_t seq) {
  return SHMS__WAIT_SEQ(w) == (uint32_t)seq && !(w & SHMS__WAIT_CLOSED) &&
         ((w & SHMS__WAIT_OWNER) || SHMS__WAIT_COUNT(w) > 0);
}

int shms__share_close(const struct shms__cls *k, uint32_t i, uint64_t seq, enum shms__share share) {
  uint64_t *wp = &shms__slot_at(k, i)->waiters, w = shms__load_64(wp);
  for (;;) {
    int alone = share == SHMS__SHARE_OWNER ? (w & SHMS__WAIT_OWNER) && SHMS__WAIT_COUNT(w) == 0
                                           : !(w & SHMS__WAIT_OWNER) && SHMS__WAIT_COUNT(w) == 1;
    if (SHMS__WAIT_SEQ(w) != (uint32_t)seq || !alone)
      return 0;
    if (w & SHMS__WAIT_CLOSED)
      return 1;
    if (ck_pr_cas_64_value(wp, w, w | SHMS__WAIT_CLOSED, &w))
      return 1;
  }
}

/* Free places in table t into at[] (n of them, plain zeros first, then records of shares already
 * left, which are gone): how many were found, at most n. Under the lock. */
static size_t free_places(const uint64_t *t, size_t n, int *at) {
  size_t got = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int j = 0; j < SHMS__JOINS && got < n; j++) {
      uint64_t e = shms__load_64(&t[j]);
      int taken = 0;
      for (size_t g = 0; g < got; g++)
        taken |= at[g] == j;
      if (!taken && (pass == 0 ? e == 0 : e != 0 && ((uint32_t)(e >> 32) & SHMS__JOIN_LEFT)))
        at[got++] = j;
    }
  return got;
}

int shms__joins_reserve(struct shms *h, const uint64_t *entries, size_t n, int *at,
                        size_t *free_count) {
  uint64_t *t = table(h);
  lock();
  size_t got = free_places(t, n, at);
  if (free_count != NULL)
    *free_count = got;
  if (got < n) {
    unlock();
    return SHMS_EBUSY;
  }
  for (size_t j = 0; j < n; j++)
    shms__store_64(&t[at[j]], entries[j]);
  unlock();
  return SHMS_OK;
}

int shms__join_add(const struct shms__cls *k, uint32_t i, uint64_t seq, uint32_t *count) {
  SHMS__ASSERT(shms__in_op(k));
  uint64_t *wp = &shms__slot_at(k, i)->waiters, w = shms__load_64(wp);
  for (;;) {
    if (!waited_for(w, seq) || SHMS__WAIT_COUNT(w) == SHMS__WAIT_COUNT_MAX)
      return SHMS_ENOTFOUND; /* ended and let go meanwhile: not joinable */
    if (ck_pr_cas_64_value(wp, w, w + 1, &w))
      break;
  }
  *count = SHMS__WAIT_COUNT(w) + 1;
  return SHMS_OK;
}

void shms__join_noted(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                      uint32_t count) {
  ck_pr_inc_64(&k->ctl->joined);
  shms__note_request(h, k, SHMS_EVENT_JOB_JOINED, i, seq, -1, 0, count);
}

int shms__join(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq) {
  SHMS__ASSERT(shms__in_op(k));
  uint64_t entry = SHMS__JOIN_ENTRY(SHMS__OWNED_REF(k->id, i), seq);
  int at;
  /* The record first: a death before the CAS leaves a share a recount counts. */
  if (shms__joins_reserve(h, &entry, 1, &at, NULL) != SHMS_OK)
    return SHMS_EBUSY;
  SHMS__STEP();
  uint32_t count;
  if (shms__join_add(k, i, seq, &count) != SHMS_OK) {
    shms__join_undo(h, k, at, i, seq, 0);
    return SHMS_ENOTFOUND;
  }
  SHMS__STEP();
  shms__join_noted(h, k, i, seq, count);
  return SHMS_OK;
}

/* Our record of slot i of k as sequence seq, still waiting (left 0) or left (left 1), or -1.
 * A process holds one record per share: it may have joined the same job more than once. */
static int find(const uint64_t *t, const struct shms__cls *k, uint32_t i, uint64_t seq, int left) {
  uint32_t ref = SHMS__OWNED_REF(k->id, i);
  for (int j = 0; j < SHMS__JOINS; j++) {
    uint64_t e = shms__load_64(&t[j]);
    if (e != 0 && SHMS__JOIN_REF(e) == ref && (uint32_t)e == (uint32_t)seq &&
        !((uint32_t)(e >> 32) & SHMS__JOIN_LEFT) == !left)
      return j;
  }
  return -1;
}

enum shms__share shms__share_of(const struct shms *h, const struct shms__cls *k, uint32_t i,
                                uint64_t seq) {
  const struct shms__slot *s = shms__slot_at(k, i);
  const uint64_t *t = shms__self_index(h) != UINT32_MAX ? table(h) : NULL;
  /* A share still held goes before one left: a process holding several (it joined its own job,
   * or one job twice) takes them back one by one. */
  if (t != NULL && find(t, k, i, seq, 0) >= 0)
    return SHMS__SHARE_JOINED;
  enum shms__share own = SHMS__SHARE_NONE;
  uint64_t w = shms__load_64(&s->waiters);
  if (shms__load_32(&s->owner) == h->owner && SHMS__WAIT_SEQ(w) == (uint32_t)seq)
    own = (w & SHMS__WAIT_OWNER)  ? SHMS__SHARE_OWNER
          : (w & SHMS__WAIT_LEFT) ? SHMS__SHARE_LEFT
                                  : SHMS__SHARE_NONE;
  if (own != SHMS__SHARE_OWNER && t != NULL && find(t, k, i, seq, 1) >= 0)
    return SHMS__SHARE_LEFT;
  return own;
}

/* Take one joiner's share off slot i's word: 1 if it was the last of all. */
static int drop_joiner(const struct shms__cls *k, uint32_t i, uint64_t seq) {
  uint64_t *wp = &shms__slot_at(k, i)->waiters, w = shms__load_64(wp);
  do {
    if (SHMS__WAIT_SEQ(w) != (uint32_t)seq || SHMS__WAIT_COUNT(w) == 0)
      return 0; /* not this job's, or already counted out (a recount) */
  } while (!ck_pr_cas_64_value(wp, w, w - 1, &w));
  return !(w & SHMS__WAIT_OWNER) && SHMS__WAIT_COUNT(w) == 1;
}

int shms__keyed_unwaited(const struct shms__cls *k, uint32_t i, uint64_t seq, int owner_dead) {
  uint64_t *wp = &shms__slot_at(k, i)->waiters, w = shms__load_64(wp);
  for (;;) {
    if (SHMS__WAIT_SEQ(w) != (uint32_t)seq)
      return owner_dead;
    if (SHMS__WAIT_COUNT(w) != 0 || ((w & SHMS__WAIT_OWNER) && !owner_dead))
      return 0;
    /* Closed in the decision's CAS: a dead submitter's OWNER bit still reads as waited for,
     * and a join let in after it would wait on a job ended and freed under it. */
    if ((w & SHMS__WAIT_CLOSED) || ck_pr_cas_64_value(wp, w, w | SHMS__WAIT_CLOSED, &w))
      return 1;
  }
}

void shms__job_abandon(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                       int reason) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__slot *s = shms__slot_at(k, i);
  shms__settle_and_kick(h, k, i, seq, 1u << SHMS__SLOT_QUEUED | 1u << SHMS__SLOT_GRANTED, reason);
  SHMS__STEP();
  /* A running job: its worker drops the result (and stops it, for a cancel). */
  uint64_t add = SHMS__SLOT_COLLECTED | (reason == SHMS_ECANCELLED ? SHMS__SLOT_CANCEL : 0);
  uint64_t w = shms__load_64(&s->word);
  while (SHMS__SLOT_STATE(w) == SHMS__SLOT_RUNNING && SHMS__SLOT_SEQ(w) == (uint32_t)seq &&
         (w & add) != add && !ck_pr_cas_64_value(&s->word, w, w | add, &w))
    ;
  w = shms__load_64(&s->word);
  if (SHMS__SLOT_STATE(w) == SHMS__SLOT_SETTLED && !(w & SHMS__SLOT_COLLECTED) &&
      SHMS__SLOT_SEQ(w) == (uint32_t)seq)
    shms__slot_collect(k, i, seq);
}

int shms__joiner_leave(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                       int left) {
  SHMS__ASSERT(shms__in_op(k));
  if (shms__self_index(h) == UINT32_MAX)
    return 0; /* an observer handle joins nothing */
  uint64_t *t = table(h);
  lock();
  int j = find(t, k, i, seq, 0);
  uint64_t e = j >= 0 ? shms__load_64(&t[j]) : 0;
  int had = j >= 0 && !((uint32_t)(e >> 32) & SHMS__JOIN_LEFT);
  if (j >= 0) /* a leaver's record stays, marked, so that its wait can say it left */
    shms__store_64(&t[j], left && had ? e | ((uint64_t)SHMS__JOIN_LEFT << 32) : 0);
  unlock();
  if (!had)
    return 0;
  SHMS__STEP();
  return drop_joiner(k, i, seq);
}

int shms__share_left(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                     int clear) {
  if (shms__self_index(h) == UINT32_MAX)
    return 0;
  uint64_t *t = table(h);
  lock();
  int j = find(t, k, i, seq, 1);
  if (j >= 0 && clear)
    shms__store_64(&t[j], 0);
  unlock();
  return j >= 0;
}

int shms__join_undo(struct shms *h, const struct shms__cls *k, int at, uint32_t i, uint64_t seq,
                    int counted) {
  uint64_t *t = table(h), want = SHMS__JOIN_ENTRY(SHMS__OWNED_REF(k->id, i), seq);
  lock();
  /* Records of one job are alike: another thread's leave may have cleared ours for its own. */
  int j = shms__load_64(&t[at]) == want ? at : find(t, k, i, seq, 0);
  if (j >= 0)
    shms__store_64(&t[j], 0);
  unlock();
  if (!counted)
    return 0;
  SHMS__STEP();
  return drop_joiner(k, i, seq);
}

/* Release every share recorded in entry p for class k, as its process would leave them. */
static void release_entry(struct shms *h, const struct shms__cls *k, struct shms__proc *p) {
  for (int j = 0; j < SHMS__JOINS; j++) {
    uint64_t e = shms__load_64(&p->joins[j]);
    uint32_t ref = SHMS__JOIN_REF(e);
    if (e == 0 || SHMS__OWNED_CLASS(ref) != (uint32_t)k->id)
      continue;
    /* The record goes first: a recoverer that dies next leaves the class torn, and the recount
     * its recovery makes counts what the records say. */
    shms__store_64(&p->joins[j], 0);
    SHMS__STEP();
    uint32_t i = SHMS__OWNED_INDEX(ref);
    if ((uint32_t)(e >> 32) & SHMS__JOIN_LEFT || i >= k->nslots)
      continue;
    /* The slot's sequence is read before the share goes: after it, a worker may drop the
     * unwaited result and free the slot, and a new job claim it under the next sequence. */
    uint64_t seq = shms__load_64(&shms__slot_at(k, i)->seq);
    int last = drop_joiner(k, i, (uint32_t)e);
    SHMS__STEP();
    if (last && (uint32_t)seq == (uint32_t)e)
      shms__job_abandon(h, k, i, seq, SHMS_EOWNERLOST);
  }
}

void shms__joins_release(struct shms *h, const struct shms__cls *k, uint32_t index) {
  SHMS__ASSERT(shms__in_op(k));
  if (index >= h->layout.procs_count)
    return;
  int own = index == shms__self_index(h);
  if (own)
    lock();
  release_entry(h, k, shms__proc_at(h, index));
  if (own)
    unlock();
}

void shms__joins_adopt(struct shms *h) {
  uint32_t self = shms__self_index(h);
  if (self == UINT32_MAX || self >= h->layout.procs_count)
    return; /* an observer joins nothing */
  const uint64_t *t = shms__proc_at(h, self)->joins;
  int any = 0;
  for (int j = 0; j < SHMS__JOINS; j++)
    any |= shms__load_64(&t[j]) != 0;
  if (!any)
    return;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    if (k->id < 0)
      continue;
    shms__op_enter(h, k);
    shms__joins_release(h, k, shms__self_index(h));
    shms__op_leave(h, k);
  }
}

/* Records of class k in entries of dead processes go: their shares are not counted again. */
static void drop_dead_records(const struct shms *h, const struct shms__cls *k,
                              int (*dead)(void *ctx, uint32_t owner), void *ctx) {
  for (uint32_t p = 0; p < h->layout.procs_count; p++) {
    struct shms__proc *e = shms__proc_at(h, p);
    if (shms__load_32(&e->state) == SHMS__PROC_FREE ||
        !dead(ctx, SHMS__OWNER(p, shms__load_32(&e->gen))))
      continue;
    for (int j = 0; j < SHMS__JOINS; j++) {
      uint64_t r = shms__load_64(&e->joins[j]);
      if (r != 0 && SHMS__OWNED_CLASS(SHMS__JOIN_REF(r)) == (uint32_t)k->id)
        shms__store_64(&e->joins[j], 0);
    }
  }
}

/* The records of the entries in use that name job i of k as sequence seq. */
static uint32_t count_records(const struct shms *h, const struct shms__cls *k, uint32_t i,
                              uint64_t seq) {
  uint32_t n = 0;
  uint64_t want = SHMS__JOIN_ENTRY(SHMS__OWNED_REF(k->id, i), seq);
  for (uint32_t p = 0; p < h->layout.procs_count; p++) {
    const struct shms__proc *e = shms__proc_at(h, p);
    if (shms__load_32(&e->state) == SHMS__PROC_FREE)
      continue;
    for (int j = 0; j < SHMS__JOINS; j++)
      n += shms__load_64(&e->joins[j]) == want;
  }
  return n;
}

void shms__joins_recount(const struct shms *h, const struct shms__cls *k,
                         int (*dead)(void *ctx, uint32_t owner), void *ctx) {
  drop_dead_records(h, k, dead, ctx);
  for (uint32_t i = 0; i < k->nslots; i++) {
    struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word), seq = shms__load_64(&s->seq);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (!(s->options & SHMS__OPT_KEYED) || st < SHMS__SLOT_QUEUED ||
        (st == SHMS__SLOT_SETTLED && (w & SHMS__SLOT_COLLECTED)))
      continue;
    uint32_t n = count_records(h, k, i, seq);
    uint64_t v = shms__load_64(&s->waiters);
    uint32_t high = SHMS__WAIT_SEQ(v) == (uint32_t)seq ? (uint32_t)v & ~SHMS__WAIT_COUNT_MAX : 0;
    if ((high & SHMS__WAIT_OWNER) && dead(ctx, s->owner))
      high &= ~SHMS__WAIT_OWNER; /* its submitter's share goes with it */
    shms__store_64(&s->waiters, SHMS__WAITERS(seq, high | n));
    if ((high & SHMS__WAIT_OWNER) || n > 0 || st == SHMS__SLOT_GRANTED)
      continue; /* a grant nobody waits for: its worker ends it (shms__keyed_unwaited) */
    /* Nobody waits any more: it ends as its last waiter's leaving would have ended it (the
     * slot rebuild frees what is settled and collected). */
    if (st == SHMS__SLOT_QUEUED)
      shms__store_64(&s->word, SHMS__SLOT_WORD(seq, SHMS_EOWNERLOST, SHMS__SLOT_COLLECTED,
                                               SHMS__SLOT_SETTLED));
    else
      shms__store_64(&s->word, w | SHMS__SLOT_COLLECTED);
  }
}

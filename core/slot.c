/*
 * Request slots: claim, settle, collect, free (docs/protocol.md, "Request
 * slots"). The slot word is authoritative; the free-slot bitmap and the
 * used count are indexes kept beside it.
 */
#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/futex.h"
#include "../shm/hbm.h"
#include "report.h"
#include "sched.h"

#define SLOT_FLAGS(w) ((uint32_t)(w)&0xff0u)

int shms__slot_reserve(const struct shms__cls *k, uint32_t n) {
  SHMS__ASSERT(shms__in_op(k));
  /* A CAS, not an add: a batch that does not fit must not make a single claim racing it fail
   * for the moment its overshoot stood. */
  uint32_t used = shms__load_32(&k->ctl->used);
  do {
    if (n > k->nslots || used > k->nslots - n)
      return SHMS_EQUEUEFULL;
  } while (!ck_pr_cas_32_value(&k->ctl->used, used, used + n, &used));
  return SHMS_OK;
}

void shms__slot_unreserve(const struct shms__cls *k, uint32_t n) { ck_pr_sub_32(&k->ctl->used, n); }

int shms__slot_take(const struct shms__cls *k, uint32_t *index, uint64_t *seq) {
  SHMS__ASSERT(shms__in_op(k));
  SHMS__STEP();
  for (uint32_t misses = 0;;) {
    int64_t i = shms__hbm_take(&k->sfree);
    if (i < 0) {
      /* A freer is between its store and its bit: it will be there in a moment, unless it
       * died there. Never wait without bound inside an operation: recovery waits for us. */
      if (++misses < 100000) {
        ck_pr_stall();
        continue;
      }
      ck_pr_dec_32(&k->ctl->used);
      return SHMS_EQUEUEFULL;
    }
    struct shms__slot *s = shms__slot_at(k, (uint32_t)i);
    uint64_t w = shms__load_64(&s->word);
    if (SHMS__SLOT_STATE(w) != SHMS__SLOT_FREE)
      continue; /* a stale bit (left by recovery): drop it */
    SHMS__STEP();
    uint64_t n = ck_pr_faa_64(&k->ctl->request_seq, 1);
    if (!ck_pr_cas_64(&s->word, w, SHMS__SLOT_WORD(n, 0, 0, SHMS__SLOT_CLAIMED)))
      continue;
    shms__store_64(&s->seq, n);
    *index = (uint32_t)i;
    *seq = n;
    return SHMS_OK;
  }
}

int shms__slot_claim(const struct shms__cls *k, uint32_t *index, uint64_t *seq) {
  SHMS__ASSERT(shms__in_op(k));
  /* The used count makes the bound exact: a reservation below it is backed by a free slot. */
  if (ck_pr_faa_32(&k->ctl->used, 1) >= k->nslots) {
    ck_pr_dec_32(&k->ctl->used);
    return SHMS_EQUEUEFULL;
  }
  return shms__slot_take(k, index, seq);
}

void shms__slot_free(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  shms__store_64(&s->word, SHMS__SLOT_WORD(SHMS__SLOT_SEQ(w), 0, 0, SHMS__SLOT_FREE));
  /* State before bit, bit before count: a reservation never finds the map short. */
  ck_pr_fence_store();
  SHMS__STEP();
  shms__hbm_set(&k->sfree, i);
  SHMS__STEP();
  ck_pr_dec_32(&k->ctl->used);
}

int shms__slot_cas(const struct shms__cls *k, uint32_t i, uint64_t *expect, uint64_t desired) {
  struct shms__slot *s = shms__slot_at(k, i);
  if (!ck_pr_cas_64_value(&s->word, *expect, desired, expect))
    return 0;
  if ((*expect & SHMS__SLOT_SLEEPING) && !(desired & SHMS__SLOT_SLEEPING))
    shms__futex_wake(shms__slot_futex(s));
  return 1;
}

void shms__count_rejected(const struct shms__cls *k, int reason) {
  static const int codes[SHMS_REJECT_REASONS] = SHMS_REJECT_REASON_CODES;
  int i = 0;
  while (i < SHMS_REJECT_REASONS - 1 && codes[i] != reason)
    i++;
  ck_pr_inc_64(&k->ctl->rejected);
  ck_pr_inc_64(&k->ctl->rejected_by[i]);
}

static void count_settled(const struct shms__cls *k, int reason) {
  if (reason == SHMS_EWOULDBLOCK)
    return; /* try_acquire withdrawing its own probe */
  if (reason == SHMS_ECANCELLED || reason == SHMS_ESUPERSEDED) /* superseded: cancelled for it */
    ck_pr_inc_64(&k->ctl->cancelled);
  else if (reason == SHMS_EDEADLINE)
    ck_pr_inc_64(&k->ctl->expired);
  else
    shms__count_rejected(k, reason);
}

enum shms__settled shms__slot_settle(struct shms *h, const struct shms__cls *k, uint32_t i,
                                     uint64_t seq, unsigned from_mask, int reason) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  uint32_t cell, gen;
  for (;;) {
    uint32_t st = SHMS__SLOT_STATE(w);
    if (SHMS__SLOT_SEQ(w) != (uint32_t)seq || !(from_mask & (1u << st)))
      return SHMS__SETTLED_NOT;
    /* The granted cell is read while the word still names this request: once our CAS settles
     * it, the waiter may free the slot and be granted another cell in it (found by spin). */
    ck_pr_fence_load();
    cell = shms__load_32(&s->cell);
    gen = shms__load_32(&s->generation);
    /* LATE too: it marks a parked QUEUED request, and an ended one is parked no more. */
    uint32_t flags = SLOT_FLAGS(w) & ~(SHMS__SLOT_SLEEPING | SHMS__SLOT_HELP | SHMS__SLOT_LATE);
    if (shms__slot_cas(k, i, &w, SHMS__SLOT_WORD(seq, reason, flags, SHMS__SLOT_SETTLED)))
      break;
  }
  SHMS__STEP();
  count_settled(k, reason);
  shms__note_settled(h, k, i, seq, SHMS__SLOT_STATE(w), cell, reason);
  if (__builtin_expect(shms__settle_report != NULL, 0)) /* a recovery of a dead owner */
    shms__report_settled(k, i, seq, SHMS__SLOT_STATE(w), cell, reason);
  if (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED) {
    shms__fast_queue(k, -1);
    SHMS__STEP();
    if (w & SHMS__SLOT_INDEXED)
      return SHMS__SETTLED_UNLINK; /* still linked into the index */
  } else {
    shms__cell_return(k, cell, gen);
  }
  return SHMS__SETTLED_KICK;
}

void shms__slot_collect(const struct shms__cls *k, uint32_t i, uint64_t seq) {
  uint64_t *wp = &shms__slot_at(k, i)->word, w = shms__load_64(wp);
  do {
    /* Collected by another hand already, and perhaps freed and claimed again: not ours. */
    if (SHMS__SLOT_STATE(w) != SHMS__SLOT_SETTLED || SHMS__SLOT_SEQ(w) != (uint32_t)seq ||
        (w & SHMS__SLOT_COLLECTED))
      return;
  } while (!ck_pr_cas_64_value(wp, w, w | SHMS__SLOT_COLLECTED, &w));
  SHMS__STEP();
  /* Whoever of waiter and index lets go second frees the slot. */
  if (!(w & SHMS__SLOT_INDEXED))
    shms__slot_free(k, i);
}

void shms__slot_unindexed(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  while (!ck_pr_cas_64_value(&s->word, w, w & ~(uint64_t)SHMS__SLOT_INDEXED, &w))
    ;
  if (w & SHMS__SLOT_COLLECTED)
    shms__slot_free(k, i);
}

void shms__slot_reattend(const struct shms__cls *k, uint32_t i, uint64_t seq) {
  uint64_t w = shms__load_64(&shms__slot_at(k, i)->word);
  if (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED && SHMS__SLOT_SEQ(w) == (uint32_t)seq &&
      !(w & (SHMS__SLOT_INDEXED | SHMS__SLOT_LATE)))
    shms__hbm_set(&k->sattn, i);
}

int shms__slot_flag(const struct shms__cls *k, uint32_t i, uint64_t *w, uint64_t flags) {
  struct shms__slot *s = shms__slot_at(k, i);
  return ck_pr_cas_64_value(&s->word, *w, *w | flags, w);
}

void shms__slot_publish(const struct shms__cls *k, uint32_t i, uint64_t seq) {
  SHMS__ASSERT(shms__in_op(k));
  ck_pr_fence_store(); /* the request's fields are visible before its state says QUEUED */
  SHMS__STEP();
  shms__store_64(&shms__slot_at(k, i)->word, SHMS__SLOT_WORD(seq, 0, 0, SHMS__SLOT_QUEUED));
}

int shms__slot_accept(const struct shms__cls *k, uint32_t i, uint64_t expect, uint64_t seq) {
  SHMS__ASSERT(shms__in_op(k));
  uint64_t done = SHMS__SLOT_WORD(seq, 0, SHMS__SLOT_COLLECTED, SHMS__SLOT_SETTLED);
  return ck_pr_cas_64(&shms__slot_at(k, i)->word, expect, done);
}

int shms__slot_run(const struct shms__cls *k, uint32_t i, uint64_t expect) {
  SHMS__ASSERT(shms__in_op(k));
  /* A client waiting for the result sleeps on; one waiting only for the start (STARTWAKE,
   * shms_wait_started) is woken. */
  int wake = (expect & SHMS__SLOT_STARTWAKE) && (expect & SHMS__SLOT_SLEEPING);
  uint64_t running = (expect & ~(uint64_t)0xf) | SHMS__SLOT_RUNNING;
  if (expect & SHMS__SLOT_STARTWAKE)
    running &= ~(uint64_t)(SHMS__SLOT_STARTWAKE | SHMS__SLOT_SLEEPING);
  struct shms__slot *s = shms__slot_at(k, i);
  if (!ck_pr_cas_64(&s->word, expect, running))
    return 0;
  if (wake)
    shms__futex_wake(shms__slot_futex(s));
  return 1;
}

/* Whether word w still shows the job with sequence seq running. */
static int still_running(uint64_t w, uint64_t seq) {
  return SHMS__SLOT_STATE(w) == SHMS__SLOT_RUNNING && SHMS__SLOT_SEQ(w) == (uint32_t)seq;
}

int shms__slot_writing(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__slot *s = shms__slot_at(k, i);
  do {
    if (!still_running(*w, seq))
      return 0;
  } while (!ck_pr_cas_64_value(&s->word, *w, *w | SHMS__SLOT_WRITING, w));
  *w |= SHMS__SLOT_WRITING;
  return 1;
}

int shms__slot_complete(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t w,
                        int dropped) {
  SHMS__ASSERT(shms__in_op(k));
  uint32_t flags;
  do {
    if (!still_running(w, seq))
      return -1;
    flags = (SLOT_FLAGS(w) & ~(SHMS__SLOT_SLEEPING | SHMS__SLOT_WRITING | SHMS__SLOT_HELP)) |
            (dropped ? SHMS__SLOT_COLLECTED : 0);
  } while (!shms__slot_cas(k, i, &w, SHMS__SLOT_WORD(seq, 0, flags, SHMS__SLOT_SETTLED)));
  return (flags & SHMS__SLOT_COLLECTED) != 0;
}

uint64_t shms__slot_set_collected(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  while (!ck_pr_cas_64_value(&s->word, w, w | SHMS__SLOT_COLLECTED, &w))
    ;
  return w;
}

/* One CAS of the word from *w to desired (the ones below): 1 if done, else *w is the word now. */
int shms__slot_mark_indexed(const struct shms__cls *k, uint32_t i, uint64_t *w) {
  return shms__slot_cas(k, i, w, (*w | SHMS__SLOT_INDEXED) & ~(uint64_t)SHMS__SLOT_SLEEPING);
}

int shms__slot_grant(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w) {
  uint32_t flags = SLOT_FLAGS(*w) & ~(SHMS__SLOT_INDEXED | SHMS__SLOT_SLEEPING | SHMS__SLOT_HELP);
  return shms__slot_cas(
      k, i, w, SHMS__SLOT_WORD(seq, 0, flags, SHMS__SLOT_GRANTED) | (*w & SHMS__SLOT_EPOCH));
}

int shms__slot_ask_help(const struct shms__cls *k, uint32_t i, uint64_t *w) {
  return shms__slot_cas(k, i, w, (*w | SHMS__SLOT_HELP) & ~(uint64_t)SHMS__SLOT_SLEEPING);
}

int shms__slot_help_taken(const struct shms__cls *k, uint32_t i, uint64_t *w) {
  return shms__slot_cas(k, i, w, *w & ~(uint64_t)SHMS__SLOT_HELP);
}

int shms__slot_revoke(const struct shms__cls *k, uint32_t i, uint64_t *w) {
  uint32_t flags = (SLOT_FLAGS(*w) & ~(SHMS__SLOT_SLEEPING | SHMS__SLOT_HELP)) | SHMS__SLOT_LATE;
  uint64_t epoch = (*w + (1ull << 12)) & SHMS__SLOT_EPOCH; /* this grant's word never recurs */
  return shms__slot_cas(k, i, w,
                        SHMS__SLOT_WORD(SHMS__SLOT_SEQ(*w), 0, flags, SHMS__SLOT_QUEUED) | epoch);
}

int shms__slot_unpark(const struct shms__cls *k, uint32_t i, uint64_t *w) {
  return shms__slot_cas(k, i, w, *w & ~(uint64_t)(SHMS__SLOT_LATE | SHMS__SLOT_SLEEPING));
}

int shms__slot_requeue(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w) {
  uint32_t flags = SLOT_FLAGS(*w) & ~(SHMS__SLOT_SLEEPING | SHMS__SLOT_WRITING);
  return shms__slot_cas(k, i, w, SHMS__SLOT_WORD(seq, 0, flags, SHMS__SLOT_QUEUED));
}

int shms__slot_job_lost(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w) {
  uint32_t flags = SLOT_FLAGS(*w) & ~(SHMS__SLOT_SLEEPING | SHMS__SLOT_WRITING);
  return shms__slot_cas(k, i, w, SHMS__SLOT_WORD(seq, SHMS_EWORKERLOST, flags, SHMS__SLOT_SETTLED));
}

/* Every lease counted for its tenant: process tallies of the fast path (tally.h). */
#include "tally.h"

#include <ck_pr.h>
#include <sched.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/crashpoint.h"
#include "../shm/proc.h"
#include "account.h"

#define MOVE_WAIT_NS (10ull * 1000 * 1000) /* as a fast-path charge waits for the table */

SHMS__TLS uint32_t shms__tally_hint;

static int unused(const struct shms__tally *t) {
  return shms__load_64((uint64_t *)&t->name[0]) == 0;
}

/* How long a thread waits for another of its process to rekey: a rekey waits MOVE_WAIT_NS at most
 * for the table. */
#define REKEY_WAIT_NS (10 * MOVE_WAIT_NS)

/*
 * Rekeying is the process's own business, serialised between its threads (and handles) by a word
 * of its entry: its first tally's `reserved`, reset when a process claims the entry (shm/proc.c:
 * one that died holding it has no threads left to wait). A word left set for good (written into
 * the live entry by another process) does not hold every acquire: after REKEY_WAIT_NS, 0, and the
 * lease goes uncounted, as when the table is locked too long.
 */
static int rekey_lock(struct shms__proc *p) {
  uint64_t until = 0;
  while (!ck_pr_cas_32(&p->tally[0].reserved, 0, 1)) {
    uint64_t now = shms__real_now_ns();
    if (until == 0)
      until = now + REKEY_WAIT_NS;
    else if (now >= until)
      return 0;
    sched_yield();
  }
  return 1;
}

static void rekey_unlock(struct shms__proc *p) { shms__store_32(&p->tally[0].reserved, 0); }

/* Move tally t into the table, under its key: 0 when the table cannot take it now. */
static int move(struct shms *h, struct shms__tally *t) {
  uint32_t c = shms__load_32(&t->cls);
  if (shms__load_64(&t->grants) == 0 && shms__load_64(&t->pending_n) == 0)
    return 1;
  if (c >= SHMS_CLASS_COUNT || h->cls[c].id < 0) {
    shms__fas_64(&t->grants, 0); /* no such class here: a torn key, which counts nothing */
    shms__fas_64(&t->pending_n, 0);
    shms__fas_64(&t->pending_ns, 0);
    return 1;
  }
  return shms__account_take_tally(&h->cls[c], t, MOVE_WAIT_NS) == SHMS_OK;
}

struct shms__tally *shms__tally_for(struct shms *h, uint32_t cls, const uint64_t *name) {
  struct shms__proc *p = h->proc;
  struct shms__tally *t = NULL;
  if (p == NULL || !rekey_lock(p))
    return NULL; /* an observer's handle takes no lease; or the rekey word is held too long */
  for (uint32_t i = 0; i < SHMS__TALLIES && t == NULL; i++)
    if (shms__tally_key_is(&p->tally[i], cls, name) || unused(&p->tally[i]))
      t = &p->tally[shms__tally_hint = i];
  if (t == NULL) {
    static SHMS__TLS uint32_t turn; /* the next to give up its key: round robin */
    uint32_t i = turn++ % SHMS__TALLIES;
    t = move(h, &p->tally[i]) ? &p->tally[shms__tally_hint = i] : NULL;
  }
  if (t != NULL && !shms__tally_key_is(t, cls, name)) {
    /* A thread counting under the old key between the move and this rekey counts its lease for
     * the new one: one lease misattributed, in a process that cycles through tenants. */
    shms__store_32(&t->cls, cls);
    for (int w = 0; w < SHMS__NAME_WORDS; w++)
      shms__store_64(&t->name[w], name[w]);
  }
  rekey_unlock(p);
  return t;
}

void shms__tally_adopt(struct shms *h) {
  struct shms__proc *p = h->proc;
  if (p == NULL || !rekey_lock(p))
    return; /* the tallies stay in the entry, counted still */
  for (uint32_t i = 0; i < SHMS__TALLIES; i++)
    if (!unused(&p->tally[i]))
      move(h, &p->tally[i]); /* one the table cannot take stays here, counted still */
  rekey_unlock(p);
}

void shms__tally_each(const struct shms__cls *k, shms__tally_fn *fn, void *ctx) {
  const struct shms *h = k->h;
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    const struct shms__proc *p = shms__proc_at(h, i);
    for (uint32_t j = 0; j < SHMS__TALLIES; j++) {
      const struct shms__tally *t = &p->tally[j];
      uint64_t name[SHMS__NAME_WORDS];
      for (int w = 0; w < SHMS__NAME_WORDS; w++)
        name[w] = shms__load_64((uint64_t *)&t->name[w]);
      uint64_t n = shms__load_64((uint64_t *)&t->grants);
      if (name[0] == 0 || n == 0 || shms__load_32((uint32_t *)&t->cls) != (uint32_t)k->id)
        continue;
      /* A key read torn by a rekey: the sequence's retry reads it again. */
      fn(ctx, name, n);
    }
  }
}

uint64_t shms__tally_read_begin(const struct shms__cls *k, int *torn) {
  for (int tries = 0; tries < 1000; tries++) {
    uint64_t v = shms__load_64(&k->actl->tally_seq);
    if ((v & 1) == 0) {
      ck_pr_fence_load();
      return v;
    }
    sched_yield();
  }
  *torn = 1;
  return 0;
}

int shms__tally_read_retry(const struct shms__cls *k, uint64_t v) {
  ck_pr_fence_load();
  return shms__load_64(&k->actl->tally_seq) != v;
}

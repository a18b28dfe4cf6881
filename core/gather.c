/*
 * Multi-cell requests (docs/protocol.md, "Multi-cell requests"): a request of K cells whose turn
 * has come gathers them. Each free cell is RESERVED for it as it comes, the class granting
 * nothing else meanwhile (and, in a class that overtakes, acquires stop overtaking: STRICT),
 * until it holds K. Then the lowest is its lead, GRANTED as any grant is, and the others are
 * BOUND to the lead: they follow it to its end (core/cell.c).
 *
 * Everything here runs under the baton. The class's RESERVED cells are the gathering request's;
 * any rebuild of the index, and recovery, return them (the request gathers again when its turn
 * comes): a gatherer that dies leaves nothing reserved for longer than that.
 */
#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "sched.h"

void shms__gather_drop(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  shms__cells_settle_reserved(k);
  SHMS__STEP();
  if (k->ctl->gather_slot != 0)
    shms__store_32(&k->ctl->gather_slot, 0);
}

uint32_t shms__gather_next(const struct shms__cls *k) {
  struct shms__class_ctl *ctl = k->ctl;
  uint32_t ref = ctl->gather_slot;
  if (ref == 0)
    return 0;
  if (ref <= k->nslots) {
    const struct shms__slot *s = shms__slot_at(k, ref - 1);
    uint64_t w = shms__load_64((uint64_t *)&s->word);
    /* Still the request it gathers for: queued and indexed, by the same sequence. */
    if (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED && (w & SHMS__SLOT_INDEXED) &&
        !(w & SHMS__SLOT_LATE) && s->seq == ctl->gather_seq &&
        SHMS__SLOT_SEQ(w) == (uint32_t)s->seq)
      return ref;
  }
  shms__gather_drop(k); /* it ended (cancelled, expired, drained, its owner gone) */
  return 0;
}

uint32_t shms__gather_reserved(const struct shms__cls *k, int64_t *lowest) {
  uint32_t n = 0;
  *lowest = -1;
  for (uint32_t c = 0; c < k->ncells; c++)
    if (SHMS__CELL_STATE(shms__load_64(&k->cells[c].word)) == SHMS__CELL_RESERVED) {
      if (n++ == 0)
        *lowest = c;
    }
  return n;
}

int64_t shms__gather(const struct shms__cls *k, uint32_t i, uint32_t want) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__slot *s = shms__slot_at(k, i);
  if (ctl->gather_slot != i + 1 || ctl->gather_seq != s->seq) {
    shms__gather_drop(k);
    ctl->gather_seq = s->seq;
    shms__store_32(&ctl->gather_slot, i + 1); /* overtaking stops from this pass's end */
  }
  int64_t lead;
  uint32_t have = shms__gather_reserved(k, &lead);
  uint64_t name[SHMS__NAME_WORDS], now = shms__coarse_now_ns();
  memcpy(name, s->tenant_name, sizeof name); /* NUL-padded by the enqueuer's strncpy */
  while (have < want) {
    int64_t c = shms__cell_take(k, SHMS__TAKE_ANY, s->owner, SHMS__CELL_RESERVED);
    if (c < 0)
      return -1; /* kept for it: the next cell freed comes here */
    SHMS__STEP();
    /* For observers: whom it is held for, and since when (shms_cells). */
    struct shms__cell *cell = &k->cells[c];
    for (size_t w = 0; w < SHMS__NAME_WORDS; w++)
      shms__store_64(&cell->tenant_name[w], name[w]);
    shms__store_32(&cell->uid, shms__load_32(&s->uid));
    shms__store_32(&cell->slot, i + 1);
    shms__store_64(&cell->lease_start_ns, now);
    if (have++ == 0 || c < lead)
      lead = c;
  }
  /* All there: the lead becomes the request's grant (the caller starts it as any). Only the
   * baton's holder writes a RESERVED cell, so a store does. */
  uint64_t w = shms__load_64(&k->cells[lead].word);
  shms__store_64(&k->cells[lead].word,
                 SHMS__CELL_WORD(SHMS__CELL_GEN(w), SHMS__CELL_OWNER(w), SHMS__CELL_GRANTED));
  return lead;
}

void shms__gather_bind(const struct shms__cls *k, uint32_t lead, uint32_t gen, uint32_t cells) {
  SHMS__ASSERT(shms__index_owned(k));
  /* Before any companion says BOUND: the lead's end ends its companions from then on. The
   * count is the lease's while the lead names itself at this generation (shms__lead_cells). */
  struct shms__cell *lc = &k->cells[lead];
  shms__store_32(&lc->ncells, cells);
  shms__store_32(&lc->lead_gen, gen);
  shms__store_32(&lc->lead, lead + 1);
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_RESERVED)
      continue;
    SHMS__STEP();
    shms__store_32(&cell->lead, lead + 1);
    shms__store_32(&cell->lead_gen, gen);
    ck_pr_fence_store(); /* whoever reads BOUND reads its lead */
    shms__store_64(&cell->word,
                   SHMS__CELL_WORD(SHMS__CELL_GEN(w), SHMS__CELL_OWNER(w), SHMS__CELL_BOUND));
  }
  SHMS__STEP();
  shms__store_32(&k->ctl->gather_slot, 0);
}

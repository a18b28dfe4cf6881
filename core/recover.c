/*
 * What an owner leaves behind when it goes away: its requests end with
 * owner-lost, its unaccepted grants return their cells, its leases are
 * released or quarantined per the class's on-holder-death policy. Run by the
 * owner itself when it detaches; the supervisor runs the same for the dead.
 * Requests are found through the owner's record (core/owned.c), so the cost
 * is what the owner held, not the size of the segment.
 */
#include <ck_pr.h>
#include <stdlib.h>

#include "../shm/atomic.h"
#include "../shm/proc.h"
#include "report.h"
#include "sched.h"

void shms__reap_unaccepted(struct shms *h, const struct shms__cls *k) {
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    uint32_t ref = shms__load_32(&cell->slot);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_GRANTED || ref == 0 || ref > k->nslots)
      continue;
    struct shms__slot *s = shms__slot_at(k, ref - 1);
    uint32_t owner = shms__load_32(&s->owner);
    uint64_t seq = shms__load_64(&s->seq);
    if (!shms__owner_dead(h, owner))
      continue;
    /* Its waiter is gone: the grant returns its cell, and the outcome is taken on its behalf. */
    if (shms__settle_and_kick(h, k, ref - 1, seq, 1u << SHMS__SLOT_GRANTED, SHMS_EOWNERLOST))
      shms__slot_collect(k, ref - 1, seq);
  }
}

/* Request i of k, sequence seq, if still owner's: ends owner-lost, its outcome taken. */
static void settle_request(struct shms *h, const struct shms__cls *k, uint32_t i, uint32_t owner,
                           uint64_t seq) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  uint32_t st = SHMS__SLOT_STATE(w);
  if (st < SHMS__SLOT_QUEUED || SHMS__SLOT_SEQ(w) != (uint32_t)seq ||
      shms__load_32(&s->owner) != owner)
    return;
  if (shms__load_32(&s->options) & SHMS__OPT_KEYED) {
    /* Only the owner's share goes: the job goes on for its joiners, if any wait. */
    if (shms__owner_drop(k, i, seq, 0))
      shms__job_abandon(h, k, i, seq, SHMS_EOWNERLOST);
    return;
  }
  shms__settle_and_kick(h, k, i, seq, 1u << SHMS__SLOT_QUEUED | 1u << SHMS__SLOT_GRANTED,
                        SHMS_EOWNERLOST);
  /* A running job goes on; when its worker completes it, the result is dropped. */
  while (SHMS__SLOT_STATE(w) == SHMS__SLOT_RUNNING && SHMS__SLOT_SEQ(w) == (uint32_t)seq &&
         !(w & SHMS__SLOT_COLLECTED) &&
         !ck_pr_cas_64_value(&s->word, w, w | SHMS__SLOT_COLLECTED, &w))
    ;
  /* Nobody will wait for these outcomes any more: take them so the slots come free. */
  w = shms__load_64(&s->word);
  if (SHMS__SLOT_STATE(w) == SHMS__SLOT_SETTLED && !(w & SHMS__SLOT_COLLECTED) &&
      SHMS__SLOT_SEQ(w) == (uint32_t)seq)
    shms__slot_collect(k, i, seq);
}

/* The requests of owner in k: those on its list l, or, without one, every slot's. */
static void settle_requests(struct shms *h, const struct shms__cls *k, uint32_t owner,
                            const struct shms__owned *l) {
  if (l != NULL) {
    for (uint32_t n = 0; n < l->n; n++)
      if (SHMS__OWNED_CLASS(l->v[n].ref) == (uint32_t)k->id)
        settle_request(h, k, SHMS__OWNED_INDEX(l->v[n].ref), owner, l->v[n].seq);
    return;
  }
  for (uint32_t i = 0; i < k->nslots; i++)
    settle_request(h, k, i, owner, shms__load_64(&shms__slot_at(k, i)->seq));
}

static void dispose_leases(struct shms *h, const struct shms__cls *k, uint32_t owner,
                           int contained) {
  /* A release it asked for while the class was held still is done first, as it asked: its
   * command is over, whatever the policy says of a holder that leaves holding its lease. */
  shms__pending_complete(h, k, SHMS__OWNER_INDEX(owner));
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_LEASED || SHMS__CELL_OWNER(w) != (owner & 0xfffffffu))
      continue;
    /* A holder's command that may still run keeps its cell out of service, whatever the
     * policy: it is never handed on under a running command. */
    if (!contained || k->cfg->on_holder_death == SHMS_ON_DEATH_QUARANTINE) {
      /* A holder that detached or exited holding it: recorded here, as no recovery's report
       * will tell it (a recovery's tells it itself). */
      if (shms__quarantine_and_check(h, k, c, w, SHMS_EOWNERLOST) && shms__settle_report == NULL)
        shms__note_cell(h, k, SHMS_EVENT_LEASE_QUARANTINED, c, owner, SHMS_EOWNERLOST);
      continue;
    }
    if (shms__cell_reclaim(k, c, w))
      shms__kick(h, k);
  }
}

int shms__recover_owner(struct shms *h, uint32_t owner, int contained, uint64_t until_real) {
  /* Its requests from its own record; cells are few (at most 4096 a class): scanned. */
  struct shms__owned l;
  int listed = shms__owned_take(h, owner, &l), done = 1;
  /* The keyed jobs it joined, recorded in its entry while the entry is still its own (an entry
   * taken over is its next owner's to release, at attach). */
  uint32_t index = SHMS__OWNER_INDEX(owner);
  int joins = owner == h->owner ||
              (index < h->layout.procs_count &&
               SHMS__OWNER(index, shms__load_32(&shms__proc_at(h, index)->gen)) == owner);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    if (k->id < 0)
      continue;
    if (shms__op_enter_until(h, k, until_real) != SHMS_OK) {
      done = 0; /* held still: this class is the next recovery's */
      continue;
    }
    if (joins)
      shms__joins_release(h, k, index);
    settle_requests(h, k, owner, listed ? &l : NULL);
    if (k->cfg->mode == SHMS_MODE_WORKER) {
      /* The owner was a worker: unbind its cell (a job it held is lost or queued again). */
      for (uint32_t c = 0; c < k->ncells; c++)
        if (shms__load_32(&k->cells[c].worker) == owner)
          shms__follow(h, k, shms__workcell_gone(h, k, c, owner, contained));
    } else {
      dispose_leases(h, k, owner, contained);
    }
    shms__op_leave(h, k);
  }
  if (!done) { /* the record stays marked as being changed: the next recovery scans slots */
    free(l.v);
    return 0;
  }
  shms__owned_done(h, owner, &l);
  return 1;
}

/*
 * What an owner leaves behind when it goes away: its requests end with
 * owner-lost, its unaccepted grants return their cells, its leases are
 * released or quarantined per the class's on-holder-death policy. Run by the
 * owner itself when it detaches; the supervisor runs the same for the dead.
 */
#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/proc.h"
#include "sched.h"

int shms__owner_dead(const struct shms *h, uint32_t owner) {
  return shms__owner_alive(h, h->fd, owner, h->self == UINT32_MAX ? 0 : h->owner) == 0;
}

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
    if (shms__slot_settle(h, k, ref - 1, seq, 1u << SHMS__SLOT_GRANTED, SHMS_EOWNERLOST))
      shms__slot_collect(k, ref - 1);
  }
}

static void settle_requests(struct shms *h, const struct shms__cls *k, uint32_t owner) {
  for (uint32_t i = 0; i < k->nslots; i++) {
    struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (st < SHMS__SLOT_QUEUED || shms__load_32(&s->owner) != owner)
      continue;
    uint64_t seq = shms__load_64(&s->seq);
    shms__slot_settle(h, k, i, seq, 1u << SHMS__SLOT_QUEUED | 1u << SHMS__SLOT_GRANTED,
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
      shms__slot_collect(k, i);
  }
}

static void dispose_leases(struct shms *h, const struct shms__cls *k, uint32_t owner) {
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_LEASED || SHMS__CELL_OWNER(w) != (owner & 0xfffffffu))
      continue;
    if (k->cfg->on_holder_death == SHMS_ON_DEATH_QUARANTINE) {
      shms__cell_quarantine(h, k, c, w, SHMS_EOWNERLOST);
      continue;
    }
    uint32_t tenant = cell->tenant;
    if (!ck_pr_cas_64(&cell->word, w,
                      SHMS__CELL_WORD(SHMS__CELL_GEN(w) + 1, 0, SHMS__CELL_AVAILABLE)))
      continue;
    shms__tenant_lease_ended(k, tenant);
    shms__fast_put(k, c);
    shms__kick(h, k);
  }
}

void shms__recover_owner(struct shms *h, uint32_t owner) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    if (k->id < 0)
      continue;
    shms__op_enter(h, k);
    settle_requests(h, k, owner);
    if (k->cfg->mode == SHMS_MODE_WORKER) {
      /* The owner was a worker: unbind its cell (a job it held is lost or queued again). */
      for (uint32_t c = 0; c < k->ncells; c++)
        if (shms__load_32(&k->cells[c].worker) == owner)
          shms__workcell_gone(h, k, c, owner, 1); /* our own command ended at detach */
    } else {
      dispose_leases(h, k, owner);
    }
    shms__op_leave(h, k);
  }
}

/*
 * The fast word and the cells: reservation, claim, lease start, return and
 * quarantine (docs/protocol.md, "Cells").
 */
#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "hbm.h"
#include "sched.h"
#include "tenant.h"

uint64_t shms__fast_add(const struct shms__cls *k, int32_t dfree, int32_t dqueued) {
  uint64_t w = shms__load_64(&k->ctl->fast), n;
  do {
    uint32_t f = SHMS__FAST_FREE(w) + (uint32_t)dfree;
    /* Masked to its 31 bits: even a count torn below zero never spills into FROZEN. */
    uint32_t q = (SHMS__FAST_QUEUED(w) + (uint32_t)dqueued) & 0x7fffffffu;
    n = ((uint64_t)q << 32) | f | (w & SHMS__FAST_FROZEN); /* an operation never unfreezes */
  } while (!ck_pr_cas_64_value(&k->ctl->fast, w, n, &w));
  return n;
}

int shms__fast_reserve(const struct shms__cls *k, int unqueued_only) {
  uint64_t w = shms__load_64(&k->ctl->fast);
  for (;;) {
    if (unqueued_only == SHMS__RESERVE_ENTERING && (w & SHMS__FAST_FROZEN))
      return -1;
    if (SHMS__FAST_FREE(w) == 0 || (unqueued_only && SHMS__FAST_QUEUED(w) != 0))
      return 0;
    /* One CAS both checks that nobody is queued and takes the cell count. */
    if (ck_pr_cas_64_value(&k->ctl->fast, w, w - 1, &w))
      return 1;
  }
}

uint32_t shms__cell_claim(const struct shms__cls *k, uint32_t owner, uint32_t state) {
  uint32_t start = shms__load_32(&k->ctl->cell_hint);
  if (start >= k->ncells)
    start = 0;
  /* The reservation guarantees an AVAILABLE cell without a claimant: the scan ends. */
  for (uint32_t n = 0, c = start;; n++, c = c + 1 < k->ncells ? c + 1 : 0) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_AVAILABLE)
      continue;
    if (ck_pr_cas_64(&cell->word, w, SHMS__CELL_WORD(SHMS__CELL_GEN(w), owner, state)))
      return c;
    if (n >= k->ncells)
      ck_pr_stall();
  }
}

int shms__cell_start(const struct shms__cls *k, uint32_t c, uint32_t tenant, uint32_t slot,
                     uint32_t *gen, uint64_t *token) {
  struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64(&cell->word);
  uint64_t next = cell->token + 1;
  /* Tokens never wrap: past the last one the cell fails closed (the caller quarantines it). */
  if (next >= shms__load_64(&k->ctl->token_limit) || next == 0)
    return SHMS_ESEQEXHAUSTED;
  /* Read by others without our ownership (lease checks, recovery, observers): atomic stores. */
  shms__store_64(&cell->token, next);
  shms__store_32(&cell->tenant, tenant);
  shms__store_32(&cell->slot, slot);
  shms__store_64(&cell->lease_start_ns, shms__coarse_now_ns());
  *gen = SHMS__CELL_GEN(w);
  *token = next;
  return SHMS_OK;
}

void shms__tenant_lease_ended(const struct shms__cls *k, uint32_t ref) {
  if (ref == 0 || ref > k->ntenants)
    return;
  ck_pr_dec_32(&shms__tenant_at(k, ref)->active);
  shms__hbm_set(k->tattn, k->ntenants, ref - 1);
}

void shms__cell_unaccepted(struct shms *h, const struct shms__cls *k, uint32_t c) {
  if (c >= k->ncells)
    return; /* a torn grant's cell: recovery recounts */
  struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64(&cell->word);
  uint32_t tenant = cell->tenant;
  while (SHMS__CELL_STATE(w) == SHMS__CELL_GRANTED) {
    /* Never exposed to anyone, so no generation bump is needed; it simply becomes free (a
     * worker cell, its worker's again). */
    uint32_t owner = k->cfg->mode == SHMS_MODE_WORKER ? shms__load_32(&cell->worker) : 0;
    if (ck_pr_cas_64_value(&cell->word, w,
                           SHMS__CELL_WORD(SHMS__CELL_GEN(w), owner, SHMS__CELL_AVAILABLE), &w)) {
      SHMS__STEP();
      shms__tenant_lease_ended(k, tenant);
      shms__fast_add(k, 1, 0);
      SHMS__STEP();
      shms__kick(h, k);
      return;
    }
  }
}

int shms__cell_quarantine(struct shms *h, const struct shms__cls *k, uint32_t c, uint64_t expect,
                          int reason) {
  struct shms__cell *cell = &k->cells[c];
  uint32_t tenant = cell->tenant;
  uint64_t q =
      SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, SHMS__CELL_OWNER(expect), SHMS__CELL_QUARANTINED);
  if (!ck_pr_cas_64(&cell->word, expect, q))
    return 0;
  shms__store_32(&cell->reason, (uint32_t)reason);
  ck_pr_inc_32(&k->ctl->quarantined);
  shms__tenant_lease_ended(k, tenant);
  shms__check_all_quarantined(h, k);
  return 1;
}

void shms__test_set_tokens(const struct shms__cls *k, uint64_t next) {
  for (uint32_t c = 0; c < k->ncells; c++)
    shms__store_64(&k->cells[c].token, next - 1);
}

void shms__cell_exhausted(struct shms *h, const struct shms__cls *k, uint32_t c) {
  shms__cell_quarantine(h, k, c, shms__load_64(&k->cells[c].word), SHMS_ESEQEXHAUSTED);
}

void shms__cell_count_lease(const struct shms__cls *k, uint32_t c) {
  struct shms__cell *cell = &k->cells[c];
  shms__store_64(&cell->leases, cell->leases + 1); /* only the cell's holder writes it */
}

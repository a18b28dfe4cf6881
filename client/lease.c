/* Lease disposition: release and quarantine present the lease exactly; repair undoes quarantine. */
#include <ck_pr.h>

#include "../core/report.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/identity.h"
#include "client.h"

/* The lease's cell and its current word, if the lease is exactly current. */
/* The class a lease names, if it names a cell of this segment at all. */
static int lease_class(struct shms *h, const shms_lease *lease, struct shms__cls **k) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (lease == NULL)
    return shms__fail(SHMS_EINVAL, "lease is NULL");
  if (lease->incarnation != h->incarnation)
    return shms__fail(SHMS_ELEASE, "the lease belongs to another segment or incarnation");
  if (lease->cls >= SHMS_CLASS_COUNT || h->cls[lease->cls].id < 0 ||
      lease->cell >= h->cls[lease->cls].ncells)
    return shms__fail(SHMS_ELEASE, "the lease names no cell of this segment");
  *k = &h->cls[lease->cls];
  return SHMS_OK;
}

/* The lease's cell word, if the lease is exactly current (read inside the operation). */
static int check_lease(const struct shms__cls **kp, const shms_lease *lease, uint64_t *w) {
  const struct shms__cls *k = *kp;
  struct shms__cell *cell = &k->cells[lease->cell];
  *w = shms__load_64(&cell->word);
  if (SHMS__CELL_STATE(*w) != SHMS__CELL_LEASED || SHMS__CELL_GEN(*w) != lease->generation ||
      shms__load_64(&cell->token) != lease->token)
    return shms__fail(SHMS_ELEASE,
                      "class %s cell %u: the lease is not current (stale, forged, "
                      "or already returned)",
                      shms_class_name(k->id), lease->cell);
  return SHMS_OK;
}

static inline __attribute__((always_inline)) int
release_op(struct shms *h, const struct shms__cls *k, const shms_lease *lease) {
  uint64_t w = 0;
  int rc = check_lease(&k, lease, &w);
  if (rc != SHMS_OK)
    return rc;
  if (!shms__release_lease(h, k, lease->cell, w))
    return shms__fail(SHMS_ELEASE, "class %s cell %u: the lease was returned concurrently",
                      shms_class_name(k->id), lease->cell);
  return SHMS_OK;
}

/*
 * The class is held still (a check or recovery, slow or stopped): the release is recorded for
 * whoever lets the class go next, and the holder goes on (docs/protocol.md, "Held still"). The
 * class cannot change while held still, so the lease is checked now, exactly.
 */
static int release_later(struct shms *h, const struct shms__cls *k, const shms_lease *lease) {
  uint64_t w = 0;
  int rc = check_lease(&k, lease, &w);
  if (rc != SHMS_OK)
    return rc;
  if (!shms__pending_record(h, k, lease->cell, lease->generation, lease->token))
    return SHMS__OP(h, k, release_op(h, k, lease)); /* one record a process: this one waits */
  shms__clear_detail();                             /* done, as far as the holder is concerned */
  if (shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN)
    return SHMS_OK; /* its freezer completes it as it lets the class go */
  /* Let go meanwhile, perhaps before its freezer could see the record: completed here, unless
   * the class is held still again (then by that freezer). */
  if (shms__op_enter_until(h, k, shms__real_now_ns() + SHMS__HELD_PATIENCE_NS) == SHMS_OK) {
    shms__pending_complete(h, k, shms__self_index(h));
    shms__op_leave(h, k);
  }
  return SHMS_OK;
}

int shms_release(shms_t *h, const shms_lease *lease) {
  struct shms__cls *k = NULL;
  int rc = lease_class(h, lease, &k);
  if (rc != SHMS_OK)
    return rc;
  /* One transfer of the fast word's line, not two: the enter reads it, the put writes it. */
  shms__rfo(&k->ctl->fast);
  if (shms__op_enter_within(h, k, SHMS__HELD_PATIENCE_NS) != SHMS_OK)
    return release_later(h, k, lease);
  rc = release_op(h, k, lease);
  shms__op_leave(h, k);
  return rc;
}

static int quarantine_op(struct shms *h, const struct shms__cls *k, const shms_lease *lease,
                         int reason) {
  uint64_t w = 0;
  int rc = check_lease(&k, lease, &w);
  if (rc != SHMS_OK)
    return rc;
  if (!shms__quarantine_and_check(h, k, lease->cell, w, reason))
    return shms__fail(SHMS_ELEASE, "class %s cell %u: the lease was returned concurrently",
                      shms_class_name(k->id), lease->cell);
  shms__note_cell(h, k, SHMS_EVENT_CELL_QUARANTINED, lease->cell, h->owner, reason);
  return SHMS_OK;
}

int shms_quarantine(shms_t *h, const shms_lease *lease, int reason) {
  struct shms__cls *k = NULL;
  int rc = lease_class(h, lease, &k);
  return rc != SHMS_OK ? rc : SHMS__OP(h, k, quarantine_op(h, k, lease, reason));
}

/*
 * QUARANTINED -> AVAILABLE (a worker class: OFFLINE, for a new worker to
 * bind) with a new generation. 1 if this call repaired it.
 */
static int repair_cell(struct shms *h, const struct shms__cls *k, uint32_t c) {
  struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64(&cell->word);
  int worker = k->cfg->mode == SHMS_MODE_WORKER;
  if (SHMS__CELL_STATE(w) != SHMS__CELL_QUARANTINED)
    return 0;
  if (!shms__cell_unquarantine(k, c, w, worker ? SHMS__CELL_OFFLINE : SHMS__CELL_AVAILABLE))
    return 0;
  shms__note(h, &(struct shms__ev){.kind = SHMS_EVENT_CELL_REPAIRED,
                                   .cls = k->id,
                                   .cell = (int32_t)c,
                                   .pid = h->pid,
                                   .value = worker ? 2 : 1});
  if (worker)
    return 1;
  if (!k->fast_map)
    shms__store_32(&k->ctl->cell_hint, c);
  shms__fast_put(k, c);
  shms__kick(h, k);
  return 1;
}

int shms_repair(shms_t *h, shms_class_t c, int cell) {
  struct shms__cls *k = NULL;
  int rc = shms__check_class(h, c, &k);
  if (rc != SHMS_OK)
    return rc;
  if (cell < -1)
    return shms__fail(SHMS_EINVAL, "class %s has no cell %d (cells 0..%u, or -1 for every one)",
                      shms_class_name(c), cell, k->ncells - 1);
  if ((rc = shms__admin_check(h, "repair cells")) != SHMS_OK)
    return rc;
  if (cell >= 0) {
    if ((uint32_t)cell >= k->ncells)
      return shms__fail(SHMS_EINVAL, "class %s has no cell %d (cells 0..%u)", shms_class_name(c),
                        cell, k->ncells - 1);
    if (!SHMS__OP(h, k, repair_cell(h, k, (uint32_t)cell)))
      return shms__fail(SHMS_EINVAL, "class %s cell %d is not quarantined", shms_class_name(c),
                        cell);
    return 1;
  }
  int repaired = 0;
  for (uint32_t i = 0; i < k->ncells; i++)
    repaired += SHMS__OP(h, k, repair_cell(h, k, i));
  return repaired;
}

int shms_drain(shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if ((rc = shms__admin_check(h, "drain the segment")) != SHMS_OK)
    return rc;
  uint32_t st = shms__segment_state(h);
  while (st == SHMS_SEG_ACTIVE && !ck_pr_cas_32_value(&h->hdr->state, st, SHMS_SEG_DRAINING, &st))
    ;
  if (st == SHMS_SEG_DESTROYING)
    return shms__fail(SHMS_ESHUTDOWN, "the segment is being destroyed");
  if (st == SHMS_SEG_ACTIVE) /* this call began the drain */
    shms__note(
        h, &(struct shms__ev){.kind = SHMS_EVENT_DRAINED, .cls = -1, .cell = -1, .pid = h->pid});
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (h->cls[c].id >= 0)
      SHMS__OP_VOID(h, &h->cls[c], shms__fail_all(h, &h->cls[c], SHMS_ESHUTDOWN));
  return SHMS_OK;
}

/*
 * DRAINING -> ACTIVE (docs/protocol.md, "Segment states"). Nothing else to undo: the drain
 * settled what was queued, and a request queued from now on is taken as on any active segment.
 */
int shms_resume(shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if ((rc = shms__admin_check(h, "lift a drain")) != SHMS_OK)
    return rc;
  uint32_t st = shms__segment_state(h);
  while (st == SHMS_SEG_DRAINING && !ck_pr_cas_32_value(&h->hdr->state, st, SHMS_SEG_ACTIVE, &st))
    ;
  if (st == SHMS_SEG_DESTROYING)
    return shms__fail(SHMS_ESHUTDOWN, "the segment is being destroyed");
  if (st == SHMS_SEG_DRAINING) /* this call lifted the drain */
    shms__note(
        h, &(struct shms__ev){.kind = SHMS_EVENT_RESUMED, .cls = -1, .cell = -1, .pid = h->pid});
  return st == SHMS_SEG_DRAINING;
}

int shms_lease_event(shms_t *h, const shms_lease *lease, const shms_ticket *ticket, uint32_t kind,
                     uint64_t value) {
  struct shms__cls *k = NULL;
  int rc = lease_class(h, lease, &k);
  if (rc != SHMS_OK)
    return rc;
  if (kind != SHMS_EVENT_LEASE_STARTED && kind != SHMS_EVENT_LEASE_ENDED)
    return shms__fail(SHMS_EINVAL, "event kind %u is not a command's start or end", kind);
  const struct shms__cls *ck = k;
  uint64_t w = 0;
  if ((rc = check_lease(&ck, lease, &w)) != SHMS_OK)
    return rc;
  int ours = ticket != NULL && ticket->seq != 0 && ticket->cls == lease->cls &&
             ticket->incarnation == h->incarnation && ticket->slot < k->nslots;
  shms__note_lease(h, k, kind, lease->cell, SHMS__CELL_OWNER(w), 0,
                   kind == SHMS_EVENT_LEASE_ENDED ? value : 0, ours ? ticket->slot + 1 : 0,
                   ours ? ticket->seq : 0);
  return SHMS_OK;
}

int shms_lease_cells(shms_t *h, const shms_lease *lease, uint32_t *out, uint32_t max) {
  struct shms__cls *k = NULL;
  int rc = lease_class(h, lease, &k);
  if (rc != SHMS_OK)
    return rc;
  if (out == NULL && max > 0)
    return shms__fail(SHMS_EINVAL, "out is NULL");
  const struct shms__cls *ck = k;
  uint64_t w = 0;
  if ((rc = check_lease(&ck, lease, &w)) != SHMS_OK)
    return rc;
  return (int)shms__lease_cells_of(k, lease->cell, lease->generation, out, max);
}

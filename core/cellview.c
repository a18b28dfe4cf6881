/*
 * Who holds what: a read-only view of a class's cells for observers (status, the supervisor's
 * log of quarantines and repairs). Reads words that others change at any moment: each cell's
 * fields are read around its state word and kept only if the word did not move meanwhile, so a
 * row is one cell's state at one instant (rows are not one instant together).
 */
#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/proc.h"
#include "sched.h"

/* What owner id owner's entry recorded of its process while the entry is still that owner's,
 * and whether it lives. */
static void holder(const struct shms *h, uint32_t owner, struct shms__pidref *ref, int *alive) {
  *alive = shms__owner_ref(h, owner, ref) && !shms__owner_dead(h, owner);
}

/* The ticket of the lease cell carries at word w, if its acceptor recorded one (core/held.c). */
static void read_ticket(const struct shms *h, const struct shms__cls *k,
                        const struct shms__cell *cell, uint64_t w, shms_ticket *out) {
  uint32_t gen = shms__load_32((uint32_t *)&cell->ticket_gen);
  ck_pr_fence_load(); /* pairs with shms__held_record's store fence */
  uint32_t slot = shms__load_32((uint32_t *)&cell->slot);
  if (gen != SHMS__CELL_GEN(w) || slot == 0 || slot > k->nslots)
    return; /* a fast-path lease (no request), or one whose record is not written yet */
  *out = (shms_ticket){.cls = (uint32_t)k->id,
                       .slot = slot - 1,
                       .seq = shms__load_64((uint64_t *)&cell->ticket_seq),
                       .incarnation = h->incarnation};
}

/* A companion cell (BOUND) is shown as its lease: the lead's state and records, if the lead
 * still carries that lease; else (an orphan about to be returned) as available. */
static void read_companion(const struct shms__cls *k, const struct shms__cell *cell, uint64_t w,
                           uint32_t *st, const struct shms__cell **rec, uint32_t *lead) {
  uint32_t ref = shms__load_32((uint32_t *)&cell->lead);
  uint32_t gen = shms__load_32((uint32_t *)&cell->lead_gen);
  *st = SHMS__CELL_AVAILABLE;
  if (ref == 0 || ref > k->ncells || shms__load_64((uint64_t *)&cell->word) != w)
    return;
  uint64_t lw = shms__load_64((uint64_t *)&k->cells[ref - 1].word);
  uint32_t lst = SHMS__CELL_STATE(lw);
  if (SHMS__CELL_GEN(lw) != gen || (lst != SHMS__CELL_GRANTED && lst != SHMS__CELL_LEASED))
    return;
  *st = lst;
  *rec = &k->cells[ref - 1];
  *lead = ref - 1;
}

static void read_cell(const struct shms *h, const struct shms__cls *k, uint32_t c,
                      shms_cell_info *out) {
  struct shms__pidref ref;
  for (int tries = 0;; tries++) {
    ref = (struct shms__pidref){0};
    const struct shms__cell *cell = &k->cells[c], *rec = cell;
    uint64_t w = shms__load_64((uint64_t *)&cell->word);
    uint32_t st = SHMS__CELL_STATE(w), lead = c;
    memset(out, 0, sizeof *out);
    out->cell = c;
    ck_pr_fence_load();
    if (st == SHMS__CELL_BOUND)
      read_companion(k, cell, w, &st, &rec, &lead);
    out->state = st;
    out->generation = SHMS__CELL_GEN(w);
    out->leases = shms__load_64((uint64_t *)&cell->leases);
    int worker = k->cfg->mode == SHMS_MODE_WORKER;
    uint32_t owner = worker ? shms__load_32((uint32_t *)&cell->worker) : SHMS__CELL_OWNER(w);
    if (st == SHMS__CELL_GRANTED || st == SHMS__CELL_LEASED) {
      out->lead = lead;
      out->lease_cells =
          shms__lead_cells(k, lead, SHMS__CELL_GEN(shms__load_64((uint64_t *)&rec->word)));
    }
    if (st == SHMS__CELL_GRANTED || st == SHMS__CELL_LEASED || st == SHMS__CELL_QUARANTINED ||
        st == SHMS__CELL_RESERVED) {
      /* A quarantine keeps the owner and the name of the lease it ended; a lease's records are
       * its lead's. */
      shms__cell_tenant(k, lead, out->tenant);
      out->uid = shms__load_32((uint32_t *)&rec->uid);
      out->since_ns = shms__load_64((uint64_t *)&rec->lease_start_ns);
    }
    if (st == SHMS__CELL_QUARANTINED) {
      out->reason = (int)shms__load_32((uint32_t *)&cell->reason);
      out->quarantined_unix_ns = shms__load_64((uint64_t *)&cell->quarantined_unix_ns);
    }
    if (st == SHMS__CELL_LEASED && !worker && rec == cell)
      read_ticket(h, k, cell, w, &out->ticket);
    if (st != SHMS__CELL_OFFLINE && (worker || st != SHMS__CELL_AVAILABLE))
      holder(h, owner, &ref, &out->alive);
    if (shms__load_64((uint64_t *)&cell->word) == w || tries == 8)
      break; /* it moved while we read: read it again (a bounded number of times) */
  }
  /* Named as the caller sees it, once the row is read (a walk of /proc is no part of it). */
  shms__pid_show_into(&ref, 1, &out->pid, &out->ns_pid, &out->pid_foreign, &out->pidns);
  shms__name_clean(out->tenant); /* shared memory: only what a name may hold */
}

int shms__view_rows(const shms_t *h, shms_class_t c, const void *out, uint32_t max,
                    const uint32_t *count, const struct shms__cls **k) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (count == NULL || (out == NULL && max > 0))
    return shms__fail(SHMS_EINVAL, "%s is NULL", count == NULL ? "count" : "out");
  if ((int)c < 0 || c >= SHMS_CLASS_COUNT || h->cls[c].id < 0)
    return shms__fail(SHMS_EINVAL, "class %d is not configured in this segment", (int)c);
  *k = &h->cls[c];
  return SHMS_OK;
}

int shms_cells(shms_t *h, shms_class_t c, shms_cell_info *out, uint32_t max, uint32_t *count) {
  const struct shms__cls *k;
  int rc = shms__view_rows(h, c, out, max, count, &k);
  if (rc != SHMS_OK)
    return rc;
  *count = k->ncells;
  for (uint32_t i = 0; i < k->ncells && i < max; i++)
    read_cell(h, k, i, &out[i]);
  return SHMS_OK;
}

/*
 * Grant revocation (docs/protocol.md, "Revocation"): a lease class's grant that its waiter
 * has not accepted within the class's grant-timeout goes to the next request. The slot word
 * decides against the waiter's acceptance: the revoker moves the slot GRANTED -> QUEUED+LATE
 * with one CAS, and only if it won does it return the cell. The late request keeps its
 * sequence and enqueue time but stays out of the index (parked) until its waiter comes back,
 * which re-indexes it at its old place: granting it again to a waiter that is still stopped
 * would leave the cell idle behind it once more.
 *
 * Who looks, with no daemon: the dispatcher, in a pass that has queued work and no free cell;
 * and every queued waiter, which sleeps no later than the oldest grant's due time while no cell
 * is free, and then kicks. A stale grant matters only to a request that waits, and every such
 * request has such a waiter.
 */
#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/hbm.h"
#include "report.h"
#include "sched.h"

void shms__revoke_note(const struct shms__cls *k, uint32_t c) {
  SHMS__ASSERT(shms__index_owned(k));
  if (k->grant_timeout_ns == 0)
    return;
  /* Grants are made in time order under the baton: only the first outstanding one can lower
   * the due time; later ones are found by the sweep that consumes it. */
  if (shms__load_64(&k->ctl->grant_due) == 0)
    shms__store_64(&k->ctl->grant_due,
                   shms__load_64(&k->cells[c].lease_start_ns) + k->grant_timeout_ns);
}

int shms__revoke_wanted(const struct shms__cls *k, uint64_t now) {
  uint64_t due = k->grant_timeout_ns ? shms__load_64(&k->ctl->grant_due) : 0;
  return due != 0 && now >= due;
}

/*
 * Cell c, GRANTED at word cw and due: revoke its grant if its waiter has still not accepted it,
 * or return it if no slot holds it. Returns 1 if the cell came free; else lowers *next to when
 * to look again.
 */
static int revoke_cell(struct shms *h, const struct shms__cls *k, uint32_t c, uint64_t cw,
                       uint64_t now, uint64_t *next) {
  struct shms__cell *cell = &k->cells[c];
  uint32_t gen = SHMS__CELL_GEN(cw), ref = shms__load_32(&cell->slot);
  struct shms__slot *s = ref >= 1 && ref <= k->nslots ? shms__slot_at(k, ref - 1) : NULL;
  uint64_t sw = s != NULL ? shms__load_64(&s->word) : 0;
  ck_pr_fence_load(); /* the word before the grant's fields it publishes */
  int bound = s != NULL && shms__load_32(&s->cell) == c && shms__load_32(&s->generation) == gen;
  uint32_t st = SHMS__SLOT_STATE(sw);
  if (bound && st == SHMS__SLOT_GRANTED) {
    /* Counted queued before it is: nobody grants it meanwhile (we hold the baton), and a
     * crash in between leaves the count one over, which recovery recounts. */
    shms__fast_queue(k, 1);
    SHMS__STEP();
    if (!shms__slot_revoke(k, ref - 1, &sw)) {
      /* Accepted or settled just now: the cell is theirs to take or return. */
      shms__fast_queue(k, -1);
      *next = *next < now + k->grant_timeout_ns ? *next : now + k->grant_timeout_ns;
      return 0;
    }
    SHMS__STEP();
    ck_pr_inc_64(&k->ctl->revoked);
    shms__note_request(h, k, SHMS_EVENT_REVOKED, ref - 1, shms__load_64(&s->seq), (int32_t)c, 0, 0);
    return shms__cell_return(k, c, gen);
  }
  if (bound && st == SHMS__SLOT_SETTLED && SHMS__SLOT_REASON(sw) == SHMS_OK) {
    /* An acceptor between its two CASes (or dead there: recovery's): look again later. */
    *next = *next < now + k->grant_timeout_ns ? *next : now + k->grant_timeout_ns;
    return 0;
  }
  /* No slot holds this grant: its dispatcher died before handing it over, or a settler or
   * revoker moved the slot out of GRANTED and is returning the cell (or died doing so). The
   * return is exact: racing a live returner, one of us wins. */
  return shms__cell_return(k, c, gen);
}

uint32_t shms__revoke_due(struct shms *h, const struct shms__cls *k, uint64_t now) {
  SHMS__ASSERT(shms__index_owned(k));
  uint64_t next = UINT64_MAX;
  uint32_t freed = 0;
  for (uint32_t c = 0; c < k->ncells; c++) {
    uint64_t cw = shms__load_64(&k->cells[c].word);
    if (SHMS__CELL_STATE(cw) != SHMS__CELL_GRANTED)
      continue;
    uint64_t due = shms__load_64(&k->cells[c].lease_start_ns) + k->grant_timeout_ns;
    if (now < due)
      next = due < next ? due : next;
    else
      freed += (uint32_t)revoke_cell(h, k, c, cw, now, &next);
  }
  shms__store_64(&k->ctl->grant_due, next == UINT64_MAX ? 0 : next);
  return freed;
}

enum shms__next shms__revoke_poll(const struct shms__cls *k, uint64_t *wake_real) {
  *wake_real = 0;
  if (k->grant_timeout_ns == 0 || (SHMS__FAST_LOW(shms__load_64(&k->ctl->fast)) != 0 &&
                                   shms__load_32(&k->ctl->quota_parked) == 0))
    return SHMS__NEXT_NONE; /* a free cell, and nobody waits for a quota: no revocation needed */
  uint64_t due = shms__load_64(&k->ctl->grant_due), now = shms__now_ns();
  if (due == 0)
    return SHMS__NEXT_NONE;
  if (now < due) {
    *wake_real = shms__real_now_ns() + (due - now);
    return SHMS__NEXT_NONE;
  }
  /* Due: a pass sweeps (if another process holds the baton, its re-check sees it due). */
  return SHMS__NEXT_KICK;
}

enum shms__next shms__revoke_unpark(const struct shms__cls *k, uint32_t i, uint64_t w) {
  if (!shms__slot_unpark(k, i, &w))
    return SHMS__NEXT_NONE; /* it changed (cancelled, drained): the caller looks again */
  SHMS__STEP();
  shms__hbm_set(&k->sattn, i);
  /* Published again: its end of overtaking (long passed) holds before a pass indexes it. */
  shms__overtake_arrived(k, shms__slot_at(k, i)->enqueue_ns);
  return SHMS__NEXT_KICK;
}

/*
 * Cells of worker classes (docs/protocol.md, "Workers"): binding a worker,
 * waking it when a job is granted to its cell, and what happens to the cell
 * and its job when the worker goes away — closes, detaches or dies.
 */
#include <ck_pr.h>
#include <sched.h>

#include "../shm/atomic.h"
#include "../shm/futex.h"
#include "../shm/hbm.h"
#include "../shm/proc.h"
#include "report.h"
#include "sched.h"

int shms__workcell_bind(const struct shms__cls *k, uint32_t owner, uint32_t *out) {
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_OFFLINE)
      continue;
    if (!shms__cell_bind(k, c, w, owner))
      continue;
    *out = c;
    return SHMS_OK;
  }
  return SHMS_EBUSY;
}

void shms__workcell_wake(const struct shms__cls *k, uint32_t c) {
  uint32_t *f = &k->cells[c].worker_futex, v = shms__load_32(f);
  /* Count the event and clear "sleeping" in one step; wake only a worker that said it sleeps. */
  while (!ck_pr_cas_32_value(f, v, (v + 2) & ~1u, &v))
    ;
  if (v & 1u)
    shms__futex_wake(f);
}

/*
 * The job on slot i ran on cell c, whose worker is gone: queue it again once if asked (KICK),
 * else end it. Only while it is still running on c: someone else may have found the dead worker
 * first, queued the job again, and another worker may be running it now.
 */
static enum shms__next job_lost(struct shms *h, const struct shms__cls *k, uint32_t i, uint32_t c,
                                int contained) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  while (SHMS__SLOT_STATE(w) == SHMS__SLOT_RUNNING && shms__load_32(&s->cell) == c) {
    /* A payload half overwritten by the result cannot run again, nor a job whose command may
     * still run. */
    int again = contained && (s->options & SHMS__OPT_RETRY_ONCE) &&
                !(s->options & SHMS__OPT_RETRIED) && !(w & SHMS__SLOT_WRITING) &&
                !(w & SHMS__SLOT_COLLECTED);
    struct shms__ev ev;
    shms__note_job(h, k, i, c, again, &ev);
    if (again) {
      s->options |= SHMS__OPT_RETRIED;
      shms__fast_queue(k, 1);
      if (shms__slot_requeue(k, i, s->seq, &w)) {
        shms__note(h, &ev);
        shms__hbm_set(&k->sattn, i);
        return SHMS__NEXT_KICK;
      }
      shms__fast_queue(k, -1);
      continue;
    }
    if (shms__slot_job_lost(k, i, s->seq, &w)) {
      shms__note(h, &ev);
      if (w & SHMS__SLOT_COLLECTED) /* its client is gone too */
        shms__slot_free(k, i);
      return SHMS__NEXT_NONE;
    }
  }
  return SHMS__NEXT_NONE;
}

/* A job granted to a gone worker never ran: it goes back to the queue, whatever its options. */
static int job_requeue(const struct shms__cls *k, uint32_t i, uint32_t c) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  shms__fast_queue(k, 1);
  while (SHMS__SLOT_STATE(w) == SHMS__SLOT_GRANTED && s->cell == c) {
    if (shms__slot_requeue(k, i, s->seq, &w)) {
      shms__hbm_set(&k->sattn, i);
      return 1;
    }
  }
  shms__fast_queue(k, -1);
  return 0;
}

enum shms__next shms__workcell_gone(struct shms *h, const struct shms__cls *k, uint32_t c,
                                    uint32_t worker, int contained) {
  struct shms__cell *cell = &k->cells[c];
  /* Bounded: what a dead process left half done here is recovery's, and recovery waits for us. */
  for (int tries = 0; tries < 10000; tries++) {
    uint64_t w = shms__load_64(&cell->word);
    if (shms__load_32(&cell->worker) != worker)
      return SHMS__NEXT_NONE;
    switch (SHMS__CELL_STATE(w)) {
    case SHMS__CELL_AVAILABLE: /* idle: take its free count with it */
      if (shms__fast_reserve(k, SHMS__TAKE_ANY) != SHMS__RESERVE_TAKEN) {
        sched_yield(); /* a grant is claiming it right now */
        continue;
      }
      if (shms__cell_offline(k, c, w, SHMS__CELL_OFFLINE)) {
        shms__store_32(&cell->worker, 0);
        return SHMS__NEXT_NONE;
      }
      shms__fast_put(k, c);
      continue;
    case SHMS__CELL_GRANTED: { /* granted, never taken */
      uint32_t slot = shms__load_32(&cell->slot);
      if (slot == 0 || slot > k->nslots || !job_requeue(k, slot - 1, c)) {
        sched_yield(); /* a cancel is returning the cell right now */
        continue;
      }
      while (!shms__cell_offline(k, c, shms__load_64(&cell->word), SHMS__CELL_OFFLINE))
        ;
      shms__store_32(&cell->worker, 0);
      return SHMS__NEXT_KICK;
    }
    case SHMS__CELL_LEASED: { /* mid-job: the job is lost, the cell's state unknown */
      uint32_t slot = shms__load_32(&cell->slot);
      enum shms__next next = SHMS__NEXT_NONE;
      if (slot >= 1 && slot <= k->nslots)
        next = job_lost(h, k, slot - 1, c, contained);
      /* The kick for a job queued again comes after the quarantine now, not before: this cell
       * was LEASED, never grantable, so a pass grants the same either way. */
      if (shms__cell_quarantine(k, c, w, SHMS_EWORKERLOST))
        next |= SHMS__NEXT_CHECK_QUARANTINED;
      return next;
    }
    default:
      return SHMS__NEXT_NONE;
    }
  }
  return SHMS__NEXT_NONE;
}

enum shms__next shms__workcell_check(struct shms *h, const struct shms__cls *k, uint32_t c) {
  uint32_t worker = shms__load_32(&k->cells[c].worker);
  if (worker == 0 || !shms__owner_dead(h, worker))
    return SHMS__NEXT_NONE;
  /* Its job's command dies before the job is declared lost or queued again; outside any
   * operation, since that may take a moment. */
  int contained = shms__proc_kill_command(h, h->fd, worker) == SHMS_OK;
  shms__op_enter(h, k);
  enum shms__next next = shms__workcell_gone(h, k, c, worker, contained);
  shms__op_leave(h, k);
  return next;
}

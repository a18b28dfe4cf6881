/*
 * Quiescence for recovery (docs/protocol.md, "Recovery"). Every operation
 * that changes a class runs between shms__op_enter and shms__op_leave, which
 * count it in the process's own entry. Recovery sets the FROZEN bit in the
 * class's fast word and waits until no live process has an operation under
 * way: then the state words stand still and every count and index can be
 * recomputed from them exactly, whatever a dead process left half done.
 *
 * Why this is enough (a Dekker pair): enter increments the count with a
 * locked instruction, then reads FROZEN; freeze sets FROZEN with a locked
 * instruction, then reads the counts. One of the two sees the other.
 */
#include <ck_pr.h>
#include <sched.h>

#include "../shm/atomic.h"
#include "../shm/proc.h"
#include "sched.h"

/* Brackets nest on one thread: only the outermost one counts. */
static _Thread_local uint32_t depth[SHMS_CLASS_COUNT];

/* Wait while k is frozen; if its freezer died, finish its job (recovery is idempotent). */
static void wait_unfrozen(struct shms *h, const struct shms__cls *k) {
  for (uint32_t spins = 0; shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN; spins++) {
    if (spins % 1024 == 1023) {
      uint32_t freezer = shms__load_32(&k->ctl->freezer);
      if (freezer != 0 && shms__owner_dead(h, freezer)) {
        shms__recover_class(h, k);
        continue;
      }
    }
    sched_yield(); /* a live freezer finishes in a bounded time */
  }
}

void shms__op_enter(struct shms *h, const struct shms__cls *k) {
  if (depth[k->id]++ > 0)
    return;
  for (;;) {
    ck_pr_inc_32(&h->ops[k->id]); /* locked: ordered before the load below */
    if (!(shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN))
      return;
    ck_pr_dec_32(&h->ops[k->id]);
    wait_unfrozen(h, k);
  }
}

void shms__op_leave(struct shms *h, const struct shms__cls *k) {
  if (--depth[k->id] == 0)
    ck_pr_dec_32(&h->ops[k->id]);
}

/* Whether some live process other than us has an operation under way on k. */
static int others_busy(struct shms *h, const struct shms__cls *k) {
  const struct shms__header *hdr = h->hdr;
  for (uint32_t i = 0; i < hdr->procs_count; i++) {
    const struct shms__proc *p = SHMS__AT(
        h->base, hdr->procs_off + (uint64_t)i * sizeof(struct shms__proc), const struct shms__proc);
    if (i == h->self || shms__load_32((uint32_t *)&p->ops[k->id]) == 0)
      continue;
    /* Only the lock says whether a count belongs to a live process. */
    if (shms__proc_alive(h->base, h->fd, i, shms__self_index(h)) == 1)
      return 1;
  }
  return 0;
}

void shms__freeze(struct shms *h, const struct shms__cls *k) {
  uint32_t me = h->owner;
  /* First the right to freeze, recorded before anything stops: a freezer that dies at any point
   * is then known, and the next one finishes its work. */
  for (;;) {
    uint32_t f = shms__load_32(&k->ctl->freezer);
    if (f == me)
      break;
    if (f != 0 && !shms__owner_dead(h, f)) {
      sched_yield(); /* a live freezer finishes in a bounded time */
      continue;
    }
    if (ck_pr_cas_32(&k->ctl->freezer, f, me))
      break;
  }
  uint64_t w = shms__load_64(&k->ctl->fast);
  while (!(w & SHMS__FAST_FROZEN) &&
         !ck_pr_cas_64_value(&k->ctl->fast, w, w | SHMS__FAST_FROZEN, &w))
    ;
  while (others_busy(h, k))
    sched_yield();
}

void shms__unfreeze(const struct shms__cls *k, uint64_t fast) {
  ck_pr_fence_store(); /* everything recomputed is visible before operations resume */
  shms__store_64(&k->ctl->fast, fast & ~SHMS__FAST_FROZEN);
  shms__store_32(&k->ctl->freezer, 0);
}

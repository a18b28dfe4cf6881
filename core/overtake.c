/*
 * Bounded overtaking (docs/protocol.md, "Bounded overtaking"): an acquire may take a free cell
 * ahead of queued requests while none of them has waited the class's bound; once one has, the
 * fast word's STRICT bit makes every release hand its cell to the queue until the baton holder
 * finds the oldest indexed request younger than the bound again.
 */
#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "sched.h"

void shms__overtake_update(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  if (k->overtake_ns == 0)
    return;
  struct shms__class_ctl *ctl = k->ctl;
  uint32_t head = ctl->all_head;
  uint64_t end = 0;
  if (head >= 1 && head <= k->nslots)
    end = shms__slot_at(k, head - 1)->enqueue_ns + k->overtake_ns;
  else
    head = 0;
  /* Stored only when they move: the line is the fast word's, in every acquirer's cache. */
  if (shms__load_64(&ctl->overtake_end_ns) != end)
    shms__store_64(&ctl->overtake_end_ns, end);
  if (shms__load_32(&ctl->oldest_slot) != head)
    shms__store_32(&ctl->oldest_slot, head);
  uint64_t w = shms__load_64(&ctl->fast), clear = SHMS__FAST_WOKEN;
  if (!(w & (SHMS__FAST_STRICT | SHMS__FAST_WOKEN)))
    return;
  /* The request that made the queue strict has been granted (or has gone) when the oldest left
   * is within the bound: acquires may overtake again. A release that finds the bound passed
   * meanwhile sets it again in its own CAS. A nudge in flight has been answered: this pass ran. */
  if (end == 0 || shms__now_ns() < end)
    clear |= SHMS__FAST_STRICT;
  while ((w & clear) && !ck_pr_cas_64_value(&ctl->fast, w, w & ~clear, &w))
    ;
}

int shms__overtake_nudge(const struct shms__cls *k) {
  uint32_t head = shms__load_32(&k->ctl->oldest_slot);
  if (head == 0 || head > k->nslots)
    return 0;
  /* Whoever occupies the slot now: any queued request's waiter kicking is as good. Only a
   * waiter asleep on it is sure to answer: one that is not waiting at all (an enqueue whose
   * caller waits later) would leave the cell to the next poll, so then the caller kicks. */
  uint64_t w = shms__load_64(&shms__slot_at(k, head - 1)->word);
  while (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED && (w & SHMS__SLOT_SLEEPING) &&
         !(w & SHMS__SLOT_HELP))
    if (shms__slot_cas(k, head - 1, &w, (w | SHMS__SLOT_HELP) & ~(uint64_t)SHMS__SLOT_SLEEPING))
      return 1; /* woken: it kicks when it runs */
  return 0;
}

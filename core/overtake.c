/*
 * Bounded overtaking (docs/protocol.md, "Bounded overtaking"): an acquire may take a free cell
 * ahead of queued requests while none of them has waited the class's bound; once one has, the
 * fast word's STRICT bit makes every release hand its cell to the queue until the baton holder
 * finds the oldest indexed request younger than the bound again.
 */
#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "fair.h"
#include "order.h"
#include "sched.h"
#include "tenant.h"

/* The earlier of two ends of overtaking, 0 standing for none (never). */
static uint64_t earlier(uint64_t a, uint64_t b) { return a == 0 || (b != 0 && b < a) ? b : a; }

/* The end of overtaking and the count of arrivals: one pair (shm/layout.h), [0] and [1]. */
static uint64_t *end_pair(const struct shms__cls *k) { return &k->ctl->overtake_end_ns; }

void shms__overtake_arrived(const struct shms__cls *k, uint64_t enqueue_ns) {
  if (k->overtake_ns == 0)
    return;
  /* Only ever earlier, and counted even when the end is no later than ours already: a pass that
   * read the pair before us then fails its CAS and keeps the earlier of its end and the word's.
   * Uncounted, an arrival that left the end alone was invisible to that pass, which could then
   * replace the end of an older request it granted by a later one, or none, while ours was still
   * waiting for its attention bit to be taken: acquires overtook it past its bound until the
   * next pass (a time slice when the baton holder was descheduled: design/overtaking.md). The
   * pass that indexes the request publishes the same end or, once it is granted, a later one. */
  uint64_t mine = enqueue_ns + k->overtake_ns, *pair = end_pair(k);
  uint64_t cur[2] = {shms__load_64(&pair[0]), shms__load_64(&pair[1])}, set[2];
  do {
    set[0] = earlier(cur[0], mine);
    set[1] = cur[1] + 1;
  } while (!shms__cas_pair(pair, cur, set));
}

void shms__overtake_seen(const struct shms__cls *k, uint64_t seen[2]) {
  /* Two loads, not one snapshot: the pass's CAS compares both words, so a pair torn by an
   * arrival in between only makes it fail and look again. */
  uint64_t *pair = end_pair(k);
  int overtakes = k->overtake_ns != 0;
  seen[0] = overtakes ? shms__load_64(&pair[0]) : 0;
  seen[1] = overtakes ? shms__load_64(&pair[1]) : 0;
}

void shms__overtake_update(const struct shms__cls *k, const uint64_t seen[2], int drained) {
  SHMS__ASSERT(shms__index_owned(k));
  if (k->overtake_ns == 0)
    return;
  struct shms__class_ctl *ctl = k->ctl;
  uint32_t head = ctl->all_head;
  if (k->timed) {
    /* Fair by time, the oldest request need not be next: a tenant charged more waits its turn
     * by design. The bound is kept for the tenant whose turn it is (its oldest request). */
    uint32_t first = shms__fair_first(k);
    head = first >= 1 && first <= k->ntenants ? shms__order_oldest(shms__tenant_at(k, first)) : 0;
  }
  uint64_t end = 0;
  uint32_t gathering = ctl->gather_slot;
  if (gathering != 0) {
    /* A request gathering several cells: every cell freed is its own until it holds them all
     * (core/gather.c). Overtaking it would only put its start off. */
    head = gathering;
    end = 1;
  } else if (head >= 1 && head <= k->nslots) {
    end = shms__slot_at(k, head - 1)->enqueue_ns + k->overtake_ns;
  } else {
    head = 0;
  }
  /* An enqueuer sets its attention bit, then brings the end forward (shms__overtake_arrived).
   * One that did so before `seen` was read had its bit taken by this pass, which indexed its
   * request: `end` counts it (unless the pass's budget ran out first: then keep `seen`). One that
   * did so since has counted itself in the pair, whether or not it moved the end: the CAS fails
   * and the earlier of the two stays. Stored only when it moves: the line is the fast word's, in
   * every acquirer's cache. */
  if (!drained)
    end = earlier(end, seen[0]);
  uint64_t *pair = end_pair(k), cur[2] = {seen[0], seen[1]}, set[2];
  while (cur[0] != end) {
    set[0] = end;
    set[1] = cur[1];
    if (shms__cas_pair(pair, cur, set))
      break;
    end = earlier(end, cur[0]);
  }
  if (shms__load_32(&ctl->oldest_slot) != head)
    shms__store_32(&ctl->oldest_slot, head);
  uint64_t w = shms__load_64(&ctl->fast), clear = SHMS__FAST_WOKEN;
  while (gathering != 0 && SHMS__FAST_QUEUED(w) != 0 && !(w & SHMS__FAST_STRICT) &&
         !ck_pr_cas_64_value(&ctl->fast, w, w | SHMS__FAST_STRICT, &w))
    ;
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

/*
 * Cooperative dispatch (docs/protocol.md, "The dispatcher baton"). Whoever
 * changes state that may allow a grant calls shms__kick: it takes the class's
 * baton with one non-blocking CAS, does a bounded pass, lets go, and then
 * re-checks for work that arrived while it held the baton. A process that
 * fails to take the baton just leaves: the holder's re-check covers it.
 */
#include <ck_pr.h>
#include <ck_sequence.h>
#include <sched.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/hbm.h"
#include "account.h"
#include "fair.h"
#include "quota.h"
#include "report.h"
#include "sched.h"
#include "tenant.h"

/* Candidates (arrivals, grants, expiries) one pass may handle. */
#define PASS_BUDGET 64
/* Passes one kick may run before it hands the rest to a waiter. */
#define MAX_PASSES 4

static uint64_t baton_value(const struct shms *h) { return (1ull << 32) | h->owner; }

static int baton_try(const struct shms *h, const struct shms__cls *k) {
  return shms__load_64(&k->ctl->baton) == 0 && ck_pr_cas_64(&k->ctl->baton, 0, baton_value(h));
}

static int work_pending(const struct shms__cls *k) {
  if (shms__hbm_any(&k->sattn) || shms__hbm_any(&k->tattn) ||
      (k->timed && shms__hbm_any(&k->aattn)))
    return 1;
  uint64_t f = shms__load_64(&k->ctl->fast);
  /* A nudge in flight (WOKEN, set by a release since this holder's last pass): its pass is owed
   * even with no cell free now. The release that set it, or the waiter it nudged, kicked into
   * this holder; if an acquire has taken the cell it freed meanwhile, the next release of that
   * cell finds WOKEN set and does nothing, so without this pass to clear WOKEN the queue would
   * wait for its 1 s poll (docs/protocol.md, "Why no wake-up is lost"). */
  if (f & SHMS__FAST_WOKEN)
    return 1;
  if (shms__load_32(&k->ctl->ring_len) == 0)
    return 0;
  /* A free cell for the ring, or none but a grant due for revocation. */
  return SHMS__FAST_LOW(f) != 0 || shms__revoke_wanted(k, shms__now_ns());
}

/* The histogram bucket of a wait (SHMS_WAIT_BUCKET_LE_NS): seven compares, on the
 * dispatcher's grant path only (the fast path never waits and never comes here). */
static uint32_t wait_bucket(uint64_t waited) {
  static const uint64_t le[SHMS_WAIT_BUCKETS] = SHMS_WAIT_BUCKET_LE_NS;
  uint32_t lo = 0, hi = SHMS_WAIT_BUCKETS - 1; /* the first bound >= waited: le[hi] is the last */
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (waited > le[mid])
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void record_wait(const struct shms__cls *k, uint32_t ref, uint64_t waited) {
  ck_sequence_t *seq = (ck_sequence_t *)&k->ctl->obs_seq;
  struct shms__class_ctl *ctl = k->ctl;
  ck_sequence_write_begin(seq);
  SHMS__STEP(); /* a death here leaves the sequence odd: observers must not hang on it */
  shms__store_64(&ctl->queue_granted, ctl->queue_granted + 1);
  shms__store_64(&ctl->total_wait_ns, ctl->total_wait_ns + waited);
  uint64_t *bucket = &ctl->wait_buckets[wait_bucket(waited)];
  shms__store_64(bucket, *bucket + 1);
  if (waited > ctl->max_wait_ns)
    shms__store_64(&ctl->max_wait_ns, waited);
  /* The tenant's figures too, so that an observer reads a row's grants and waits as one
   * instant without the baton (core/tenantview.c). */
  struct shms__tenant *t = shms__tenant_at(k, ref);
  shms__store_64(&t->granted, t->granted + 1);
  shms__store_64(&t->total_wait_ns, t->total_wait_ns + waited);
  if (waited > t->max_wait_ns)
    shms__store_64(&t->max_wait_ns, waited);
  /* And in the tenant table, which keeps them while the tenant is idle (the record referenced:
   * never folded meanwhile, and only this class's baton holder writes its part). */
  if (t->acct != 0 && k->id >= 0) {
    struct shms__account_class *a = &shms__account_at(k, t->acct)->cls[k->id];
    shms__store_64(&a->grants, a->grants + 1);
    shms__store_64(&a->wait_ns, a->wait_ns + waited);
    if (waited > a->max_wait_ns)
      shms__store_64(&a->max_wait_ns, waited);
  }
  ck_sequence_write_end(seq);
}

/* After a grant attempt to ring head ref: a tenant with work left takes its turn again last. */
static void after_turn(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (k->timed)
    return; /* its next turn is ordered by its charge (shms__fair_granted) */
  if ((t->flags & SHMS__TENANT_INRING) && k->ctl->ring_head == ref)
    shms__index_corrupt |= shms__ring_rotate(k);
}

/* The cell was bound; the request went away meanwhile: give everything back. */
static void grant_lost(struct shms *h, const struct shms__cls *k, uint32_t i, uint32_t c,
                       uint32_t gen) {
  shms__return_and_kick(h, k, c, gen);
  shms__slot_unindexed(k, i);
}

/*
 * The lines grant(i) of tenant ref will write after its first locked instructions, asked for
 * as it begins so that their misses overlap its work. Each request after i takes i's place in an
 * order: the next of its group its treap node and the group's ends (core/order.c), the next by
 * age and in the class's list their back links. The tenant next in turn (the ring's, or its
 * calendar bucket's) takes a back link, and its tenant-table record counts the grant. Among
 * thousands of tenants each is a line of its own, cold, and a locked instruction after a store
 * that missed waits for it. Their places are read from the record and the slot warm_next
 * brought in: no load here waits. Only hints.
 */
static void warm_links(const struct shms__cls *k, const struct shms__tenant *t,
                       const struct shms__slot *s) {
  if (s->grp_next != 0 && s->grp_next <= k->nslots) {
    const struct shms__slot *n = shms__slot_at(k, s->grp_next - 1);
    __builtin_prefetch(&n->prio_left, 1, 3);
    __builtin_prefetch(&n->prio_right, 1, 3);
    __builtin_prefetch(&n->grp_prev, 1, 3);
  }
  if (s->age_next != 0 && s->age_next <= k->nslots)
    __builtin_prefetch(&shms__slot_at(k, s->age_next - 1)->age_prev, 1, 3);
  if (s->all_next != 0 && s->all_next <= k->nslots)
    __builtin_prefetch(&shms__slot_at(k, s->all_next - 1)->all_prev, 1, 3);
  uint32_t after = k->timed ? t->cal_next : t->ring_next;
  if (after != 0 && after <= k->ntenants) {
    const struct shms__tenant *n = shms__tenant_at(k, after);
    __builtin_prefetch(k->timed ? (const void *)&n->cal_prev : (const void *)&n->ring_prev, 1, 3);
  }
  if (t->acct != 0 && t->acct <= k->naccts && k->id >= 0)
    __builtin_prefetch(&shms__account_at(k, t->acct)->cls[k->id], 1, 3);
}

/*
 * Grant indexed request i of ring-head tenant ref. Returns 0 when no cell is
 * free (the pass stops), 1 when the candidate was dealt with either way.
 */
static int grant(struct shms *h, const struct shms__cls *k, uint32_t ref, uint32_t i,
                 uint64_t now) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  if (SHMS__SLOT_STATE(w) != SHMS__SLOT_QUEUED) {
    /* The index holds only INDEXED slots, QUEUED or settled since: anything else is a torn
     * index (attending it would change nothing, and it would be picked again for ever). */
    if (SHMS__SLOT_STATE(w) != SHMS__SLOT_SETTLED || !(w & SHMS__SLOT_INDEXED))
      shms__index_corrupt = 1;
    shms__index_attend(h, k, i); /* settled meanwhile: unlink it */
    return 1;
  }
  if ((uint32_t)shms__load_64(&s->seq) != SHMS__SLOT_SEQ(w)) {
    /* No step leaves a queued request's two sequences apart (its claimer stores the full one
     * before publishing it): the slot is corrupt. A settle by the full sequence never matches
     * the word, and the request would be picked again for ever; the word is authoritative. */
    shms__settle_and_kick(h, k, i, SHMS__SLOT_SEQ(w), 1u << SHMS__SLOT_QUEUED, SHMS_EVIOLATION);
    shms__index_attend(h, k, i);
    return 1;
  }
  warm_links(k, shms__tenant_at(k, ref), s);
  if (s->deadline_ns != 0 && now >= s->deadline_ns) {
    /* Never granted past its deadline; its waiter learns at once. */
    shms__settle_and_kick(h, k, i, s->seq, 1u << SHMS__SLOT_QUEUED, SHMS_EDEADLINE);
    shms__index_attend(h, k, i);
    return 1;
  }
  uint32_t want = SHMS__OPT_CELLS(s->options), quotas = SHMS__QUOTAS_NAMED(s->quotas), full = 0;
  /* A quota with no unit free parks the request: the tenant's next request, or the next
   * tenant, is served meanwhile (docs/protocol.md, "Quotas"). */
  if (quotas != 0 && !shms__quota_take(k, quotas, &full)) {
    shms__index_park(k, i, full);
    return 1;
  }
  int64_t taken = want > 1 ? shms__gather(k, i, want)
                           : shms__cell_take(k, SHMS__TAKE_ANY, s->owner, SHMS__CELL_GRANTED);
  if (taken < 0) {
    if (quotas != 0)
      shms__quota_put(k, quotas);
    return 0;
  }
  /* The lease counts against its tenant: for its limit, for its charge's correction, (a lease
   * of several cells) so that its end looks for its companions, or so that its end gives its
   * quotas back. */
  uint32_t counted = k->cfg->tenant_max_active != 0 || k->timed || want > 1 || quotas != 0,
           c = (uint32_t)taken, gen;
  uint64_t token, name[SHMS__NAME_WORDS];
  memcpy(name, s->tenant_name, sizeof name); /* NUL-padded by the enqueuer's strncpy */
  SHMS__STEP();
  if (counted)
    ck_pr_inc_32(&shms__tenant_at(k, ref)->active);
  shms__store_32(&k->cells[c].uid, shms__load_32(&s->uid)); /* with the name: see layout.h */
  /* Started at the pass's time: the release measures a counted lease on the same clock. */
  if (shms__cell_start(k, c, counted ? ref : 0, name, i + 1, now, &gen, &token) != SHMS_OK) {
    /* Settle the request first, so its waiter learns why, before the quarantine may fail
     * everyone else for lack of cells. */
    shms__settle_and_kick(h, k, i, s->seq, 1u << SHMS__SLOT_QUEUED, SHMS_ESEQEXHAUSTED);
    shms__index_attend(h, k, i);
    if (quotas != 0) /* the quarantine below ends no lease that holds them */
      shms__quota_put(k, quotas);
    shms__exhaust_and_check(h, k, c);
    if (want > 1)
      shms__gather_drop(k); /* the other cells it gathered go back */
    return 1;
  }
  if (quotas != 0) /* before the grant is published: its ender reads it */
    shms__store_64(&k->qheld[c], SHMS__QHELD(gen, quotas));
  if (want > 1)
    shms__gather_bind(k, c, gen, want);
  if (k->timed)
    shms__index_corrupt |= shms__fair_granted(k, ref, c, want);
  SHMS__STEP();
  shms__store_32(&s->cell, c);         /* waiters read it while polling */
  shms__store_32(&s->generation, gen); /* settlers read it to return the cell */
  s->token = token;
  /* Read now: once the CAS below hands the slot over, it may be freed and reused at once. */
  uint64_t waited = now > s->enqueue_ns ? now - s->enqueue_ns : 0, seq = s->seq;
  SHMS__STEP();
  shms__index_unlink(k, i);
  SHMS__STEP();
  after_turn(k, ref);
  for (;;) {
    if (SHMS__SLOT_STATE(w) != SHMS__SLOT_QUEUED) {
      grant_lost(h, k, i, c, gen);
      return 1;
    }
    /* The cell, generation and token above are visible before the state says GRANTED. */
    if (shms__slot_grant(k, i, s->seq, &w))
      break;
  }
  SHMS__STEP();
  shms__fast_queue(k, -1);
  shms__revoke_note(k, c);
  if (k->cfg->mode == SHMS_MODE_WORKER)
    shms__workcell_wake(k, c);
  SHMS__STEP();
  record_wait(k, ref, waited);
  shms__note_granted(h, k, i, seq, c, waited);
  return 1;
}

/* Ask a waiter to carry on dispatching after this process's bounded share. */
static void hand_off(const struct shms__cls *k, uint64_t now) {
  int64_t i = shms__hbm_peek(&k->sattn);
  if (i < 0 && k->ctl->ring_head != 0) {
    uint32_t first = shms__index_select(k, k->ctl->ring_head, now);
    i = first ? (int64_t)first - 1 : -1;
  }
  if (i < 0)
    return;
  uint64_t w = shms__load_64(&shms__slot_at(k, (uint32_t)i)->word);
  while (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED && !(w & SHMS__SLOT_HELP) &&
         !shms__slot_ask_help(k, (uint32_t)i, &w))
    ;
}

/*
 * The next pass's first candidate, its record and its first request asked for into the cache
 * as this pass ends: among thousands of tenants they are cold, and the next grant (another
 * release's pass, usually much later) would wait for each line in turn. One load waits here,
 * the record's line with the request's place. Only a hint: anything may change before then.
 */
static void warm_next(const struct shms__cls *k) {
  uint32_t ref = k->timed ? shms__fair_first(k) : k->ctl->ring_head;
  if (ref == 0 || ref > k->ntenants)
    return;
  const struct shms__tenant *t = shms__tenant_at(k, ref);
  for (size_t l = 0; l < sizeof *t / SHMS__LINE; l++)
    __builtin_prefetch((const char *)t + SHMS__LINE * l, 1, 3);
  uint32_t i = shms__load_32((uint32_t *)&t->prio_first);
  if (i == 0 || i > k->nslots)
    return;
  const char *s = (const char *)shms__slot_at(k, i - 1);
  for (size_t l = 0; l < sizeof(struct shms__slot) / SHMS__LINE; l++)
    __builtin_prefetch(s + SHMS__LINE * l, 1, 3);
}

/* One bounded pass at now (0: it reads the clock): arrivals and settled requests, tenants, then
 * grants. Returns how much it did; *exhausted says whether it used its whole budget. */
static int pass(struct shms *h, const struct shms__cls *k, uint64_t now, int *exhausted) {
  if (shms__index_corrupt)
    shms__index_rebuild(k);
  if (k->timed) /* weights and teams changed by policy take effect from this pass's grants */
    shms__index_corrupt |= shms__tenant_refresh(k);
  /* The end of overtaking as found before the arrivals are taken: what the update at the end may
   * replace (shms__overtake_update). */
  uint64_t seen[2];
  if (now == 0)
    now = shms__now_ns();
  shms__overtake_seen(k, seen);
  int budget = PASS_BUDGET, drained = 0;
  for (int64_t i; budget > 0 && !(drained = (i = shms__hbm_take(&k->sattn)) < 0); budget--) {
    SHMS__STEP();
    shms__index_attend(h, k, (uint32_t)i);
  }
  int tenants = 0;
  for (int64_t t; tenants < PASS_BUDGET && (t = shms__hbm_take(&k->tattn)) >= 0; tenants++)
    shms__index_attend_tenant(k, (uint32_t)t + 1);
  if (k->timed) {
    int torn = 0;
    tenants += shms__tenant_take_fast(k, PASS_BUDGET, &torn);
    shms__index_corrupt |= torn;
  }
  if (k->ctl->quota_parked != 0) {
    /* A grant not accepted in time holds its quotas' units as well as its cell: a request parked
     * for one of them has it revoked, as a request waiting for a cell does. */
    if (shms__revoke_wanted(k, now))
      (void)shms__revoke_due(h, k, now);
    shms__index_unpark_room(k); /* a unit came free for a request parked for it? */
  }
  if (k->ctl->ring_head == 0 && shms__load_32(&k->ctl->ring_len) != 0)
    shms__index_corrupt = 1;  /* a ring that counts tenants but has no head */
  (void)shms__gather_next(k); /* a gathering request that ended gives its cells back now */
  for (int cells = 1, swept = 0; budget > 0 && k->ctl->ring_head != 0 && !shms__index_corrupt;
       budget--) {
    if (!cells) {
      /* Work waits and no cell is free: a grant not accepted in time goes to it. One sweep a
       * pass: it revokes every grant due by now, so on a healthy segment a second one could only
       * find grants this pass just made; on a corrupt one, a sweep that kept reporting a cell
       * freed that no grant can take would give the round back for ever. */
      if (swept++ || !shms__revoke_wanted(k, now) || shms__revoke_due(h, k, now) == 0)
        break;
    }
    /* A request of several cells whose turn came keeps it until it holds them all. */
    uint32_t pick = shms__gather_next(k);
    uint32_t ref = pick != 0  ? shms__slot_at(k, pick - 1)->tenant
                   : k->timed ? shms__fair_first(k)
                              : k->ctl->ring_head;
    /* Every index read from the segment is checked before use: a bad one means a torn or
     * corrupt index, rebuilt from the slots' state words. None (0) while the ring has a head:
     * an order of turns that lost its members. */
    if (ref == 0 || ref > k->ntenants) {
      shms__index_corrupt = 1;
      break;
    }
    if (pick == 0)
      pick = shms__index_select(k, ref, now);
    if (pick == 0 || pick > k->nslots)
      shms__index_corrupt = 1; /* the ring holds only tenants with a queued request */
    if (shms__index_corrupt)
      break;
    cells = grant(h, k, ref, pick - 1, now);
    budget += !cells; /* no grant was made: not a candidate spent */
  }
  if (shms__index_corrupt)
    shms__index_rebuild(k);
  shms__overtake_update(k, seen, drained);
  if (!shms__index_corrupt)
    warm_next(k);
  *exhausted = budget == 0;
  return PASS_BUDGET - budget + tenants;
}

/*
 * Holding the baton: pass, let go, re-check, after every pass: a holder that let go without
 * looking would leave work published meanwhile by a process whose kick found the baton held
 * to the poll (the spin model found both earlier versions of this loop doing so). Past
 * MAX_PASSES a pass that used its whole budget also asks a waiter to take over.
 *
 * What ends the loop is the re-check finding nothing. A pass finds nothing while the re-check
 * says there is work only when work arrived during the pass and another kick took the baton
 * and the work in between: the next pass does something. IDLE_LIMIT idle passes in a row mean
 * a state no pass can progress on (the pass rebuilds the index it can tell is torn; this is
 * for what it cannot tell): a holder must never spin inside an operation, which recovery
 * waits for, so it asks a waiter to carry on and lets go.
 */
#define IDLE_LIMIT 64
/*
 * RUN_LIMIT passes in all end the loop the same way, whatever they did: a pass that keeps
 * finding work it cannot finish (a corrupt segment whose state no pass, settle or rebuild
 * changes) must not keep its holder for ever either. A healthy holder gets there only while
 * work keeps arriving through every one of them, and the waiter it hands off to carries on.
 */
#define RUN_LIMIT 256

/* now: the first pass's time, or 0. */
static void run(struct shms *h, const struct shms__cls *k, uint64_t now) {
  for (int passes = 1, idle = 0, total = 1;; passes += passes < MAX_PASSES, total++, now = 0) {
    int exhausted, did = pass(h, k, now, &exhausted);
    idle = did ? 0 : idle + 1;
    int stop = idle >= IDLE_LIMIT || total >= RUN_LIMIT;
    if ((exhausted && passes >= MAX_PASSES) || stop)
      hand_off(k, shms__now_ns());
    SHMS__STEP(); /* a holder dead between its pass and letting go: recovery takes the baton */
    /* An atomic exchange: everything the pass wrote is visible before the baton reads free,
     * and (a full barrier) the re-check below is not ordered before it. A process that failed to
     * take the baton published its work first, so one of us sees the other. */
    shms__fas_64(&k->ctl->baton, 0);
    if (stop || !work_pending(k) || !baton_try(h, k))
      return;
  }
}

void shms__kick_at(struct shms *h, const struct shms__cls *k, uint64_t now) {
  ck_pr_fence_memory(); /* our published change is visible before we look at the baton */
  if (shms__load_64(&k->ctl->baton) != 0)
    return; /* its holder re-checks before letting go */
  shms__op_enter(h, k);
  if (baton_try(h, k))
    run(h, k, now);
  shms__op_leave(h, k);
}

void shms__kick(struct shms *h, const struct shms__cls *k) { shms__kick_at(h, k, 0); }

void shms__unlink_settled(struct shms *h, const struct shms__cls *k, uint32_t i) {
  shms__op_enter(h, k);
  /* Directly, when we can: the attention bit's way costs a locked set and a locked take per
   * level of the bitmap, which grows with the queue. */
  if (baton_try(h, k)) {
    SHMS__STEP();
    shms__index_attend(h, k, i);
    run(h, k, 0);
  } else {
    shms__hbm_set(&k->sattn, i);
    shms__kick(h, k);
  }
  shms__op_leave(h, k);
}

static int holder_dead(const struct shms *h, uint64_t baton) {
  return shms__owner_dead(h, (uint32_t)baton);
}

void shms__baton_check_holder(struct shms *h, const struct shms__cls *k) {
  uint64_t b = shms__load_64(&k->ctl->baton);
  if (b == 0) {
    shms__kick(h, k);
    return;
  }
  if (b == baton_value(h) || !holder_dead(h, b))
    return;
  /* Its holder died mid-pass and may have torn the index: rebuild it from the slots. */
  shms__op_enter(h, k);
  if (ck_pr_cas_64(&k->ctl->baton, b, baton_value(h))) {
    shms__index_rebuild(k);
    run(h, k, 0);
  }
  shms__op_leave(h, k);
}

int shms__baton_acquire(struct shms *h, const struct shms__cls *k, uint64_t timeout_ns) {
  uint64_t until = shms__real_now_ns() + timeout_ns;
  for (;;) {
    if (baton_try(h, k))
      return SHMS_OK;
    uint64_t b = shms__load_64(&k->ctl->baton);
    if (b != 0 && holder_dead(h, b) && ck_pr_cas_64(&k->ctl->baton, b, baton_value(h))) {
      shms__index_rebuild(k);
      return SHMS_OK;
    }
    if (shms__real_now_ns() >= until)
      return SHMS_ETIMEDOUT;
    sched_yield(); /* a live holder finishes a bounded pass soon */
  }
}

void shms__baton_done(struct shms *h, const struct shms__cls *k) { run(h, k, 0); }

void shms__fail_all(struct shms *h, const struct shms__cls *k, int reason) {
  for (uint32_t i = 0; i < k->nslots; i++) {
    struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (st == SHMS__SLOT_QUEUED || st == SHMS__SLOT_GRANTED)
      shms__settle_and_kick(h, k, i, shms__load_64(&s->seq),
                            1u << SHMS__SLOT_QUEUED | 1u << SHMS__SLOT_GRANTED, reason);
  }
  shms__kick(h, k);
}

void shms__check_all_quarantined(struct shms *h, const struct shms__cls *k) {
  if (shms__load_32(&k->ctl->quarantined) >= k->ncells)
    shms__fail_all(h, k, SHMS_EQUARANTINED);
}

void shms__follow(struct shms *h, const struct shms__cls *k, enum shms__next next) {
  if (next == SHMS__NEXT_NONE)
    return;
  shms__op_enter(h, k);
  if (next & SHMS__NEXT_KICK)
    shms__kick(h, k);
  if (next & SHMS__NEXT_CHECK_QUARANTINED)
    shms__check_all_quarantined(h, k);
  shms__op_leave(h, k);
}

int shms__settle_and_kick(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                          unsigned from_mask, int reason) {
  switch (shms__slot_settle(h, k, i, seq, from_mask, reason)) {
  case SHMS__SETTLED_UNLINK:
    shms__unlink_settled(h, k, i);
    return 1;
  case SHMS__SETTLED_KICK:
    shms__kick(h, k);
    return 1;
  default:
    return 0;
  }
}

int shms__return_and_kick(struct shms *h, const struct shms__cls *k, uint32_t c, uint32_t gen) {
  if (!shms__cell_return(k, c, gen))
    return 0;
  shms__kick(h, k);
  return 1;
}

int shms__quarantine_and_check(struct shms *h, const struct shms__cls *k, uint32_t c,
                               uint64_t expect, int reason) {
  if (!shms__cell_quarantine(k, c, expect, reason))
    return 0;
  shms__check_all_quarantined(h, k);
  return 1;
}

int shms__exhaust_and_check(struct shms *h, const struct shms__cls *k, uint32_t c) {
  if (!shms__cell_exhausted(k, c))
    return 0;
  shms__check_all_quarantined(h, k);
  return 1;
}

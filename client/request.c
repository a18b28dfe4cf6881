/*
 * Enqueue, wait, acquire, try_acquire: a request from claim to acceptance
 * (docs/protocol.md, "Request slots").
 */
#include <ck_pr.h>
#include <string.h>

#include "../core/held.h"
#include "../core/report.h"
#include "../core/tally.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/futex.h"
#include "../shm/hbm.h"
#include "client.h"

void shms__slot_fill(struct shms *h, struct shms__slot *s, const shms_request *req, size_t len,
                     unsigned options, const char *key, uint32_t quotas, uint64_t seq) {
  s->deadline_ns = req->deadline_ns;
  s->priority = req->priority;
  shms__store_32(&s->owner, h->owner); /* reapers read it without owning the slot */
  shms__store_32(&s->uid, shms__load_32(&h->proc->uid)); /* cancellers judge by it */
  s->tenant = 0;
  shms__store_32(&s->cell, 0);
  s->payload_len = (uint32_t)len;
  s->result_len = 0;
  s->result_status = 0;
  s->options = options;
  s->quotas = quotas;
  strncpy(s->tenant_name, req->tenant, sizeof s->tenant_name);
  s->tenant_name[SHMS_TENANT_MAX] = '\0';
  memset(s->activation, 0, sizeof s->activation);
  if (req->activation != NULL)
    strncpy(s->activation, req->activation, SHMS_TENANT_MAX);
  memset(s->key, 0, sizeof s->key);
  if (key != NULL)
    strncpy(s->key, key, SHMS_KEY_MAX);
  shms__store_64(&s->waiters, shms__waiters_first(seq, options));
}

int shms__sleep_on(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                   uint64_t until_real) {
  struct shms__slot *s = shms__slot_at(k, i);
  if (!(w & SHMS__SLOT_SLEEPING)) {
    if (!shms__slot_flag(k, i, &w, SHMS__SLOT_SLEEPING))
      return 0; /* it changed: look again */
    w |= SHMS__SLOT_SLEEPING;
  }
  /* Shared by the process's threads: racy by design (any of them may do the check), so atomic. */
  uint64_t now = shms__real_now_ns(), *due_p = &h->poll_due[k->id], due = shms__load_64(due_p);
  if (due == 0 || due > now + SHMS__POLL_NS)
    shms__store_64(due_p, due = now + SHMS__POLL_NS);
  uint64_t limit = until_real != 0 && until_real < due ? until_real : due;
  struct shms__sleeper me = {.word64 = &s->word, .bit = SHMS__SLOT_SLEEPING};
  if (shms__sleeper_add(h, &me))
    return 0; /* interrupted: the caller's loop returns */
  shms__futex_wait(shms__slot_futex(s), (uint32_t)w, limit);
  shms__sleeper_remove(h, &me);
  if ((now = shms__real_now_ns()) < due || !ck_pr_cas_64(due_p, due, now + SHMS__POLL_NS))
    return 0;
  return 1;
}

int shms__spin_then_sleep(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                          uint64_t until_real, int kind) {
  /* Only before announcing: a waiter that already said it sleeps (woken by its poll) sleeps.
   * A lease class's queued requests are its waiters, each of whom may spin, and each holder but
   * the one whose release we wait for needs a CPU too: a holder descheduled by a spinner on its
   * CPU gives nothing back until the spinner sleeps (design/overtaking.md, "A spinning waiter
   * must not keep the holder off its CPU"). A worker class's are jobs, whose clients wait
   * however many each has in flight. */
  uint32_t waiters = 1;
  if (k->cfg->mode == SHMS_MODE_LEASE) {
    uint64_t f = shms__load_64(&k->ctl->fast);
    uint32_t held = shms__cells_held(k, f);
    waiters = SHMS__FAST_QUEUED(f) + (held > 1 ? held - 1 : 0);
  }
  struct shms__slot *s = shms__slot_at(k, i);
  if (!(w & SHMS__SLOT_SLEEPING) &&
      shms__spin(h, &h->spin[k->id][kind], &s->word, w, until_real, waiters) != SHMS__SPUN_NOT)
    return 0; /* changed, or interrupted: the caller's loop looks again */
  return shms__sleep_on(h, k, i, w, until_real);
}

void shms__poll_checks(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq) {
  SHMS__OP_VOID(h, k, shms__slot_reattend(k, i, seq));
  shms__baton_check_holder(h, k);
  shms__stamp_leases(k); /* a waiter learns how long the holders it waits for have held */
}

void shms__help(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w) {
  if (shms__slot_help_taken(k, i, &w))
    shms__kick(h, k);
}

/*
 * Answer what the dispatcher's side asked of the waiter of queued request i (word w): HELP,
 * carry on its work (shms__help: one kick); LATE, its grant was revoked while the waiter was
 * away (stopped, descheduled): back into line at its old place (shms__revoke_unpark). Returns 1
 * if it answered one (the caller reads the word again), 0 if neither is set. Both wait loops
 * (the enqueue's, for indexing, and shms_wait's) answer them here.
 *
 * Both flags can be set at once (a hand-off picks a LATE request whose attention bit a
 * recovery raised again), and the order of the answers does not matter, though the two loops
 * once answered them in opposite orders: each answer is one CAS on the slot word that clears
 * its own flag and keeps the other, then a kick; neither needs the other's first; and the
 * caller reads the word again after each, so the other is answered on its next turn, before it
 * can sleep (a sleep compares the word it read, with the flag still set, and returns at once).
 */
static int answer_flags(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w) {
  if (w & SHMS__SLOT_HELP) {
    shms__help(h, k, i, w);
    return 1;
  }
  if (w & SHMS__SLOT_LATE) {
    SHMS__OP_VOID(h, k, shms__follow(h, k, shms__revoke_unpark(k, i, w)));
    return 1;
  }
  return 0;
}

/* Settle our own fresh request if a drain or total quarantine raced its publication. */
void shms__recheck_after_publish(struct shms *h, const struct shms__cls *k, uint32_t i,
                                 uint64_t seq) {
  int reason = shms__segment_state(h) != SHMS_SEG_ACTIVE          ? SHMS_ESHUTDOWN
               : shms__load_32(&k->ctl->quarantined) >= k->ncells ? SHMS_EQUARANTINED
                                                                  : 0;
  if (reason != 0)
    shms__settle_and_kick(h, k, i, seq, 1u << SHMS__SLOT_QUEUED, reason);
}

static int refused(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                   int reason) {
  SHMS__OP_VOID(h, k, shms__job_collect(h, k, i, seq));
  switch (reason) {
  case SHMS_EDUPACT:
    return shms__fail(reason, "activation id is already live in class %s", shms_class_name(k->id));
  case SHMS_EQUEUEFULL:
    return shms__fail(reason, "class %s: the tenant table is full (max-tenants)",
                      shms_class_name(k->id));
  case SHMS_EWOULDBLOCK: /* shms_submit_key's: another job of the key went first */
    return shms__fail(reason, "class %s: a job of the same key went first", shms_class_name(k->id));
  default:
    return shms__fail(reason, "request refused: %s", shms_strerror(reason));
  }
}

int shms_enqueue(shms_t *h, const shms_request *req, shms_ticket *ticket) {
  struct shms__cls *k = NULL;
  int rc = shms__check_request(h, req, SHMS_MODE_LEASE, ticket, "ticket", &k, NULL);
  if (rc != SHMS_OK)
    return rc;
  uint32_t quotas = 0;
  if (req->nquotas != 0 && (rc = shms__check_quotas(k, req, &quotas)) != SHMS_OK)
    return rc;
  unsigned cells = req->cells > 1 ? req->cells << SHMS__OPT_CELLS_SHIFT : 0;
  return shms__enqueue_slot(h, k, req, NULL, 0, cells, NULL, quotas, ticket);
}

uint64_t shms__deadline_real(uint64_t deadline_ns) {
  if (deadline_ns == 0)
    return 0;
  uint64_t now = shms__now_ns();
  return shms__real_now_ns() + (deadline_ns > now ? deadline_ns - now : 0);
}

int shms__held_still(uint64_t deadline_ns, const char *where) {
  if (deadline_ns != 0 && shms__now_ns() >= deadline_ns)
    return shms__fail(SHMS_EDEADLINE, "deadline passed while %s; %s", shms_last_error_detail(),
                      where);
  return shms__fail(SHMS_ETIMEDOUT, "the request is still queued (%s)", shms_last_error_detail());
}
#define HELD_QUEUED "the request ends when the class goes again, never granted"

uint64_t shms__held_limit(uint64_t deadline_ns, uint64_t until_real, uint64_t timeout_ns) {
  uint64_t limit = shms__deadline_real(deadline_ns);
  if (timeout_ns == 0)
    return shms__real_now_ns();
  return until_real != 0 && (limit == 0 || until_real < limit) ? until_real : limit;
}

/* Claim a slot, fill it and publish it as QUEUED: one operation. */
static int publish(struct shms *h, struct shms__cls *k, const shms_request *req,
                   const void *payload, size_t len, unsigned options, const char *key,
                   uint32_t quotas, uint32_t *index, uint64_t *seq_out) {
  int rc;
  uint32_t i = 0;
  uint64_t seq;
  if ((rc = shms__slot_claim(k, &i, &seq)) != SHMS_OK) {
    shms__count_rejected(k, rc);
    shms__note_refused(h, k, req->tenant, rc);
    return shms__fail(rc, "class %s: all %u request slots are in use", shms_class_name(k->id),
                      k->nslots);
  }
  struct shms__slot *s = shms__slot_at(k, i);
  SHMS__STEP();
  shms__slot_fill(h, s, req, len, options, key, quotas, seq);
  if (len > 0)
    memcpy(shms__slot_payload(k, i), payload, len); /* the one copy in */
  shms__owned_add(h, k, i); /* on our record before anyone can see it queued */
  /* Count it queued before it can be granted: a grant takes it off the count. */
  SHMS__STEP();
  shms__fast_queue(k, 1);
  /* The request's time is its publication's, taken at the last moment before the QUEUED store,
   * the first thing that can show the request to anyone (a pass that takes a stale attention
   * bit of the slot indexes it from then on, by this time): its wait, its age and the end of its
   * overtaking count from here. An enqueuer descheduled while it fills and publishes (a time
   * slice, 4 ms, on a busy machine) is not queued meanwhile, and nobody can grant what nobody
   * sees: stamped as it filled the slot, its own delay read as a queue wait past the bound
   * (docs/protocol.md, "Request slots"). */
  s->enqueue_ns = shms__now_ns();
  shms__slot_publish(k, i, seq);
  SHMS__STEP();
  shms__hbm_set(&k->sattn, i);
  shms__overtake_arrived(k, s->enqueue_ns); /* after the bit: docs/protocol.md */
  SHMS__STEP();
  shms__recheck_after_publish(h, k, i, seq);
  shms__kick(h, k);
  *index = i;
  *seq_out = seq;
  return SHMS_OK;
}

int shms__enqueue_slot(struct shms *h, struct shms__cls *k, const shms_request *req,
                       const void *payload, size_t len, unsigned options, const char *key,
                       uint32_t quotas, shms_ticket *ticket) {
  uint32_t i = 0;
  uint64_t seq = 0;
  /* A class held still past the request's deadline (a recovery or check, slow or stopped):
   * the deadline is kept, and nothing was queued. */
  int rc = shms__op_enter_until(h, k, shms__deadline_real(req->deadline_ns));
  if (rc != SHMS_OK)
    return shms__held_still(req->deadline_ns, "nothing was queued");
  rc = publish(h, k, req, payload, len, options, key, quotas, &i, &seq);
  shms__op_leave(h, k);
  if (rc != SHMS_OK)
    return rc;
  struct shms__slot *s = shms__slot_at(k, i);
  /* Return once the dispatcher has indexed the request or refused it. */
  for (;;) {
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    /* Indexed, or already past the queue (granted, taken by a worker, even completed): the
     * ticket's holder collects what follows. Any other end this early is a refusal. */
    if ((st == SHMS__SLOT_QUEUED && (w & SHMS__SLOT_INDEXED)) || st == SHMS__SLOT_GRANTED ||
        st == SHMS__SLOT_RUNNING || (st == SHMS__SLOT_SETTLED && SHMS__SLOT_REASON(w) == SHMS_OK))
      break;
    if (st == SHMS__SLOT_SETTLED)
      return refused(h, k, i, seq, SHMS__SLOT_REASON(w));
    if (answer_flags(h, k, i, w)) /* LATE: granted and revoked before we looked */
      continue;
    if (shms__spin_then_sleep(h, k, i, w, 0, 0))
      shms__poll_checks(h, k, i, seq);
    else
      shms__kick(h, k);
  }
  *ticket =
      (shms_ticket){.cls = (uint32_t)k->id, .slot = i, .seq = seq, .incarnation = h->incarnation};
  return SHMS_OK;
}

static void make_lease(const struct shms *h, const struct shms__cls *k, uint32_t c, uint32_t gen,
                       uint64_t token, shms_lease *lease) {
  *lease = (shms_lease){.cls = (uint32_t)k->id,
                        .cell = c,
                        .generation = gen,
                        .cells = 1,
                        .token = token,
                        .incarnation = h->incarnation};
}

/*
 * GRANTED -> accepted: re-check drain and deadline, then win the slot
 * against any canceller with one CAS, then take the cell as ours. Returns
 * SHMS_OK with *lease, or SHMS__LOOK_AGAIN when the slot changed under us.
 */
static int accept_op(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                     shms_lease *lease) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t seq = s->seq;
  int late = s->deadline_ns != 0 && shms__now_ns() >= s->deadline_ns;
  if (late || shms__segment_state(h) != SHMS_SEG_ACTIVE) {
    shms__settle_and_kick(h, k, i, seq, 1u << SHMS__SLOT_GRANTED,
                          late ? SHMS_EDEADLINE : SHMS_ESHUTDOWN);
    return SHMS__LOOK_AGAIN;
  }
  ck_pr_fence_load(); /* the grant's cell and token were written before GRANTED */
  uint32_t c = s->cell, gen = s->generation, cells = SHMS__OPT_CELLS(s->options);
  uint64_t token = s->token;
  if (c >= k->ncells || !shms__slot_accept(k, i, w, seq))
    return SHMS__LOOK_AGAIN;
  SHMS__STEP();
  shms__owned_remove(h, k, i); /* ours alone to free now: off our record first */
  int taken = shms__cell_accept(k, c, gen, h->owner);
  SHMS__STEP();
  if (!taken) {
    /* Never hand out a lease on a cell this acceptance did not take. */
    shms__slot_free(k, i);
    return shms__fail(SHMS_EVIOLATION, "cell %u was not granted to this request", c);
  }
  shms__cell_count_lease(k, c);
  shms__held_record(k, c, gen, seq); /* its ticket goes on naming the lease (core/held.h) */
  shms__slot_free(k, i);             /* a lease-mode request gives its slot back once accepted */
  make_lease(h, k, c, gen, token, lease);
  lease->cells = cells;
  return SHMS_OK;
}

/* queued_step's answer when the waiter is to sleep (until *limit). */
#define QUEUED_SLEEP 2

/* wait_queued's steps inside its operation: SHMS_OK to look again, an error to end the wait,
 * or QUEUED_SLEEP with the time to sleep until in *limit. */
static int queued_step(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                       uint64_t until_real, uint64_t timeout_ns, uint64_t *limit) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t now = shms__now_ns(), real = shms__real_now_ns();
  if (s->deadline_ns != 0 && now >= s->deadline_ns) {
    shms__settle_and_kick(h, k, i, s->seq, 1u << SHMS__SLOT_QUEUED, SHMS_EDEADLINE);
    return SHMS_OK;
  }
  if (answer_flags(h, k, i, w))
    return SHMS_OK;
  /* A grant due for revocation while no cell is free is revoked by whoever waits for a cell;
   * else we sleep no later than the oldest grant's due time. */
  uint64_t due;
  enum shms__next revoke = shms__revoke_poll(k, &due);
  shms__follow(h, k, revoke);
  if (revoke != SHMS__NEXT_NONE && shms__load_64(&s->word) != w)
    return SHMS_OK; /* the pass it ran may have granted us: look again */
  if (timeout_ns == 0 || (until_real != 0 && real >= until_real))
    return shms__fail(SHMS_ETIMEDOUT, "the request is still queued");
  if (shms__interrupted(h))
    return shms__fail(SHMS_ETIMEDOUT, "the request is still queued (the wait was interrupted)");
  *limit = shms__sleep_limit(s, until_real);
  if (due != 0 && (*limit == 0 || due < *limit))
    *limit = due;
  return QUEUED_SLEEP;
}

/*
 * The request is still queued: expire it, answer the dispatcher's flags, or sleep. The deadline
 * comes first: a request past it ends so whatever the flags say, and its settle kicks as HELP's
 * answer would (the settle clears HELP; LATE means nothing on a settled request).
 *
 * Everything before the sleep is one operation, entered no later than the wait may last: a
 * class held still by a recovery or a check (slow, or stopped) is waited out asleep, and the
 * deadline and the wait's timeout are kept meanwhile.
 */
static int wait_queued(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                       uint64_t until_real, uint64_t timeout_ns) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t limit = shms__held_limit(s->deadline_ns, until_real, timeout_ns);
  if (shms__op_enter_until(h, k, limit) != SHMS_OK)
    return shms__held_still(s->deadline_ns, HELD_QUEUED);
  int rc = queued_step(h, k, i, w, until_real, timeout_ns, &limit);
  shms__op_leave(h, k);
  if (rc != QUEUED_SLEEP)
    return rc;
  if (shms__spin_then_sleep(h, k, i, w, limit, 1) &&
      shms__op_enter_until(h, k, shms__held_limit(s->deadline_ns, until_real, timeout_ns)) ==
          SHMS_OK) {
    /* Slept a whole poll interval: make sure nobody dead is holding the class up, not even a
     * holder, whom only the supervisor would otherwise find. */
    shms__poll_checks(h, k, i, s->seq);
    shms__reap_unaccepted(h, k);
    shms__op_leave(h, k);
    shms__reap_dead_holders(h, k); /* outside: it may recover the class, which freezes it */
  }
  return SHMS_OK;
}

uint64_t shms__sleep_limit(const struct shms__slot *s, uint64_t until_real) {
  /* Wake at the deadline itself, not at the next poll. */
  uint64_t now = shms__now_ns(), real = shms__real_now_ns(), until = until_real;
  if (s->deadline_ns != 0 && s->deadline_ns > now &&
      (until == 0 || real + (s->deadline_ns - now) < until))
    until = real + (s->deadline_ns - now);
  return until;
}

int shms_wait(shms_t *h, const shms_ticket *ticket, uint64_t timeout_ns, shms_lease *lease) {
  struct shms__cls *k = NULL;
  uint32_t i = 0;
  int rc = shms__check_ticket(h, ticket, lease, "lease", &k, &i);
  if (rc != SHMS_OK)
    return rc;
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t until_real = shms__wait_end(timeout_ns), w;
  for (;;) {
    if ((rc = shms__ticket_live(h, s, ticket, "request", &w)) != SHMS_OK)
      return rc;
    uint32_t st = SHMS__SLOT_STATE(w);
    /* Held still past the wait's end, it ends (held_still); a settled request then stays on
     * our record, which the next operation or the detach collects. */
    uint64_t limit = shms__held_limit(s->deadline_ns, until_real, timeout_ns);
    if (st == SHMS__SLOT_SETTLED) {
      int reason = SHMS__SLOT_REASON(w);
      if (shms__op_enter_until(h, k, limit) == SHMS_OK) {
        shms__owned_collect(h, k, i);
        shms__op_leave(h, k);
      }
      return shms__fail(reason, "%s", shms_strerror(reason));
    }
    if (st == SHMS__SLOT_GRANTED) {
      if (shms__op_enter_until(h, k, limit) != SHMS_OK)
        return shms__held_still(s->deadline_ns, HELD_QUEUED);
      rc = accept_op(h, k, i, w, lease);
      shms__op_leave(h, k);
      if (rc != SHMS__LOOK_AGAIN)
        return rc;
      continue;
    }
    if ((rc = wait_queued(h, k, i, w, until_real, timeout_ns)) != SHMS_OK)
      return rc;
  }
}

/* The fast path: a free cell and nobody queued; one CAS on the fast word (and one on the cell
 * in a class too large for the fast word's map of free cells). SHMS__LOOK_AGAIN: frozen, enter
 * the ordinary way (which waits) and look again. */
static inline __attribute__((always_inline)) int take_now_op(struct shms *h,
                                                             const struct shms__cls *k,
                                                             const uint64_t *tenant, int stamp,
                                                             shms_lease *lease, int entering) {
  int64_t r = shms__cell_take(k, entering ? SHMS__TAKE_ENTERING : SHMS__TAKE_UNQUEUED, h->owner,
                              SHMS__CELL_LEASED);
  if (r == SHMS__TAKE_FROZEN)
    return SHMS__LOOK_AGAIN;
  if (r == SHMS__TAKE_NONE)
    return SHMS_EWOULDBLOCK;
  uint32_t c = (uint32_t)r, gen;
  uint64_t token;
  SHMS__STEP();
  shms__store_32(&k->cells[c].uid, shms__load_32(&h->proc->uid)); /* with the name: layout.h */
  int rc = shms__cell_start(k, c, 0, tenant, 0, stamp ? shms__fast_stamp(k) : 0, &gen, &token);
  if (rc != SHMS_OK) {
    shms__exhaust_and_check(h, k, c);
    return shms__fail(rc, "class %s: cell %u's token sequence is exhausted (cell quarantined)",
                      shms_class_name(k->id), c);
  }
  shms__cell_count_lease(k, c);
  shms__tally_lease(h, k, tenant);
  make_lease(h, k, c, gen, token, lease);
  return SHMS_OK;
}

/*
 * The fast path as one operation: marked without a fence of its own, since its
 * first step is the locked CAS that both reserves and checks FROZEN.
 */
__attribute__((noinline, cold)) static int take_entered(struct shms *h, const struct shms__cls *k,
                                                        const uint64_t *tenant, int stamp,
                                                        shms_lease *lease, uint64_t until_real) {
  if (shms__op_enter_until(h, k, until_real) != SHMS_OK)
    return SHMS_ETIMEDOUT; /* held still until then: the detail says by whom */
  int rc = take_now_op(h, k, tenant, stamp, lease, 0);
  shms__op_leave(h, k);
  return rc;
}

int shms__take_now(struct shms *h, const struct shms__cls *k, const uint64_t *tenant, int stamp,
                   shms_lease *lease, uint64_t until_real) {
  int rc = take_now_op(h, k, tenant, stamp, lease, shms__op_enter_fast(h, k));
  shms__op_leave(h, k);
  /* Frozen: enter the ordinary way, which waits (until until_real), and look again (out of
   * line: the fast path's frame stays small). */
  return rc == SHMS__LOOK_AGAIN ? take_entered(h, k, tenant, stamp, lease, until_real) : rc;
}

int shms__take_after_yield(struct shms *h, const struct shms__cls *k, const uint64_t *tenant,
                           int stamp, shms_lease *lease, uint64_t until_real) {
  /* Nothing shared was written since the first look: the second is the first taken later, for
   * the protocol as for the overtaking bound. */
  if (!shms__yield_before_queueing(SHMS__FAST_QUEUED(shms__load_64(&k->ctl->fast))))
    return SHMS_EWOULDBLOCK;
  return shms__take_now(h, k, tenant, stamp, lease, until_real);
}

/* How long a try waits for a class held still: a recovery's freeze lasts milliseconds; one
 * that lasts longer (a stopped check) makes the try say would-block, as a busy class does. */
#define TRY_THAW_NS (20ull * 1000 * 1000)

int shms__try_now(struct shms *h, const struct shms__cls *k, const uint64_t *tenant, int stamp,
                  shms_lease *lease) {
  int rc = shms__take_now(h, k, tenant, stamp, lease, shms__real_now_ns() + TRY_THAW_NS);
  if (rc == SHMS_ETIMEDOUT)
    return shms__fail(SHMS_EWOULDBLOCK, "%s", shms_last_error_detail());
  return rc == SHMS_EWOULDBLOCK ? shms__fail(rc, "no free cell, or queued work goes first") : rc;
}

int shms_try_acquire(shms_t *h, const shms_request *req, shms_lease *lease) {
  struct shms__cls *k = NULL;
  uint64_t tenant[SHMS__NAME_WORDS];
  int rc = shms__check_request(h, req, SHMS_MODE_LEASE, lease, "lease", &k, tenant);
  if (rc != SHMS_OK)
    return rc;
  if (k->cfg->tenant_max_active == 0 && req->cells <= 1 && req->nquotas == 0)
    return shms__try_now(h, k, tenant, 1, lease);
  return shms__try_limited(h, k, req, lease);
}

int shms__try_limited(struct shms *h, const struct shms__cls *k, const shms_request *req,
                      shms_lease *lease) {
  /* A tenant limit, or several cells at once, needs the dispatcher's books: queue, look once,
   * withdraw if not granted (as would-block, which no counter records: nothing was refused or
   * cancelled). */
  shms_ticket t;
  int rc;
  if ((rc = shms_enqueue(h, req, &t)) != SHMS_OK)
    return rc;
  if ((rc = shms_wait(h, &t, 0, lease)) != SHMS_ETIMEDOUT)
    return rc;
  SHMS__OP(h, k,
           shms__settle_and_kick(h, k, t.slot, t.seq,
                                 1u << SHMS__SLOT_QUEUED | 1u << SHMS__SLOT_GRANTED,
                                 SHMS_EWOULDBLOCK));
  rc = shms_wait(h, &t, 0, lease);
  return rc == SHMS_EWOULDBLOCK
             ? shms__fail(rc,
                          req->cells > 1      ? "not %u cells free, or queued work goes first"
                          : req->nquotas != 0 ? "no free cell, or a quota it names is full"
                                              : "no free cell within the tenant's limit",
                          req->cells)
             : rc;
}

int shms_acquire(shms_t *h, const shms_request *req, shms_lease *lease) {
  struct shms__cls *k = NULL;
  uint64_t tenant[SHMS__NAME_WORDS];
  int rc = shms__check_request(h, req, SHMS_MODE_LEASE, lease, "lease", &k, tenant);
  if (rc != SHMS_OK)
    return rc;
  /* An immediate grant never takes a request slot (a grant of several cells always does). */
  if (k->cfg->tenant_max_active == 0 && req->cells <= 1 && req->nquotas == 0 &&
      (rc = shms__take_blocking(h, k, tenant, 1, lease, shms__deadline_real(req->deadline_ns))) !=
          SHMS_EWOULDBLOCK)
    return rc == SHMS_ETIMEDOUT ? shms__held_still(req->deadline_ns, "nothing was queued") : rc;
  return shms__acquire_queued(h, req, lease);
}

int shms__acquire_queued(struct shms *h, const shms_request *req, shms_lease *lease) {
  shms_ticket t;
  int rc;
  if ((rc = shms_enqueue(h, req, &t)) != SHMS_OK)
    return rc;
  if ((rc = shms_wait(h, &t, UINT64_MAX, lease)) != SHMS_ETIMEDOUT)
    return rc;
  /* Interrupted (shms_interrupt): the caller has no ticket to wait again or cancel with, so the
   * request is withdrawn, not left queued. Granted meanwhile: the cancel returns the cell. */
  shms_cancel(h, &t);
  if ((rc = shms_wait(h, &t, 0, lease)) != SHMS_ECANCELLED)
    return rc; /* it had ended otherwise first: that is its outcome */
  return shms__fail(SHMS_ETIMEDOUT, "the wait was interrupted: the request was withdrawn");
}

/*
 * The lease-scheduling contract, one process at a time: bounds, fairness,
 * order, aging, limits, cancellation, deadlines, handoff, drain, leases,
 * exhaustion and quarantine. Order is observed deterministically: hold the
 * only cell, queue requests, release, and see which one was granted.
 */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/atomic.h"
#include "shm/handle.h"
#include "shm/hbm.h"

START_TEST(acquire_and_release_round_trip) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 8, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease a, b, c;
  ck_assert_shms_ok(shms_acquire(h, &r, &a));
  ck_assert_shms_ok(shms_try_acquire(h, &r, &b));
  ck_assert_uint_ne(a.cell, b.cell);
  ck_assert_shms_err(shms_try_acquire(h, &r, &c), SHMS_EWOULDBLOCK, "no free cell");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 0);
  ck_assert_uint_eq(s.leased, 2);
  ck_assert_uint_eq(s.granted, 2);
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_shms_ok(shms_release(h, &b));
  s = sched_stats(h);
  ck_assert_uint_eq(s.available, 2);
  ck_assert_uint_eq(s.queue_depth, 0);
  sched_close(h, name);
}
END_TEST

/* A map-mode take prefers the cell this thread took last (its lines are in this CPU's cache):
 * a user sees the same cell again while it is free, and the lowest free one otherwise. */
START_TEST(a_thread_takes_its_last_cell_again_while_it_is_free) {
  const char *name;
  shms_t *h = sched_open(&name, 4, 8, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease a, b, c, d;
  ck_assert_shms_ok(shms_acquire(h, &r, &a));
  ck_assert_shms_ok(shms_acquire(h, &r, &b));
  ck_assert_uint_eq(a.cell, 0); /* the lowest free, before this thread had taken any */
  ck_assert_uint_eq(b.cell, 1);
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_shms_ok(shms_release(h, &b));
  ck_assert_shms_ok(shms_acquire(h, &r, &c));
  ck_assert_uint_eq(c.cell, 1); /* the last one taken, though cell 0 is free and lower */
  ck_assert_shms_ok(shms_acquire(h, &r, &d));
  ck_assert_uint_eq(d.cell, 0); /* the last is held (by c): the lowest free */
  ck_assert_shms_ok(shms_release(h, &c));
  ck_assert_shms_ok(shms_release(h, &d));
  sched_close(h, name);
}
END_TEST

START_TEST(bounds_and_denials) {
  shms_config cfg;
  harness_config(&cfg, 1, 2);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1, .cells = 1, .queue = 0};
  cfg.classes[SHMS_CLASS_EXTRA_LARGE] =
      (shms_class_config){.configured = 1, .cells = 1, .queue = 1};
  cfg.classes[SHMS_CLASS_LARGE] =
      (shms_class_config){.configured = 1, .cells = 1, .queue = 1, .allow_count = 1};
  strcpy(cfg.classes[SHMS_CLASS_LARGE].allow[0], "alice");
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_lease l;
  shms_ticket t;
  shms_request r = sched_req("bob", 0);
  r.cls = SHMS_CLASS_SMALL; /* queue=0 denies even with a free cell */
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_EDENIED, "queue=0");
  r.cls = SHMS_CLASS_EXTRA_LARGE; /* restricted by default */
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_EDENIED, "does not allow");
  r.cls = SHMS_CLASS_LARGE;
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EDENIED, "'bob'");
  r.tenant = "alice";
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  r.cls = SHMS_CLASS_TINY; /* not configured */
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EINVAL, "not configured");
  r.cls = SHMS_CLASS_STANDARD;
  r.tenant = "has space";
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EINVAL, "has a space (0x20) at 3");
  /* queue=2: one held cell, two queued, the third is refused and changes nothing. */
  r.tenant = "bob";
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  shms_ticket q1 = sched_enqueue(h, "bob", 0, 0), q2 = sched_enqueue(h, "carol", 0, 0);
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EQUEUEFULL, "request slots");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.queue_depth, 2);
  ck_assert_uint_eq(s.rejected, 1);
  ck_assert_shms_ok(shms_release(h, &l));
  /* Both are served, one after the other: which first is the fairness's (by time, bob is
   * charged what his lease held while carol waited, if the clock saw it). */
  shms_ticket both[] = {q1, q2};
  int first = sched_granted(h, both, 2, &l);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, both, 2, &l), 1 - first);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

/* By grants (a class fair by time orders turns by what the real clock says each lease held). */
static shms_t *by_grants(const char **name, unsigned cells, unsigned queue) {
  shms_config cfg;
  harness_config(&cfg, cells, queue);
  cfg.classes[SHMS_CLASS_STANDARD].fairness = SHMS_FAIRNESS_GRANTS;
  return sched_open(name, 0, 0, &cfg);
}

START_TEST(tenants_take_round_robin_turns) {
  const char *name;
  shms_t *h = by_grants(&name, 1, 16);
  shms_lease l;
  shms_request r = sched_req("x", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  /* a floods first; b and c join later; order must alternate, not drain a. */
  shms_ticket t[] = {sched_enqueue(h, "a", 0, 0), sched_enqueue(h, "a", 0, 0),
                     sched_enqueue(h, "a", 0, 0), sched_enqueue(h, "b", 0, 0),
                     sched_enqueue(h, "c", 0, 0), sched_enqueue(h, "b", 0, 0)};
  int want[] = {0, 3, 4, 1, 5, 2};
  for (int n = 0; n < 6; n++) {
    ck_assert_shms_ok(shms_release(h, &l));
    ck_assert_int_eq(sched_granted(h, t, 6, &l), want[n]);
  }
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_uint_eq(sched_stats(h).available, 1);
  sched_close(h, name);
}
END_TEST

START_TEST(priority_then_deadline_then_enqueue_order) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 16, NULL);
  shms_lease l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  uint64_t far = UINT64_MAX / 2; /* deadlines that never pass during the test */
  shms_ticket t[] = {
      sched_enqueue(h, "a", 1, 0),        /* 0 */
      sched_enqueue(h, "a", 5, 0),        /* 1: highest priority */
      sched_enqueue(h, "a", 3, 0),        /* 2 */
      sched_enqueue(h, "a", 3, far + 50), /* 3: same priority, a deadline goes first */
      sched_enqueue(h, "a", 3, far + 10), /* 4: earlier deadline first */
      sched_enqueue(h, "a", 3, 0),        /* 5: no deadline, after 2 by enqueue order */
      sched_enqueue(h, "a", -7, 0),       /* 6: negative priority last */
  };
  int want[] = {1, 4, 3, 2, 5, 0, 6};
  for (int n = 0; n < 7; n++) {
    ck_assert_shms_ok(shms_release(h, &l));
    ck_assert_int_eq(sched_granted(h, t, 7, &l), want[n]);
  }
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

START_TEST(aged_requests_go_first_oldest_first) {
  shms_set_clock(sched_fake_clock, NULL);
  shms_config cfg;
  harness_config(&cfg, 1, 16);
  cfg.starvation_after_ns = 1000000000ull; /* 1s of fake time */
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_lease l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  shms_ticket t[4];
  t[0] = sched_enqueue(h, "a", 0, 0); /* t=0 */
  sched_fake_now += 300000000ull;
  t[1] = sched_enqueue(h, "a", 1, 0); /* t=0.3 */
  sched_fake_now += 300000000ull;
  t[2] = sched_enqueue(h, "a", 9, 0); /* t=0.6 */
  sched_fake_now += 300000000ull;
  t[3] = sched_enqueue(h, "a", 9, 0); /* t=0.9 */
  /* t=1.35: t0 and t1 are aged; the oldest goes first despite lower priority, then t1. */
  sched_fake_now += 450000000ull;
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, t, 4, &l), 0);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, t, 4, &l), 1);
  /* Nobody else aged yet: priority order (then enqueue order) again. */
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, t, 4, &l), 2);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, t, 4, &l), 3);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

START_TEST(a_tenant_at_its_limit_is_passed_over) {
  shms_config cfg;
  harness_config(&cfg, 2, 16);
  cfg.classes[SHMS_CLASS_STANDARD].tenant_max_active = 1;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_lease la1, lb, l;
  shms_ticket a1 = sched_enqueue(h, "a", 0, 0);
  ck_assert_shms_ok(shms_wait(h, &a1, 0, &la1)); /* granted at once: a cell was free */
  shms_ticket a2 = sched_enqueue(h, "a", 9, 0), b1 = sched_enqueue(h, "b", 0, 0);
  ck_assert_shms_ok(shms_wait(h, &b1, 0, &lb)); /* a is at its limit: b goes past it */
  ck_assert_int_eq(shms_wait(h, &a2, 0, &l), SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_release(h, &lb)); /* a free cell, but a is still at its limit */
  ck_assert_int_eq(shms_wait(h, &a2, 0, &l), SHMS_ETIMEDOUT);
  shms_explanation e;
  ck_assert_shms_ok(shms_explain(h, &a2, &e));
  ck_assert(e.blocked_by & SHMS_BLOCK_TENANT_LIMIT);
  ck_assert_uint_eq(e.tenants_ahead, UINT32_MAX); /* out of the ring while at its limit */
  shms_request ra = sched_req("a", 0);
  ck_assert_int_eq(shms_try_acquire(h, &ra, &l), SHMS_EWOULDBLOCK);
  ck_assert_uint_eq(sched_stats(h).cancelled + sched_stats(h).rejected, 0); /* just a probe */
  ck_assert_shms_ok(shms_release(h, &la1)); /* a drops below its limit and gets its turn */
  ck_assert_shms_ok(shms_wait(h, &a2, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 2);
  ck_assert_uint_eq(s.queue_depth, 0);
  sched_close(h, name);
}
END_TEST

START_TEST(cancel_a_queued_request) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "a", 0, 0), u = sched_enqueue(h, "b", 0, 0);
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_int_eq(shms_cancel(h, &t), 0);
  ck_assert_str_eq(shms_last_error_detail(), "the request was already cancelled");
  ck_assert_uint_eq(sched_stats(h).queue_depth, 1);
  ck_assert_shms_err(shms_wait(h, &t, 0, &l), SHMS_ECANCELLED, "cancelled");
  /* Retired: the ticket is unknown now, and so is a forged one. */
  ck_assert_shms_err(shms_cancel(h, &t), SHMS_ENOTFOUND, "stale");
  shms_ticket forged = u;
  forged.seq++;
  ck_assert_int_eq(shms_cancel(h, &forged), SHMS_ENOTFOUND);
  forged = u;
  forged.incarnation ^= 1;
  ck_assert_int_eq(shms_cancel(h, &forged), SHMS_ENOTFOUND);
  forged.incarnation = u.incarnation;
  forged.slot = 4;
  ck_assert_int_eq(shms_cancel(h, &forged), SHMS_ENOTFOUND);
  /* The cancelled request never gets the cell. */
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &u, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.cancelled, 1);
  ck_assert_uint_eq(s.available, 1);
  sched_close(h, name);
}
END_TEST

static int slot_indexed(const shms_t *h, uint32_t i) {
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  return (shms__load_64(&shms__slot_at(k, i)->word) & SHMS__SLOT_INDEXED) != 0;
}

/* docs/protocol.md, "The dispatcher baton": a cancel unlinks its request itself when the baton
 * is free, and otherwise leaves its attention bit to the holder, whose re-check unlinks it. */
START_TEST(a_cancelled_request_is_unlinked_with_or_without_the_baton) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "a", 0, 0), u = sched_enqueue(h, "b", 0, 0),
              v = sched_enqueue(h, "c", 0, 0);
  ck_assert(slot_indexed(h, t.slot) && slot_indexed(h, u.slot) && slot_indexed(h, v.slot));
  /* The baton is free: out of the index before the cancel returns, no bit left behind. */
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert(!slot_indexed(h, t.slot));
  ck_assert(!shms__hbm_any(&k->sattn));
  /* Someone holds the baton: the request is settled at once, and left to the holder. */
  shms__op_enter(h, k);
  ck_assert_shms_ok(shms__baton_acquire(h, k, 1000000000ull));
  ck_assert_int_eq(shms_cancel(h, &u), 1);
  ck_assert(slot_indexed(h, u.slot));
  ck_assert(shms__hbm_any(&k->sattn));
  ck_assert_uint_eq(sched_stats(h).queue_depth, 1);
  shms__baton_done(h, k); /* the holder's re-check finds the bit */
  shms__op_leave(h, k);
  ck_assert(!slot_indexed(h, u.slot));
  ck_assert(!shms__hbm_any(&k->sattn));
  char report[512];
  uint32_t violations = 1;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  /* Neither cancelled request gets the cell; both slots come free once collected. */
  ck_assert_shms_err(shms_wait(h, &t, 0, &l), SHMS_ECANCELLED, "cancelled");
  ck_assert_shms_err(shms_wait(h, &u, 0, &l), SHMS_ECANCELLED, "cancelled");
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &v, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  shms_class_stats st = sched_stats(h);
  ck_assert_uint_eq(st.cancelled, 2);
  ck_assert_uint_eq(st.queue_depth, 0);
  ck_assert_uint_eq(shms__load_32(&k->ctl->used), 0);
  sched_close(h, name);
}
END_TEST

/* docs/protocol.md, "Guards": a request left queued but neither indexed nor
 * awaiting the dispatcher is found again by its waiter within a poll interval. */
START_TEST(a_stranded_request_is_found_again_by_its_waiter) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "b", 0, 0);
  /* Strand it: out of the index, its flag cleared, no attention bit. */
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  struct shms__slot *s = shms__slot_at(k, t.slot);
  shms__freeze(h, k); /* the index is changed only by its owner (here: a freezer) */
  shms__index_unlink(k, t.slot);
  shms__unfreeze(k, shms__load_64(&k->ctl->fast) & ~SHMS__FAST_FROZEN);
  ck_pr_and_64(&s->word, ~(uint64_t)SHMS__SLOT_INDEXED);
  ck_assert(!shms__hbm_test(&k->sattn, t.slot));
  ck_assert_shms_ok(shms_release(h, &held)); /* its pass finds nobody to grant */
  ck_assert_uint_eq(sched_stats(h).available, 1);
  ck_assert_shms_ok(shms_wait(h, &t, 5ull * 1000 * 1000 * 1000, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

START_TEST(an_unaccepted_grant_returns_its_cell) {
  const char *name;
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].overtake_ns = SHMS_OVERTAKE_STRICT; /* release grants */
  shms_t *h = sched_open(&name, 1, 4, &cfg);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "a", 0, 0);
  ck_assert_shms_ok(shms_release(h, &held)); /* granted to t, not yet accepted */
  shms_explanation e;
  ck_assert_shms_ok(shms_explain(h, &t, &e));
  ck_assert_uint_eq(e.state, SHMS_REQ_GRANTED);
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 1); /* back in service, not quarantined */
  ck_assert_uint_eq(s.quarantined, 0);
  ck_assert_int_eq(shms_wait(h, &t, 0, &l), SHMS_ECANCELLED);
  /* An accepted lease is the holder's: a later cancel cannot touch it, but still finds it. */
  t = sched_enqueue(h, "a", 0, 0);
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_int_eq(shms_cancel(h, &t), 0);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "holds its lease on class standard"));
  ck_assert_uint_eq(sched_stats(h).leased, 1);
  ck_assert_shms_ok(shms_explain(h, &t, &e));
  ck_assert_uint_eq(e.state, SHMS_REQ_HELD);
  ck_assert_uint_eq(e.cell, l.cell);
  ck_assert_int_eq(e.holder_pid, getpid());
  ck_assert_uint_eq(e.holder_alive, 1);
  ck_assert_shms_ok(shms_release(h, &l));
  /* Its lease ended: the ticket is retired. */
  ck_assert_int_eq(shms_cancel(h, &t), SHMS_ENOTFOUND);
  ck_assert_int_eq(shms_explain(h, &t, &e), SHMS_ENOTFOUND);
  sched_close(h, name);
}
END_TEST

START_TEST(deadlines_are_never_extended) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  r.deadline_ns = sched_fake_now; /* already due */
  shms_ticket t;
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EDEADLINE, "already passed");
  shms_ticket a = sched_enqueue(h, "a", 0, sched_fake_now + 100);
  shms_ticket b = sched_enqueue(h, "b", 0, sched_fake_now + 1000);
  ck_assert_int_eq(shms_wait(h, &a, 0, &l), SHMS_ETIMEDOUT);
  sched_fake_now += 500; /* a is past its deadline: it is never granted, b is */
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_err(shms_wait(h, &a, 0, &l), SHMS_EDEADLINE, "deadline");
  ck_assert_shms_ok(shms_wait(h, &b, 0, &l));
  /* A granted request whose deadline passes before acceptance is not accepted. */
  shms_ticket c = sched_enqueue(h, "c", 0, sched_fake_now + 100);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_fake_now += 500;
  ck_assert_shms_err(shms_wait(h, &c, 0, &l), SHMS_EDEADLINE, "deadline");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.expired, 2);
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

START_TEST(a_waiter_wakes_at_its_deadline) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  r.deadline_ns = now + 30 * 1000000ull;
  ck_assert_int_eq(shms_acquire(h, &r, &l), SHMS_EDEADLINE);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  /* Never early (no upper bound here: timing belongs in perf/, not in unit tests). */
  ck_assert_uint_ge((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, r.deadline_ns);
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

START_TEST(drain_settles_waiters_and_keeps_leases) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  shms_ticket q = sched_enqueue(h, "b", 0, 0), g = sched_enqueue(h, "c", 0, 0);
  ck_assert_shms_ok(shms_release(h, &l)); /* q is granted, unaccepted */
  ck_assert_shms_ok(shms_drain(h));
  ck_assert_shms_err(shms_wait(h, &q, 0, &l), SHMS_ESHUTDOWN, "draining");
  ck_assert_shms_err(shms_wait(h, &g, 0, &l), SHMS_ESHUTDOWN, "draining");
  shms_ticket t;
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_ESHUTDOWN, "draining");
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_ESHUTDOWN, "draining");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.leased, 1); /* the accepted lease keeps its cell */
  ck_assert_uint_eq(s.available, 1);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

START_TEST(stale_forged_and_double_releases_change_nothing) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  shms_lease a, b, bad;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &a));
  ck_assert_shms_ok(shms_acquire(h, &r, &b));
  bad = a;
  bad.token++;
  ck_assert_shms_err(shms_release(h, &bad), SHMS_ELEASE, "not current");
  bad = a;
  bad.generation++;
  ck_assert_shms_err(shms_quarantine(h, &bad, 1), SHMS_ELEASE, "not current");
  bad = a;
  bad.incarnation++;
  ck_assert_shms_err(shms_release(h, &bad), SHMS_ELEASE, "another segment");
  bad = a;
  bad.cell = 99;
  ck_assert_shms_err(shms_release(h, &bad), SHMS_ELEASE, "no cell");
  bad = a;
  bad.cls = SHMS_CLASS_TINY;
  ck_assert_shms_err(shms_release(h, &bad), SHMS_ELEASE, "no cell");
  ck_assert_uint_eq(sched_stats(h).available, 0);
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_shms_err(shms_release(h, &a), SHMS_ELEASE, "not current");
  /* The cell was reused: the old lease still cannot touch the new holder's. */
  shms_lease c;
  ck_assert_shms_ok(shms_acquire(h, &r, &c));
  ck_assert_uint_eq(c.cell, a.cell);
  ck_assert_shms_err(shms_release(h, &a), SHMS_ELEASE, "not current");
  ck_assert_shms_err(shms_quarantine(h, &a, 1), SHMS_ELEASE, "not current");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 0);
  ck_assert_uint_eq(s.leased, 2);
  ck_assert_shms_ok(shms_release(h, &b));
  ck_assert_shms_ok(shms_release(h, &c));
  ck_assert_uint_eq(sched_stats(h).available, 2);
  sched_close(h, name);
}
END_TEST

START_TEST(token_exhaustion_fails_closed) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms__test_set_tokens(k, UINT64_MAX - 1);
  shms_lease l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &l)); /* the last token */
  ck_assert_uint_eq(l.token, UINT64_MAX - 1);
  shms_ticket t = sched_enqueue(h, "b", 0, 0);
  ck_assert_shms_ok(shms_release(h, &l)); /* the next grant would wrap: the cell is quarantined */
  ck_assert_shms_err(shms_wait(h, &t, 0, &l), SHMS_ESEQEXHAUSTED, "exhausted");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.quarantined, 1);
  ck_assert_uint_eq(s.available, 0);
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_EQUARANTINED, "quarantined");
  shms__test_set_tokens(k, 1);
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, 0), 1);
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

START_TEST(all_cells_quarantined_fails_waiters_until_repair) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  shms_lease a, b, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &a));
  ck_assert_shms_ok(shms_acquire(h, &r, &b));
  shms_ticket t = sched_enqueue(h, "b", 0, 0);
  ck_assert_shms_ok(shms_quarantine(h, &a, 42));
  ck_assert_int_eq(shms_wait(h, &t, 0, &l), SHMS_ETIMEDOUT); /* one cell may still come back */
  ck_assert_shms_ok(shms_quarantine(h, &b, 42));
  ck_assert_shms_err(shms_wait(h, &t, 0, &l), SHMS_EQUARANTINED, "quarantined");
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EQUARANTINED, "every cell");
  ck_assert_shms_err(shms_quarantine(h, &a, 1), SHMS_ELEASE, "not current");
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, 5), SHMS_EINVAL);
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, -1), 2);
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, 0), SHMS_EINVAL); /* not quarantined */
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 2);
  ck_assert_uint_eq(s.quarantined, 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

START_TEST(duplicate_live_activation_ids_are_refused) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  r.activation = "job-1";
  shms_ticket t, u;
  ck_assert_shms_ok(shms_enqueue(h, &r, &t));
  r.tenant = "b";
  ck_assert_shms_err(shms_enqueue(h, &r, &u), SHMS_EDUPACT, "already live");
  ck_assert_uint_eq(sched_stats(h).queue_depth, 1);
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_int_eq(shms_wait(h, &t, 0, &l), SHMS_ECANCELLED);
  ck_assert_shms_ok(shms_enqueue(h, &r, &u)); /* no longer live: the id is free again */
  r.activation = "bad id";
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EINVAL, "activation id");
  ck_assert_int_eq(shms_cancel(h, &u), 1);
  ck_assert_int_eq(shms_wait(h, &u, 0, &l), SHMS_ECANCELLED);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

START_TEST(explain_says_why_a_request_waits) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_lease held;
  shms_request r = sched_req("x", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket a1 = sched_enqueue(h, "a", 0, 0), a2 = sched_enqueue(h, "a", 0, 0);
  shms_ticket b1 = sched_enqueue(h, "b", 0, 0);
  shms_explanation e;
  ck_assert_shms_ok(shms_explain(h, &b1, &e));
  ck_assert_uint_eq(e.state, SHMS_REQ_QUEUED);
  ck_assert_str_eq(e.tenant, "b");
  ck_assert_uint_eq(e.tenants_ahead, 1);
  ck_assert_uint_eq(e.ring_length, 2);
  ck_assert_uint_eq(e.ahead_in_tenant, 0);
  ck_assert(e.blocked_by & SHMS_BLOCK_NO_CELL);
  ck_assert_shms_ok(shms_explain(h, &a2, &e));
  ck_assert_uint_eq(e.tenants_ahead, 0);
  ck_assert_uint_eq(e.ahead_in_tenant, 1);
  ck_assert_uint_eq(e.tenant_queued, 2);
  ck_assert_int_eq(shms_cancel(h, &a1), 1);
  ck_assert_shms_ok(shms_explain(h, &a1, &e));
  ck_assert_uint_eq(e.state, SHMS_REQ_ENDED);
  ck_assert_int_eq(e.outcome, SHMS_ECANCELLED);
  shms_tenant_stats ts[4];
  uint32_t n;
  ck_assert_shms_ok(shms_tenants(h, SHMS_CLASS_STANDARD, ts, 4, &n));
  ck_assert_uint_eq(n, 3);           /* a and b queued, and x, whose lease was taken at once */
  ck_assert_shms_ok(shms_detach(h)); /* its requests end with it */
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.queued_tenants, 0);
  sched_close(h, name);
}
END_TEST

START_TEST(tickets_print_and_parse) {
  shms_ticket t = {.cls = SHMS_CLASS_EXTRA_LARGE,
                   .slot = 17,
                   .seq = 123456789012ull,
                   .incarnation = 0x0123456789abcdefull},
              back;
  char buf[SHMS_TICKET_STRLEN];
  shms_ticket_format(&t, buf);
  ck_assert_str_eq(buf, "extra-large.17.123456789012.0123456789abcdef");
  ck_assert_shms_ok(shms_ticket_parse(buf, &back));
  ck_assert(memcmp(&t, &back, sizeof t) == 0);
  const char *bad[] = {"",
                       "standard",
                       "huge.1.2.0123456789abcdef",
                       "standard.-1.2.0123456789abcdef",
                       "standard.1.2.0123",
                       "standard.1.2.0123456789abcdeg",
                       "standard.1..0123456789abcdef",
                       "standard.1.2.0123456789abcdef.",
                       "standard. 1.2.0123456789abcdef"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(shms_ticket_parse(bad[i], &back) == SHMS_EINVAL, "'%s' parsed", bad[i]);
}
END_TEST

START_TEST(observers_cannot_schedule) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL), *o;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  shms_request r = sched_req("a", 0);
  shms_lease l;
  ck_assert_shms_err(shms_acquire(o, &r, &l), SHMS_EINVAL, "observer");
  ck_assert_shms_ok(shms_detach(o));
  sched_close(h, name);
}
END_TEST

/* A reference model of one class's order: tenants' ring, then priority, deadline, arrival. */
struct model_req {
  int tenant, prio, alive;
  uint64_t deadline;
  shms_ticket ticket;
};

static int model_before(const struct model_req *a, const struct model_req *b) {
  if (a->prio != b->prio)
    return a->prio > b->prio;
  uint64_t da = a->deadline ? a->deadline : UINT64_MAX, db = b->deadline ? b->deadline : UINT64_MAX;
  return da < db; /* equal keys: the earlier arrival, which comes first in the array */
}

static int model_pick(struct model_req *r, int n, int tenant) {
  int best = -1;
  for (int i = 0; i < n; i++)
    if (r[i].alive && r[i].tenant == tenant && (best < 0 || model_before(&r[i], &r[best])))
      best = i;
  return best;
}

static void ring_remove(int *ring, int *len, int tenant) {
  for (int i = 0; i < *len; i++)
    if (ring[i] == tenant) {
      memmove(&ring[i], &ring[i + 1], sizeof *ring * (size_t)(*len - i - 1));
      (*len)--;
      return;
    }
}

static int tenant_has_work(struct model_req *r, int n, int tenant) {
  return model_pick(r, n, tenant) >= 0;
}

START_TEST(grant_order_matches_a_reference_model) {
  enum { N = 300, TENANTS = 4 };
  const char *names[TENANTS] = {"a", "b", "c", "d"};
  const char *name;
  shms_t *h = by_grants(&name, 1, N + 1);
  shms_lease l;
  shms_request hr = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &hr, &l));
  static struct model_req r[N];
  int ring[TENANTS], len = 0;
  unsigned seed = 7;
  uint64_t far = UINT64_MAX / 2;
  for (int i = 0; i < N; i++) {
    r[i] = (struct model_req){
        .tenant = rand_r(&seed) % TENANTS, .prio = rand_r(&seed) % 3, .alive = 1};
    r[i].deadline = rand_r(&seed) % 3 ? 0 : far + (uint64_t)(rand_r(&seed) % 4);
    if (!tenant_has_work(r, i, r[i].tenant))
      ring[len++] = r[i].tenant; /* a newly active tenant joins the tail */
    r[i].ticket = sched_enqueue(h, names[r[i].tenant], r[i].prio, r[i].deadline);
    if (rand_r(&seed) % 5 == 0) { /* cancel some earlier request */
      int v = rand_r(&seed) % (i + 1);
      if (r[v].alive) {
        ck_assert_int_eq(shms_cancel(h, &r[v].ticket), 1);
        ck_assert_int_eq(shms_wait(h, &r[v].ticket, 0, &(shms_lease){0}), SHMS_ECANCELLED);
        r[v].alive = 0;
        if (!tenant_has_work(r, i + 1, r[v].tenant))
          ring_remove(ring, &len, r[v].tenant);
      }
    }
  }
  while (len > 0) {
    int tenant = ring[0], want = model_pick(r, N, tenant);
    ck_assert_shms_ok(shms_release(h, &l));
    ck_assert_msg(shms_wait(h, &r[want].ticket, 0, &l) == SHMS_OK,
                  "expected request %d (tenant %s, priority %d) to be granted", want, names[tenant],
                  r[want].prio);
    r[want].alive = 0;
    ring_remove(ring, &len, tenant);
    if (tenant_has_work(r, N, tenant))
      ring[len++] = tenant; /* work left: to the tail */
  }
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sched");
  TCase *tc = harness_tcase("contract");
  tcase_add_test(tc, acquire_and_release_round_trip);
  tcase_add_test(tc, a_thread_takes_its_last_cell_again_while_it_is_free);
  tcase_add_test(tc, bounds_and_denials);
  tcase_add_test(tc, tenants_take_round_robin_turns);
  tcase_add_test(tc, priority_then_deadline_then_enqueue_order);
  tcase_add_test(tc, aged_requests_go_first_oldest_first);
  tcase_add_test(tc, a_tenant_at_its_limit_is_passed_over);
  tcase_add_test(tc, cancel_a_queued_request);
  tcase_add_test(tc, a_cancelled_request_is_unlinked_with_or_without_the_baton);
  tcase_add_test(tc, a_stranded_request_is_found_again_by_its_waiter);
  tcase_add_test(tc, an_unaccepted_grant_returns_its_cell);
  tcase_add_test(tc, deadlines_are_never_extended);
  tcase_add_test(tc, a_waiter_wakes_at_its_deadline);
  tcase_add_test(tc, drain_settles_waiters_and_keeps_leases);
  tcase_add_test(tc, stale_forged_and_double_releases_change_nothing);
  tcase_add_test(tc, token_exhaustion_fails_closed);
  tcase_add_test(tc, all_cells_quarantined_fails_waiters_until_repair);
  tcase_add_test(tc, duplicate_live_activation_ids_are_refused);
  tcase_add_test(tc, explain_says_why_a_request_waits);
  tcase_add_test(tc, tickets_print_and_parse);
  tcase_add_test(tc, observers_cannot_schedule);
  tcase_add_test(tc, grant_order_matches_a_reference_model);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * Prepared requests (shms_request_prepare, shms_acquire_prepared, shms_try_acquire_prepared):
 * what preparing validates, that a prepared acquire behaves as a plain one, and that a stale,
 * foreign, corrupt or forged prepared request is refused (stale-prepared) and changes nothing.
 * The credential rules (tenant=user/group, identity allow entries) need two users: they are
 * test_security's.
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/atomic.h"
#include "shm/clock.h"
#include "shm/handle.h"

/* What the class looks like from outside: enough to see that a refused call changed nothing. */
struct seen {
  uint32_t available, leased, queued;
  uint64_t granted, rejected;
};

static struct seen look(shms_t *h) {
  shms_class_stats s = sched_stats(h);
  return (struct seen){s.available, s.leased, s.queue_depth, s.granted, s.rejected};
}

static void assert_same(struct seen a, struct seen b) {
  ck_assert_uint_eq(a.available, b.available);
  ck_assert_uint_eq(a.leased, b.leased);
  ck_assert_uint_eq(a.queued, b.queued);
  ck_assert_uint_eq(a.granted, b.granted);
  ck_assert_uint_eq(a.rejected, b.rejected);
}

static shms_prepared prepare(shms_t *h, const char *tenant) {
  shms_request r = sched_req(tenant, 0);
  shms_prepared p;
  ck_assert_shms_ok(shms_request_prepare(h, &r, &p));
  return p;
}

/* The tenant cell c records (its lease's). */
static void cell_tenant(shms_t *h, uint32_t c, char *out) {
  shms_cell_info cells[4];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, cells, 4, &n));
  ck_assert_uint_lt(c, n);
  strcpy(out, cells[c].tenant);
}

START_TEST(prepared_acquires_as_plain_ones_do) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 8, NULL);
  shms_prepared alice = prepare(h, "alice"), bob = prepare(h, "bob"), copy;
  memcpy(&copy, &alice, sizeof copy); /* a copy is as good as the original */
  shms_lease a, b, c;
  char t[SHMS_TENANT_MAX + 1];
  ck_assert_shms_ok(shms_acquire_prepared(h, &copy, &a));
  ck_assert_shms_ok(shms_try_acquire_prepared(h, &bob, &b));
  ck_assert_uint_ne(a.cell, b.cell);
  cell_tenant(h, a.cell, t);
  ck_assert_str_eq(t, "alice");
  cell_tenant(h, b.cell, t);
  ck_assert_str_eq(t, "bob");
  struct seen before = look(h);
  ck_assert_shms_err(shms_try_acquire_prepared(h, &alice, &c), SHMS_EWOULDBLOCK, "no free cell");
  assert_same(before, look(h));
  ck_assert_uint_eq(before.granted, 2);
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_shms_ok(shms_release(h, &b));
  /* The same cell again, for another tenant: the cell records the new one. */
  for (int i = 0; i < 3; i++) {
    ck_assert_shms_ok(shms_acquire_prepared(h, i % 2 ? &alice : &bob, &a));
    cell_tenant(h, a.cell, t);
    ck_assert_str_eq(t, i % 2 ? "alice" : "bob");
    ck_assert_shms_ok(shms_release(h, &a));
  }
  ck_assert_uint_eq(look(h).available, 2);
  sched_close(h, name);
}
END_TEST

START_TEST(preparing_validates_once_what_acquire_would) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1, .cells = 1, .queue = 0};
  cfg.classes[SHMS_CLASS_LARGE] =
      (shms_class_config){.configured = 1, .cells = 1, .queue = 2, .allow_count = 1};
  strcpy(cfg.classes[SHMS_CLASS_LARGE].allow[0], "alice");
  cfg.classes[SHMS_CLASS_TINY] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 2, .mode = SHMS_MODE_WORKER, .payload = 64};
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_prepared p, untouched;
  memset(&p, 0xa5, sizeof p);
  memcpy(&untouched, &p, sizeof p);
  shms_request r = sched_req("bob", 0);
  r.cls = SHMS_CLASS_LARGE; /* the allow list */
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EDENIED, "does not allow tenant 'bob'");
  r.cls = SHMS_CLASS_SMALL;
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EDENIED, "queue=0");
  r.cls = SHMS_CLASS_TINY;
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EINVAL, "worker class");
  r.cls = SHMS_CLASS_EXTRA_LARGE;
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EINVAL, "not configured");
  r.cls = SHMS_CLASS_STANDARD;
  r.tenant = "has space";
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EINVAL, "has a space (0x20) at 3");
  r.tenant = "bob";
  r.deadline_ns = UINT64_MAX;
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EINVAL, "no deadline");
  r.deadline_ns = 0;
  r.activation = "job-1";
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EINVAL, "no activation");
  r.activation = NULL;
  ck_assert_shms_err(shms_request_prepare(h, NULL, &p), SHMS_EINVAL, "request is NULL");
  ck_assert_shms_err(shms_request_prepare(h, &r, NULL), SHMS_EINVAL, "prepared request is NULL");
  ck_assert_int_eq(memcmp(&p, &untouched, sizeof p), 0); /* every failure left it as it was */
  /* The allow list admits alice, once and for all her prepared acquires. */
  r.cls = SHMS_CLASS_LARGE;
  r.tenant = "alice";
  ck_assert_shms_ok(shms_request_prepare(h, &r, &p));
  shms_lease l;
  ck_assert_shms_ok(shms_acquire_prepared(h, &p, &l));
  ck_assert_uint_eq(l.cls, SHMS_CLASS_LARGE);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_err(shms_acquire_prepared(h, NULL, &l), SHMS_EINVAL, "prepared request is NULL");
  ck_assert_shms_err(shms_acquire_prepared(h, &p, NULL), SHMS_EINVAL, "lease is NULL");
  ck_assert_shms_err(shms_try_acquire_prepared(NULL, &p, &l), SHMS_EINVAL, "handle is NULL");
  sched_close(h, name);
}
END_TEST

START_TEST(another_handle_or_incarnation_is_stale) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL), *other;
  shms_prepared p = prepare(h, "alice");
  shms_lease l;
  ck_assert_shms_ok(shms_attach(name, 0, &other));
  struct seen before = look(h);
  ck_assert_shms_err(shms_acquire_prepared(other, &p, &l), SHMS_ESTALE, "another handle");
  ck_assert_shms_err(shms_try_acquire_prepared(other, &p, &l), SHMS_ESTALE, "another handle");
  assert_same(before, look(h));
  /* Detached: a handle attached after it (even at the same address) is another handle. */
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_assert_shms_err(shms_acquire_prepared(h, &p, &l), SHMS_ESTALE, "another handle");
  assert_same(before, look(h));
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_detach(other));
  /* The segment made again under its name: another incarnation. */
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  ck_assert_shms_ok(shms_destroy(name, SHMS_DESTROY_FORCE));
  harness_create(name, &cfg);
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  before = look(h);
  ck_assert_shms_err(shms_acquire_prepared(h, &p, &l), SHMS_ESTALE,
                     "another segment or incarnation");
  assert_same(before, look(h));
  sched_close(h, name);
}
END_TEST

/* Every byte of a prepared request counts: any one changed makes it corrupt, and nothing is
 * taken. A forgery that names another tenant (one the allow list refuses) is one such change. */
START_TEST(corrupt_or_forged_is_refused) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].allow_count = 1;
  strcpy(cfg.classes[SHMS_CLASS_STANDARD].allow[0], "alice");
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_prepared good = prepare(h, "alice"), bad;
  shms_lease l;
  struct seen before = look(h);
  for (size_t i = 0; i < sizeof good; i++)
    for (unsigned bit = 0; bit < 8; bit += 3) {
      memcpy(&bad, &good, sizeof bad);
      ((unsigned char *)&bad)[i] ^= (unsigned char)(1u << bit);
      int rc = shms_acquire_prepared(h, &bad, &l);
      ck_assert_msg(rc == SHMS_ESTALE, "byte %zu bit %u: %s (%s)", i, bit, shms_err_name(rc),
                    shms_last_error_detail());
      assert_same(before, look(h));
    }
  /* "alice" -> "mallory" in place, the check word kept: the name's bytes are in the request. */
  memcpy(&bad, &good, sizeof bad);
  unsigned char *bytes = (unsigned char *)&bad;
  size_t at = 0;
  while (at + 5 <= sizeof bad && memcmp(bytes + at, "alice", 5) != 0)
    at++;
  ck_assert_uint_lt(at + 5, sizeof bad);
  memcpy(bytes + at, "bob\0\0", 5);
  ck_assert_shms_err(shms_acquire_prepared(h, &bad, &l), SHMS_ESTALE, "corrupt");
  memset(&bad, 0, sizeof bad);
  ck_assert_shms_err(shms_try_acquire_prepared(h, &bad, &l), SHMS_ESTALE, "");
  assert_same(before, look(h));
  ck_assert_shms_ok(shms_acquire_prepared(h, &good, &l)); /* the original still works */
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

START_TEST(what_can_change_is_checked_each_time) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_prepared p = prepare(h, "alice");
  shms_lease l;
  ck_assert_shms_ok(shms_drain(h));
  ck_assert_shms_err(shms_acquire_prepared(h, &p, &l), SHMS_ESHUTDOWN, "draining");
  ck_assert_int_eq(shms_resume(h), 1);
  ck_assert_shms_ok(shms_acquire_prepared(h, &p, &l));
  ck_assert_shms_ok(shms_quarantine(h, &l, 7));
  ck_assert_shms_err(shms_try_acquire_prepared(h, &p, &l), SHMS_EQUARANTINED, "quarantined");
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, -1), 1);
  ck_assert_shms_ok(shms_try_acquire_prepared(h, &p, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

struct waiter {
  shms_t *h;
  const shms_prepared *p;
  shms_lease lease;
  int rc;
};

static void *acquire_thread(void *arg) {
  struct waiter *w = arg;
  w->rc = shms_acquire_prepared(w->h, w->p, &w->lease);
  return NULL;
}

/* No cell free: the prepared acquire queues the request it was prepared from (its tenant and
 * priority) and waits for it as shms_acquire does. */
START_TEST(without_a_free_cell_it_queues) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("carol", 5);
  shms_prepared p;
  ck_assert_shms_ok(shms_request_prepare(h, &r, &p));
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  struct waiter w = {.h = h, .p = &p, .rc = 1};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, acquire_thread, &w), 0);
  /* Until its request is queued: the fast word's count, read atomically. (Not shms_observe:
   * the dispatch pass counts queued tenants with a plain increment, which ThreadSanitizer
   * reports against an observer reading it at the same moment.) */
  while (SHMS__FAST_QUEUED(shms__load_64(&h->cls[SHMS_CLASS_STANDARD].ctl->fast)) == 0)
    sched_yield();
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_shms_ok(w.rc);
  char tenant[SHMS_TENANT_MAX + 1];
  cell_tenant(h, w.lease.cell, tenant); /* granted to the request queued for carol */
  ck_assert_str_eq(tenant, "carol");
  ck_assert_shms_ok(shms_release(h, &w.lease));
  sched_close(h, name);
}
END_TEST

/* The start time cell c records for its lease (0: not stamped yet). */
static uint64_t cell_since(shms_t *h, uint32_t c) {
  shms_cell_info cells[4];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, cells, 4, &n));
  ck_assert_uint_lt(c, n);
  return cells[c].since_ns;
}

/* A prepared acquire's fast path leaves its lease's start unstamped, sparing the clock: the next
 * shms_upkeep (the supervisor's tick) stamps it with the time it looked, once. A plain acquire's
 * lease is stamped at once, and upkeep leaves it be. */
START_TEST(a_prepared_lease_is_stamped_by_upkeep) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = sched_open(&name, 2, 8, NULL);
  shms_prepared p = prepare(h, "alice");
  shms_request r = sched_req("bob", 0);
  shms_lease a, b;
  uint64_t t0 = sched_fake_now;
  ck_assert_shms_ok(shms_acquire_prepared(h, &p, &a));
  ck_assert_shms_ok(shms_acquire(h, &r, &b));
  ck_assert_uint_eq(cell_since(h, a.cell), 0);
  ck_assert_uint_eq(cell_since(h, b.cell), t0);
  sched_fake_now += 5000000;
  ck_assert_int_eq(shms_upkeep(h), 1);
  ck_assert_uint_eq(cell_since(h, a.cell), t0 + 5000000);
  ck_assert_uint_eq(cell_since(h, b.cell), t0);
  sched_fake_now += 5000000;
  ck_assert_int_eq(shms_upkeep(h), 0); /* stamped once: the age does not restart */
  ck_assert_uint_eq(cell_since(h, a.cell), t0 + 5000000);
  /* The next lease on the cell starts unstamped again: never the previous one's time. */
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_shms_ok(shms_acquire_prepared(h, &p, &a));
  ck_assert_uint_eq(cell_since(h, a.cell), 0);
  ck_assert_int_eq(shms_upkeep(h), 1);
  ck_assert_uint_eq(cell_since(h, a.cell), sched_fake_now);
  /* Upkeep writes: an observer handle may not. */
  shms_t *o = NULL;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  ck_assert_shms_err(shms_upkeep(o), SHMS_EINVAL, "observer");
  ck_assert_shms_ok(shms_detach(o));
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_shms_ok(shms_release(h, &b));
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

/* Without a supervisor, a waiter stamps the leases it waits behind when it checks on them after
 * sleeping a whole poll interval (1 s): whoever waits learns how long the holders have held. */
START_TEST(a_waiter_stamps_the_prepared_lease_it_waits_behind) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_prepared p = prepare(h, "alice");
  shms_lease held;
  ck_assert_shms_ok(shms_acquire_prepared(h, &p, &held));
  ck_assert_uint_eq(cell_since(h, held.cell), 0);
  struct waiter w = {.h = h, .p = &p, .rc = 1};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, acquire_thread, &w), 0);
  /* The waiter's first poll is 1 s after it sleeps: allow ten. */
  uint64_t until = shms__real_now_ns() + 10ull * 1000000000ull, since = 0;
  while ((since = cell_since(h, held.cell)) == 0 && shms__real_now_ns() < until)
    sched_yield();
  ck_assert_uint_ne(since, 0);
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_shms_ok(w.rc);
  ck_assert_shms_ok(shms_release(h, &w.lease));
  sched_close(h, name);
}
END_TEST

struct worker {
  shms_t *h;
  const shms_prepared *p;
  int failures;
};

enum { THREADS = 4, ROUNDS = 2000 };

static void *lease_loop(void *arg) {
  struct worker *w = arg;
  for (int i = 0; i < ROUNDS; i++) {
    shms_lease l;
    if (shms_acquire_prepared(w->h, w->p, &l) != SHMS_OK || shms_release(w->h, &l) != SHMS_OK)
      w->failures++;
  }
  return NULL;
}

/* One prepared request shared by threads at once (it is only read): every acquire succeeds,
 * on the fast path or queued, and the class ends as it began. */
START_TEST(threads_share_one_prepared_request) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 16, NULL);
  shms_prepared p = prepare(h, "shared");
  pthread_t t[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (struct worker){.h = h, .p = &p};
    ck_assert_int_eq(pthread_create(&t[i], NULL, lease_loop, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_int_eq(w[i].failures, 0);
  }
  struct seen end = look(h);
  ck_assert_uint_eq(end.available, 2);
  ck_assert_uint_eq(end.queued, 0);
  ck_assert_uint_eq(end.granted, (uint64_t)THREADS * ROUNDS);
  sched_close(h, name);
}
END_TEST

/* tenant-max-active: no fast path, the dispatcher's books (queue, look, withdraw). */
START_TEST(tenant_limits_still_apply) {
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  cfg.classes[SHMS_CLASS_STANDARD].tenant_max_active = 1;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_prepared p = prepare(h, "dave");
  shms_lease a, b;
  ck_assert_shms_ok(shms_acquire_prepared(h, &p, &a));
  ck_assert_shms_err(shms_try_acquire_prepared(h, &p, &b), SHMS_EWOULDBLOCK, "tenant's limit");
  ck_assert_uint_eq(look(h).queued, 0);
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_shms_ok(shms_try_acquire_prepared(h, &p, &b));
  ck_assert_shms_ok(shms_release(h, &b));
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("prepared");
  TCase *tc = harness_tcase("prepared");
  tcase_add_test(tc, prepared_acquires_as_plain_ones_do);
  tcase_add_test(tc, preparing_validates_once_what_acquire_would);
  tcase_add_test(tc, another_handle_or_incarnation_is_stale);
  tcase_add_test(tc, corrupt_or_forged_is_refused);
  tcase_add_test(tc, what_can_change_is_checked_each_time);
  tcase_add_test(tc, without_a_free_cell_it_queues);
  tcase_add_test(tc, tenant_limits_still_apply);
  tcase_add_test(tc, threads_share_one_prepared_request);
  tcase_add_test(tc, a_prepared_lease_is_stamped_by_upkeep);
  tcase_add_test(tc, a_waiter_stamps_the_prepared_lease_it_waits_behind);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * Spinning before sleeping (client/spin.c): what a spinning waiter must still do. The window is
 * set far longer than any test runs, so a spin that missed what ends it would never end (the
 * suite's timeout fails the test): a spinning waiter still takes its grant, a cancelled one still
 * ends, an interrupt still cuts the spin short, a spinning worker still takes its job. No timing:
 * each test waits for the waiter to be spinning (the handle's count of spinners) before it acts.
 * Then the rules that decide whether to spin at all: the back-off after failed spins, the CPUs
 * against the waiters, and SHMSCHED_SPIN_US; and the yield of an acquire before it queues.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "sched_util.h"

#define FOREVER_NS (3600ull * 1000 * 1000 * 1000) /* "never ends by itself", within a test */

/* A handle whose waits spin for FOREVER_NS, on any machine (two CPUs counted even on one). */
static shms_t *spin_open(const char **name) {
  shms_config cfg;
  harness_config(&cfg, 1, 8);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 64};
  shms_t *h = sched_open(name, 0, 0, &cfg);
  shms__spin_set_window_ns(FOREVER_NS);
  shms__spin_set_cpus(2);
  return h;
}

struct waiter {
  shms_t *h;
  shms_ticket t;
  shms_worker_t *w;
  shms_lease lease;
  shms_job job;
  int rc;
};

static void *wait_thread(void *arg) {
  struct waiter *z = arg;
  z->rc = z->w != NULL ? shms_worker_take(z->w, UINT64_MAX, &z->job)
                       : shms_wait(z->h, &z->t, UINT64_MAX, &z->lease);
  return NULL;
}

/* Start z's wait on a thread and return once it spins. */
static pthread_t spinning(struct waiter *z) {
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, z), 0);
  while (ck_pr_load_32(&z->h->spinning) == 0)
    sched_yield();
  return th;
}

/* The holder's release hands the cell to the spinning waiter, which never announced sleep. */
START_TEST(a_spinning_waiter_takes_its_grant) {
  const char *name;
  shms_t *h = spin_open(&name);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  struct waiter z = {.h = h, .t = sched_enqueue(h, "waiter", 0, 0)};
  pthread_t th = spinning(&z);
  uint64_t won = ck_pr_load_64(&h->spin_won);
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_shms_ok(z.rc);
  ck_assert_uint_ge(ck_pr_load_64(&h->spin_won), won + 1);
  ck_assert_uint_eq(z.lease.cell, held.cell);
  ck_assert_shms_ok(shms_release(h, &z.lease));
  sched_close(h, name);
}
END_TEST

START_TEST(a_spinning_waiter_that_is_cancelled_ends) {
  const char *name;
  shms_t *h = spin_open(&name);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  struct waiter z = {.h = h, .t = sched_enqueue(h, "waiter", 0, 0)};
  pthread_t th = spinning(&z);
  ck_assert_int_eq(shms_cancel(h, &z.t), 1);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(z.rc, SHMS_ECANCELLED);
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

START_TEST(an_interrupt_cuts_a_spin_short) {
  const char *name;
  shms_t *h = spin_open(&name);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  struct waiter z = {.h = h, .t = sched_enqueue(h, "waiter", 0, 0)};
  pthread_t th = spinning(&z);
  ck_assert_shms_ok(shms_interrupt(h, 1));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(z.rc, SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_interrupt(h, 0));
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &z.t, UINT64_MAX, &z.lease)); /* still queued: its grant */
  ck_assert_shms_ok(shms_release(h, &z.lease));
  /* An idle worker spinning for a job likewise. */
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &z.w));
  th = spinning(&z);
  ck_assert_shms_ok(shms_interrupt(h, 1));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(z.rc, SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_interrupt(h, 0));
  ck_assert_shms_ok(shms_worker_close(z.w));
  sched_close(h, name);
}
END_TEST

/* The worker spins for its next job and takes it; the client spins for the result and gets it. */
START_TEST(a_spinning_worker_and_client_complete_a_job) {
  const char *name;
  shms_t *h = spin_open(&name);
  struct waiter z = {.h = h};
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &z.w));
  pthread_t th = spinning(&z);
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "client"};
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "ping", 4, 0, &t));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_shms_ok(z.rc);
  ck_assert_uint_eq(z.job.payload_len, 4);
  ck_assert_int_eq(memcmp(z.job.payload, "ping", 4), 0);
  ck_assert_shms_ok(shms_worker_complete(z.w, &z.job, 7, "pong", 4));
  char buf[8];
  shms_result res;
  ck_assert_shms_ok(shms_wait_result(h, &t, UINT64_MAX, buf, sizeof buf, &res));
  ck_assert_int_eq(res.status, 7);
  ck_assert_int_eq(memcmp(buf, "pong", 4), 0);
  ck_assert_shms_ok(shms_worker_close(z.w));
  sched_close(h, name);
}
END_TEST

/* Failed spins back off: after f in a row, 2^f - 1 waits sleep at once (f at most 6); a won spin
 * resets. A word that never changes and a window of 1 ns: each spin that runs fails. */
START_TEST(failed_spins_back_off_and_a_won_one_resets) {
  const char *name;
  shms_t *h = spin_open(&name);
  shms__spin_set_window_ns(1);
  struct shms__spin st = {0};
  uint64_t word = 5;
  uint32_t f = 0;
  for (int round = 0; round < 9; round++) {
    uint64_t lost = h->spin_lost;
    ck_assert_int_eq(shms__spin(h, &st, &word, 5, 0, 1), SHMS__SPUN_NOT);
    ck_assert_uint_eq(h->spin_lost, lost + 1); /* it spun, and lost */
    f = f < 6 ? f + 1 : 6;
    ck_assert_uint_eq(st.fails, f);
    ck_assert_uint_eq(st.skip, (1u << f) - 1);
    for (uint32_t s = 0; s < (1u << f) - 1; s++) /* these sleep at once: no spin at all */
      ck_assert_int_eq(shms__spin(h, &st, &word, 5, 0, 1), SHMS__SPUN_NOT);
    ck_assert_uint_eq(h->spin_lost, lost + 1);
    ck_assert_uint_eq(st.skip, 0);
  }
  /* A spin that sees the word change resets the record. */
  shms__spin_set_window_ns(FOREVER_NS);
  struct waiter z = {.h = h};
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  z.t = sched_enqueue(h, "waiter", 0, 0);
  struct shms__spin *rec = &h->spin[SHMS_CLASS_STANDARD][1];
  rec->fails = 6;
  rec->skip = 0;
  pthread_t th = spinning(&z);
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_shms_ok(z.rc);
  ck_assert_uint_eq(rec->fails, 0);
  ck_assert_shms_ok(shms_release(h, &z.lease));
  sched_close(h, name);
}
END_TEST

/* No spin with one CPU, nor with as many waiters as CPUs (a holder needs one). */
START_TEST(no_spin_without_a_cpu_to_spare) {
  const char *name;
  shms_t *h = spin_open(&name);
  struct shms__spin st = {0};
  uint64_t word = 5, lost = h->spin_lost;
  shms__spin_set_cpus(1);
  ck_assert_int_eq(shms__spin(h, &st, &word, 5, 0, 1), SHMS__SPUN_NOT);
  shms__spin_set_cpus(4);
  ck_assert_int_eq(shms__spin(h, &st, &word, 5, 0, 4), SHMS__SPUN_NOT);
  ck_assert_int_eq(shms__spin(h, &st, &word, 5, 0, 9), SHMS__SPUN_NOT);
  ck_assert_uint_eq(h->spin_lost, lost); /* none of them spun */
  ck_assert_uint_eq(st.fails, 0);        /* nor learnt anything */
  /* A word that already changed: look again, spinning or not. */
  ck_assert_int_eq(shms__spin(h, &st, &word, 6, 0, 9), SHMS__SPUN_CHANGED);
  /* With a CPU to spare it spins (a 1 ns window: and loses). */
  shms__spin_set_window_ns(1);
  ck_assert_int_eq(shms__spin(h, &st, &word, 5, 0, 3), SHMS__SPUN_NOT);
  ck_assert_uint_eq(h->spin_lost, lost + 1);
  sched_close(h, name);
}
END_TEST

/* A lease class's holders need CPUs too: with two cells held and one request queued, a waiter on
 * two CPUs sleeps at once (a spinner would keep a descheduled holder off its CPU, and that
 * holder's release is what it waits for), and on three it spins. The rule once counted only the
 * queued requests, and spun here on two. */
START_TEST(no_spin_while_holders_and_waiters_fill_the_cpus) {
  const char *name;
  shms_config cfg;
  harness_config(&cfg, 2, 8);
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms__spin_set_window_ns(1); /* a spin, if any, loses at once */
  shms_request r = sched_req("a", 0);
  shms_lease l1, l2, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l1));
  ck_assert_shms_ok(shms_acquire(h, &r, &l2));
  shms_ticket t = sched_enqueue(h, "a", 0, 0);
  uint64_t lost = h->spin_lost;
  shms__spin_set_cpus(2);
  ck_assert_shms_err(shms_wait(h, &t, 1000000, &l), SHMS_ETIMEDOUT, "still queued");
  ck_assert_uint_eq(h->spin_lost, lost); /* slept without spinning */
  /* A waiter that announced its sleep sleeps: the next look is another request's. */
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_shms_err(shms_wait(h, &t, 0, &l), SHMS_ECANCELLED, "cancelled");
  t = sched_enqueue(h, "a", 0, 0);
  shms__spin_set_cpus(3);
  ck_assert_shms_err(shms_wait(h, &t, 1000000, &l), SHMS_ETIMEDOUT, "still queued");
  ck_assert_uint_eq(h->spin_lost, lost + 1); /* spun (and lost) */
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_shms_err(shms_wait(h, &t, 0, &l), SHMS_ECANCELLED, "cancelled");
  ck_assert_shms_ok(shms_release(h, &l1));
  ck_assert_shms_ok(shms_release(h, &l2));
  sched_close(h, name);
}
END_TEST

/* Yielding before queueing: the hook runs where the acquire would call sched_yield. */
static shms_t *yield_h;
static shms_lease yield_held;
static uint32_t yields;
static void release_at_yield(void) {
  yields++;
  ck_assert_shms_ok(shms_release(yield_h, &yield_held));
}
static void count_yield(void) { ck_pr_inc_32(&yields); } /* on the acquirer's thread */

static uint64_t grants_from_the_queue(shms_t *h) {
  shms_class_stats st;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_STANDARD, &st));
  uint64_t n = 0;
  for (int b = 0; b < SHMS_WAIT_BUCKETS; b++)
    n += st.wait_buckets[b];
  return n;
}

/* An acquire, plain or prepared, that finds the only cell held gives its CPU away before it
 * queues; the holder, run meanwhile, releases; the acquire's second look takes the cell, and
 * nothing was queued. Without the yield the acquire would queue for a cell nobody releases. */
START_TEST(an_acquire_that_finds_no_cell_yields_and_takes_the_one_freed_meanwhile) {
  const char *name;
  shms_t *h = spin_open(&name);
  shms_request r = sched_req("holder", 0), a = sched_req("acquirer", 0);
  shms_prepared p;
  ck_assert_shms_ok(shms_request_prepare(h, &a, &p));
  yield_h = h;
  shms__test_on_yield(release_at_yield);
  for (int prepared = 0; prepared <= 1; prepared++) {
    yields = 0;
    ck_assert_shms_ok(shms_acquire(h, &r, &yield_held));
    shms_lease l;
    ck_assert_shms_ok(prepared ? shms_acquire_prepared(h, &p, &l) : shms_acquire(h, &a, &l));
    ck_assert_uint_eq(yields, 1);
    ck_assert_uint_eq(l.cell, yield_held.cell);
    ck_assert_uint_eq(grants_from_the_queue(h), 0);
    ck_assert_shms_ok(shms_release(h, &l));
  }
  /* A try never yields: it says would-block. */
  yields = 0;
  ck_assert_shms_ok(shms_acquire(h, &r, &yield_held));
  shms_lease l;
  ck_assert_shms_err(shms_try_acquire(h, &a, &l), SHMS_EWOULDBLOCK, "no free cell");
  ck_assert_uint_eq(yields, 0);
  shms__test_on_yield(NULL);
  ck_assert_shms_ok(shms_release(h, &yield_held));
  sched_close(h, name);
}
END_TEST

struct acquirer {
  shms_t *h;
  int rc;
};

static void *acquire_thread(void *arg) {
  struct acquirer *z = arg;
  shms_request a = sched_req("acquirer", 0);
  shms_lease l;
  z->rc = shms_acquire(z->h, &a, &l);
  if (z->rc == SHMS_OK)
    z->rc = shms_release(z->h, &l);
  return NULL;
}

/* Queued requests are the class's backlog once they outnumber the CPUs: an acquire then queues
 * behind them at once (a second look would only overtake them). With as many as the CPUs, it
 * yields first. */
START_TEST(no_yield_while_more_requests_are_queued_than_cpus) {
  const char *name;
  shms_t *h = spin_open(&name);
  shms__spin_set_window_ns(0); /* the acquirer's wait sleeps: nothing here is timed */
  shms__test_on_yield(count_yield);
  shms_request r = sched_req("holder", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t[2] = {sched_enqueue(h, "q0", 0, 0), sched_enqueue(h, "q1", 0, 0)};
  for (uint32_t cpus = 1; cpus <= 2; cpus++) {
    shms__spin_set_cpus(cpus);
    ck_pr_store_32(&yields, 0);
    struct acquirer z = {.h = h, .rc = -1};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, acquire_thread, &z), 0);
    shms_class_stats st;
    do { /* until the acquire is queued behind the two */
      sched_yield();
      ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_STANDARD, &st));
    } while (st.queue_depth < 3);
    ck_assert_uint_eq(ck_pr_load_32(&yields), cpus == 1 ? 0 : 1);
    /* Let it through: the two withdrawn, the cell released. */
    for (int i = 0; i < 2; i++)
      ck_assert_int_eq(shms_cancel(h, &t[i]), 1);
    ck_assert_shms_ok(shms_release(h, &held));
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_shms_ok(z.rc);
    shms_lease l;
    for (int i = 0; i < 2; i++)
      ck_assert_shms_err(shms_wait(h, &t[i], 0, &l), SHMS_ECANCELLED, "cancelled");
    ck_assert_shms_ok(shms_acquire(h, &r, &held));
    t[0] = sched_enqueue(h, "q0", 0, 0);
    t[1] = sched_enqueue(h, "q1", 0, 0);
  }
  shms__test_on_yield(NULL);
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(shms_cancel(h, &t[i]), 1);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

/* SHMSCHED_SPIN_US: 0..1000 microseconds; anything else fails the attach, saying why. */
START_TEST(the_spin_window_comes_from_the_environment) {
  const char *name;
  shms_t *h = spin_open(&name), *h2;
  ck_assert_int_eq(setenv("SHMSCHED_SPIN_US", "50", 1), 0);
  ck_assert_shms_ok(shms_attach(name, 0, &h2));
  ck_assert_uint_eq(shms__spin_window_ns(), 50000);
  ck_assert_shms_ok(shms_detach(h2));
  const char *bad[] = {"1001", "-1", "20us", "x", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ck_assert_int_eq(setenv("SHMSCHED_SPIN_US", bad[i], 1), 0);
    h2 = NULL;
    ck_assert_int_eq(shms_attach(name, 0, &h2), SHMS_EINVAL);
    ck_assert_ptr_null(h2);
    ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "SHMSCHED_SPIN_US"));
    ck_assert_uint_eq(shms__spin_window_ns(), 50000); /* unchanged */
  }
  ck_assert_int_eq(setenv("SHMSCHED_SPIN_US", "0", 1), 0);
  ck_assert_shms_ok(shms_attach(name, 0, &h2));
  ck_assert_uint_eq(shms__spin_window_ns(), 0);
  ck_assert_shms_ok(shms_detach(h2));
  ck_assert_int_eq(unsetenv("SHMSCHED_SPIN_US"), 0);
  ck_assert_shms_ok(shms_attach(name, 0, &h2));
  ck_assert_uint_eq(shms__spin_window_ns(), 20000); /* the default */
  ck_assert_shms_ok(shms_detach(h2));
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("spin");
  TCase *tc = tcase_create("spin");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, a_spinning_waiter_takes_its_grant);
  tcase_add_test(tc, no_spin_while_holders_and_waiters_fill_the_cpus);
  tcase_add_test(tc, a_spinning_waiter_that_is_cancelled_ends);
  tcase_add_test(tc, an_interrupt_cuts_a_spin_short);
  tcase_add_test(tc, a_spinning_worker_and_client_complete_a_job);
  tcase_add_test(tc, failed_spins_back_off_and_a_won_one_resets);
  tcase_add_test(tc, no_spin_without_a_cpu_to_spare);
  tcase_add_test(tc, the_spin_window_comes_from_the_environment);
  tcase_add_test(tc, an_acquire_that_finds_no_cell_yields_and_takes_the_one_freed_meanwhile);
  tcase_add_test(tc, no_yield_while_more_requests_are_queued_than_cpus);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

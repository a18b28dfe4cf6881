/*
 * Idle means idle: a waiter that nothing concerns sleeps until its timeout,
 * waking only for the once-a-second safety poll (SHMS__POLL_NS). Counted in
 * the waiting thread's own voluntary context switches (each return from a
 * futex sleep is one), over a wait of WAIT_NS with nobody changing anything:
 * at most one per poll interval, plus the timeout's own.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>

#include "client/client.h"
#include "sched_util.h"

#define WAIT_NS (2500ull * 1000 * 1000)
/* Wake-ups a wait of 2.5 s may take with nothing happening: at most one a second (the safety
 * poll: two), one more if the poll's due time was set before the wait began, and the
 * timeout's own. */
#define MAX_WAKES 4L

static long voluntary_switches(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nvcsw;
}

/* Wait for t with nothing happening; returns how often this thread woke. Counted before the
 * assertion: Check's bookkeeping (a malloc, which creates this thread's arena, and a write
 * under a lock other threads' assertions share) sleeps too. */
static long idle_wait(shms_t *h, const shms_ticket *t) {
  shms_lease l;
  long before = voluntary_switches();
  int rc = shms_wait(h, t, WAIT_NS, &l);
  long wakes = voluntary_switches() - before;
  ck_assert_int_eq(rc, SHMS_ETIMEDOUT);
  return wakes;
}

START_TEST(a_queued_waiter_wakes_once_a_poll) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "waiter", 0, 0);
  long wakes = idle_wait(h, &t);
  ck_assert_msg(wakes <= MAX_WAKES, "an idle waiter woke %ld times in %llu ms (at most %ld)", wakes,
                WAIT_NS / 1000000, MAX_WAKES);
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

struct waiter {
  shms_t *h;
  shms_ticket t;
  long wakes;
};

static void *wait_thread(void *arg) {
  struct waiter *w = arg;
  w->wakes = idle_wait(w->h, &w->t);
  return NULL;
}

START_TEST(threads_waiting_in_one_process_each_wake_once_a_poll) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  struct waiter w[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    w[i] = (struct waiter){.h = h, .t = sched_enqueue(h, "waiter", 0, 0)};
    ck_assert_int_eq(pthread_create(&th[i], NULL, wait_thread, &w[i]), 0);
  }
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    ck_assert_msg(w[i].wakes <= MAX_WAKES, "idle waiter %d woke %ld times in %llu ms (at most %ld)",
                  i, w[i].wakes, WAIT_NS / 1000000, MAX_WAKES);
  }
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

START_TEST(an_idle_worker_wakes_once_a_poll) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 64};
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_job job;
  long before = voluntary_switches();
  int rc = shms_worker_take(w, WAIT_NS, &job);
  long wakes = voluntary_switches() - before;
  ck_assert_int_eq(rc, SHMS_ETIMEDOUT);
  ck_assert_msg(wakes <= MAX_WAKES, "an idle worker woke %ld times in %llu ms (at most %ld)", wakes,
                WAIT_NS / 1000000, MAX_WAKES);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/*
 * shms_interrupt wakes a wait asleep on another thread at once (a lease wait, a worker's), and
 * makes later waits return at once too until it is cleared; the request stays queued.
 */
struct sleeper {
  shms_t *h;
  shms_ticket t;
  shms_worker_t *w;
  int rc;
};

static void *sleep_thread(void *arg) {
  struct sleeper *z = arg;
  shms_lease l;
  shms_job job;
  z->rc = z->w != NULL ? shms_worker_take(z->w, UINT64_MAX, &job)
                       : shms_wait(z->h, &z->t, UINT64_MAX, &l);
  return NULL;
}

/* Wait (yielding) until the sleeper's word says it sleeps: its futex wait is under way or
 * just about to be. */
static void until_sleeping(const uint64_t *word64, const uint32_t *word32, uint64_t bit) {
  while (!(word64 != NULL ? (ck_pr_load_64((uint64_t *)word64) & bit)
                          : (ck_pr_load_32((uint32_t *)word32) & (uint32_t)bit)))
    sched_yield();
}

START_TEST(an_interrupt_wakes_a_sleeping_wait) {
  shms_config cfg;
  harness_config(&cfg, 1, 8);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 64};
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  struct sleeper z = {.h = h, .t = sched_enqueue(h, "waiter", 0, 0)};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, sleep_thread, &z), 0);
  struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  until_sleeping(&shms__slot_at(k, z.t.slot)->word, NULL, SHMS__SLOT_SLEEPING);
  ck_assert_shms_ok(shms_interrupt(h, 1));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(z.rc, SHMS_ETIMEDOUT);
  shms_lease l;
  ck_assert_int_eq(shms_wait(h, &z.t, UINT64_MAX, &l), SHMS_ETIMEDOUT); /* still in force */
  ck_assert_shms_ok(shms_interrupt(h, 0));
  ck_assert_int_eq(shms_wait(h, &z.t, 0, &l), SHMS_ETIMEDOUT); /* still queued */
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &z.t, UINT64_MAX, &l)); /* its grant */
  ck_assert_shms_ok(shms_release(h, &l));
  /* An idle worker likewise. */
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &z.w));
  ck_assert_int_eq(pthread_create(&th, NULL, sleep_thread, &z), 0);
  k = &h->cls[SHMS_CLASS_SMALL];
  until_sleeping(NULL, &k->cells[shms_worker_cell(z.w)].worker_futex, 1);
  ck_assert_shms_ok(shms_interrupt(h, 1));
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_int_eq(z.rc, SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_interrupt(h, 0));
  ck_assert_shms_ok(shms_worker_close(z.w));
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("idle");
  TCase *tc = harness_tcase("idle");
  tcase_add_test(tc, a_queued_waiter_wakes_once_a_poll);
  tcase_add_test(tc, threads_waiting_in_one_process_each_wake_once_a_poll);
  tcase_add_test(tc, an_idle_worker_wakes_once_a_poll);
  tcase_add_test(tc, an_interrupt_wakes_a_sleeping_wait);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

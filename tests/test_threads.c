/*
 * Threads: one process, several threads sharing one handle, churning
 * acquire, release, enqueue, cancel and wait. The library keeps one
 * registration per process and per-thread operation brackets; afterwards the
 * audit is clean and everything is back. ThreadSanitizer runs this suite too
 * (a TSan build sees Concurrency Kit's atomics as compiler builtins).
 */
#include <pthread.h>
#include <stdlib.h>

#include "sched_util.h"

#define THREADS 4
#define STEPS   3000

static shms_t *shared;

static void *churn(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  const char *tenants[] = {"a", "b", "c"};
  long bad = 0;
  for (int i = 0; i < STEPS; i++) {
    shms_request r = sched_req(tenants[rand_r(&seed) % 3], (int32_t)(rand_r(&seed) % 3));
    shms_lease l;
    shms_ticket t;
    int rc;
    switch (rand_r(&seed) % 3) {
    case 0:
      if ((rc = shms_acquire(shared, &r, &l)) == SHMS_OK)
        bad += shms_release(shared, &l) != SHMS_OK;
      else
        bad++;
      break;
    case 1:
      if ((rc = shms_try_acquire(shared, &r, &l)) == SHMS_OK)
        bad += shms_release(shared, &l) != SHMS_OK;
      else
        bad += rc != SHMS_EWOULDBLOCK;
      break;
    default:
      if (shms_enqueue(shared, &r, &t) != SHMS_OK) {
        bad++;
        break;
      }
      if (rand_r(&seed) % 2)
        bad += shms_cancel(shared, &t) < 0;
      rc = shms_wait(shared, &t, UINT64_MAX, &l);
      if (rc == SHMS_OK)
        bad += shms_release(shared, &l) != SHMS_OK;
      else
        bad += rc != SHMS_ECANCELLED;
    }
  }
  return (void *)bad;
}

START_TEST(threads_share_a_handle) {
  const char *name;
  shared = sched_open(&name, 2, 64, NULL);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&th[i], NULL, churn, (void *)(uintptr_t)(i + 1)), 0);
  long bad = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    ck_assert_int_eq(pthread_join(th[i], &r), 0);
    bad += (long)r;
  }
  ck_assert_int_eq(bad, 0);
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(shared, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  shms_class_stats s = sched_stats(shared);
  ck_assert_uint_eq(s.available, 2);
  ck_assert_uint_eq(s.queue_depth, 0);
  sched_close(shared, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("threads");
  TCase *tc = harness_tcase("shared handle");
  tcase_add_test(tc, threads_share_a_handle);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * Every lease is counted for its tenant, and a tenant's figures outlive its idle periods: leases
 * taken on the fast path (a lone tenant's, every one) count as grants from the queue do; the
 * counts survive the tenant going idle, its process detaching, dying, or cycling through more
 * tenants than its tallies hold; a full tenant table folds them into `_other` without losing
 * any. Per-tenant grants add up to the class's.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/atomic.h"

static shms_t *open_class(const char **name, uint32_t table) {
  shms_config cfg;
  harness_config(&cfg, 2, 16);
  cfg.tenant_table = table;
  return sched_open(name, 0, 0, &cfg);
}

/* A lease taken at once (the fast path: nobody queued) and given back. */
static void fast_once(shms_t *h, const char *tenant) {
  shms_request r = sched_req(tenant, 0);
  shms_lease l;
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_release(h, &l));
}

/* The class's tenants as an observer reads them; *n of them. */
static uint32_t rows_of(const char *name, shms_tenant_stats *rows, uint32_t max) {
  shms_t *o;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  uint32_t n = 0;
  ck_assert_shms_ok(shms_tenants_snapshot(o, SHMS_CLASS_STANDARD, rows, max, &n));
  ck_assert_uint_le(n, max);
  ck_assert_shms_ok(shms_detach(o));
  return n;
}

static uint64_t granted_to(const shms_tenant_stats *rows, uint32_t n, const char *tenant) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(rows[i].name, tenant) == 0)
      return rows[i].granted;
  return 0;
}

static uint64_t granted_sum(const shms_tenant_stats *rows, uint32_t n) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < n; i++)
    sum += rows[i].granted;
  return sum;
}

/* A lone tenant served on the fast path only: each of its leases counted, while idle too. */
START_TEST(a_lone_tenant_on_the_fast_path_is_counted) {
  const char *name;
  shms_t *h = open_class(&name, 0);
  for (int i = 0; i < 25; i++)
    fast_once(h, "lone");
  shms_tenant_stats rows[8];
  uint32_t n = rows_of(name, rows, 8);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(rows[0].name, "lone");
  ck_assert_uint_eq(rows[0].granted, 25);
  ck_assert_uint_eq(rows[0].queued, 0);
  ck_assert_uint_eq(sched_stats(h).granted, 25);
  /* The baton's view says the same. */
  ck_assert_shms_ok(shms_tenants(h, SHMS_CLASS_STANDARD, rows, 8, &n));
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(rows[0].granted, 25);
  sched_close(h, name);
}
END_TEST

/* Grants from the queue, and their waits, stay with the tenant once it is idle and its record
 * in the class is gone; with the fast path's, they add up to the class's grants. */
START_TEST(queued_grants_are_kept_while_idle) {
  const char *name;
  shms_t *h = open_class(&name, 0);
  shms_request r = sched_req("holder", 0);
  shms_lease a, b, l;
  ck_assert_shms_ok(shms_try_acquire(h, &r, &a));
  ck_assert_shms_ok(shms_try_acquire(h, &r, &b));
  shms_ticket t[3];
  for (int i = 0; i < 3; i++)
    t[i] = sched_enqueue(h, "queued", 0, 0);
  ck_assert_shms_ok(shms_release(h, &a));
  for (int i = 0; i < 3; i++) {
    ck_assert_shms_ok(shms_wait(h, &t[i], UINT64_MAX, &l));
    ck_assert_shms_ok(shms_release(h, &l));
  }
  ck_assert_shms_ok(shms_release(h, &b));
  fast_once(h, "queued"); /* attends the releases: the idle tenant's record goes */
  shms_tenant_stats rows[8];
  uint32_t n = rows_of(name, rows, 8);
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_eq(granted_to(rows, n, "queued"), 4);
  ck_assert_uint_eq(granted_to(rows, n, "holder"), 2);
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(rows[i].name, "queued") == 0) {
      ck_assert_uint_eq(rows[i].queued, 0);
      ck_assert_uint_gt(rows[i].total_wait_ns, 0);
      ck_assert_uint_ge(rows[i].total_wait_ns, rows[i].max_wait_ns);
    }
  ck_assert_uint_eq(granted_sum(rows, n), sched_stats(h).granted);
  sched_close(h, name);
}
END_TEST

/* Children take leases and go: one detaches, one is killed holding its count; a third takes over
 * an entry and moves what its predecessor tallied into the table. Nothing is lost. */
START_TEST(counts_outlive_their_processes) {
  const char *name;
  shms_t *h = open_class(&name, 0);
  int gate[2];
  ck_assert_int_eq(pipe(gate), 0);
  pid_t kids[3];
  for (int c = 0; c < 3; c++) {
    kids[c] = fork();
    ck_assert_int_ge(kids[c], 0);
    if (kids[c] == 0) {
      shms_t *ch;
      if (shms_attach(name, 0, &ch) != SHMS_OK)
        _exit(1);
      shms_request r = sched_req(c == 0 ? "detached" : "killed", 0);
      for (int i = 0; i < 10 + c; i++) {
        shms_lease l;
        if (shms_try_acquire(ch, &r, &l) != SHMS_OK || shms_release(ch, &l) != SHMS_OK)
          _exit(2);
      }
      if (c == 0) {
        shms_detach(ch);
        _exit(0);
      }
      char x = 1;
      if (write(gate[1], &x, 1) != 1)
        _exit(3);
      pause(); /* killed here, attached */
      _exit(4);
    }
  }
  int status;
  ck_assert_int_eq(waitpid(kids[0], &status, 0), kids[0]);
  ck_assert_int_eq(WEXITSTATUS(status), 0);
  char x;
  for (int c = 1; c < 3; c++)
    ck_assert_int_eq(read(gate[0], &x, 1), 1);
  for (int c = 1; c < 3; c++) {
    kill(kids[c], SIGKILL);
    ck_assert_int_eq(waitpid(kids[c], NULL, 0), kids[c]);
  }
  shms_tenant_stats rows[8];
  uint32_t n = rows_of(name, rows, 8);
  ck_assert_uint_eq(granted_to(rows, n, "detached"), 10);
  ck_assert_uint_eq(granted_to(rows, n, "killed"), 23);
  /* New processes take the freed and the dead entries over, moving their tallies. */
  for (int c = 0; c < 3; c++) {
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
      shms_t *ch;
      _exit(shms_attach(name, 0, &ch) == SHMS_OK ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(p, &status, 0), p);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
  }
  n = rows_of(name, rows, 8);
  ck_assert_uint_eq(granted_to(rows, n, "detached"), 10);
  ck_assert_uint_eq(granted_to(rows, n, "killed"), 23);
  ck_assert_uint_eq(granted_sum(rows, n), sched_stats(h).granted);
  close(gate[0]);
  close(gate[1]);
  sched_close(h, name);
}
END_TEST

/* One process cycling through more tenants than it has tallies: each counted exactly. */
START_TEST(a_process_of_many_tenants_counts_each) {
  const char *name;
  shms_t *h = open_class(&name, 0);
  char tenant[16];
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 9; i++) {
      snprintf(tenant, sizeof tenant, "m%d", i);
      for (int j = 0; j <= i; j++)
        fast_once(h, tenant);
    }
  shms_tenant_stats rows[16];
  uint32_t n = rows_of(name, rows, 16);
  ck_assert_uint_eq(n, 9);
  for (int i = 0; i < 9; i++) {
    snprintf(tenant, sizeof tenant, "m%d", i);
    ck_assert_uint_eq(granted_to(rows, n, tenant), 3 * (uint64_t)(i + 1));
  }
  ck_assert_uint_eq(granted_sum(rows, n), sched_stats(h).granted);
  sched_close(h, name);
}
END_TEST

struct lessee {
  shms_t *h;
  pthread_barrier_t *start;
  int n;
};

static void *lease_loop(void *arg) {
  struct lessee *l = arg;
  pthread_barrier_wait(l->start);
  for (int i = 0; i < l->n; i++)
    fast_once(l->h, "threads");
  return NULL;
}

/* Threads of one process share its tally, and add to it atomically once there are two: their
 * counts add up (only the lease the first thread counts as the second starts, with its plain
 * add, may be lost). */
START_TEST(threads_of_a_process_count_together) {
  const char *name;
  shms_t *h = open_class(&name, 0);
  enum { THREADS = 2, EACH = 20000 };
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t tid[THREADS];
  struct lessee l = {h, &start, EACH};
  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&tid[i], NULL, lease_loop, &l), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(tid[i], NULL);
  pthread_barrier_destroy(&start);
  shms_tenant_stats rows[4];
  uint32_t n = rows_of(name, rows, 4);
  ck_assert_uint_eq(sched_stats(h).granted, THREADS * EACH);
  ck_assert_uint_le(granted_to(rows, n, "threads"), THREADS * EACH);
  ck_assert_uint_ge(granted_to(rows, n, "threads"), THREADS * EACH - 1);
  sched_close(h, name);
}
END_TEST

/* More tenants than the table has records: the least recently active are summed into `_other`,
 * and the rows still add up to the class. */
START_TEST(a_full_table_keeps_the_sum_in_other) {
  const char *name;
  shms_t *h = open_class(&name, 16);
  char tenant[16];
  for (int i = 0; i < 40; i++) {
    snprintf(tenant, sizeof tenant, "f%02d", i);
    for (int j = 0; j < 3; j++)
      fast_once(h, tenant);
  }
  shms_tenant_stats rows[64];
  uint32_t n = rows_of(name, rows, 64);
  ck_assert_uint_lt(n, 40);
  ck_assert_uint_gt(granted_to(rows, n, "_other"), 0);
  ck_assert_uint_eq(granted_to(rows, n, "f39"), 3); /* the most recent keep their own row */
  ck_assert_uint_eq(granted_sum(rows, n), 120);
  ck_assert_uint_eq(sched_stats(h).granted, 120);
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tally");
  TCase *tc = harness_tcase("tally");
  tcase_add_test(tc, a_lone_tenant_on_the_fast_path_is_counted);
  tcase_add_test(tc, queued_grants_are_kept_while_idle);
  tcase_add_test(tc, counts_outlive_their_processes);
  tcase_add_test(tc, a_process_of_many_tenants_counts_each);
  tcase_add_test(tc, threads_of_a_process_count_together);
  tcase_add_test(tc, a_full_table_keeps_the_sum_in_other);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

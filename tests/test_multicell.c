/*
 * Multi-cell requests: a request of K cells holds all K or none; the cells freed while it is
 * next are reserved for it; every way a request or lease ends gives all K back; a dead holder's
 * lease of K cells is disposed of whole; it is charged K times its hold.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sched_util.h"

static shms_request multi(const char *tenant, uint32_t cells) {
  shms_request r = sched_req(tenant, 0);
  r.cells = cells;
  return r;
}

static shms_ticket enqueue_multi(shms_t *h, const char *tenant, uint32_t cells) {
  shms_request r = multi(tenant, cells);
  shms_ticket t;
  ck_assert_shms_ok(shms_enqueue(h, &r, &t));
  return t;
}

static uint32_t violations(shms_t *h) {
  char report[4096];
  uint32_t v;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &v));
  ck_assert_msg(v == 0, "%s", report);
  return v;
}

/* What a lease of several cells holds, checked through shms_lease_cells and shms_cells. */
static void assert_lease_cells(shms_t *h, const shms_lease *l, uint32_t want) {
  uint32_t cells[8];
  ck_assert_uint_eq(l->cells, want);
  ck_assert_int_eq(shms_lease_cells(h, l, cells, 8), (int)want);
  shms_cell_info info[8];
  uint32_t n;
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, info, 8, &n));
  for (uint32_t i = 0; i < want; i++) {
    ck_assert(i == 0 || cells[i] > cells[i - 1]); /* ascending */
    const shms_cell_info *ci = &info[cells[i]];
    ck_assert_uint_eq(ci->state, SHMS_CELL_LEASED);
    ck_assert_uint_eq(ci->lead, l->cell);
    ck_assert_uint_eq(ci->lease_cells, want);
    ck_assert_int_eq(ci->pid, getpid());
  }
}

START_TEST(a_request_of_two_cells_holds_both) {
  const char *name;
  shms_t *h = sched_open(&name, 3, 8, NULL);
  shms_request r = multi("pair", 2);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  assert_lease_cells(h, &l, 2);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.leased, 2);
  ck_assert_uint_eq(s.available, 1);
  violations(h);
  /* A copy naming a companion instead of the lead is no lease. */
  uint32_t cells[2];
  ck_assert_int_eq(shms_lease_cells(h, &l, cells, 2), 2);
  shms_lease forged = l;
  forged.cell = cells[1];
  ck_assert_int_eq(shms_release(h, &forged), SHMS_ELEASE);
  ck_assert_shms_ok(shms_release(h, &l));
  s = sched_stats(h);
  ck_assert_uint_eq(s.available, 3);
  ck_assert_int_eq(shms_release(h, &l), SHMS_ELEASE); /* once */
  ck_assert_int_eq(shms_lease_cells(h, &l, cells, 2), SHMS_ELEASE);
  violations(h);
  sched_close(h, name);
}
END_TEST

START_TEST(cells_freed_are_reserved_until_all_are_there) {
  const char *name;
  shms_t *h = sched_open(&name, 3, 8, NULL);
  shms_request one = sched_req("one", 0);
  shms_lease a, b;
  ck_assert_shms_ok(shms_acquire(h, &one, &a));
  ck_assert_shms_ok(shms_acquire(h, &one, &b));
  shms_ticket big = enqueue_multi(h, "big", 3);
  shms_lease l;
  ck_assert_int_eq(shms_wait(h, &big, 0, &l), SHMS_ETIMEDOUT);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.reserved, 1); /* the free cell is held for it */
  ck_assert_uint_eq(s.available, 0);
  /* Nothing else goes ahead of it: not the fast path, not a later request of one cell. */
  ck_assert_int_eq(shms_try_acquire(h, &one, &l), SHMS_EWOULDBLOCK);
  shms_ticket small = sched_enqueue(h, "small", 0, 0);
  /* explain says who gathers and how far it got, and what holds the others back. */
  shms_explanation x;
  ck_assert_shms_ok(shms_explain(h, &big, &x));
  ck_assert_uint_eq(x.cells, 3);
  ck_assert_uint_eq(x.gathered, 1);
  ck_assert(x.blocked_by & SHMS_BLOCK_GATHER);
  ck_assert_shms_ok(shms_explain(h, &small, &x));
  ck_assert_uint_eq(x.cells, 1);
  ck_assert_uint_eq(x.gathered, 0);
  ck_assert(x.blocked_by & SHMS_BLOCK_GATHER);
  ck_assert_shms_ok(shms_release(h, &a));
  ck_assert_int_eq(shms_wait(h, &big, 0, &l), SHMS_ETIMEDOUT);
  ck_assert_uint_eq(sched_stats(h).reserved, 2);
  violations(h);
  ck_assert_shms_ok(shms_release(h, &b));
  ck_assert_shms_ok(shms_wait(h, &big, 0, &l));
  assert_lease_cells(h, &l, 3);
  ck_assert_uint_eq(sched_stats(h).reserved, 0);
  shms_lease m;
  ck_assert_int_eq(shms_wait(h, &small, 0, &m), SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_ok(shms_wait(h, &small, 0, &m)); /* the queue goes on */
  ck_assert_shms_ok(shms_release(h, &m));
  violations(h);
  sched_close(h, name);
}
END_TEST

/* A gathering request that ends any way gives its reserved cells back at once. */
static void gathering_ends(int how) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 8, NULL);
  shms_request one = sched_req("one", 0);
  shms_lease a, l;
  ck_assert_shms_ok(shms_acquire(h, &one, &a));
  shms_set_clock(sched_fake_clock, NULL);
  shms_request r = multi("big", 2);
  r.deadline_ns = sched_fake_now + 1000000;
  shms_ticket big;
  ck_assert_shms_ok(shms_enqueue(h, &r, &big));
  shms_ticket small = sched_enqueue(h, "small", 0, 0);
  ck_assert_uint_eq(sched_stats(h).reserved, 1);
  int want;
  if (how == 0) {
    ck_assert_int_eq(shms_cancel(h, &big), 1);
    want = SHMS_ECANCELLED;
  } else if (how == 1) {
    sched_fake_now += 2000000;
    want = SHMS_EDEADLINE;
  } else {
    ck_assert_shms_ok(shms_drain(h));
    want = SHMS_ESHUTDOWN;
  }
  ck_assert_int_eq(shms_wait(h, &big, 0, &l), want);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.reserved, 0);
  if (how != 2) { /* the free cell went to the next request */
    ck_assert_shms_ok(shms_wait(h, &small, 0, &l));
    ck_assert_shms_ok(shms_release(h, &l));
  } else {
    ck_assert_uint_eq(s.available, 1);
  }
  ck_assert_shms_ok(shms_release(h, &a));
  violations(h);
  shms_set_clock(NULL, NULL);
  sched_close(h, name);
}

START_TEST(a_cancelled_gathering_returns_its_cells) { gathering_ends(0); }
END_TEST

START_TEST(an_expired_gathering_returns_its_cells) { gathering_ends(1); }
END_TEST

START_TEST(a_drained_gathering_returns_its_cells) { gathering_ends(2); }
END_TEST

START_TEST(bad_requests_of_several_cells_are_refused) {
  shms_config cfg;
  harness_config(&cfg, 2, 8);
  cfg.classes[SHMS_CLASS_SMALL] = cfg.classes[SHMS_CLASS_STANDARD];
  cfg.classes[SHMS_CLASS_SMALL].tenant_max_active = 1;
  cfg.classes[SHMS_CLASS_LARGE] = cfg.classes[SHMS_CLASS_STANDARD];
  cfg.classes[SHMS_CLASS_LARGE].mode = SHMS_MODE_WORKER;
  cfg.classes[SHMS_CLASS_LARGE].payload = 64;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_request r = multi("t", 3);
  shms_lease l;
  shms_ticket t;
  ck_assert_int_eq(shms_acquire(h, &r, &l), SHMS_EINVAL);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "has 2 cells"));
  ck_assert_int_eq(shms_enqueue(h, &r, &t), SHMS_EINVAL);
  r.cells = 2;
  r.cls = SHMS_CLASS_SMALL;
  ck_assert_int_eq(shms_enqueue(h, &r, &t), SHMS_EINVAL);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "tenant-max-active"));
  r.cls = SHMS_CLASS_LARGE;
  ck_assert_int_eq(shms_submit(h, &r, "x", 1, 0, &t), SHMS_EINVAL);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "worker class"));
  r.cls = SHMS_CLASS_STANDARD;
  shms_prepared p;
  ck_assert_int_eq(shms_request_prepare(h, &r, &p), SHMS_EINVAL);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.available, 2);
  sched_close(h, name);
}
END_TEST

START_TEST(quarantine_takes_every_cell_of_the_lease) {
  const char *name;
  shms_t *h = sched_open(&name, 3, 8, NULL);
  shms_request r = multi("pair", 2);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_quarantine(h, &l, 77));
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.quarantined, 2);
  ck_assert_uint_eq(s.available, 1);
  violations(h);
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, -1), 2);
  ck_assert_uint_eq(sched_stats(h).available, 3);
  violations(h);
  sched_close(h, name);
}
END_TEST

START_TEST(a_try_of_several_cells_takes_them_or_nothing) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 8, NULL);
  shms_request r = multi("pair", 2), one = sched_req("one", 0);
  shms_lease l, a;
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l));
  ck_assert_uint_eq(l.cells, 2);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_ok(shms_acquire(h, &one, &a));
  ck_assert_int_eq(shms_try_acquire(h, &r, &l), SHMS_EWOULDBLOCK);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.reserved, 0); /* withdrawn: nothing kept for it */
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_shms_ok(shms_release(h, &a));
  violations(h);
  sched_close(h, name);
}
END_TEST

/* A child takes a lease of two cells and is killed holding it. */
static void dead_pair_holder(unsigned policy) {
  shms_config cfg;
  harness_config(&cfg, 3, 8);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = policy;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    shms_request r = multi("doomed", 2);
    shms_lease l;
    if (shms_attach(name, 0, &c) != SHMS_OK || shms_acquire(c, &r, &l) != SHMS_OK ||
        write(p[1], "r", 1) != 1)
      _exit(1);
    for (;;)
      pause();
  }
  char b;
  ck_assert_int_eq(read(p[0], &b, 1), 1);
  close(p[0]);
  close(p[1]);
  shms_ticket t = enqueue_multi(h, "waiting", 3);
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(h, &rec));
  violations(h);
  shms_lease l;
  shms_class_stats s = sched_stats(h);
  if (policy == SHMS_ON_DEATH_RELEASE) {
    ck_assert_shms_ok(shms_wait(h, &t, 0, &l)); /* all three went to the waiter */
    ck_assert_uint_eq(l.cells, 3);
    ck_assert_shms_ok(shms_release(h, &l));
  } else {
    ck_assert_uint_eq(s.quarantined, 2);
    ck_assert_int_eq(shms_wait(h, &t, 0, &l), SHMS_ETIMEDOUT);
    ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, -1), 2);
    ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
    ck_assert_shms_ok(shms_release(h, &l));
  }
  violations(h);
  sched_close(h, name);
}

START_TEST(a_dead_holders_cells_are_quarantined_together) {
  dead_pair_holder(SHMS_ON_DEATH_QUARANTINE);
}
END_TEST

START_TEST(a_dead_holders_cells_are_released_together) { dead_pair_holder(SHMS_ON_DEATH_RELEASE); }
END_TEST

/* A grant of two cells not accepted within grant-timeout goes back whole: the next request gets
 * both cells, and the late request gathers again when its waiter comes back. */
START_TEST(a_late_grant_of_two_cells_is_revoked_whole) {
  shms_config cfg;
  harness_config(&cfg, 2, 8);
  cfg.classes[SHMS_CLASS_STANDARD].grant_timeout_ns = 1000000000ull;
  const char *name;
  shms_set_clock(sched_fake_clock, NULL);
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_ticket late = enqueue_multi(h, "late", 2); /* granted at once; nobody accepts it */
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.granted_unaccepted, 2);
  sched_fake_now += 1000000000ull;
  shms_ticket next = enqueue_multi(h, "next", 2); /* its kick revokes the grant */
  ck_assert_uint_eq(sched_stats(h).revoked, 1);
  shms_lease ln, ll;
  ck_assert_shms_ok(shms_wait(h, &next, 0, &ln));
  ck_assert_uint_eq(ln.cells, 2);
  violations(h);
  ck_assert_int_eq(shms_wait(h, &late, 0, &ll), SHMS_ETIMEDOUT); /* back in line */
  ck_assert_shms_ok(shms_release(h, &ln));
  ck_assert_shms_ok(shms_wait(h, &late, 0, &ll));
  ck_assert_uint_eq(ll.cells, 2);
  ck_assert_shms_ok(shms_release(h, &ll));
  ck_assert_uint_eq(sched_stats(h).available, 2);
  violations(h);
  shms_set_clock(NULL, NULL);
  sched_close(h, name);
}
END_TEST

/* Fair by time: a lease of K cells is charged K times what it held. */
START_TEST(a_lease_of_several_cells_is_charged_for_each) {
  shms_config cfg;
  harness_config(&cfg, 4, 8);
  cfg.classes[SHMS_CLASS_STANDARD].fairness = SHMS_FAIRNESS_TIME;
  const char *name;
  shms_set_clock(sched_fake_clock, NULL);
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_request r = multi("quad", 3);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  sched_fake_now += 100000000ull; /* 100 ms */
  ck_assert_shms_ok(shms_release(h, &l));
  /* The tenant's cell-time is settled by the next pass: any request makes one. */
  shms_ticket t = sched_enqueue(h, "other", 0, 0);
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  shms_policy_row rows[8];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_policy_list(h, rows, 8, &n));
  int found = 0;
  for (uint32_t i = 0; i < n && i < 8; i++)
    if (strcmp(rows[i].name, "quad") == 0) {
      found = 1;
      ck_assert_uint_eq(rows[i].cell_ns[SHMS_CLASS_STANDARD], 300000000ull);
    }
  ck_assert(found);
  shms_set_clock(NULL, NULL);
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("multicell");
  TCase *tc = harness_tcase("multicell");
  tcase_add_test(tc, a_request_of_two_cells_holds_both);
  tcase_add_test(tc, cells_freed_are_reserved_until_all_are_there);
  tcase_add_test(tc, a_cancelled_gathering_returns_its_cells);
  tcase_add_test(tc, an_expired_gathering_returns_its_cells);
  tcase_add_test(tc, a_drained_gathering_returns_its_cells);
  tcase_add_test(tc, bad_requests_of_several_cells_are_refused);
  tcase_add_test(tc, quarantine_takes_every_cell_of_the_lease);
  tcase_add_test(tc, a_try_of_several_cells_takes_them_or_nothing);
  tcase_add_test(tc, a_dead_holders_cells_are_quarantined_together);
  tcase_add_test(tc, a_dead_holders_cells_are_released_together);
  tcase_add_test(tc, a_late_grant_of_two_cells_is_revoked_whole);
  tcase_add_test(tc, a_lease_of_several_cells_is_charged_for_each);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

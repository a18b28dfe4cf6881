/*
 * Named quotas: a request naming quotas is granted a cell only while each has a unit free, and
 * holds one of each until its lease ends (by release, cancel, the death of its holder, or the
 * repair of its quarantined cell); never more than a quota's maximum are held; a request
 * waiting for a quota holds back no other request; the maximum can be changed at runtime.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sched_util.h"

#define SEC (1000ull * 1000 * 1000)

static shms_t *open_quota(const char **name, unsigned cells, uint32_t max, int on_death) {
  shms_config cfg;
  harness_config(&cfg, cells, 16);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = (uint32_t)on_death;
  cfg.quota_count = 1;
  strcpy(cfg.quotas[0].name, "gpu");
  cfg.quotas[0].max = max;
  return sched_open(name, 0, 0, &cfg);
}

static const char *const gpu[] = {"gpu"};

static shms_request quota_req(const char *tenant, int32_t priority) {
  shms_request r = sched_req(tenant, priority);
  r.quotas = gpu;
  r.nquotas = 1;
  return r;
}

static shms_quota_row quota_row(shms_t *h, const char *quota) {
  shms_quota_row rows[SHMS_QUOTAS_MAX];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_quota_list(h, rows, SHMS_QUOTAS_MAX, &n));
  for (uint32_t i = 0; i < n && i < SHMS_QUOTAS_MAX; i++)
    if (strcmp(rows[i].name, quota) == 0)
      return rows[i];
  ck_abort_msg("no quota '%s' listed", quota);
  return rows[0];
}

/* Observe the segment until the quota has this many waiters (the test's timeout bounds it). */
static void await_waiters(shms_t *h, uint32_t waiters) {
  while (quota_row(h, "gpu").waiters != waiters)
    sched_yield();
}

static void assert_audit_clean(shms_t *h) {
  char report[4096];
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "audit: %s", report);
}

struct shared {
  int inflight, maxseen;
};

/* Four processes, each a request naming a quota of 2 on a class of 4 cells: two hold at once,
 * never three; each one that ends lets exactly one more in. */
START_TEST(max_is_never_exceeded_under_concurrency) {
  const char *name;
  shms_t *h = open_quota(&name, 4, 2, SHMS_ON_DEATH_QUARANTINE);
  struct shared *sh =
      mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(sh, MAP_FAILED);
  int got[2], go[4][2];
  ck_assert_int_eq(pipe(got), 0);
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(pipe(go[i]), 0);
    kids[i] = fork();
    ck_assert_int_ge(kids[i], 0);
    if (kids[i] == 0) {
      shms_t *ch;
      char tenant[8];
      snprintf(tenant, sizeof tenant, "t%d", i);
      shms_request r = quota_req(tenant, 0);
      shms_lease l;
      char me = (char)i, b;
      if (shms_attach(name, 0, &ch) != SHMS_OK || shms_acquire(ch, &r, &l) != SHMS_OK)
        _exit(1);
      int now = __atomic_add_fetch(&sh->inflight, 1, __ATOMIC_SEQ_CST), seen = sh->maxseen;
      while (now > seen && !__atomic_compare_exchange_n(&sh->maxseen, &seen, now, 0,
                                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
      if (write(got[1], &me, 1) != 1 || read(go[i][0], &b, 1) != 1)
        _exit(2);
      __atomic_sub_fetch(&sh->inflight, 1, __ATOMIC_SEQ_CST);
      _exit(shms_release(ch, &l) == SHMS_OK && shms_detach(ch) == SHMS_OK ? 0 : 3);
    }
  }
  int holding[4] = {0}, held = 0;
  char who;
  for (int n = 0; n < 2; n++) {
    ck_assert_int_eq(read(got[0], &who, 1), 1);
    holding[(int)who] = 1;
  }
  await_waiters(h, 2); /* the other two are queued, parked for the quota */
  ck_assert_int_eq(__atomic_load_n(&sh->inflight, __ATOMIC_SEQ_CST), 2);
  ck_assert_uint_eq(quota_row(h, "gpu").used, 2);
  assert_audit_clean(h);
  /* End one holder at a time: exactly one waiter takes its place. */
  for (int done = 0; done < 4; done++) {
    int i = 0;
    while (!holding[i])
      i++;
    holding[i] = 0;
    ck_assert_int_eq(write(go[i][1], "x", 1), 1);
    int status;
    ck_assert_int_eq(waitpid(kids[i], &status, 0), kids[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", i, status);
    if (done < 2) {
      ck_assert_int_eq(read(got[0], &who, 1), 1);
      holding[(int)who] = 1;
      held++;
    }
  }
  ck_assert_int_eq(held, 2);
  ck_assert_int_eq(sh->maxseen, 2);
  shms_quota_row q = quota_row(h, "gpu");
  ck_assert_uint_eq(q.used, 0);
  ck_assert_uint_eq(q.waiters, 0);
  assert_audit_clean(h);
  munmap(sh, sizeof *sh);
  sched_close(h, name);
}
END_TEST

/* A request waiting for its quota holds back neither its tenant's next request nor another
 * tenant's: both are granted while it waits; it is granted when a unit comes back. */
START_TEST(no_head_of_line_blocking) {
  const char *name;
  shms_t *h = open_quota(&name, 4, 1, SHMS_ON_DEATH_QUARANTINE);
  shms_request r = quota_req("a", 0);
  shms_lease first, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &first));
  r.priority = 10; /* ahead of a's other request in a's order */
  shms_ticket blocked;
  ck_assert_shms_ok(shms_enqueue(h, &r, &blocked));
  shms_ticket mine = sched_enqueue(h, "a", 0, 0), other = sched_enqueue(h, "b", 0, 0);
  ck_assert_shms_ok(shms_wait(h, &mine, 10 * SEC, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_ok(shms_wait(h, &other, 10 * SEC, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_err(shms_wait(h, &blocked, 0, &l), SHMS_ETIMEDOUT, "still queued");
  ck_assert_uint_eq(quota_row(h, "gpu").waiters, 1);
  shms_explanation ex;
  ck_assert_shms_ok(shms_explain(h, &blocked, &ex));
  ck_assert_uint_eq(ex.blocked_by, SHMS_BLOCK_QUOTA);
  ck_assert_str_eq(ex.quota, "gpu");
  /* Acquires naming no quota still take the free cells. */
  shms_request plain = sched_req("c", 0);
  ck_assert_shms_ok(shms_try_acquire(h, &plain, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_ok(shms_release(h, &first));
  ck_assert_shms_ok(shms_wait(h, &blocked, 10 * SEC, &l));
  ck_assert_uint_eq(quota_row(h, "gpu").used, 1);
  ck_assert_uint_eq(quota_row(h, "gpu").waiters, 0);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_uint_eq(quota_row(h, "gpu").used, 0);
  assert_audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* A grant cancelled before it is accepted, and a waiting request cancelled, give back what they
 * hold: the unit, the waiter. */
START_TEST(cancel_returns_the_unit) {
  const char *name;
  shms_t *h = open_quota(&name, 2, 1, SHMS_ON_DEATH_QUARANTINE);
  shms_request r = quota_req("a", 0);
  shms_ticket granted, waiting;
  ck_assert_shms_ok(shms_enqueue(h, &r, &granted));
  ck_assert_shms_ok(shms_enqueue(h, &r, &waiting));
  await_waiters(h, 1);
  ck_assert_uint_eq(quota_row(h, "gpu").used, 1);
  ck_assert_int_eq(shms_cancel(h, &waiting), 1);
  ck_assert_uint_eq(quota_row(h, "gpu").waiters, 0);
  ck_assert_int_eq(shms_cancel(h, &granted), 1);
  ck_assert_uint_eq(quota_row(h, "gpu").used, 0);
  shms_lease l;
  ck_assert_shms_err(shms_wait(h, &granted, 0, &l), SHMS_ECANCELLED, "cancelled");
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l)); /* the unit is free again */
  ck_assert_shms_ok(shms_release(h, &l));
  assert_audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* A holder killed with SIGKILL: recovery settles its lease and the unit with it, once. With
 * on-holder-death=quarantine the unit stays held until the cell is repaired. */
static void killed_holder(int on_death) {
  const char *name;
  shms_t *h = open_quota(&name, 2, 1, on_death);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t kid = fork();
  ck_assert_int_ge(kid, 0);
  if (kid == 0) {
    shms_t *ch;
    shms_request r = quota_req("dies", 0);
    shms_lease l;
    if (shms_attach(name, 0, &ch) != SHMS_OK || shms_acquire(ch, &r, &l) != SHMS_OK)
      _exit(1);
    if (write(p[1], &l.cell, sizeof l.cell) != (ssize_t)sizeof l.cell)
      _exit(2);
    pause();
    _exit(0);
  }
  uint32_t cell;
  ck_assert_int_eq(read(p[0], &cell, sizeof cell), (ssize_t)sizeof cell);
  ck_assert_uint_eq(quota_row(h, "gpu").used, 1);
  kill(kid, SIGKILL);
  ck_assert_int_eq(waitpid(kid, NULL, 0), kid);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(h, &rec));
  shms_request r = quota_req("lives", 0);
  shms_lease l;
  if (on_death == SHMS_ON_DEATH_QUARANTINE) {
    ck_assert_uint_eq(rec.leases_quarantined, 1);
    ck_assert_uint_eq(quota_row(h, "gpu").used, 1); /* counts against it until repair */
    ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_EWOULDBLOCK, "quota");
    assert_audit_clean(h);
    ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, (int)cell), 1);
  } else {
    ck_assert_uint_eq(rec.leases_released, 1);
  }
  ck_assert_uint_eq(quota_row(h, "gpu").used, 0);
  ck_assert_shms_ok(shms_recover(h, &rec)); /* a second recovery gives nothing back again */
  ck_assert_uint_eq(quota_row(h, "gpu").used, 0);
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l));
  ck_assert_uint_eq(quota_row(h, "gpu").used, 1);
  ck_assert_shms_ok(shms_release(h, &l));
  assert_audit_clean(h);
  sched_close(h, name);
}

START_TEST(killed_holder_released_by_recovery) { killed_holder(SHMS_ON_DEATH_RELEASE); }
END_TEST

START_TEST(killed_holder_quarantined_until_repair) { killed_holder(SHMS_ON_DEATH_QUARANTINE); }
END_TEST

/* A higher maximum lets a waiting request in at once; a lower one revokes nothing, and the next
 * grant waits until the units in use fall below it. */
START_TEST(runtime_max_change_takes_effect_at_next_grant) {
  const char *name;
  shms_t *h = open_quota(&name, 4, 1, SHMS_ON_DEATH_QUARANTINE);
  shms_request r = quota_req("a", 0);
  shms_lease l1, l2, l3;
  ck_assert_shms_ok(shms_acquire(h, &r, &l1));
  shms_ticket t;
  ck_assert_shms_ok(shms_enqueue(h, &r, &t));
  await_waiters(h, 1);
  ck_assert_shms_ok(shms_policy_quota(h, "gpu", 2));
  ck_assert_shms_ok(shms_wait(h, &t, 10 * SEC, &l2));
  ck_assert_uint_eq(quota_row(h, "gpu").max, 2);
  ck_assert_shms_ok(shms_policy_quota(h, "gpu", 1)); /* two held: both keep theirs */
  ck_assert_uint_eq(quota_row(h, "gpu").used, 2);
  ck_assert_shms_ok(shms_release(h, &l1));
  ck_assert_shms_err(shms_try_acquire(h, &r, &l3), SHMS_EWOULDBLOCK, "quota");
  ck_assert_shms_ok(shms_release(h, &l2));
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l3));
  ck_assert_shms_ok(shms_release(h, &l3));
  /* A quota added at runtime is named like any other. */
  ck_assert_shms_ok(shms_policy_quota(h, "licence", 3));
  const char *const both[] = {"gpu", "licence"};
  r.quotas = both;
  r.nquotas = 2;
  ck_assert_shms_ok(shms_acquire(h, &r, &l1));
  ck_assert_uint_eq(quota_row(h, "licence").used, 1);
  ck_assert_shms_ok(shms_release(h, &l1));
  ck_assert_uint_eq(quota_row(h, "licence").used, 0);
  shms_event_record recs[64];
  size_t got = 0;
  uint64_t cursor = 0;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, 64, &got, NULL));
  int seen = 0;
  for (size_t i = 0; i < got; i++)
    seen += recs[i].event.kind == SHMS_EVENT_POLICY_CHANGED &&
            recs[i].event.reason == SHMS_POLICY_EVENT_QUOTA;
  ck_assert_int_eq(seen, 3);
  assert_audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* Every bad input is refused with a detail naming it, and changes nothing. */
START_TEST(bad_input_is_refused) {
  const char *name;
  shms_t *h = open_quota(&name, 2, 1, SHMS_ON_DEATH_QUARANTINE);
  shms_request r = sched_req("a", 0);
  shms_lease l;
  shms_ticket t;
  const char *const unknown[] = {"cpu"}, *const twice[] = {"gpu", "gpu"}, *const bad[] = {"a b"};
  const char *const nine[] = {"gpu", "b", "c", "d", "e", "f", "g", "h", "i"};
  r.quotas = unknown;
  r.nquotas = 1;
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_EINVAL, "no quota 'cpu'");
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EINVAL, "no quota 'cpu'");
  r.quotas = twice;
  r.nquotas = 2;
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_EINVAL, "named twice");
  r.quotas = bad;
  r.nquotas = 1;
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_EINVAL, "quota 1: name");
  r.quotas = nine;
  r.nquotas = 9;
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_EINVAL, "at most 8 quotas");
  r.quotas = NULL;
  r.nquotas = 1;
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_EINVAL, "quotas is NULL");
  r = quota_req("a", 0);
  r.cells = 2;
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_EINVAL, "names no quotas");
  r.cells = 0;
  shms_prepared p;
  ck_assert_shms_err(shms_request_prepare(h, &r, &p), SHMS_EINVAL, "prepared request names no");
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0); /* nothing was queued */
  ck_assert_uint_eq(quota_row(h, "gpu").used, 0);
  /* Policy: the maximum's range, the name, the table's bound, the right. */
  ck_assert_shms_err(shms_policy_quota(h, "gpu", 0), SHMS_EINVAL, "max: must be 1..4095");
  ck_assert_shms_err(shms_policy_quota(h, "gpu", 4096), SHMS_EINVAL, "got 4096");
  ck_assert_shms_err(shms_policy_quota(h, "", 1), SHMS_EINVAL, "quota name");
  char q[16];
  for (int i = 1; i < SHMS_QUOTAS_MAX; i++) {
    snprintf(q, sizeof q, "q%d", i);
    ck_assert_shms_ok(shms_policy_quota(h, q, 1));
  }
  ck_assert_shms_err(shms_policy_quota(h, "one-more", 1), SHMS_EQUEUEFULL, "table is full");
  ck_assert_uint_eq(quota_row(h, "gpu").max, 1);
  shms_t *o;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  ck_assert_shms_err(shms_policy_quota(o, "gpu", 2), SHMS_EINVAL, "observer");
  shms_detach(o);
  sched_close(h, name);
}
END_TEST

/* The configuration's table: names, maxima, duplicates, its bound. */
START_TEST(config_is_validated) {
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  cfg.quota_count = 1;
  strcpy(cfg.quotas[0].name, "gpu");
  cfg.quotas[0].max = 0;
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "quota gpu: max: must be 1..4095");
  cfg.quotas[0].max = 4096;
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "got 4096");
  cfg.quotas[0].max = 2;
  ck_assert_shms_ok(shms_config_validate(&cfg));
  cfg.quota_count = 2;
  strcpy(cfg.quotas[1].name, "gpu");
  cfg.quotas[1].max = 1;
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "named twice");
  strcpy(cfg.quotas[1].name, "a b");
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "quota 2: name");
  cfg.quota_count = SHMS_QUOTAS_MAX + 1;
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "the table holds 16");
  /* A worker class's jobs name quotas too (tests/test_worker_quota.c), checked the same way. */
  harness_config(&cfg, 2, 4);
  cfg.classes[SHMS_CLASS_STANDARD].mode = SHMS_MODE_WORKER;
  cfg.classes[SHMS_CLASS_STANDARD].payload = 64;
  cfg.quota_count = 1;
  strcpy(cfg.quotas[0].name, "gpu");
  cfg.quotas[0].max = 1;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_request r = quota_req("a", 0);
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "", 0, 0, &t));
  const char *const twice[] = {"gpu", "gpu"};
  r.quotas = twice;
  r.nquotas = 2;
  ck_assert_shms_err(shms_submit(h, &r, "", 0, 0, &t), SHMS_EINVAL, "named twice");
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("quota");
  TCase *tc = harness_tcase("quota");
  tcase_add_test(tc, max_is_never_exceeded_under_concurrency);
  tcase_add_test(tc, no_head_of_line_blocking);
  tcase_add_test(tc, cancel_returns_the_unit);
  tcase_add_test(tc, killed_holder_released_by_recovery);
  tcase_add_test(tc, killed_holder_quarantined_until_repair);
  tcase_add_test(tc, runtime_max_change_takes_effect_at_next_grant);
  tcase_add_test(tc, bad_input_is_refused);
  tcase_add_test(tc, config_is_validated);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * Out of memory, SQLite's way: for each call, learn how many heap allocations it makes, then make
 * each of them fail once in turn (shm/alloc.h's hook). Every time, the call must fail with
 * out-of-memory and a detail, or survive the failure by a slower path, and the segment must audit
 * clean with nothing left behind (the unit suite runs under ASan too: nothing leaked).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sched_util.h"
#include "shm/alloc.h"

/* One scenario's state, set up afresh for each failure point. */
struct fx {
  const char *name;
  shms_t *h;          /* the handle the scenario acts on (NULL: none yet) */
  shms_worker_t *w;   /* worker_open's */
  shms_ticket ticket; /* enqueue's or submit's */
  shms_recovery totals;
  unsigned events; /* told to on_event */
};

struct scenario {
  void (*setup)(struct fx *f);
  int (*op)(struct fx *f); /* the call under test, with the hook armed */
  /* Check the state after op returned rc (failed says whether one allocation failed), then
   * clean up everything setup made. */
  void (*verify)(struct fx *f, int rc, int failed);
};

/* 0 when the segment audits clean; else the violations, printed. */
static void audit_clean(const char *name) {
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  char report[4096];
  uint32_t violations = 1;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "audit: %s", report);
  ck_assert_shms_ok(shms_detach(h));
}

static uint32_t processes(shms_t *h) {
  uint32_t n = 0;
  ck_assert_shms_ok(shms_processes(h, NULL, 0, &n));
  return n;
}

/*
 * Fail allocation 1, 2, ... of s->op until op makes fewer allocations than the one armed (it
 * ran through); returns how many allocations op makes when nothing fails.
 */
static unsigned long oom_loop(const struct scenario *s) {
  for (unsigned long n = 1;; n++) {
    struct fx f = {0};
    s->setup(&f);
    shms__alloc_fail_at(n);
    int rc = s->op(&f);
    int failed = shms__alloc_count() >= n;
    shms__alloc_fail_at(0);
    if (rc < 0) {
      ck_assert_msg(failed, "failed %s without a failed allocation: %s", shms_err_name(rc),
                    shms_last_error_detail());
      ck_assert_msg(rc == SHMS_ENOMEM, "allocation %lu failed: %s (%s), expected out-of-memory", n,
                    shms_err_name(rc), shms_last_error_detail());
      ck_assert_msg(shms_last_error_detail()[0] != '\0', "allocation %lu: no detail", n);
    }
    s->verify(&f, rc, failed);
    if (!failed)
      return n - 1;
  }
}

/* ---- attach ---- */

static void attach_setup(struct fx *f) {
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  f->name = harness_name("oom");
  harness_create(f->name, &cfg);
}

static int attach_op(struct fx *f) { return shms_attach(f->name, 0, &f->h); }

static void attach_verify(struct fx *f, int rc, int failed) {
  (void)failed;
  if (rc != SHMS_OK) {
    ck_assert_ptr_null(f->h); /* out untouched */
    ck_assert_shms_ok(shms_attach(f->name, 0, &f->h));
  }
  ck_assert_uint_eq(processes(f->h), 1); /* one registration, ours: the failure took none */
  audit_clean(f->name);
  sched_close(f->h, f->name);
}

START_TEST(attach_fails_cleanly) {
  struct scenario s = {attach_setup, attach_op, attach_verify};
  ck_assert_uint_ge(oom_loop(&s), 2); /* the handle, the process's record of the file */
}
END_TEST

/* ---- calls that allocate nothing: create, enqueue, wait, check, submit ---- */

static int create_op(struct fx *f) {
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  f->name = harness_name("oom");
  return shms_create(f->name, &cfg);
}

static void nothing_setup(struct fx *f) { (void)f; }

static void create_verify(struct fx *f, int rc, int failed) {
  (void)failed;
  ck_assert_shms_ok(rc);
  audit_clean(f->name);
  ck_assert_shms_ok(shms_destroy(f->name, 0));
}

static void lease_setup(struct fx *f) { f->h = sched_open(&f->name, 1, 4, NULL); }

/* Enqueue while the only cell is held, then wait: queued, then granted once it is released. */
static int enqueue_wait_op(struct fx *f) {
  shms_lease held, got;
  shms_request r = sched_req("a", 0);
  int rc = shms_acquire(f->h, &r, &held);
  if (rc == SHMS_OK)
    rc = shms_enqueue(f->h, &r, &f->ticket);
  if (rc == SHMS_OK && (rc = shms_wait(f->h, &f->ticket, 0, &got)) == SHMS_ETIMEDOUT)
    rc = shms_release(f->h, &held);
  if (rc == SHMS_OK && (rc = shms_wait(f->h, &f->ticket, UINT64_MAX, &got)) == SHMS_OK)
    rc = shms_release(f->h, &got);
  if (rc == SHMS_OK) {
    char report[1024];
    uint32_t violations;
    rc = shms_check(f->h, report, sizeof report, &violations);
  }
  return rc;
}

static void lease_verify(struct fx *f, int rc, int failed) {
  (void)failed;
  ck_assert_shms_ok(rc);
  audit_clean(f->name);
  sched_close(f->h, f->name);
}

static void worker_setup(struct fx *f) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 64};
  f->h = sched_open(&f->name, 0, 0, &cfg);
}

static int submit_op(struct fx *f) {
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "a"};
  int rc = shms_submit(f->h, &r, "job", 3, 0, &f->ticket);
  return rc == SHMS_OK ? shms_cancel(f->h, &f->ticket) : rc;
}

static void submit_verify(struct fx *f, int rc, int failed) {
  ck_assert_int_eq(rc, 1); /* the cancellation installed */
  lease_verify(f, SHMS_OK, failed);
}

START_TEST(calls_that_allocate_nothing_cannot_run_out) {
  struct scenario create = {nothing_setup, create_op, create_verify};
  struct scenario enqueue = {lease_setup, enqueue_wait_op, lease_verify};
  struct scenario submit = {worker_setup, submit_op, submit_verify};
  ck_assert_uint_eq(oom_loop(&create), 0);
  ck_assert_uint_eq(oom_loop(&enqueue), 0);
  ck_assert_uint_eq(oom_loop(&submit), 0);
}
END_TEST

/* ---- worker_open ---- */

static int worker_open_op(struct fx *f) { return shms_worker_open(f->h, SHMS_CLASS_SMALL, &f->w); }

static void worker_open_verify(struct fx *f, int rc, int failed) {
  (void)failed;
  if (rc != SHMS_OK) {
    ck_assert_ptr_null(f->w);
    /* The class's one cell is still free for a worker: the failure bound none. */
    ck_assert_shms_ok(shms_worker_open(f->h, SHMS_CLASS_SMALL, &f->w));
  }
  ck_assert_shms_ok(shms_worker_close(f->w));
  audit_clean(f->name);
  sched_close(f->h, f->name);
}

START_TEST(worker_open_fails_cleanly) {
  struct scenario s = {worker_setup, worker_open_op, worker_open_verify};
  ck_assert_uint_ge(oom_loop(&s), 1);
}
END_TEST

/* ---- detach ---- */

/* A lease held and two requests queued behind it: detach must settle all three. */
static void busy_setup(struct fx *f) {
  shms_config cfg; /* released, not quarantined: a quarantined last cell would end the queue */
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  f->h = sched_open(&f->name, 0, 0, &cfg);
  shms_lease l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(f->h, &r, &l));
  sched_enqueue(f->h, "a", 0, 0);
  sched_enqueue(f->h, "b", 0, 0);
}

static int detach_op(struct fx *f) { return shms_detach(f->h); }

static void detach_verify(struct fx *f, int rc, int failed) {
  ck_assert_shms_ok(rc); /* without its list of requests, detach looks for them */
  shms_t *h; /* an observer: a member's attach could settle what a departed owner left */
  ck_assert_shms_ok(shms_attach(f->name, SHMS_ATTACH_OBSERVER, &h));
  shms_class_stats s = sched_stats(h);
  ck_assert_msg(s.queue_depth == 0 && s.leased == 0 && s.granted_unaccepted == 0 &&
                    s.available == 1,
                "failed=%d: queued %u leased %u available %u granted-unaccepted %u quarantined %u",
                failed, s.queue_depth, s.leased, s.available, s.granted_unaccepted, s.quarantined);
  ck_assert_uint_eq(processes(h), 0); /* ours is gone */
  audit_clean(f->name);
  sched_close(h, f->name);
}

START_TEST(detach_survives_running_out) {
  struct scenario s = {busy_setup, detach_op, detach_verify};
  ck_assert_uint_ge(oom_loop(&s), 1); /* its list of queued requests */
}
END_TEST

/* ---- recovery ---- */

/* A child attaches, takes the one cell, queues a request and dies without detaching. */
static void dead_setup(struct fx *f) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  f->name = harness_name("oom");
  harness_create(f->name, &cfg);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    shms_lease l;
    shms_request r = sched_req("dead", 0);
    shms_ticket t;
    int ok = shms_attach(f->name, 0, &c) == SHMS_OK && shms_acquire(c, &r, &l) == SHMS_OK &&
             shms_enqueue(c, &r, &t) == SHMS_OK;
    _exit(ok ? 0 : 1);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
  ck_assert_shms_ok(shms_attach(f->name, 0, &f->h));
}

static void count_event(const shms_event *ev, void *ctx) {
  (void)ev;
  ((struct fx *)ctx)->events++;
}

static int recover_dead_op(struct fx *f) {
  return shms_recover_dead(f->h, 0, count_event, f, &f->totals);
}

static int recover_full_op(struct fx *f) {
  return shms_recover_dead(f->h, SHMS_RECOVER_FULL, count_event, f, &f->totals);
}

static unsigned items(const shms_recovery *t) {
  return t->dead_processes + t->requests_owner_lost + t->grants_returned + t->leases_released +
         t->leases_quarantined + t->jobs_requeued + t->jobs_lost + t->workers_unbound +
         t->slots_freed + t->batons_recovered + t->counts_fixed;
}

/* A failed recovery may have done part of its work, never half a transition: recovering again
 * finishes the job and the segment audits clean. */
static void recover_verify(struct fx *f, int rc, int failed) {
  if (rc == SHMS_OK && failed) /* an event's record could not grow: that event is not told */
    ck_assert_uint_lt(f->events, items(&f->totals) + 1);
  else if (rc == SHMS_OK)
    ck_assert_uint_ge(f->events, items(&f->totals));
  if (rc != SHMS_OK)
    ck_assert_shms_ok(shms_recover_dead(f->h, 0, NULL, NULL, NULL));
  ck_assert_uint_eq(processes(f->h), 1); /* the dead one's entry freed */
  shms_class_stats s = sched_stats(f->h);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.leased, 0);
  audit_clean(f->name);
  sched_close(f->h, f->name);
}

START_TEST(recover_dead_fails_cleanly) {
  struct scenario s = {dead_setup, recover_dead_op, recover_verify};
  ck_assert_uint_ge(oom_loop(&s), 2); /* the cells it held, the record of its events */
}
END_TEST

START_TEST(full_recovery_fails_cleanly) {
  struct scenario s = {dead_setup, recover_full_op, recover_verify};
  ck_assert_uint_ge(oom_loop(&s), 2); /* the class's liveness cache, the record of its events */
}
END_TEST

int main(void) {
  Suite *s = suite_create("oom");
  TCase *tc = harness_tcase("oom");
  tcase_add_test(tc, attach_fails_cleanly);
  tcase_add_test(tc, calls_that_allocate_nothing_cannot_run_out);
  tcase_add_test(tc, worker_open_fails_cleanly);
  tcase_add_test(tc, detach_survives_running_out);
  tcase_add_test(tc, recover_dead_fails_cleanly);
  tcase_add_test(tc, full_recovery_fails_cleanly);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

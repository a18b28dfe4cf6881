/*
 * The contract across processes: a waiter in one process is woken by a
 * release in another, cancelled from a third, and many processes churning
 * acquire, release and cancel at once leave every cell and slot accounted
 * for. Processes are ordered with pipes (a byte, or EOF as a start gun),
 * never with sleeps.
 */
#include <ck_pr.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"

static void read_all(int fd, void *buf, size_t n) {
  ck_assert_int_eq(read(fd, buf, n), (ssize_t)n);
}

static int child_status(pid_t pid) {
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status), "child died of signal %d", WTERMSIG(status));
  return WEXITSTATUS(status);
}

/*
 * In a child: attach, enqueue for tenant, report the ticket, wait (in slices of slice_ns, or
 * without limit for UINT64_MAX); exit 0 if the outcome is expect.
 */
static pid_t spawn_waiter_sliced(const char *name, const char *tenant, int report_fd, int expect,
                                 uint64_t slice_ns) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid != 0)
    return pid;
  shms_t *h;
  if (shms_attach(name, 0, &h) != SHMS_OK)
    _exit(10);
  shms_request r = sched_req(tenant, 0);
  shms_ticket t;
  if (shms_enqueue(h, &r, &t) != SHMS_OK)
    _exit(11);
  if (write(report_fd, &t, sizeof t) != sizeof t)
    _exit(12);
  shms_lease l;
  int rc;
  while ((rc = shms_wait(h, &t, slice_ns, &l)) == SHMS_ETIMEDOUT)
    ;
  if (rc == SHMS_OK && shms_release(h, &l) != SHMS_OK)
    _exit(13);
  shms_detach(h);
  _exit(rc == expect ? 0 : 20);
}

static pid_t spawn_waiter(const char *name, const char *tenant, int report_fd, int expect) {
  return spawn_waiter_sliced(name, tenant, report_fd, expect, UINT64_MAX);
}

START_TEST(a_release_wakes_a_waiter_in_another_process) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = spawn_waiter(name, "b", p[1], SHMS_OK);
  shms_ticket t;
  read_all(p[0], &t, sizeof t); /* queued: now the release must reach it */
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_int_eq(child_status(pid), 0);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.granted, 2);
  sched_close(h, name);
}
END_TEST

START_TEST(a_cancel_from_another_process_wakes_the_waiter) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = spawn_waiter(name, "b", p[1], SHMS_ECANCELLED);
  shms_ticket t;
  read_all(p[0], &t, sizeof t);
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_int_eq(child_status(pid), 0);
  ck_assert_shms_ok(shms_release(h, &held));
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.cancelled, 1);
  sched_close(h, name);
}
END_TEST

START_TEST(a_waiter_that_detaches_takes_its_requests_along) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held, l;
  shms_request r = sched_req("a", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    shms_ticket t;
    shms_request cr = sched_req("gone", 0);
    if (shms_attach(name, 0, &c) != SHMS_OK || shms_enqueue(c, &cr, &t) != SHMS_OK)
      _exit(1);
    if (write(p[1], &t, sizeof t) != sizeof t)
      _exit(3);
    _exit(shms_detach(c) == SHMS_OK ? 0 : 2);
  }
  shms_ticket gone;
  read_all(p[0], &gone, sizeof gone);
  ck_assert_int_eq(child_status(pid), 0);
  shms_ticket stays = sched_enqueue(h, "b", 0, 0);
  ck_assert_uint_eq(sched_stats(h).queue_depth, 1);
  ck_assert_shms_ok(shms_release(h, &held)); /* the departed request never gets the cell */
  ck_assert_shms_ok(shms_wait(h, &stays, 0, &l));
  ck_assert_int_eq(shms_cancel(h, &gone), SHMS_ENOTFOUND);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

static void killed_waiter_case(uint64_t slice_ns) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_lease held;
  shms_request r = sched_req("x", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  shms_ticket ta, tb;
  pid_t a = spawn_waiter(name, "a", p[1], SHMS_OK);
  read_all(p[0], &ta, sizeof ta);
  kill(a, SIGKILL); /* dies queued; its request is first in line */
  ck_assert_int_eq(waitpid(a, NULL, 0), a);
  pid_t b = spawn_waiter_sliced(name, "b", p[1], SHMS_OK, slice_ns);
  read_all(p[0], &tb, sizeof tb);
  ck_assert_shms_ok(shms_release(h, &held)); /* granted to the dead a, never accepted */
  /* b's waiter notices at its next poll and takes the cell back: no supervisor needed. */
  ck_assert_int_eq(child_status(b), 0);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_int_eq(shms_cancel(h, &ta), SHMS_ENOTFOUND);
  sched_close(h, name);
}

START_TEST(a_waiter_killed_before_accepting_does_not_wedge_the_class) {
  killed_waiter_case(UINT64_MAX);
}
END_TEST

START_TEST(waiting_in_short_slices_still_recovers_a_dead_waiters_grant) {
  killed_waiter_case(20 * 1000 * 1000); /* well under the poll interval */
}
END_TEST

/* A churning child's tally: every call's outcome is counted exactly once. */
struct tally {
  uint32_t acquired, would_block, enqueued, accepted, cancelled_by_us, cancelled, expired;
  uint32_t unexpected;
};

/* One random step of a churning process. */
static void churn_step(shms_t *h, unsigned *seed, const char *tenant, struct tally *t) {
  shms_request r = sched_req(tenant, (int32_t)(rand_r(seed) % 3));
  shms_lease l;
  shms_ticket tk;
  int rc;
  switch (rand_r(seed) % 4) {
  case 0: /* acquire, then release */
    rc = shms_acquire(h, &r, &l);
    if (rc == SHMS_OK) {
      t->acquired++;
      t->unexpected += shms_release(h, &l) != SHMS_OK;
    } else {
      t->unexpected++;
    }
    return;
  case 1: /* try, never queue */
    rc = shms_try_acquire(h, &r, &l);
    if (rc == SHMS_OK) {
      t->acquired++;
      t->unexpected += shms_release(h, &l) != SHMS_OK;
    } else {
      t->would_block += rc == SHMS_EWOULDBLOCK;
      t->unexpected += rc != SHMS_EWOULDBLOCK;
    }
    return;
  default: /* enqueue; maybe cancel (the race with the grant is the point); then wait */
    if (rand_r(seed) % 2)
      r.deadline_ns = 0;
    if ((rc = shms_enqueue(h, &r, &tk)) != SHMS_OK) {
      t->unexpected += rc != SHMS_EQUEUEFULL;
      return;
    }
    t->enqueued++;
    if (rand_r(seed) % 2) {
      rc = shms_cancel(h, &tk);
      t->cancelled_by_us += rc == 1;
      t->unexpected += rc != 1 && rc != 0;
    }
    rc = shms_wait(h, &tk, UINT64_MAX, &l);
    if (rc == SHMS_OK) {
      t->accepted++;
      t->unexpected += shms_release(h, &l) != SHMS_OK;
    } else if (rc == SHMS_ECANCELLED) {
      t->cancelled++;
    } else {
      t->unexpected++;
    }
    /* The outcome retired the ticket: exactly one terminal state. */
    t->unexpected += shms_wait(h, &tk, 0, &l) != SHMS_ENOTFOUND;
  }
}

static pid_t spawn_churner(const char *name, int id, const int go[2], int out_fd, int steps) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid != 0)
    return pid;
  int go_fd = go[0];
  close(go[1]); /* or the start gun's EOF never comes */
  shms_t *h;
  struct tally t = {0};
  char tenant[16];
  snprintf(tenant, sizeof tenant, "t%d", id % 3);
  unsigned seed = 1234u + (unsigned)id;
  char b;
  if (shms_attach(name, 0, &h) != SHMS_OK)
    _exit(1);
  if (read(go_fd, &b, 1) != 0) /* EOF is the start gun for everyone at once */
    _exit(2);
  for (int i = 0; i < steps; i++)
    churn_step(h, &seed, tenant, &t);
  shms_detach(h);
  _exit(write(out_fd, &t, sizeof t) == sizeof t ? 0 : 3);
}

/* Twice: 2 cells (the fast word holds a map of free cells) and 40 (it holds a count). */
START_TEST(many_processes_churning_conserve_everything) {
  enum { PROCS = 8, STEPS = 3000 };
  const unsigned cells = _i == 0 ? 2 : 40;
  const char *name;
  shms_t *h = sched_open(&name, cells, 64, NULL);
  int go[2], out[2];
  ck_assert(pipe(go) == 0 && pipe(out) == 0);
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++)
    pids[i] = spawn_churner(name, i, go, out[1], STEPS);
  close(go[0]);
  close(go[1]);
  struct tally sum = {0};
  for (int i = 0; i < PROCS; i++) {
    struct tally t;
    read_all(out[0], &t, sizeof t);
    sum.acquired += t.acquired;
    sum.enqueued += t.enqueued;
    sum.accepted += t.accepted;
    sum.cancelled_by_us += t.cancelled_by_us;
    sum.cancelled += t.cancelled;
    sum.unexpected += t.unexpected;
  }
  for (int i = 0; i < PROCS; i++)
    ck_assert_int_eq(child_status(pids[i]), 0);
  ck_assert_uint_eq(sum.unexpected, 0);
  /* Every request ended exactly one way, and every cancel that installed cancelled one. */
  ck_assert_uint_eq(sum.enqueued, sum.accepted + sum.cancelled);
  ck_assert_uint_eq(sum.cancelled, sum.cancelled_by_us);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.available, cells);
  ck_assert_uint_eq(s.leased + s.granted_unaccepted + s.quarantined, 0);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.queued_tenants, 0);
  ck_assert_uint_eq(s.cancelled, sum.cancelled);
  ck_assert_uint_eq(s.granted, sum.acquired + sum.accepted);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  ck_assert_uint_eq(ck_pr_load_32(&k->ctl->used), 0);
  ck_assert_uint_eq(k->ctl->tenants_used, 0);
  ck_assert_int_eq(k->fast_map, cells <= 32);
  /* Every cell free in the fast word too (all mapped, or counted). */
  ck_assert_uint_eq(SHMS__FAST_LOW(ck_pr_load_64(&k->ctl->fast)), shms__fast_free_field(k));
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("multiproc");
  TCase *tc = harness_tcase("processes");
  tcase_add_test(tc, a_release_wakes_a_waiter_in_another_process);
  tcase_add_test(tc, a_cancel_from_another_process_wakes_the_waiter);
  tcase_add_test(tc, a_waiter_that_detaches_takes_its_requests_along);
  tcase_add_test(tc, a_waiter_killed_before_accepting_does_not_wedge_the_class);
  tcase_add_test(tc, waiting_in_short_slices_still_recovers_a_dead_waiters_grant);
  tcase_add_loop_test(tc, many_processes_churning_conserve_everything, 0, 2);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

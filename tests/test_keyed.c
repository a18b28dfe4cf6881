/*
 * Single-flight and supersede by key (shms_submit_key): joiners share one run
 * and its result, leave one by one, die and are released by recovery;
 * supersede ends queued jobs and stops running ones when asked. Processes are
 * ordered with pipes, never with sleeps.
 */
#include <ck_pr.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "harness.h"
#include "sched_util.h"
#include "shm/crashpoint.h"
#include "shm/handle.h"
#include "shm/proc.h"

#define PAYLOAD 64

static shms_t *open_class(const char **name) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 8, .mode = SHMS_MODE_WORKER, .payload = PAYLOAD};
  cfg.classes[SHMS_CLASS_LARGE] = (shms_class_config){.configured = 1, .cells = 1, .queue = 4};
  return sched_open(name, 0, 0, &cfg);
}

static shms_request req(const char *tenant) {
  return (shms_request){.cls = SHMS_CLASS_SMALL, .tenant = tenant};
}

static shms_ticket submit_key(shms_t *h, const char *key, const char *payload, unsigned flags,
                              int expect_joined) {
  shms_request r = req("a");
  shms_ticket t;
  int joined = -1;
  ck_assert_shms_ok(shms_submit_key(h, &r, key, payload, strlen(payload), flags, &t, &joined));
  ck_assert_int_eq(joined, expect_joined);
  return t;
}

static shms_class_stats stats(shms_t *h) {
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  return s;
}

static uint32_t used(shms_t *h) { return ck_pr_load_32(&h->cls[SHMS_CLASS_SMALL].ctl->used); }

static void read_all(int fd, void *buf, size_t n) {
  ck_assert_int_eq(read(fd, buf, n), (ssize_t)n);
}

static int child_status(pid_t pid) {
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status), "child died of signal %d", WTERMSIG(status));
  return WEXITSTATUS(status);
}

/* Take the next job and complete it with result "R:<payload>" and status 7. */
static void run_one(shms_worker_t *w, const char *expect_payload) {
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_uint_eq(job.payload_len, strlen(expect_payload));
  ck_assert(memcmp(job.payload, expect_payload, job.payload_len) == 0);
  char out[PAYLOAD];
  int n = snprintf(out, sizeof out, "R:%.*s", (int)job.payload_len, (const char *)job.payload);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 7, out, (size_t)n));
}

/* No job is left to run. */
static void none_left(shms_worker_t *w) {
  shms_job job;
  ck_assert_int_eq(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT);
}

static void expect_result(shms_t *h, const shms_ticket *t, const char *want) {
  char buf[PAYLOAD];
  shms_result res;
  ck_assert_shms_ok(shms_wait_result(h, t, UINT64_MAX, buf, sizeof buf, &res));
  ck_assert_int_eq(res.status, 7);
  ck_assert_uint_eq(res.result_len, strlen(want));
  ck_assert(memcmp(buf, want, res.result_len) == 0);
}

/*
 * A child that attaches and submits key (its own payload "child") and tells the parent its
 * ticket and whether it joined; then, told by the parent on go: 'c' cancel and report the
 * wait's outcome, 'w' wait for the result and report it, 'x' exit without detaching.
 */
static pid_t joiner(const char *name, const char *key, int *to_child, int *from_child) {
  int up[2], down[2];
  ck_assert(pipe(up) == 0 && pipe(down) == 0);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    shms_t *ch;
    shms_ticket t;
    shms_request r = req("b");
    int joined = 0;
    if (shms_attach(name, 0, &ch) != SHMS_OK ||
        shms_submit_key(ch, &r, key, "child", 5, 0, &t, &joined) != SHMS_OK)
      _exit(1);
    if (write(up[1], &t, sizeof t) != sizeof t ||
        write(up[1], &joined, sizeof joined) != sizeof joined)
      _exit(2);
    for (;;) {
      char op;
      if (read(down[0], &op, 1) != 1)
        _exit(3);
      int rc = 0;
      char buf[PAYLOAD] = "";
      shms_result res = {0};
      if (op == 'x')
        _exit(0);
      if (op == 'c') {
        rc = shms_cancel(ch, &t);
        if (rc == 1)
          rc = shms_wait_result(ch, &t, 0, buf, sizeof buf, &res);
      } else {
        rc = shms_wait_result(ch, &t, UINT64_MAX, buf, sizeof buf, &res);
      }
      if (write(up[1], &rc, sizeof rc) != sizeof rc ||
          write(up[1], &res, sizeof res) != sizeof res ||
          write(up[1], buf, sizeof buf) != sizeof buf)
        _exit(4);
      if (op == 'w') {
        shms_detach(ch);
        _exit(0);
      }
    }
  }
  close(up[1]);
  close(down[0]);
  *to_child = down[1];
  *from_child = up[0];
  return c;
}

static void child_joined(int from, const shms_ticket *want) {
  shms_ticket t;
  int joined;
  read_all(from, &t, sizeof t);
  read_all(from, &joined, sizeof joined);
  ck_assert_int_eq(joined, 1);
  ck_assert(memcmp(&t, want, sizeof t) == 0); /* the same ticket: the same job */
}

/* Tell the child op; return its outcome (and result bytes into buf). */
static int child_do(int to, int from, char op, shms_result *res, char *buf) {
  ck_assert_int_eq(write(to, &op, 1), 1);
  int rc;
  read_all(from, &rc, sizeof rc);
  read_all(from, res, sizeof *res);
  read_all(from, buf, PAYLOAD);
  return rc;
}

START_TEST(joiners_share_one_run_and_its_result) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit_key(h, "build-42", "first", 0, 0);
  int to, from;
  pid_t c = joiner(name, "build-42", &to, &from);
  child_joined(from, &t);
  ck_assert_uint_eq(used(h), 1); /* no second job */
  ck_assert_uint_eq(stats(h).joined, 1);
  /* Another key is a job of its own. */
  shms_ticket other = submit_key(h, "build-43", "second", 0, 0);
  ck_assert_uint_eq(used(h), 2);
  run_one(w, "first"); /* first's payload: the joiner's is not used */
  shms_result res;
  char buf[PAYLOAD];
  ck_assert_shms_ok(child_do(to, from, 'w', &res, buf));
  ck_assert_int_eq(res.status, 7);
  ck_assert_uint_eq(res.result_len, 7);
  ck_assert(memcmp(buf, "R:first", 7) == 0);
  ck_assert_int_eq(child_status(c), 0);
  expect_result(h, &t, "R:first");
  run_one(w, "second");
  none_left(w); /* the keyed job ran once */
  expect_result(h, &other, "R:second");
  ck_assert_uint_eq(used(h), 0); /* every share taken: the slots are free */
  /* The key is free again once its job ended: a new submit queues a new job. */
  shms_ticket again = submit_key(h, "build-42", "third", 0, 0);
  ck_assert(again.seq != t.seq);
  run_one(w, "third");
  expect_result(h, &again, "R:third");
  /* The join is in the event ring. */
  shms_event_record recs[64];
  size_t n = 0;
  uint64_t cursor = 0, lost = 0;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, 64, &n, &lost));
  int joins = 0;
  for (size_t i = 0; i < n; i++)
    joins += recs[i].event.kind == SHMS_EVENT_JOB_JOINED;
  ck_assert_int_eq(joins, 1);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(a_joiner_that_cancels_leaves_and_the_job_runs_for_the_other) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit_key(h, "k", "job", 0, 0);
  int to, from;
  pid_t c = joiner(name, "k", &to, &from);
  child_joined(from, &t);
  shms_result res;
  char buf[PAYLOAD];
  ck_assert_int_eq(child_do(to, from, 'c', &res, buf), SHMS_ECANCELLED); /* it left */
  ck_assert_int_eq(write(to, "x", 1), 1);
  ck_assert_int_eq(child_status(c), 0);
  ck_assert_uint_eq(used(h), 1); /* still there for us */
  run_one(w, "job");
  none_left(w);
  expect_result(h, &t, "R:job");
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(the_last_waiter_to_cancel_cancels_the_job) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit_key(h, "k", "job", 0, 0);
  int to, from;
  pid_t c = joiner(name, "k", &to, &from);
  child_joined(from, &t);
  /* The submitter leaves first: the job goes on for the joiner. */
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_str_eq(shms_last_error_detail(), "left the job: it goes on for its other waiters");
  shms_result res;
  char buf[PAYLOAD];
  ck_assert_int_eq(shms_wait_result(h, &t, 0, buf, sizeof buf, &res), SHMS_ECANCELLED);
  ck_assert_uint_eq(used(h), 1);
  /* The joiner is the last: its cancel ends the job, and its wait says so. */
  ck_assert_int_eq(child_do(to, from, 'c', &res, buf), SHMS_ECANCELLED);
  ck_assert_int_eq(write(to, "x", 1), 1);
  ck_assert_int_eq(child_status(c), 0);
  shms_recover(h, NULL); /* the child exited without detaching */
  none_left(w);          /* it never runs */
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(a_killed_joiner_s_share_is_released_by_recovery) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit_key(h, "k", "job", 0, 0);
  int to, from;
  pid_t c = joiner(name, "k", &to, &from);
  child_joined(from, &t);
  kill(c, SIGKILL);
  ck_assert_int_eq(waitpid(c, NULL, 0), c);
  ck_assert_shms_ok(shms_recover(h, NULL));
  /* Only we wait now: our cancel is the last waiter's, and ends the job. */
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  shms_result res;
  ck_assert_int_eq(shms_wait_result(h, &t, 0, NULL, 0, &res), SHMS_ECANCELLED);
  none_left(w);
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(a_killed_submitter_leaves_the_job_to_its_joiner) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  /* The child submits first (so it owns the job); we join it. */
  int to, from;
  pid_t c = joiner(name, "k", &to, &from);
  shms_ticket ct;
  int joined;
  read_all(from, &ct, sizeof ct);
  read_all(from, &joined, sizeof joined);
  ck_assert_int_eq(joined, 0);
  shms_ticket t = submit_key(h, "k", "ours", 0, 1);
  ck_assert(memcmp(&t, &ct, sizeof t) == 0);
  kill(c, SIGKILL);
  ck_assert_int_eq(waitpid(c, NULL, 0), c);
  ck_assert_shms_ok(shms_recover(h, NULL));
  ck_assert_uint_eq(used(h), 1); /* not withdrawn: we still wait */
  /* Queued still in its dead submitter's name, for us: nothing left for a recovery to do. */
  char report[2048];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "audit: %s", report);
  run_one(w, "child");
  expect_result(h, &t, "R:child");
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(supersede_ends_queued_jobs_of_the_key) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket old = submit_key(h, "k", "old", 0, 0);
  shms_ticket other = submit_key(h, "j", "other", 0, 0);
  shms_ticket t = submit_key(h, "k", "new", SHMS_SUBMIT_SUPERSEDE, 0);
  ck_assert(t.seq != old.seq);
  shms_result res;
  ck_assert_shms_err(shms_wait_result(h, &old, 0, NULL, 0, &res), SHMS_ESUPERSEDED, "ended");
  ck_assert_str_eq(shms_err_name(SHMS_ESUPERSEDED), "superseded");
  run_one(w, "other"); /* another key's job is untouched */
  expect_result(h, &other, "R:other");
  run_one(w, "new"); /* the old job never ran */
  none_left(w);
  expect_result(h, &t, "R:new");
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(supersede_leaves_a_running_job_unless_asked_to_stop_it) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket first = submit_key(h, "k", "first", 0, 0);
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  shms_ticket second = submit_key(h, "k", "second", SHMS_SUBMIT_SUPERSEDE, 0);
  ck_assert_int_eq(shms_worker_cancelled(w, &job), 0); /* left to finish */
  /* A plain submit now joins the newest job of the key. */
  shms_ticket joined = submit_key(h, "k", "x", 0, 1);
  ck_assert(memcmp(&joined, &second, sizeof joined) == 0);
  shms_ticket third =
      submit_key(h, "k", "third", SHMS_SUBMIT_SUPERSEDE | SHMS_SUBMIT_SUPERSEDE_RUNNING, 0);
  ck_assert_int_eq(shms_worker_cancelled(w, &job), 1); /* its worker is asked to stop it */
  shms_result res;
  ck_assert_int_eq(shms_wait_result(h, &second, 0, NULL, 0, &res), SHMS_ESUPERSEDED);
  ck_assert_int_eq(shms_wait_result(h, &joined, 0, NULL, 0, &res), SHMS_ESUPERSEDED);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 7, "R:first", 7));
  expect_result(h, &first, "R:first");
  run_one(w, "third");
  none_left(w);
  expect_result(h, &third, "R:third");
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(bad_keys_and_flags_are_refused_and_change_nothing) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_request r = req("a");
  shms_ticket t;
  char longest[SHMS_KEY_MAX + 2];
  memset(longest, 'k', sizeof longest - 1);
  longest[sizeof longest - 1] = '\0';
  ck_assert_shms_err(shms_submit_key(h, &r, "", "p", 1, 0, &t, NULL), SHMS_EINVAL, "empty");
  ck_assert_shms_err(shms_submit_key(h, &r, NULL, "p", 1, 0, &t, NULL), SHMS_EINVAL, "NULL");
  ck_assert_shms_err(shms_submit_key(h, &r, longest, "p", 1, 0, &t, NULL), SHMS_EINVAL,
                     "longer than 31");
  ck_assert_shms_err(shms_submit_key(h, &r, "a b", "p", 1, 0, &t, NULL), SHMS_EINVAL,
                     "byte 2 (0x20)");
  ck_assert_shms_err(shms_submit_key(h, &r, "k\x7f", "p", 1, 0, &t, NULL), SHMS_EINVAL,
                     "not graphic");
  ck_assert_shms_err(shms_submit_key(h, &r, "k", "p", 1, SHMS_SUBMIT_SUPERSEDE_RUNNING, &t, NULL),
                     SHMS_EINVAL, "needs SHMS_SUBMIT_SUPERSEDE");
  ck_assert_shms_err(shms_submit_key(h, &r, "k", "p", 1, 1u << 9, &t, NULL), SHMS_EINVAL,
                     "unknown submit flags");
  ck_assert_shms_err(shms_submit(h, &r, "p", 1, SHMS_SUBMIT_SUPERSEDE, &t), SHMS_EINVAL,
                     "unknown submit flags");
  shms_request act = req("a");
  act.activation = "id";
  ck_assert_shms_err(shms_submit_key(h, &act, "k", "p", 1, 0, &t, NULL), SHMS_EINVAL, "activation");
  shms_request lease = {.cls = SHMS_CLASS_LARGE, .tenant = "a"};
  ck_assert_int_eq(shms_submit_key(h, &lease, "k", "p", 1, 0, &t, NULL), SHMS_EINVAL);
  static const char *const gpu[] = {"gpu"};
  shms_request quota = req("a");
  quota.quotas = gpu;
  quota.nquotas = 1;
  ck_assert_shms_err(shms_submit_key(h, &quota, "k", "p", 1, 0, &t, NULL), SHMS_EINVAL,
                     "no quota 'gpu' in the segment");
  memset(longest, 'k', SHMS_KEY_MAX);
  longest[SHMS_KEY_MAX] = '\0';
  ck_assert_uint_eq(stats(h).queue_depth, 0);
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_submit_key(h, &r, longest, "p", 1, 0, &t, NULL)); /* 31 bytes will do */
  sched_close(h, name);
}
END_TEST

/*
 * A joiner killed at each step of its join, then of its leave: whatever it left, recovery
 * settles, and the submitter is then the job's only waiter (its cancel ends the job).
 */
static void killed_at_each_step(int leave) {
  for (uint32_t n = 1;; n++) {
    const char *name;
    shms_t *h = open_class(&name);
    shms_ticket t = submit_key(h, "k", "job", 0, 0);
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
      shms_t *ch;
      shms_ticket ct;
      shms_request r = req("b");
      if (shms_attach(name, 0, &ch) != SHMS_OK)
        _exit(1);
      if (!leave)
        shms__test_crash_at(n);
      if (shms_submit_key(ch, &r, "k", "child", 5, 0, &ct, NULL) != SHMS_OK)
        _exit(2);
      if (leave)
        shms__test_crash_at(n);
      if (leave && shms_cancel(ch, &ct) != 1)
        _exit(3);
      _exit(0); /* not detached: dead all the same */
    }
    int status;
    ck_assert_int_eq(waitpid(c, &status, 0), c);
    ck_assert_msg(WIFEXITED(status) ? WEXITSTATUS(status) == 0 : WTERMSIG(status) == SIGKILL,
                  "step %u: child ended %d", n, status);
    ck_assert_shms_ok(shms_recover(h, NULL));
    ck_assert_int_eq(shms_cancel(h, &t), 1);
    shms_result res;
    ck_assert_msg(shms_wait_result(h, &t, 0, NULL, 0, &res) == SHMS_ECANCELLED,
                  "step %u: the job did not end with our cancel", n);
    ck_assert_uint_eq(stats(h).queue_depth, 0);
    ck_assert_uint_eq(used(h), 0);
    sched_close(h, name);
    if (WIFEXITED(status))
      break; /* it got through every step */
    ck_assert_uint_lt(n, 200);
  }
}

START_TEST(a_joiner_killed_at_each_step_of_its_join) { killed_at_each_step(0); }
END_TEST

START_TEST(a_joiner_killed_at_each_step_of_its_leave) { killed_at_each_step(1); }
END_TEST

/*
 * The worker that ends a dead client's granted job owner-lost collects it on the client's
 * behalf; the dead client's recovery, run by another process between that settle and that
 * collection, collects it too. The slot is freed once: the second collection finds it
 * collected (it used to free it again, and the class's used count wrapped below zero).
 */
static shms_t *race_h;
static const char *race_name;
static uint32_t race_slot;
static int race_done;

static void recover_between_settle_and_collect(void) {
  const struct shms__cls *k = &race_h->cls[SHMS_CLASS_SMALL];
  uint64_t w = ck_pr_load_64(&shms__slot_at(k, race_slot)->word);
  if (race_done || SHMS__SLOT_STATE(w) != SHMS__SLOT_SETTLED || (w & SHMS__SLOT_COLLECTED))
    return;
  race_done = 1;
  pid_t c = fork();
  if (c == 0) {
    shms_t *ch;
    _exit(shms_attach(race_name, 0, &ch) == SHMS_OK &&
                  shms_recover_dead(ch, 0, NULL, NULL, NULL) == SHMS_OK
              ? 0
              : 1);
  }
  int status;
  if (c < 0 || waitpid(c, &status, 0) != c || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    abort();
}

START_TEST(a_dead_client_s_job_is_collected_once_by_worker_and_recovery) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  int up[2];
  ck_assert(pipe(up) == 0);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    shms_t *ch;
    shms_ticket t;
    shms_request r = req("b");
    if (shms_attach(name, 0, &ch) != SHMS_OK || shms_submit(ch, &r, "job", 3, 0, &t) != SHMS_OK ||
        write(up[1], &t, sizeof t) != sizeof t)
      _exit(1);
    pause(); /* killed while its job is granted to our worker */
    _exit(2);
  }
  shms_ticket t;
  read_all(up[0], &t, sizeof t);
  kill(c, SIGKILL);
  ck_assert_int_eq(waitpid(c, NULL, 0), c);
  race_h = h;
  race_name = name;
  race_slot = t.slot;
  race_done = 0;
  shms__test_step_check(recover_between_settle_and_collect);
  shms_job job;
  int rc = shms_worker_take(w, 0, &job);
  shms__test_step_check(NULL);
  ck_assert_int_eq(rc, SHMS_ETIMEDOUT); /* the job never ran: its client is gone */
  ck_assert_int_eq(race_done, 1);       /* the recovery did run in between */
  ck_assert_uint_eq(used(h), 0);
  ck_assert_uint_eq(stats(h).queue_depth, 0);
  /* The slot is free once: the class takes as many jobs as it has slots, and no more. */
  shms_request r = req("a");
  shms_ticket more[8];
  for (int j = 0; j < 8; j++)
    ck_assert_shms_ok(shms_submit(h, &r, "x", 1, 0, &more[j]));
  ck_assert_int_eq(shms_submit(h, &r, "x", 1, 0, &t), SHMS_EQUEUEFULL);
  ck_assert_shms_ok(shms_worker_close(w));
  close(up[0]);
  close(up[1]);
  sched_close(h, name);
}
END_TEST

/* A child that attaches and runs fn, then waits to be killed; its parent waits for it to be
 * ready. */
static pid_t ready_child(const char *name, void (*fn)(shms_t *)) {
  int up[2];
  ck_assert(pipe(up) == 0);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    shms_t *ch;
    if (shms_attach(name, 0, &ch) != SHMS_OK)
      _exit(1);
    fn(ch);
    if (write(up[1], "r", 1) != 1)
      _exit(2);
    pause();
    _exit(3);
  }
  char r;
  read_all(up[0], &r, 1);
  close(up[0]);
  close(up[1]);
  return c;
}

static void bind_worker(shms_t *ch) {
  shms_worker_t *w;
  if (shms_worker_open(ch, SHMS_CLASS_SMALL, &w) != SHMS_OK)
    _exit(4);
}

static void submit_keyed(shms_t *ch) {
  shms_request r = req("b");
  shms_ticket t;
  if (shms_submit_key(ch, &r, "k", "job", 3, 0, &t, NULL) != SHMS_OK)
    _exit(5);
}

/*
 * A keyed job granted to a worker that dies before taking it, and whose submitter dies too:
 * the recovery queues the grant again, and as nobody waits for it any more it ends there (it
 * used to stay queued for its dead submitter, which the audit reports).
 */
START_TEST(a_keyed_grant_to_a_dead_worker_with_its_submitter_dead_ends) {
  const char *name;
  shms_t *h = open_class(&name);
  pid_t worker = ready_child(name, bind_worker);
  pid_t submitter = ready_child(name, submit_keyed); /* granted at once to the free cell */
  kill(worker, SIGKILL);
  kill(submitter, SIGKILL);
  ck_assert_int_eq(waitpid(worker, NULL, 0), worker);
  ck_assert_int_eq(waitpid(submitter, NULL, 0), submitter);
  ck_assert_uint_eq(used(h), 1);
  ck_assert_shms_ok(shms_recover(h, NULL));
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_uint_eq(stats(h).queue_depth, 0);
  ck_assert_uint_eq(used(h), 0);
  sched_close(h, name);
}
END_TEST

/*
 * A joiner paused between its record and its CAS while the worker ends the job for its dead
 * submitter (nobody waits: no joiner yet). The joiner must not count on that job: it queues one
 * of its own (it used to join the ended job, whose slot was freed under it).
 */
static shms_t *pause_h;
static int pause_up, pause_down, pause_done;

static void pause_at_join_record(void) {
  const uint64_t *t = shms__proc_at(pause_h, shms__self_index(pause_h))->joins;
  int recorded = 0;
  for (int j = 0; j < SHMS__JOINS; j++)
    recorded |= ck_pr_load_64(&t[j]) != 0;
  if (pause_done || !recorded)
    return;
  pause_done = 1;
  char c = 'p';
  if (write(pause_up, &c, 1) != 1 || read(pause_down, &c, 1) != 1)
    _exit(6);
}

START_TEST(a_join_never_counts_on_a_job_ended_for_its_dead_submitter) {
  const char *name;
  shms_t *h = open_class(&name);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  pid_t submitter = ready_child(name, submit_keyed); /* granted at once to our worker's cell */
  kill(submitter, SIGKILL);
  ck_assert_int_eq(waitpid(submitter, NULL, 0), submitter);
  int up[2], down[2];
  ck_assert(pipe(up) == 0 && pipe(down) == 0);
  pid_t j = fork();
  ck_assert_int_ge(j, 0);
  if (j == 0) {
    shms_ticket t;
    shms_request r = req("c");
    int joined = -1;
    if (shms_attach(name, 0, &pause_h) != SHMS_OK)
      _exit(1);
    pause_up = up[1];
    pause_down = down[0];
    shms__test_step_check(pause_at_join_record);
    int rc = shms_submit_key(pause_h, &r, "k", "mine", 4, 0, &t, &joined);
    shms__test_step_check(NULL);
    if (rc != SHMS_OK || write(up[1], &joined, sizeof joined) != sizeof joined)
      _exit(2);
    _exit(0);
  }
  char c;
  read_all(up[0], &c, 1); /* the joiner has recorded its share, not yet counted it */
  shms_job job;
  ck_assert_int_eq(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT); /* ended owner-lost */
  ck_assert_int_eq(write(down[1], "g", 1), 1);
  int joined;
  read_all(up[0], &joined, sizeof joined);
  ck_assert_int_eq(child_status(j), 0);
  ck_assert_int_eq(joined, 0); /* a job of its own */
  ck_assert_shms_ok(shms_recover(h, NULL));
  none_left(w); /* the joiner exited without waiting for its own job: recovery ended it */
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_uint_eq(used(h), 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/*
 * A dead joiner was a running job's last waiter (its submitter left it). Its recovery takes its
 * share back; right then the worker completes the job, drops the result nobody waits for and
 * frees the slot, and another client queues a job in it. The recovery must leave that job
 * alone (it used to end it owner-lost, taking the slot's new sequence for the dead joiner's).
 */
static shms_t *reuse_h;
static const char *reuse_name;
static int reuse_to_worker, reuse_from_worker, reuse_done, reuse_up[2];
static shms_ticket reuse_ticket;
static pid_t reuse_pid;

static void complete_and_reuse(void) {
  const struct shms__slot *s = shms__slot_at(&reuse_h->cls[SHMS_CLASS_SMALL], 0);
  uint64_t wt = ck_pr_load_64(&s->waiters);
  if (reuse_done || SHMS__SLOT_STATE(ck_pr_load_64(&s->word)) != SHMS__SLOT_RUNNING ||
      SHMS__WAIT_COUNT(wt) != 0 || (wt & SHMS__WAIT_OWNER))
    return;
  reuse_done = 1;
  char c = 'g';
  if (write(reuse_to_worker, &c, 1) != 1 || read(reuse_from_worker, &c, 1) != 1)
    abort(); /* the worker completed the job */
  pid_t r = fork();
  if (r == 0) {
    shms_t *ch;
    shms_request rq = req("b");
    shms_ticket t;
    if (shms_attach(reuse_name, 0, &ch) != SHMS_OK || shms_submit(ch, &rq, "next", 4, 0, &t) != 0 ||
        write(reuse_up[1], &t, sizeof t) != sizeof t)
      _exit(1);
    pause();
    _exit(2);
  }
  if (r < 0 || read(reuse_up[0], &reuse_ticket, sizeof reuse_ticket) != sizeof reuse_ticket)
    abort();
  reuse_pid = r;
}

START_TEST(a_dead_joiner_s_recovery_leaves_the_slot_s_next_job_alone) {
  const char *name;
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 1, .mode = SHMS_MODE_WORKER, .payload = PAYLOAD};
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  /* The worker: takes the job, completes it when told. */
  int go[2], done[2];
  ck_assert(pipe(go) == 0 && pipe(done) == 0 && pipe(reuse_up) == 0);
  pid_t wk = fork();
  ck_assert_int_ge(wk, 0);
  if (wk == 0) {
    shms_t *ch;
    shms_worker_t *w;
    shms_job job;
    char c;
    if (shms_attach(name, 0, &ch) != SHMS_OK || shms_worker_open(ch, SHMS_CLASS_SMALL, &w) != 0 ||
        shms_worker_take(w, UINT64_MAX, &job) != SHMS_OK || write(done[1], "t", 1) != 1 ||
        read(go[0], &c, 1) != 1 || shms_worker_complete(w, &job, 7, "R", 1) != SHMS_OK ||
        write(done[1], "c", 1) != 1)
      _exit(1);
    pause();
    _exit(2);
  }
  shms_ticket t = submit_key(h, "k", "job", 0, 0);
  int to, from;
  pid_t c = joiner(name, "k", &to, &from);
  child_joined(from, &t);
  char b;
  read_all(done[0], &b, 1);                /* running */
  ck_assert_int_eq(shms_cancel(h, &t), 1); /* we leave: the joiner is its last waiter */
  kill(c, SIGKILL);
  ck_assert_int_eq(waitpid(c, NULL, 0), c);
  reuse_h = h;
  reuse_name = name;
  reuse_to_worker = go[1];
  reuse_from_worker = done[0];
  reuse_done = 0;
  shms__test_step_check(complete_and_reuse);
  ck_assert_shms_ok(shms_recover_dead(h, 0, NULL, NULL, NULL));
  shms__test_step_check(NULL);
  ck_assert_int_eq(reuse_done, 1);
  ck_assert_uint_eq(reuse_ticket.slot, 0);
  uint64_t w = ck_pr_load_64(&shms__slot_at(&h->cls[SHMS_CLASS_SMALL], 0)->word);
  /* Queued, or granted to the worker's free cell: live, not ended. */
  ck_assert_msg(
      (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED || SHMS__SLOT_STATE(w) == SHMS__SLOT_GRANTED) &&
          SHMS__SLOT_SEQ(w) == reuse_ticket.seq,
      "the next job in the slot: state %u, sequence %u (its ticket's: %llu)",
      (unsigned)SHMS__SLOT_STATE(w), (unsigned)SHMS__SLOT_SEQ(w),
      (unsigned long long)reuse_ticket.seq);
  kill(wk, SIGKILL);
  kill(reuse_pid, SIGKILL);
  ck_assert_int_eq(waitpid(wk, NULL, 0), wk);
  ck_assert_int_eq(waitpid(reuse_pid, NULL, 0), reuse_pid);
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("keyed");
  TCase *tc = tcase_create("keyed");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, joiners_share_one_run_and_its_result);
  tcase_add_test(tc, a_joiner_that_cancels_leaves_and_the_job_runs_for_the_other);
  tcase_add_test(tc, the_last_waiter_to_cancel_cancels_the_job);
  tcase_add_test(tc, a_killed_joiner_s_share_is_released_by_recovery);
  tcase_add_test(tc, a_killed_submitter_leaves_the_job_to_its_joiner);
  tcase_add_test(tc, supersede_ends_queued_jobs_of_the_key);
  tcase_add_test(tc, supersede_leaves_a_running_job_unless_asked_to_stop_it);
  tcase_add_test(tc, bad_keys_and_flags_are_refused_and_change_nothing);
  tcase_add_test(tc, a_joiner_killed_at_each_step_of_its_join);
  tcase_add_test(tc, a_joiner_killed_at_each_step_of_its_leave);
  tcase_add_test(tc, a_dead_client_s_job_is_collected_once_by_worker_and_recovery);
  tcase_add_test(tc, a_keyed_grant_to_a_dead_worker_with_its_submitter_dead_ends);
  tcase_add_test(tc, a_join_never_counts_on_a_job_ended_for_its_dead_submitter);
  tcase_add_test(tc, a_dead_joiner_s_recovery_leaves_the_slot_s_next_job_alone);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

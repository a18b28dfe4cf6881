/*
 * Worker mode: jobs with payloads go to worker processes and results come
 * back; cancellation, deadlines, fairness; workers and clients dying at the
 * wrong moment. Processes are ordered with pipes, never with sleeps.
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

#define PAYLOAD 1000

static shms_t *open_worker_class(const char **name, unsigned cells, unsigned queue) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1,
                                                      .cells = cells,
                                                      .queue = queue,
                                                      .mode = SHMS_MODE_WORKER,
                                                      .payload = PAYLOAD};
  return sched_open(name, 0, 0, &cfg);
}

static shms_request job_req(const char *tenant) {
  return (shms_request){.cls = SHMS_CLASS_SMALL, .tenant = tenant};
}

static shms_ticket submit(shms_t *h, const char *tenant, const void *p, size_t n, unsigned flags) {
  shms_request r = job_req(tenant);
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, p, n, flags, &t));
  return t;
}

static shms_class_stats stats(shms_t *h) {
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  return s;
}

static void uppercase_into(char *out, const void *in, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = ((const char *)in)[i];
    out[i] = c >= 'a' && c <= 'z' ? (char)(c - 32) : c;
  }
}

START_TEST(payloads_of_every_size_round_trip) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  static char in[PAYLOAD + 1], out[PAYLOAD], back[PAYLOAD];
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (char)('a' + i % 26);
  size_t sizes[] = {0, 1, 2, 63, 64, 65, 500, PAYLOAD - 1, PAYLOAD};
  for (size_t n = 0; n < sizeof sizes / sizeof sizes[0]; n++) {
    size_t len = sizes[n];
    shms_ticket t = submit(h, "a", in, len, 0);
    shms_job job;
    ck_assert_shms_ok(shms_worker_take(w, 0, &job));
    ck_assert_uint_eq(job.payload_len, len);
    ck_assert(memcmp(job.payload, in, len) == 0);
    ck_assert_str_eq(job.tenant, "a");
    uppercase_into(out, job.payload, len);
    ck_assert_shms_ok(shms_worker_complete(w, &job, (int)n, out, len));
    shms_result res;
    ck_assert_shms_ok(shms_wait_result(h, &t, 0, back, sizeof back, &res));
    ck_assert_int_eq(res.status, (int)n);
    ck_assert_uint_eq(res.result_len, len);
    ck_assert(memcmp(back, out, len) == 0);
    ck_assert_int_eq(shms_wait_result(h, &t, 0, back, sizeof back, &res), SHMS_ENOTFOUND);
  }
  shms_request r = job_req("a");
  shms_ticket t;
  ck_assert_shms_err(shms_submit(h, &r, in, PAYLOAD + 1, 0, &t), SHMS_EINVAL, "more than");
  ck_assert_uint_eq(stats(h).queue_depth, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(results_are_refused_not_truncated_and_buffers_can_grow) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  static char big[PAYLOAD + 1];
  memset(big, 'x', sizeof big);
  shms_ticket t = submit(h, "a", "hello", 5, 0);
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_shms_err(shms_worker_complete(w, &job, 0, big, PAYLOAD + 1), SHMS_EINVAL, "refused");
  ck_assert_int_eq(shms_worker_cancelled(w, &job), 0); /* the job still runs */
  ck_assert_shms_ok(shms_worker_complete(w, &job, 7, big, PAYLOAD));
  ck_assert_int_eq(shms_worker_complete(w, &job, 7, big, 1), SHMS_ELEASE); /* only once */
  char small[10];
  shms_result res;
  ck_assert_shms_err(shms_wait_result(h, &t, 0, small, sizeof small, &res), SHMS_EINVAL, "larger");
  ck_assert_uint_eq(res.result_len, PAYLOAD);
  static char enough[PAYLOAD];
  ck_assert_shms_ok(shms_wait_result(h, &t, 0, enough, sizeof enough, &res));
  ck_assert_int_eq(res.status, 7);
  ck_assert(memcmp(enough, big, PAYLOAD) == 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(workers_bind_cells_and_lease_calls_are_refused) {
  const char *name;
  shms_t *h = open_worker_class(&name, 2, 4);
  ck_assert_uint_eq(stats(h).offline, 2);
  shms_worker_t *a, *b, *c;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &a));
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &b));
  ck_assert_uint_ne(shms_worker_cell(a), shms_worker_cell(b));
  ck_assert_shms_err(shms_worker_open(h, SHMS_CLASS_SMALL, &c), SHMS_EBUSY, "already have");
  shms_class_stats s = stats(h);
  ck_assert_uint_eq(s.available, 2);
  ck_assert_uint_eq(s.offline, 0);
  shms_request r = job_req("a");
  shms_lease l;
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_EINVAL, "worker class");
  ck_assert_shms_ok(shms_worker_close(a));
  ck_assert_uint_eq(stats(h).offline, 1);
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &a));
  ck_assert_shms_ok(shms_worker_close(a));
  ck_assert_shms_ok(shms_worker_close(b));
  ck_assert_uint_eq(stats(h).offline, 2);
  sched_close(h, name);
}
END_TEST

START_TEST(cancel_a_queued_and_a_started_job) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_ticket q = submit(h, "a", "q", 1, 0); /* no worker yet: it waits */
  ck_assert_int_eq(shms_cancel(h, &q), 1);
  shms_result res;
  char buf[8];
  ck_assert_shms_err(shms_wait_result(h, &q, 0, buf, sizeof buf, &res), SHMS_ECANCELLED, "cancel");
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit(h, "a", "run", 3, 0);
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  shms_explanation e;
  ck_assert_shms_ok(shms_explain(h, &t, &e));
  ck_assert_uint_eq(e.state, SHMS_REQ_RUNNING);
  ck_assert_int_eq(shms_worker_cancelled(w, &job), 0);
  ck_assert_int_eq(shms_cancel(h, &t), 1); /* a flag the worker reads; the worker decides */
  ck_assert_int_eq(shms_cancel(h, &t), 0);
  ck_assert_int_eq(shms_worker_cancelled(w, &job), 1);
  ck_assert_int_eq(shms_wait_result(h, &t, 0, buf, sizeof buf, &res), SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 130, NULL, 0));
  ck_assert_shms_ok(shms_wait_result(h, &t, 0, buf, sizeof buf, &res));
  ck_assert_int_eq(res.status, 130);
  ck_assert_uint_eq(stats(h).cancelled, 1); /* only the queued job counts as cancelled */
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(a_job_past_its_deadline_never_starts) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_request r = job_req("a");
  r.deadline_ns = sched_fake_now + 100;
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "x", 1, 0, &t));
  sched_fake_now += 200;
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w)); /* granted, due, never started */
  shms_job job;
  ck_assert_int_eq(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT);
  shms_result res;
  char buf[4];
  ck_assert_shms_err(shms_wait_result(h, &t, 0, buf, sizeof buf, &res), SHMS_EDEADLINE, "deadline");
  shms_class_stats s = stats(h);
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.expired, 1);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

START_TEST(jobs_take_fair_turns_between_tenants) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 16);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  const char *tenants[] = {"a", "a", "a", "b", "c", "b"};
  shms_ticket t[6];
  for (int i = 0; i < 6; i++)
    t[i] = submit(h, tenants[i], &i, sizeof i, 0);
  /* a1 went straight to the idle worker, which emptied a: a left the ring and came back with
   * a2 as a newcomer, ahead of b and c. From then on a, b, c take turns. */
  int want[] = {0, 1, 3, 4, 2, 5};
  for (int n = 0; n < 6; n++) {
    shms_job job;
    ck_assert_shms_ok(shms_worker_take(w, 0, &job));
    int got;
    memcpy(&got, job.payload, sizeof got);
    ck_assert_int_eq(got, want[n]);
    ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  }
  shms_result res;
  for (int i = 0; i < 6; i++)
    ck_assert_shms_ok(shms_wait_result(h, &t[i], 0, NULL, 0, &res));
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

static int submit_check(shms_t *h) {
  shms_request r = job_req("z");
  shms_ticket t;
  return shms_submit(h, &r, "z", 1, 0, &t);
}

START_TEST(a_quarantined_worker_cell_is_repaired_offline) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit(h, "a", "x", 1, 0);
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_shms_ok(shms_worker_quarantine(w, &job, 137));
  shms_result res;
  ck_assert_shms_ok(shms_wait_result(h, &t, 0, NULL, 0, &res));
  ck_assert_int_eq(res.status, 137);
  ck_assert_uint_eq(stats(h).quarantined, 1);
  ck_assert_shms_err(shms_worker_take(w, 0, &job), SHMS_EQUARANTINED, "quarantined");
  ck_assert_shms_err(submit_check(h), SHMS_EQUARANTINED, "quarantined");
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_SMALL, -1), 1);
  ck_assert_uint_eq(stats(h).offline, 1);
  ck_assert_shms_err(shms_worker_take(w, 0, &job), SHMS_ENOTFOUND, "no longer bound");
  ck_assert_shms_ok(shms_worker_close(w));
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  t = submit(h, "a", "y", 1, 0);
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  ck_assert_shms_ok(shms_wait_result(h, &t, 0, NULL, 0, &res));
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* ---- Across processes ---- */

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
 * A worker process: take `jobs` jobs; for each, report its pid on report_fd,
 * then (if hold) block forever, else complete it with the payload uppercased.
 */
static pid_t spawn_worker(const char *name, int jobs, int report_fd, int hold) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid != 0)
    return pid;
  shms_t *h;
  shms_worker_t *w;
  if (shms_attach(name, 0, &h) != SHMS_OK || shms_worker_open(h, SHMS_CLASS_SMALL, &w) != SHMS_OK)
    _exit(10);
  for (int n = 0; n < jobs; n++) {
    shms_job job;
    if (shms_worker_take(w, UINT64_MAX, &job) != SHMS_OK)
      _exit(11);
    pid_t me = getpid();
    if (write(report_fd, &me, sizeof me) != sizeof me)
      _exit(12);
    while (hold)
      pause(); /* until the test kills us */
    char out[PAYLOAD];
    uppercase_into(out, job.payload, job.payload_len);
    if (shms_worker_complete(w, &job, 0, out, job.payload_len) != SHMS_OK)
      _exit(13);
  }
  shms_worker_close(w);
  shms_detach(h);
  _exit(0);
}

/* Whether the event ring holds a record of kind for ticket t, with reason. */
static int recorded(shms_t *h, uint32_t kind, const shms_ticket *t, int reason) {
  static shms_event_record recs[1024];
  uint64_t cursor = 0;
  size_t n;
  ck_assert_shms_ok(shms_events_read(h, &cursor, SHMS_EVENTS_SKIP_PENDING, recs, 1024, &n, NULL));
  for (size_t i = 0; i < n; i++)
    if (recs[i].event.kind == kind && recs[i].event.ticket.seq == t->seq &&
        recs[i].event.reason == reason)
      return 1;
  return 0;
}

static void worker_killed_case(unsigned flags) {
  const char *name;
  shms_t *h = open_worker_class(&name, 2, 4);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t a = spawn_worker(name, 1, p[1], 1), who;
  shms_ticket t = submit(h, "a", "retry me", 8, flags);
  read_all(p[0], &who, sizeof who); /* a runs the job */
  ck_assert_int_eq(who, a);
  pid_t b = flags ? spawn_worker(name, 1, p[1], 0) : 0;
  kill(a, SIGKILL);
  ck_assert_int_eq(waitpid(a, NULL, 0), a);
  /* No supervisor: the waiting client notices the dead worker within a poll interval. */
  char buf[16];
  shms_result res;
  int rc = shms_wait_result(h, &t, UINT64_MAX, buf, sizeof buf, &res);
  if (flags) {
    ck_assert_shms_ok(rc);
    ck_assert(memcmp(buf, "RETRY ME", 8) == 0);
    read_all(p[0], &who, sizeof who);
    ck_assert_int_eq(who, b);
    ck_assert_int_eq(child_status(b), 0);
  } else {
    ck_assert_int_eq(rc, SHMS_EWORKERLOST);
  }
  /* The client that found the dead worker recorded what became of the job. */
  ck_assert(flags ? recorded(h, SHMS_EVENT_JOB_REQUEUED, &t, 0)
                  : recorded(h, SHMS_EVENT_JOB_LOST, &t, SHMS_EWORKERLOST));
  shms_class_stats s = stats(h);
  ck_assert_uint_eq(s.quarantined, 1); /* the dead worker's cell: cleanup unproven */
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(ck_pr_load_32(&h->cls[SHMS_CLASS_SMALL].ctl->used), 0);
  /* Its repair, back offline for a new worker, is recorded too (no ticket: a cell's event). */
  ck_assert_int_eq(shms_repair_lost_workers(h), 1);
  shms_event_record rec;
  uint64_t end = 0;
  size_t none;
  ck_assert_shms_ok(shms_events_read(h, &end, 0, NULL, 0, &none, NULL));
  uint64_t cursor = end - 1;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, &rec, 1, &none, NULL));
  ck_assert_uint_eq(none, 1);
  ck_assert_uint_eq(rec.event.kind, SHMS_EVENT_CELL_REPAIRED);
  ck_assert_uint_eq(rec.value, 2); /* offline */
  sched_close(h, name);
}

START_TEST(a_worker_killed_mid_job_loses_it) { worker_killed_case(0); }
END_TEST

START_TEST(a_job_asked_to_retry_once_completes_on_another_worker) {
  worker_killed_case(SHMS_SUBMIT_RETRY_ONCE);
}
END_TEST

START_TEST(two_workers_racing_take_one_job_each) {
  const char *name;
  shms_t *h = open_worker_class(&name, 2, 4);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t a = spawn_worker(name, 1, p[1], 0), b = spawn_worker(name, 1, p[1], 0), first, second;
  shms_result res;
  char buf[8];
  shms_ticket t1 = submit(h, "a", "one", 3, 0);
  read_all(p[0], &first, sizeof first);
  ck_assert_shms_ok(shms_wait_result(h, &t1, UINT64_MAX, buf, sizeof buf, &res));
  ck_assert(memcmp(buf, "ONE", 3) == 0);
  shms_ticket t2 = submit(h, "b", "two", 3, 0);
  read_all(p[0], &second, sizeof second);
  ck_assert_shms_ok(shms_wait_result(h, &t2, UINT64_MAX, buf, sizeof buf, &res));
  ck_assert(memcmp(buf, "TWO", 3) == 0);
  ck_assert_int_ne(first, second); /* each took exactly one: no job was taken twice */
  ck_assert(first == a || first == b);
  ck_assert(second == a || second == b);
  ck_assert_int_eq(child_status(a), 0);
  ck_assert_int_eq(child_status(b), 0);
  ck_assert_uint_eq(stats(h).offline, 2);
  sched_close(h, name);
}
END_TEST

static void client_gone_case(int detach) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  int p[2], go[2];
  ck_assert(pipe(p) == 0 && pipe(go) == 0);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    shms_t *ch;
    shms_ticket t;
    shms_request r = job_req("gone");
    if (shms_attach(name, 0, &ch) != SHMS_OK || shms_submit(ch, &r, "x", 1, 0, &t) != SHMS_OK)
      _exit(1);
    if (write(p[1], &t, sizeof t) != sizeof t)
      _exit(2);
    char b;
    if (read(go[0], &b, 1) != 1)
      _exit(3);
    _exit(detach && shms_detach(ch) == SHMS_OK ? 0 : 4);
  }
  shms_ticket t;
  read_all(p[0], &t, sizeof t);
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, UINT64_MAX, &job));
  if (detach) {
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    ck_assert_int_eq(child_status(c), 0);
  } else {
    kill(c, SIGKILL);
    ck_assert_int_eq(waitpid(c, NULL, 0), c);
  }
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, "X", 1)); /* nobody takes the result */
  shms_class_stats s = stats(h);
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(ck_pr_load_32(&h->cls[SHMS_CLASS_SMALL].ctl->used), 0); /* nothing leaks */
  shms_result res;
  ck_assert_int_eq(shms_wait_result(h, &t, 0, NULL, 0, &res), SHMS_ENOTFOUND);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}

START_TEST(a_client_killed_while_its_job_runs_leaks_nothing) { client_gone_case(0); }
END_TEST

START_TEST(a_client_that_detaches_while_its_job_runs_leaks_nothing) { client_gone_case(1); }
END_TEST

/* A client that takes its result and exits at once, again and again: its slot is freed once. */
START_TEST(clients_that_exit_right_after_their_result_free_their_slot_once) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  for (int n = 0; n < 200; n++) {
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
      shms_t *ch;
      shms_ticket t;
      shms_result res;
      shms_request r = job_req("quick");
      if (shms_attach(name, 0, &ch) != SHMS_OK || shms_submit(ch, &r, "x", 1, 0, &t) != SHMS_OK ||
          shms_wait_result(ch, &t, UINT64_MAX, NULL, 0, &res) != SHMS_EINVAL)
        _exit(1);
      char b;
      _exit(shms_wait_result(ch, &t, 0, &b, 1, &res) == SHMS_OK ? 0 : 2); /* no detach */
    }
    shms_job job;
    ck_assert_shms_ok(shms_worker_take(w, UINT64_MAX, &job));
    ck_assert_shms_ok(shms_worker_complete(w, &job, 0, "X", 1));
    ck_assert_int_eq(child_status(c), 0);
  }
  ck_assert_uint_eq(ck_pr_load_32(&h->cls[SHMS_CLASS_SMALL].ctl->used), 0);
  char report[2048];
  uint32_t violations;
  ck_assert_shms_ok(shms_recover(h, NULL));
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/*
 * Rounds of clients submitting at once to two worker processes: every job completes. A worker
 * that saw its cell granted before the dispatcher had marked the slot used to hand the cell
 * back, leaving the job granted to nothing.
 */
START_TEST(every_job_of_concurrent_rounds_completes) {
  enum { ROUNDS = 300, CLIENTS = 6 };
  const char *name;
  shms_t *h = open_worker_class(&name, 2, 16);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t workers[2] = {spawn_worker(name, ROUNDS * CLIENTS, p[1], 0), 0};
  workers[1] = spawn_worker(name, ROUNDS * CLIENTS, p[1], 0); /* both serve until killed */
  for (int r = 0; r < ROUNDS; r++) {
    pid_t c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
      ck_assert_int_ge(c[i] = fork(), 0);
      if (c[i] == 0) {
        shms_t *ch;
        shms_ticket t;
        shms_result res;
        shms_request req = job_req(i % 2 ? "odd" : "even");
        char buf[8];
        if (shms_attach(name, 0, &ch) != SHMS_OK ||
            shms_submit(ch, &req, "ab", 2, 0, &t) != SHMS_OK)
          _exit(1);
        /* A bounded wait: a job granted to nothing would hang here. */
        _exit(shms_wait_result(ch, &t, 10ull * 1000 * 1000 * 1000, buf, sizeof buf, &res) == SHMS_OK
                  ? 0
                  : 2);
      }
    }
    for (int i = 0; i < CLIENTS; i++)
      ck_assert_msg(child_status(c[i]) == 0, "round %d: a job did not complete", r);
  }
  for (int i = 0; i < 2; i++) {
    kill(workers[i], SIGKILL);
    waitpid(workers[i], NULL, 0);
  }
  char report[2048];
  uint32_t violations;
  ck_assert_shms_ok(shms_recover(h, NULL));
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("worker");
  TCase *tc = harness_tcase("jobs");
  tcase_add_test(tc, payloads_of_every_size_round_trip);
  tcase_add_test(tc, results_are_refused_not_truncated_and_buffers_can_grow);
  tcase_add_test(tc, workers_bind_cells_and_lease_calls_are_refused);
  tcase_add_test(tc, cancel_a_queued_and_a_started_job);
  tcase_add_test(tc, a_job_past_its_deadline_never_starts);
  tcase_add_test(tc, jobs_take_fair_turns_between_tenants);
  tcase_add_test(tc, a_quarantined_worker_cell_is_repaired_offline);
  tcase_add_test(tc, a_worker_killed_mid_job_loses_it);
  tcase_add_test(tc, a_job_asked_to_retry_once_completes_on_another_worker);
  tcase_add_test(tc, two_workers_racing_take_one_job_each);
  tcase_add_test(tc, a_client_killed_while_its_job_runs_leaks_nothing);
  tcase_add_test(tc, a_client_that_detaches_while_its_job_runs_leaks_nothing);
  tcase_add_test(tc, clients_that_exit_right_after_their_result_free_their_slot_once);
  tcase_add_test(tc, every_job_of_concurrent_rounds_completes);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

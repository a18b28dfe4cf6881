/*
 * Batches of jobs (shms_submit_batch): all queued or none, refusals that
 * leave the queue as it was, no observer ever seeing part of a batch, and
 * cancelling a batch's unstarted jobs. Processes are ordered with pipes,
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
#include "shm/proc.h"

#define PAYLOAD 64

static shms_t *open_class(const char **name, unsigned cells, unsigned queue, uint32_t tenants) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1,
                                                      .cells = cells,
                                                      .queue = queue,
                                                      .mode = SHMS_MODE_WORKER,
                                                      .payload = PAYLOAD};
  if (tenants != 0)
    cfg.max_tenants = tenants;
  return sched_open(name, 0, 0, &cfg);
}

static shms_class_stats stats(shms_t *h) {
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  return s;
}

static uint32_t used(shms_t *h) { return ck_pr_load_32(&h->cls[SHMS_CLASS_SMALL].ctl->used); }

static shms_batch_job job(const char *tenant, const char *payload) {
  return (shms_batch_job){.tenant = tenant, .payload = payload, .len = strlen(payload)};
}

/* The queue as it was: depth and slots in use. */
static void assert_queue(shms_t *h, uint32_t depth, uint32_t slots) {
  ck_assert_uint_eq(stats(h).queue_depth, depth);
  ck_assert_uint_eq(used(h), slots);
}

START_TEST(a_batch_queues_every_job_in_order) {
  const char *name;
  shms_t *h = open_class(&name, 1, 8, 0);
  shms_batch_job jobs[3] = {job("a", "one"), job("b", "two"), job("a", "three")};
  jobs[2].priority = 5;
  shms_ticket t[3];
  size_t failed = 99;
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed));
  ck_assert_uint_eq(failed, 3);
  assert_queue(h, 3, 3);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  int seen = 0;
  for (int n = 0; n < 3; n++) {
    shms_job j;
    ck_assert_shms_ok(shms_worker_take(w, 0, &j));
    for (int i = 0; i < 3; i++)
      if (j.ticket.slot == t[i].slot && j.ticket.seq == t[i].seq) {
        ck_assert_uint_eq(j.payload_len, jobs[i].len);
        ck_assert(memcmp(j.payload, jobs[i].payload, j.payload_len) == 0);
        ck_assert_str_eq(j.tenant, jobs[i].tenant);
        ck_assert_int_eq(j.priority, jobs[i].priority);
        seen |= 1 << i;
      }
    ck_assert_shms_ok(shms_worker_complete(w, &j, 10 + n, j.payload, j.payload_len));
  }
  ck_assert_int_eq(seen, 7);
  for (int i = 0; i < 3; i++) {
    char buf[PAYLOAD];
    shms_result r;
    ck_assert_shms_ok(shms_wait_result(h, &t[i], 0, buf, sizeof buf, &r));
    ck_assert_uint_eq(r.result_len, jobs[i].len);
    ck_assert(memcmp(buf, jobs[i].payload, r.result_len) == 0);
  }
  assert_queue(h, 0, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

START_TEST(a_batch_that_does_not_fit_is_refused_whole) {
  const char *name;
  shms_t *h = open_class(&name, 1, 4, 0);
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "x"};
  shms_ticket single[2], t[5];
  ck_assert_shms_ok(shms_submit(h, &r, "s", 1, 0, &single[0]));
  ck_assert_shms_ok(shms_submit(h, &r, "s", 1, 0, &single[1]));
  shms_class_stats before = stats(h);
  shms_batch_job jobs[5] = {job("a", "1"), job("a", "2"), job("a", "3"), job("a", "4"),
                            job("a", "5")};
  size_t failed = 0;
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EQUEUEFULL);
  ck_assert_uint_eq(failed, 3); /* the batch as a whole */
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "do not fit"));
  assert_queue(h, 2, 2);
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 5, 0, t, &failed), SHMS_EQUEUEFULL);
  assert_queue(h, 2, 2);
  ck_assert_uint_eq(stats(h).queue_depth, before.queue_depth);
  /* Two do fit, and the queue is then full. */
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, 0, t, &failed));
  assert_queue(h, 4, 4);
  sched_close(h, name);
}
END_TEST

START_TEST(a_bad_job_refuses_the_batch_naming_it) {
  const char *name;
  shms_t *h = open_class(&name, 1, 8, 0);
  static char big[PAYLOAD + 1];
  memset(big, 'b', sizeof big);
  shms_batch_job jobs[3] = {job("a", "1"), job("a", "2"), job("a", "3")};
  shms_ticket t[3];
  size_t failed = 0;
  jobs[1].tenant = "has space";
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EINVAL);
  ck_assert_uint_eq(failed, 1);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "job 1: "));
  jobs[1].tenant = "a";
  jobs[2].payload = big;
  jobs[2].len = sizeof big;
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EINVAL);
  ck_assert_uint_eq(failed, 2);
  jobs[2] = job("a", "3");
  jobs[0].deadline_ns = 1; /* long past */
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EDEADLINE);
  ck_assert_uint_eq(failed, 0);
  jobs[0].deadline_ns = 0;
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 0, 0, t, &failed), SHMS_EINVAL);
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0x80, t, &failed), SHMS_EINVAL);
  assert_queue(h, 0, 0);
  sched_close(h, name);
}
END_TEST

START_TEST(a_denied_tenant_refuses_the_batch) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1,
                                                      .cells = 1,
                                                      .queue = 8,
                                                      .mode = SHMS_MODE_WORKER,
                                                      .payload = PAYLOAD,
                                                      .allow_count = 1};
  strcpy(cfg.classes[SHMS_CLASS_SMALL].allow[0], "ci");
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_batch_job jobs[3] = {job("ci", "1"), job("ci", "2"), job("web", "3")};
  shms_ticket t[3];
  size_t failed = 0;
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EDENIED);
  ck_assert_uint_eq(failed, 2);
  assert_queue(h, 0, 0);
  sched_close(h, name);
}
END_TEST

/* A tenant new to the class finds the tenant table full at the index: the whole batch goes. */
START_TEST(a_full_tenant_table_refuses_the_batch) {
  const char *name;
  shms_t *h = open_class(&name, 1, 16, 2);
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "x"};
  shms_ticket single, t[3];
  ck_assert_shms_ok(shms_submit(h, &r, "s", 1, 0, &single));
  shms_batch_job jobs[3] = {job("y", "1"), job("z", "2"), job("y", "3")};
  size_t failed = 0;
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EQUEUEFULL);
  ck_assert_uint_eq(failed, 1);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "tenant table"));
  assert_queue(h, 1, 1);
  /* The index is whole: the tenants that fit are served as before. */
  jobs[1].tenant = "x";
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed));
  assert_queue(h, 4, 4);
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  sched_close(h, name);
}
END_TEST

START_TEST(cancelling_a_batch_cancels_only_what_has_not_started) {
  const char *name;
  shms_t *h = open_class(&name, 1, 8, 0);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_batch_job jobs[3] = {job("a", "1"), job("a", "2"), job("a", "3")};
  shms_ticket t[3];
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, NULL));
  shms_job j;
  ck_assert_shms_ok(shms_worker_take(w, 0, &j)); /* one cell: one job starts */
  size_t cancelled = 0;
  ck_assert_shms_ok(shms_cancel_batch(h, t, 3, &cancelled));
  ck_assert_uint_eq(cancelled, 2);
  ck_assert_int_eq(shms_worker_cancelled(w, &j), 0); /* the running one was not asked */
  ck_assert_shms_ok(shms_worker_complete(w, &j, 0, "ok", 2));
  int ok = 0, gone = 0;
  for (int i = 0; i < 3; i++) {
    char buf[PAYLOAD];
    shms_result r;
    int rc = shms_wait_result(h, &t[i], 0, buf, sizeof buf, &r);
    ok += rc == SHMS_OK;
    gone += rc == SHMS_ECANCELLED;
  }
  ck_assert_int_eq(ok, 1);
  ck_assert_int_eq(gone, 2);
  /* Again, with every ticket retired: nothing to cancel, and no error. */
  ck_assert_shms_ok(shms_cancel_batch(h, t, 3, &cancelled));
  ck_assert_uint_eq(cancelled, 0);
  assert_queue(h, 0, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

#define BATCHES 24
#define PER     3

/* The slots whose payload names batch b ("b:j") and that are queued, granted or running. */
static int live_of_batch(shms_t *h, int b) {
  const struct shms__cls *k = &h->cls[SHMS_CLASS_SMALL];
  char prefix[16];
  int n = snprintf(prefix, sizeof prefix, "%d:", b), live = 0;
  for (uint32_t i = 0; i < k->nslots; i++) {
    uint32_t st = SHMS__SLOT_STATE(ck_pr_load_64(&shms__slot_at(k, i)->word));
    if ((st == SHMS__SLOT_QUEUED || st == SHMS__SLOT_GRANTED || st == SHMS__SLOT_RUNNING) &&
        memcmp(shms__slot_payload(k, i), prefix, (size_t)n) == 0)
      live++;
  }
  return live;
}

/*
 * A worker in another process takes jobs while batches are published: the moment it takes the
 * first job of a batch, every job of that batch must be queued already (one at a time, as
 * shms_submit would queue them, the first would be granted and taken before the last was).
 */
START_TEST(a_worker_never_sees_part_of_a_batch) {
  const char *name;
  shms_t *h = open_class(&name, 1, BATCHES * PER, 0);
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *v;
    shms_worker_t *w;
    if (shms_attach(name, 0, &v) != SHMS_OK || shms_worker_open(v, SHMS_CLASS_SMALL, &w) != 0)
      _exit(90);
    if (write(ready[1], "r", 1) != 1)
      _exit(91);
    int first_seen[BATCHES] = {0};
    for (int n = 0; n < BATCHES * PER; n++) {
      shms_job j;
      if (shms_worker_take(w, UINT64_MAX, &j) != SHMS_OK)
        _exit(92);
      int b = atoi(j.payload);
      if (b < 0 || b >= BATCHES)
        _exit(93);
      if (!first_seen[b]++ && live_of_batch(v, b) != PER)
        _exit(94); /* part of the batch was not yet queued */
      if (shms_worker_complete(w, &j, 0, NULL, 0) != SHMS_OK)
        _exit(95);
    }
    _exit(0);
  }
  char c;
  ck_assert_int_eq(read(ready[0], &c, 1), 1);
  static char payload[BATCHES][PER][16];
  static shms_ticket t[BATCHES][PER];
  for (int b = 0; b < BATCHES; b++) {
    shms_batch_job jobs[PER];
    for (int j = 0; j < PER; j++) {
      snprintf(payload[b][j], sizeof payload[b][j], "%d:%d", b, j);
      jobs[j] = job(j % 2 ? "odd" : "even", payload[b][j]);
    }
    ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, PER, 0, t[b], NULL));
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 94,
                "the worker took a job of a batch not yet wholly queued");
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker status 0x%x", status);
  for (int b = 0; b < BATCHES; b++)
    for (int j = 0; j < PER; j++) {
      shms_result r;
      ck_assert_shms_ok(shms_wait_result(h, &t[b][j], 0, NULL, 0, &r));
    }
  assert_queue(h, 0, 0);
  sched_close(h, name);
}
END_TEST

/* ---- Keyed jobs in a batch ---- */

static shms_batch_job keyed(const char *tenant, const char *payload, const char *key) {
  shms_batch_job j = job(tenant, payload);
  j.key = key;
  return j;
}

static uint64_t waiters_of(shms_t *h, const shms_ticket *t) {
  return ck_pr_load_64(&shms__slot_at(&h->cls[SHMS_CLASS_SMALL], t->slot)->waiters);
}

static int same_ticket(const shms_ticket *a, const shms_ticket *b) {
  return a->slot == b->slot && a->seq == b->seq;
}

/* Our process entry's join records in use. */
static int join_records(shms_t *h) {
  const struct shms__proc *p = shms__proc_at(h, shms__self_index(h));
  int n = 0;
  for (int j = 0; j < SHMS__JOINS; j++)
    n += ck_pr_load_64((uint64_t *)&p->joins[j]) != 0;
  return n;
}

/* The next job (its payload expect) completes with status 7 and "R:" and its payload. */
static void run_one(shms_worker_t *w, const char *expect) {
  shms_job j;
  ck_assert_shms_ok(shms_worker_take(w, 0, &j));
  ck_assert_uint_eq(j.payload_len, strlen(expect));
  ck_assert(memcmp(j.payload, expect, j.payload_len) == 0);
  char out[PAYLOAD];
  int n = snprintf(out, sizeof out, "R:%s", expect);
  ck_assert_shms_ok(shms_worker_complete(w, &j, 7, out, (size_t)n));
}

static void result_is(shms_t *h, const shms_ticket *t, const char *expect) {
  char buf[PAYLOAD];
  shms_result r;
  ck_assert_shms_ok(shms_wait_result(h, t, 0, buf, sizeof buf, &r));
  ck_assert_int_eq(r.status, 7);
  ck_assert_uint_eq(r.result_len, strlen(expect));
  ck_assert(memcmp(buf, expect, r.result_len) == 0);
}

/* Another process's keyed job runs; a batch line of its key joins it and gets its result, the
 * other lines queue as ever. */
START_TEST(a_keyed_line_joins_the_running_job_of_its_key) {
  const char *name;
  shms_t *h = open_class(&name, 1, 8, 0);
  int tk[2], res[2];
  ck_assert_int_eq(pipe(tk), 0);
  ck_assert_int_eq(pipe(res), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *v;
    shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "a"};
    shms_ticket t;
    char buf[PAYLOAD];
    shms_result out;
    if (shms_attach(name, 0, &v) != SHMS_OK ||
        shms_submit_key(v, &r, "k", "orig", 4, 0, &t, NULL) != SHMS_OK ||
        write(tk[1], &t, sizeof t) != (ssize_t)sizeof t ||
        shms_wait_result(v, &t, UINT64_MAX, buf, sizeof buf, &out) != SHMS_OK)
      _exit(90);
    _exit(out.result_len == 6 && memcmp(buf, "R:orig", 6) == 0 ? out.status : 91);
  }
  shms_ticket theirs, t[2];
  ck_assert_int_eq(read(tk[0], &theirs, sizeof theirs), (ssize_t)sizeof theirs);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_job running;
  ck_assert_shms_ok(shms_worker_take(w, 0, &running));
  uint64_t joined_before = ck_pr_load_64(&h->cls[SHMS_CLASS_SMALL].ctl->joined);
  shms_batch_job jobs[2] = {keyed("b", "other", "k"), job("b", "plain")};
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, 0, t, NULL));
  ck_assert(same_ticket(&t[0], &theirs));
  ck_assert_uint_eq(SHMS__WAIT_COUNT(waiters_of(h, &t[0])), 1);
  ck_assert_uint_eq(ck_pr_load_64(&h->cls[SHMS_CLASS_SMALL].ctl->joined), joined_before + 1);
  assert_queue(h, 1, 2); /* the plain job queued; the keyed one runs */
  ck_assert_shms_ok(shms_worker_complete(w, &running, 7, "R:orig", 6));
  result_is(h, &t[0], "R:orig");
  run_one(w, "plain");
  result_is(h, &t[1], "R:plain");
  ck_assert_int_eq(waitpid(pid, &(int){0}, 0), pid);
  assert_queue(h, 0, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* Two lines of one key: the later joins the job the earlier queues; it runs once, and each line
 * gets its result. A cancel of the batch takes both shares back and cancels it. */
START_TEST(two_lines_of_a_key_run_once) {
  const char *name;
  shms_t *h = open_class(&name, 1, 8, 0);
  shms_batch_job jobs[3] = {keyed("a", "first", "k"), keyed("a", "second", "k"), job("a", "p")};
  shms_ticket t[3];
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, NULL));
  ck_assert(same_ticket(&t[0], &t[1]));
  assert_queue(h, 2, 2);
  ck_assert_uint_eq(SHMS__WAIT_COUNT(waiters_of(h, &t[0])), 1);
  ck_assert(waiters_of(h, &t[0]) & SHMS__WAIT_OWNER);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  run_one(w, "first");
  run_one(w, "p");
  shms_job none;
  ck_assert_int_eq(shms_worker_take(w, 0, &none), SHMS_ETIMEDOUT);
  result_is(h, &t[0], "R:first");
  result_is(h, &t[1], "R:first");
  result_is(h, &t[2], "R:p");
  ck_assert_int_eq(join_records(h), 0);
  assert_queue(h, 0, 0);

  /* Cancelled before it runs: both of the process's shares go, and with them the job. */
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, 0, t, NULL));
  ck_assert_shms_ok(shms_cancel_batch(h, t, 2, NULL));
  for (int i = 0; i < 2; i++) {
    shms_result r;
    ck_assert_int_eq(shms_wait_result(h, &t[i], 0, NULL, 0, &r), SHMS_ECANCELLED);
  }
  ck_assert_int_eq(shms_worker_take(w, 0, &none), SHMS_ETIMEDOUT);
  ck_assert_int_eq(join_records(h), 0);
  assert_queue(h, 0, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* Refused at the index after its join was made: the joined job is as it was, and not ours. */
START_TEST(a_refused_batch_leaves_the_joined_job_as_it_was) {
  const char *name;
  shms_t *h = open_class(&name, 1, 16, 2);
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "x"};
  shms_ticket mine, t[3];
  ck_assert_shms_ok(shms_submit_key(h, &r, "k", "orig", 4, 0, &mine, NULL));
  uint64_t before = waiters_of(h, &mine);
  uint64_t joined_before = ck_pr_load_64(&h->cls[SHMS_CLASS_SMALL].ctl->joined);
  shms_batch_job jobs[3] = {keyed("y", "1", "k"), job("y", "2"), job("z", "3")};
  size_t failed = 0;
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EQUEUEFULL);
  ck_assert_uint_eq(failed, 2);
  ck_assert_uint_eq(waiters_of(h, &mine), before);
  ck_assert_int_eq(join_records(h), 0);
  ck_assert_uint_eq(ck_pr_load_64(&h->cls[SHMS_CLASS_SMALL].ctl->joined), joined_before);
  assert_queue(h, 1, 1);
  /* A full queue refuses it before any join. */
  shms_batch_job many[20];
  for (int i = 0; i < 20; i++)
    many[i] = job("x", "q");
  many[0] = keyed("x", "1", "k");
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, many, 20, 0, t, &failed),
                   SHMS_EQUEUEFULL);
  ck_assert_uint_eq(waiters_of(h, &mine), before);
  ck_assert_int_eq(join_records(h), 0);
  /* The job was never ours to cancel: it runs for its submitter. */
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  run_one(w, "orig");
  result_is(h, &mine, "R:orig");
  assert_queue(h, 0, 0);
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* More joins than the process may hold refuse the batch whole, naming the first that does not
 * fit; bad keys and supersede are refused too. */
START_TEST(too_many_joins_refuse_the_batch_whole) {
  const char *name;
  shms_t *h = open_class(&name, 1, 8, 0);
  shms_batch_job jobs[SHMS_KEY_JOINS_MAX + 2];
  shms_ticket t[SHMS_KEY_JOINS_MAX + 2];
  for (int i = 0; i < SHMS_KEY_JOINS_MAX + 2; i++)
    jobs[i] = keyed("a", "x", "k");
  size_t failed = 0;
  ck_assert_int_eq(
      shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, SHMS_KEY_JOINS_MAX + 2, 0, t, &failed),
      SHMS_EINVAL);
  ck_assert_uint_eq(failed, SHMS_KEY_JOINS_MAX + 1);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "SHMS_KEY_JOINS_MAX"));
  assert_queue(h, 0, 0);
  /* 14 joins held already: 2 are free, and a batch needing 3 is refused. */
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "a"};
  shms_ticket mine, j;
  ck_assert_shms_ok(shms_submit_key(h, &r, "k", "x", 1, 0, &mine, NULL));
  for (int i = 0; i < SHMS_KEY_JOINS_MAX - 2; i++)
    ck_assert_shms_ok(shms_submit_key(h, &r, "k", "x", 1, 0, &j, NULL));
  uint64_t before = waiters_of(h, &mine);
  ck_assert_uint_eq(SHMS__WAIT_COUNT(before), SHMS_KEY_JOINS_MAX - 2);
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed), SHMS_EBUSY);
  ck_assert_uint_eq(failed, 2);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "job 2: key 'k'"));
  ck_assert_uint_eq(waiters_of(h, &mine), before);
  ck_assert_int_eq(join_records(h), SHMS_KEY_JOINS_MAX - 2);
  assert_queue(h, 1, 1);
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, 0, t, &failed));
  ck_assert_uint_eq(SHMS__WAIT_COUNT(waiters_of(h, &mine)), SHMS_KEY_JOINS_MAX);
  /* Bad keys and supersede: refused, nothing changed. */
  jobs[1].key = "has space";
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, 0, t, &failed), SHMS_EINVAL);
  ck_assert_uint_eq(failed, 1);
  jobs[1].key = "";
  ck_assert_int_eq(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, 0, t, &failed), SHMS_EINVAL);
  jobs[1].key = "k";
  ck_assert_int_eq(
      shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, SHMS_SUBMIT_SUPERSEDE, t, &failed),
      SHMS_EINVAL);
  ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "supersede"));
  ck_assert_uint_eq(SHMS__WAIT_COUNT(waiters_of(h, &mine)), SHMS_KEY_JOINS_MAX);
  assert_queue(h, 1, 1);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  run_one(w, "x");
  for (int i = 0; i <= SHMS_KEY_JOINS_MAX; i++)
    result_is(h, &mine, "R:x");
  ck_assert_int_eq(join_records(h), 0);
  assert_queue(h, 0, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("batch");
  TCase *tc = harness_tcase("batch");
  tcase_add_test(tc, a_batch_queues_every_job_in_order);
  tcase_add_test(tc, a_batch_that_does_not_fit_is_refused_whole);
  tcase_add_test(tc, a_bad_job_refuses_the_batch_naming_it);
  tcase_add_test(tc, a_denied_tenant_refuses_the_batch);
  tcase_add_test(tc, a_full_tenant_table_refuses_the_batch);
  tcase_add_test(tc, cancelling_a_batch_cancels_only_what_has_not_started);
  tcase_add_test(tc, a_worker_never_sees_part_of_a_batch);
  tcase_add_test(tc, a_keyed_line_joins_the_running_job_of_its_key);
  tcase_add_test(tc, two_lines_of_a_key_run_once);
  tcase_add_test(tc, a_refused_batch_leaves_the_joined_job_as_it_was);
  tcase_add_test(tc, too_many_joins_refuse_the_batch_whole);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * What a failing call leaves (include/shmsched.h, docs/api.md): for the error paths the other
 * suites do not reach (scripts/coverage.sh found them), each call's error code, its detail, and
 * the state after it: nothing queued, taken or held that the caller cannot see or undo, and a
 * segment that audits clean. Processes are ordered with pipes, never with sleeps.
 */
#include <ck_pr.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"

/* The segment audits clean. */
static void audit_clean(shms_t *h) {
  char report[4096];
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "audit: %s", report);
}

static shms_t *open_worker_class(const char **name, unsigned cells, unsigned queue) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = cells, .queue = queue, .mode = SHMS_MODE_WORKER, .payload = 64};
  return sched_open(name, 0, 0, &cfg);
}

static shms_class_stats worker_stats(shms_t *h) {
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  return s;
}

static shms_ticket submit_job(shms_t *h, const char *tenant, uint64_t deadline) {
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = tenant, .deadline_ns = deadline};
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "job", 3, 0, &t));
  return t;
}

/* Every pointer a call needs, passed NULL: invalid-argument naming it, and nothing changed. */
START_TEST(null_arguments_are_refused_and_change_nothing) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "bob", 0, 0);
  shms_class_stats before = sched_stats(h);
  shms_ticket t2;
  uint32_t n;
  ck_assert_shms_err(shms_attach(name, 0, NULL), SHMS_EINVAL, "out is NULL");
  ck_assert_shms_err(shms_detach(NULL), SHMS_EINVAL, "handle is NULL");
  ck_assert_shms_err(shms_enqueue(h, NULL, &t2), SHMS_EINVAL, "request is NULL");
  ck_assert_shms_err(shms_enqueue(h, &r, NULL), SHMS_EINVAL, "ticket is NULL");
  ck_assert_shms_err(shms_acquire(h, &r, NULL), SHMS_EINVAL, "lease is NULL");
  ck_assert_shms_err(shms_wait(h, NULL, 0, &l), SHMS_EINVAL, "ticket is NULL");
  ck_assert_shms_err(shms_wait(h, &t, 0, NULL), SHMS_EINVAL, "lease is NULL");
  ck_assert_shms_err(shms_cancel(h, NULL), SHMS_EINVAL, "ticket is NULL");
  ck_assert_shms_err(shms_explain(h, &t, NULL), SHMS_EINVAL, "out is NULL");
  ck_assert_shms_err(shms_release(h, NULL), SHMS_EINVAL, "lease is NULL");
  ck_assert_shms_err(shms_quarantine(h, NULL, 1), SHMS_EINVAL, "lease is NULL");
  ck_assert_shms_err(shms_observe(h, SHMS_CLASS_STANDARD, NULL), SHMS_EINVAL, "out is NULL");
  ck_assert_shms_err(shms_get_config(h, NULL), SHMS_EINVAL, "out is NULL");
  ck_assert_shms_err(shms_segment_info_get(h, NULL), SHMS_EINVAL, "out is NULL");
  ck_assert_shms_err(shms_tenants(h, SHMS_CLASS_STANDARD, NULL, 1, &n), SHMS_EINVAL, "NULL");
  ck_assert_shms_err(shms_cells(h, SHMS_CLASS_STANDARD, NULL, 1, &n), SHMS_EINVAL, "out is NULL");
  ck_assert_shms_err(shms_processes(h, NULL, 1, &n), SHMS_EINVAL, "NULL");
  ck_assert_shms_err(shms_check(h, NULL, 0, &n), SHMS_EINVAL, "report");
  ck_assert_shms_err(shms_command_cgroup(h, NULL, 0), SHMS_EINVAL, "path is NULL");
  ck_assert_shms_err(shms_ticket_parse(NULL, &t2), SHMS_EINVAL, "NULL");
  ck_assert_int_eq(shms_segment_size(NULL), 0);
  ck_assert_shms_err(shms_config_validate(NULL), SHMS_EINVAL, "configuration is NULL");
  /* A ticket naming a class the segment does not configure is not-found, not a crash. */
  shms_ticket other = t;
  other.cls = SHMS_CLASS_LARGE;
  ck_assert_shms_err(shms_cancel(h, &other), SHMS_ENOTFOUND, "class is not configured");
  shms_class_stats after = sched_stats(h);
  ck_assert_uint_eq(after.queue_depth, before.queue_depth);
  ck_assert_uint_eq(after.leased, before.leased);
  ck_assert_uint_eq(after.available, before.available);
  ck_assert_uint_eq(after.granted, before.granted);
  ck_assert_uint_eq(after.rejected, before.rejected);
  ck_assert_uint_eq(after.cancelled, before.cancelled);
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* shms_command_cgroup's buffer may be too short, or there may be no cgroup at all: either way a
 * clear error, and the registration records no cgroup. */
START_TEST(command_cgroup_too_short_is_refused) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  char path[4];
  int rc = shms_command_cgroup(h, path, sizeof path);
  if (rc == SHMS_ENOTFOUND)
    ck_assert_ptr_nonnull(strstr(shms_last_error_detail(), "no cgroup v2 hierarchy"));
  else
    ck_assert_shms_err(rc, SHMS_EINVAL, "more than 4");
  ck_assert_uint_eq(h->proc->cmd_flags, 0);
  sched_close(h, name);
}
END_TEST

/* The worker-mode calls, given what they cannot use. */
START_TEST(worker_calls_refuse_bad_arguments) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "alice"};
  shms_ticket t;
  shms_worker_t *w;
  shms_job job;
  shms_result res;
  ck_assert_shms_err(shms_submit(h, &r, NULL, 3, 0, &t), SHMS_EINVAL, "payload is NULL");
  ck_assert_shms_err(shms_submit(h, &r, "x", 1, 0x80, &t), SHMS_EINVAL, "unknown submit flags");
  ck_assert_uint_eq(worker_stats(h).queue_depth, 0);
  ck_assert_shms_err(shms_worker_open(h, SHMS_CLASS_SMALL, NULL), SHMS_EINVAL, "out is NULL");
  ck_assert_shms_err(shms_worker_take(NULL, 0, &job), SHMS_EINVAL, "NULL");
  ck_assert_shms_err(shms_worker_close(NULL), SHMS_EINVAL, "worker is NULL");
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  t = submit_job(h, "alice", 0);
  ck_assert_shms_err(shms_wait_result(h, &t, 0, NULL, 8, &res), SHMS_EINVAL, "buf is NULL");
  ck_assert_shms_ok(shms_worker_take(w, UINT64_MAX, &job));
  /* A worker runs one job at a time: taking another while it holds one is refused. */
  ck_assert_shms_err(shms_worker_take(w, 0, &job), SHMS_EINVAL, "complete it first");
  ck_assert_shms_err(shms_worker_complete(w, &job, 0, NULL, 2), SHMS_EINVAL, "result is NULL");
  ck_assert_shms_err(shms_worker_complete(w, NULL, 0, NULL, 0), SHMS_EINVAL, "NULL");
  /* The job still runs, and completes. */
  ck_assert_int_eq(worker_stats(h).leased, 1);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 7, "ok", 2));
  char buf[8];
  ck_assert_shms_ok(shms_wait_result(h, &t, 0, buf, sizeof buf, &res));
  ck_assert_int_eq(res.status, 7);
  ck_assert_shms_ok(shms_worker_close(w));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* A lease class and a worker class are not interchangeable: each call says which it wants. */
START_TEST(lease_and_worker_classes_are_not_mixed) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 64};
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_worker_t *w;
  shms_result res;
  ck_assert_shms_err(shms_worker_open(h, SHMS_CLASS_STANDARD, &w), SHMS_EINVAL, "lease class");
  shms_ticket t = sched_enqueue(h, "alice", 0, 0); /* granted at once: the cell is free */
  ck_assert_shms_err(shms_wait_result(h, &t, 0, NULL, 0, &res), SHMS_EINVAL, "lease class");
  ck_assert_shms_err(shms_wait_started(h, &t, 0), SHMS_EINVAL, "lease class");
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l)); /* untouched by the refusals */
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

/*
 * shms_repair takes one cell, or -1 for every one: any other negative number is an error, not
 * "every cell".
 */
START_TEST(repair_refuses_a_negative_cell_other_than_all) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_quarantine(h, &l, 42));
  ck_assert_shms_err(shms_repair(h, SHMS_CLASS_STANDARD, -2), SHMS_EINVAL, "-2");
  ck_assert_uint_eq(sched_stats(h).quarantined, 1);
  ck_assert_shms_err(shms_repair(h, SHMS_CLASS_STANDARD, 2), SHMS_EINVAL, "no cell 2");
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, -1), 1);
  ck_assert_uint_eq(sched_stats(h).available, 2);
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/*
 * The fast path (shms_try_acquire, shms_acquire with a cell free) on a cell whose lease tokens
 * are used up: the cell is quarantined on the way, the call fails sequence-exhausted naming the
 * cell, and no lease is held; once every cell is, queued and new work fail
 * all-cells-quarantined.
 */
START_TEST(fast_path_token_exhaustion_quarantines_the_cell) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms__test_set_tokens(k, UINT64_MAX);
  shms_request r = sched_req("alice", 0);
  shms_lease l;
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_ESEQEXHAUSTED,
                     "exhausted (cell quarantined)");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.quarantined, 1);
  ck_assert_uint_eq(s.available, 1);
  ck_assert_uint_eq(s.leased, 0);
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_ESEQEXHAUSTED, "exhausted (cell quarantined)");
  ck_assert_uint_eq(sched_stats(h).quarantined, 2);
  shms_ticket t;
  ck_assert_shms_err(shms_enqueue(h, &r, &t), SHMS_EQUARANTINED, "quarantined");
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_EQUARANTINED, "quarantined");
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  audit_clean(h);
  shms_cell_info cells[2];
  uint32_t n;
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, cells, 2, &n));
  ck_assert_int_eq(cells[0].reason, SHMS_ESEQEXHAUSTED);
  ck_assert_int_eq(cells[1].reason, SHMS_ESEQEXHAUSTED);
  shms__test_set_tokens(k, 1);
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, -1), 2);
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

/* A full tenant table refuses a new tenant's request: queue-full, said so, nothing kept. */
START_TEST(full_tenant_table_refuses_and_keeps_nothing) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.max_tenants = 1;
  /* By grants: a class fair by time keeps a tenant's record while a lease granted from the
   * queue is held too (its charge is corrected at the lease's end). */
  cfg.classes[SHMS_CLASS_STANDARD].fairness = SHMS_FAIRNESS_GRANTS;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_request a = sched_req("alice", 0), b = sched_req("bob", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &a, &held));
  shms_ticket ta = sched_enqueue(h, "alice", 0, 0), tb;
  ck_assert_shms_err(shms_enqueue(h, &b, &tb), SHMS_EQUEUEFULL, "tenant table is full");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.queue_depth, 1);
  ck_assert_uint_eq(s.rejected, 1);
  ck_assert_uint_eq(s.queued_tenants, 1);
  audit_clean(h);
  /* Once alice has no queued work, bob's tenant fits. */
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &ta, 0, &held));
  ck_assert_shms_ok(shms_enqueue(h, &b, &tb));
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &tb, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/*
 * shms_interrupt makes waits return timed-out. shms_acquire has no ticket to hand back, so an
 * interrupted acquire must not leave its request queued behind the caller's back.
 */
START_TEST(interrupted_acquire_leaves_no_request) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  ck_assert_shms_ok(shms_interrupt(h, 1));
  ck_assert_shms_err(shms_acquire(h, &r, &l), SHMS_ETIMEDOUT, "interrupted");
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.queued_tenants, 0);
  ck_assert_uint_eq(s.leased, 1);
  ck_assert_uint_eq(s.cancelled, 1); /* withdrawn: counted as cancelled */
  audit_clean(h);
  ck_assert_shms_ok(shms_interrupt(h, 0));
  ck_assert_shms_ok(shms_release(h, &held));
  /* The cell is free and nobody queues: the next acquire takes it at once. */
  ck_assert_shms_ok(shms_try_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

/* The segment and class the drain hook watches. */
static shms_t *race_h;

/* At the first crash point after the enqueue published its request (the class counts it
 * queued), mark the segment draining: as if a drain had settled every queued request just
 * before the publication, and so missed this one. */
static void drain_after_publish(void) {
  const struct shms__cls *k = &race_h->cls[SHMS_CLASS_STANDARD];
  if (race_h->hdr->state == SHMS_SEG_ACTIVE && SHMS__FAST_QUEUED(ck_pr_load_64(&k->ctl->fast)) == 1)
    race_h->hdr->state = SHMS_SEG_DRAINING;
}

/* A drain that races an enqueue's publication leaves nothing queued: the enqueue fails
 * shutdown, its slot given back. */
START_TEST(enqueue_racing_a_drain_leaves_nothing_queued) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  race_h = h;
  shms__test_step_check(drain_after_publish);
  shms_ticket t;
  shms_request b = sched_req("bob", 0);
  int rc = shms_enqueue(h, &b, &t);
  shms__test_step_check(NULL);
  ck_assert_shms_err(rc, SHMS_ESHUTDOWN, "refused");
  ck_assert_uint_eq(h->hdr->state, SHMS_SEG_DRAINING);
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.rejected, 1);
  audit_clean(h);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

/* Cancelling a request that has already ended returns 0 and says how it ended. */
START_TEST(cancel_after_the_end_says_how_it_ended) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "bob", 0, 0);
  ck_assert_shms_ok(shms_drain(h));
  ck_assert_shms_err(shms_cancel(h, &t), 0, "already ended: shutdown");
  ck_assert_uint_eq(sched_stats(h).cancelled, 0);
  ck_assert_shms_err(shms_wait(h, &t, 0, &l), SHMS_ESHUTDOWN, "");
  ck_assert_shms_err(shms_cancel(h, &t), SHMS_ENOTFOUND, "stale or retired");
  /* A drain keeps accepted leases: the lease is still ours to release. */
  ck_assert_shms_ok(shms_release(h, &held));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* A segment being destroyed refuses new processes; removed with --force under an attached
 * handle, drain says so. */
START_TEST(drain_of_a_destroyed_segment_is_shutdown) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  ck_assert_shms_err(shms_destroy(name, 0), SHMS_EBUSY, "live attached");
  /* The detail names the flag that would overcome it, for front ends to respell. */
  ck_assert_shms_err(shms_destroy(name, 0), SHMS_EBUSY, "; SHMS_DESTROY_FORCE removes it anyway");
  ck_assert_int_eq(shms_segment_removed(h), 0);
  /* Between a destroy's mark and its unlink, nobody may register. */
  h->hdr->state = SHMS_SEG_DESTROYING;
  shms_t *late;
  ck_assert_shms_err(shms_attach(name, 0, &late), SHMS_ESHUTDOWN, "being destroyed");
  h->hdr->state = SHMS_SEG_ACTIVE;
  ck_assert_shms_ok(shms_destroy(name, SHMS_DESTROY_FORCE));
  ck_assert_int_eq(shms_segment_removed(h), 1);
  ck_assert_shms_err(shms_drain(h), SHMS_ESHUTDOWN, "being destroyed");
  shms_request r = sched_req("alice", 0);
  shms_lease l;
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_ESHUTDOWN, "");
  ck_assert_shms_ok(shms_detach(h));
}
END_TEST

/* A queued job whose deadline passes ends deadline-exceeded, never started, its slot freed. */
START_TEST(queued_job_past_its_deadline_ends_unstarted) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4); /* no worker: the job stays queued */
  shms_ticket t = submit_job(h, "alice", sched_fake_now + 1000);
  char buf[8];
  shms_result res;
  ck_assert_shms_err(shms_wait_result(h, &t, 0, buf, sizeof buf, &res), SHMS_ETIMEDOUT, "queued");
  ck_assert_shms_err(shms_wait_started(h, &t, 0), SHMS_ETIMEDOUT, "queued");
  sched_fake_now += 2000;
  ck_assert_shms_err(shms_wait_result(h, &t, 0, buf, sizeof buf, &res), SHMS_EDEADLINE,
                     "the job ended");
  shms_class_stats s = worker_stats(h);
  ck_assert_uint_eq(s.expired, 1);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_shms_err(shms_wait_result(h, &t, 0, buf, sizeof buf, &res), SHMS_ENOTFOUND, "retired");
  audit_clean(h);
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

/* A job granted to an idle worker whose deadline passes before the worker takes it is not
 * started: the client gets deadline-exceeded and the worker the next job. */
START_TEST(granted_job_past_its_deadline_is_not_started) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket late = submit_job(h, "alice", sched_fake_now + 1000);
  ck_assert_uint_eq(worker_stats(h).granted_unaccepted, 1);
  sched_fake_now += 2000;
  shms_job job;
  ck_assert_shms_err(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT, "no job");
  char buf[8];
  shms_result res;
  ck_assert_shms_err(shms_wait_result(h, &late, 0, buf, sizeof buf, &res), SHMS_EDEADLINE, "");
  shms_class_stats s = worker_stats(h);
  ck_assert_uint_eq(s.expired, 1);
  ck_assert_uint_eq(s.available, 1); /* idle again */
  shms_ticket next = submit_job(h, "alice", 0);
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_uint_eq(job.ticket.seq, next.seq);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  ck_assert_shms_ok(shms_wait_result(h, &next, 0, buf, sizeof buf, &res));
  ck_assert_shms_ok(shms_worker_close(w));
  audit_clean(h);
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

/* A job whose client died after it was granted is never started: the worker drops it (nobody
 * will collect it) and takes the next; recovery then finds nothing of the job left. */
START_TEST(job_of_a_dead_client_is_not_started) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "bob"};
    shms_ticket t;
    int ok = shms_attach(name, 0, &c) == SHMS_OK && shms_submit(c, &r, "x", 1, 0, &t) == SHMS_OK;
    _exit(ok ? 0 : 1); /* dies attached, its job granted to the idle worker */
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
  ck_assert_uint_eq(worker_stats(h).granted_unaccepted, 1);
  shms_job job;
  ck_assert_shms_err(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT, "no job");
  shms_class_stats s = worker_stats(h);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.available, 1);
  shms_ticket next = submit_job(h, "alice", 0);
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_uint_eq(job.ticket.seq, next.seq);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover_dead(h, 0, NULL, NULL, &rec));
  ck_assert_uint_eq(rec.dead_processes, 1);
  ck_assert_uint_eq(rec.requests_owner_lost, 0); /* the worker had settled it already */
  ck_assert_uint_eq(rec.slots_freed, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/*
 * A dispatcher that dies between marking an idle worker's cell granted and naming the job in it
 * leaves a grant to nobody. The worker finds it, gives the cell back and goes on (here: no job,
 * so its take times out), instead of spinning on it until a recovery comes; the next job runs.
 */
START_TEST(worker_undoes_a_grant_its_dead_dispatcher_left_unnamed) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  const struct shms__cls *k = &h->cls[SHMS_CLASS_SMALL];
  /* The dispatcher's first step of a grant, and nothing after it (no baton is held). */
  shms__op_enter(h, k);
  int64_t c = shms__cell_take(k, SHMS__TAKE_ANY, h->owner, SHMS__CELL_GRANTED);
  shms__op_leave(h, k);
  ck_assert_int_eq(c, (int64_t)shms_worker_cell(w));
  ck_assert_uint_eq(worker_stats(h).granted_unaccepted, 1);
  shms_job job;
  ck_assert_shms_err(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT, "no job");
  shms_class_stats s = worker_stats(h);
  ck_assert_uint_eq(s.granted_unaccepted, 0);
  ck_assert_uint_eq(s.available, 1);
  audit_clean(h);
  shms_ticket t = submit_job(h, "alice", 0);
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_uint_eq(job.ticket.seq, t.seq);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* The kinds of the events a recovery told, in order. */
struct events {
  uint32_t kinds[16];
  int n;
};

static void note_event(const shms_event *e, void *ctx) {
  struct events *ev = ctx;
  if (ev->n < 16)
    ev->kinds[ev->n++] = e->kind;
}

/*
 * A worker that dies with a job granted to its cell but not yet taken never started it: the
 * job is queued again (not lost, not worker-lost), the recovery says worker-offline for the
 * cell, and the next worker runs the job.
 */
START_TEST(job_granted_to_a_worker_that_died_is_queued_again) {
  const char *name;
  shms_t *h = open_worker_class(&name, 1, 4);
  int ready[2], never[2];
  ck_assert_int_eq(pipe(ready), 0);
  ck_assert_int_eq(pipe(never), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(never[1]);
    shms_t *c;
    shms_worker_t *w;
    char x = 'x';
    if (shms_attach(name, 0, &c) != SHMS_OK || shms_worker_open(c, SHMS_CLASS_SMALL, &w) != 0 ||
        write(ready[1], &x, 1) != 1)
      _exit(1);
    (void)!read(never[0], &x, 1); /* bound and idle, never taking, until killed */
    _exit(1);
  }
  close(never[0]);
  char x;
  ck_assert_int_eq(read(ready[0], &x, 1), 1);
  shms_ticket t = submit_job(h, "alice", 0);
  ck_assert_uint_eq(worker_stats(h).granted_unaccepted, 1);
  ck_assert_int_eq(kill(pid, SIGKILL), 0);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  struct events ev = {.n = 0};
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover_dead(h, 0, note_event, &ev, &rec));
  ck_assert_uint_eq(rec.dead_processes, 1);
  ck_assert_uint_eq(rec.workers_unbound, 1);
  ck_assert_uint_eq(rec.jobs_lost, 0);
  ck_assert_uint_eq(rec.jobs_requeued, 0);
  int offline = 0;
  for (int i = 0; i < ev.n; i++)
    offline += ev.kinds[i] == SHMS_EVENT_WORKER_OFFLINE;
  ck_assert_int_eq(offline, 1);
  shms_class_stats s = worker_stats(h);
  ck_assert_uint_eq(s.offline, 1);
  ck_assert_uint_eq(s.queue_depth, 1);
  ck_assert_shms_err(shms_wait_started(h, &t, 0), SHMS_ETIMEDOUT, "queued");
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_uint_eq(job.ticket.seq, t.seq);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 5, NULL, 0));
  char buf[8];
  shms_result res;
  ck_assert_shms_ok(shms_wait_result(h, &t, 0, buf, sizeof buf, &res));
  ck_assert_int_eq(res.status, 5);
  ck_assert_shms_ok(shms_worker_close(w));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/*
 * explain and tenants read the index under the dispatcher's baton. A live holder that keeps it
 * (here: a process stopped in a pass) makes them fail timed-out after a second, changing
 * nothing; a dead holder's baton is taken over and the index rebuilt from the slots.
 */
START_TEST(explain_waits_for_a_live_dispatcher_and_takes_over_a_dead_one) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("alice", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "bob", 3, 0);
  int ready[2], never[2];
  ck_assert_int_eq(pipe(ready), 0);
  ck_assert_int_eq(pipe(never), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(never[1]);
    shms_t *c;
    char x = 'x';
    if (shms_attach(name, 0, &c) != SHMS_OK)
      _exit(1);
    const struct shms__cls *k = &c->cls[SHMS_CLASS_STANDARD];
    shms__op_enter(c, k);
    if (shms__baton_acquire(c, k, UINT64_MAX / 2) != SHMS_OK || write(ready[1], &x, 1) != 1)
      _exit(1);
    (void)!read(never[0], &x, 1); /* holds the baton until killed */
    _exit(1);
  }
  close(never[0]);
  char x;
  ck_assert_int_eq(read(ready[0], &x, 1), 1);
  shms_explanation why;
  ck_assert_shms_err(shms_explain(h, &t, &why), SHMS_ETIMEDOUT, "stayed busy");
  shms_tenant_stats rows[2];
  uint32_t n = 99;
  ck_assert_shms_err(shms_tenants(h, SHMS_CLASS_STANDARD, rows, 2, &n), SHMS_ETIMEDOUT,
                     "stayed busy");
  ck_assert_uint_eq(n, 99);
  ck_assert_uint_eq(sched_stats(h).queue_depth, 1);
  ck_assert_int_eq(kill(pid, SIGKILL), 0);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_shms_ok(shms_explain(h, &t, &why));
  ck_assert_uint_eq(why.state, SHMS_REQ_QUEUED);
  ck_assert_str_eq(why.tenant, "bob");
  ck_assert_int_eq(why.priority, 3);
  ck_assert_uint_eq(why.tenants_ahead, 0);
  ck_assert_uint_eq(why.blocked_by & SHMS_BLOCK_NO_CELL, SHMS_BLOCK_NO_CELL);
  ck_assert_shms_ok(shms_tenants(h, SHMS_CLASS_STANDARD, rows, 2, &n));
  ck_assert_uint_eq(n, 2); /* bob, with a record, first; then the holder's tenant */
  ck_assert_str_eq(rows[0].name, "bob");
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover_dead(h, 0, NULL, NULL, &rec));
  ck_assert_uint_eq(rec.dead_processes, 1);
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

static Suite *contract_suite(void) {
  Suite *s = suite_create("contract");
  TCase *tc = harness_tcase("arguments");
  tcase_add_test(tc, null_arguments_are_refused_and_change_nothing);
  tcase_add_test(tc, command_cgroup_too_short_is_refused);
  tcase_add_test(tc, worker_calls_refuse_bad_arguments);
  tcase_add_test(tc, lease_and_worker_classes_are_not_mixed);
  tcase_add_test(tc, repair_refuses_a_negative_cell_other_than_all);
  suite_add_tcase(s, tc);
  tc = harness_tcase("leases");
  tcase_add_test(tc, fast_path_token_exhaustion_quarantines_the_cell);
  tcase_add_test(tc, full_tenant_table_refuses_and_keeps_nothing);
  tcase_add_test(tc, interrupted_acquire_leaves_no_request);
  tcase_add_test(tc, enqueue_racing_a_drain_leaves_nothing_queued);
  tcase_add_test(tc, cancel_after_the_end_says_how_it_ended);
  tcase_add_test(tc, drain_of_a_destroyed_segment_is_shutdown);
  suite_add_tcase(s, tc);
  tc = harness_tcase("jobs");
  tcase_add_test(tc, queued_job_past_its_deadline_ends_unstarted);
  tcase_add_test(tc, granted_job_past_its_deadline_is_not_started);
  tcase_add_test(tc, job_of_a_dead_client_is_not_started);
  tcase_add_test(tc, job_granted_to_a_worker_that_died_is_queued_again);
  tcase_add_test(tc, worker_undoes_a_grant_its_dead_dispatcher_left_unnamed);
  suite_add_tcase(s, tc);
  tc = harness_tcase("dispatcher");
  tcase_add_test(tc, explain_waits_for_a_live_dispatcher_and_takes_over_a_dead_one);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(contract_suite()); }

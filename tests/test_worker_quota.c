/*
 * Quotas on worker classes: a job naming quotas is dispatched to a worker only while each has a
 * unit free, holds one of each from its grant until it ends (completed, cancelled, its worker or
 * its submitter gone, its cell quarantined until repaired), never more than a quota's maximum
 * run at once, and a job waiting for a quota holds back no other job. Processes are ordered with
 * pipes and shared counters, never with sleeps.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sched_util.h"

#define PAYLOAD 64

static shms_t *open_workers(const char **name, unsigned cells, uint32_t max) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = cells, .queue = 16, .mode = SHMS_MODE_WORKER, .payload = PAYLOAD};
  cfg.quota_count = 1;
  strcpy(cfg.quotas[0].name, "gpu");
  cfg.quotas[0].max = max;
  return sched_open(name, 0, 0, &cfg);
}

static const char *const gpu[] = {"gpu"};

static shms_request job_req(const char *tenant, int quota) {
  return (shms_request){.cls = SHMS_CLASS_SMALL,
                        .tenant = tenant,
                        .quotas = quota ? gpu : NULL,
                        .nquotas = quota ? 1 : 0};
}

static shms_ticket submit(shms_t *h, const char *tenant, int quota) {
  shms_request r = job_req(tenant, quota);
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "job", 3, 0, &t));
  return t;
}

static shms_quota_row gpu_row(shms_t *h) {
  shms_quota_row row;
  uint32_t n = 0;
  ck_assert_shms_ok(shms_quota_list(h, &row, 1, &n));
  ck_assert_uint_eq(n, 1);
  return row;
}

static void await_waiters(shms_t *h, uint32_t waiters) {
  while (gpu_row(h).waiters != waiters)
    sched_yield();
}

static void assert_audit_clean(shms_t *h) {
  char report[4096];
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "audit: %s", report);
}

static void assert_used(shms_t *h, uint32_t used) {
  ck_assert_uint_eq(gpu_row(h).used, used);
  assert_audit_clean(h); /* the units in use are the units the class's cells hold */
}

static int child_status(pid_t pid) {
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct shared {
  int inflight, maxseen;
};

/*
 * A worker process: take one job, count it running, say so on got[1] (its index), wait for a byte
 * on go, count it ended, complete it. hold: never complete (until killed).
 */
static pid_t spawn_worker(const char *name, struct shared *sh, int idx, int got, int go, int hold) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid != 0)
    return pid;
  shms_t *h;
  shms_worker_t *w;
  shms_job job;
  char me = (char)idx, b;
  if (shms_attach(name, 0, &h) != SHMS_OK || shms_worker_open(h, SHMS_CLASS_SMALL, &w) != SHMS_OK ||
      shms_worker_take(w, UINT64_MAX, &job) != SHMS_OK)
    _exit(1);
  int now = __atomic_add_fetch(&sh->inflight, 1, __ATOMIC_SEQ_CST), seen = sh->maxseen;
  while (now > seen && !__atomic_compare_exchange_n(&sh->maxseen, &seen, now, 0, __ATOMIC_SEQ_CST,
                                                    __ATOMIC_SEQ_CST))
    ;
  if (write(got, &me, 1) != 1)
    _exit(2);
  while (hold)
    pause();
  if (read(go, &b, 1) != 1)
    _exit(3);
  __atomic_sub_fetch(&sh->inflight, 1, __ATOMIC_SEQ_CST);
  if (shms_worker_complete(w, &job, 0, NULL, 0) != SHMS_OK)
    _exit(4);
  _exit(shms_worker_close(w) == SHMS_OK && shms_detach(h) == SHMS_OK ? 0 : 5);
}

/* Four workers, four jobs naming a quota of 2: two run at once, never three; each job that ends
 * lets exactly one more start. */
START_TEST(a_quota_of_two_runs_two_jobs_at_once) {
  const char *name;
  shms_t *h = open_workers(&name, 4, 2);
  struct shared *sh =
      mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(sh, MAP_FAILED);
  int got[2], go[4][2];
  ck_assert_int_eq(pipe(got), 0);
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(pipe(go[i]), 0);
    kids[i] = spawn_worker(name, sh, i, got[1], go[i][0], 0);
  }
  shms_ticket t[4];
  for (int i = 0; i < 4; i++)
    t[i] = submit(h, i % 2 ? "a" : "b", 1);
  int running[4] = {0};
  char who;
  for (int n = 0; n < 2; n++) {
    ck_assert_int_eq(read(got[0], &who, 1), 1);
    running[(int)who] = 1;
  }
  await_waiters(h, 2); /* the other two are queued, parked for the quota */
  ck_assert_int_eq(__atomic_load_n(&sh->inflight, __ATOMIC_SEQ_CST), 2);
  assert_used(h, 2);
  for (int done = 0; done < 4; done++) {
    int i = 0;
    while (!running[i])
      i++;
    running[i] = 0;
    ck_assert_int_eq(write(go[i][1], "x", 1), 1);
    ck_assert_int_eq(child_status(kids[i]), 0);
    if (done < 2) {
      ck_assert_int_eq(read(got[0], &who, 1), 1);
      running[(int)who] = 1;
    }
  }
  ck_assert_int_eq(sh->maxseen, 2);
  for (int i = 0; i < 4; i++) {
    shms_result res;
    ck_assert_shms_ok(shms_wait_result(h, &t[i], UINT64_MAX, NULL, 0, &res));
  }
  ck_assert_uint_eq(gpu_row(h).waiters, 0);
  assert_used(h, 0);
  munmap(sh, sizeof *sh);
  sched_close(h, name);
}
END_TEST

/* A job waiting for its quota holds back neither its tenant's next job (naming none) nor
 * another tenant's; it runs once the unit comes back. */
START_TEST(a_job_waiting_for_a_quota_holds_back_no_other) {
  const char *name;
  shms_t *h = open_workers(&name, 3, 1);
  shms_worker_t *w[3];
  for (int i = 0; i < 3; i++)
    ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w[i]));
  shms_ticket a = submit(h, "t", 1), b = submit(h, "t", 1), c = submit(h, "t", 0),
              d = submit(h, "u", 0);
  shms_job ja, jc, jd, jb;
  ck_assert_shms_ok(shms_worker_take(w[0], 0, &ja)); /* granted at its submit */
  ck_assert_uint_eq(ja.ticket.seq, a.seq);
  ck_assert_shms_ok(shms_worker_take(w[1], 0, &jc));
  ck_assert_shms_ok(shms_worker_take(w[2], 0, &jd));
  ck_assert_msg((jc.ticket.seq == c.seq && jd.ticket.seq == d.seq) ||
                    (jc.ticket.seq == d.seq && jd.ticket.seq == c.seq),
                "the jobs naming no quota run while b waits");
  ck_assert_uint_eq(gpu_row(h).waiters, 1);
  shms_explanation e;
  ck_assert_shms_ok(shms_explain(h, &b, &e));
  ck_assert_uint_eq(e.state, SHMS_REQ_QUEUED);
  ck_assert(e.blocked_by & SHMS_BLOCK_QUOTA);
  ck_assert_str_eq(e.quota, "gpu");
  assert_used(h, 1);
  ck_assert_shms_ok(shms_worker_complete(w[1], &jc, 0, NULL, 0));
  ck_assert_int_eq(shms_worker_take(w[1], 0, &jb), SHMS_ETIMEDOUT); /* still no unit */
  ck_assert_shms_ok(shms_worker_complete(w[0], &ja, 0, NULL, 0));
  int got = 0;
  for (int i = 0; i < 3 && !got; i++)
    got = i != 2 && shms_worker_take(w[i], 0, &jb) == SHMS_OK;
  ck_assert_msg(got, "b runs once a's unit is back");
  ck_assert_uint_eq(jb.ticket.seq, b.seq);
  ck_assert_uint_eq(gpu_row(h).waiters, 0);
  assert_used(h, 1);
  for (int i = 0; i < 3; i++)
    (void)shms_worker_close(w[i]); /* the test is over: a job still held goes as the close says */
  sched_close(h, name);
}
END_TEST

/* A cancelled job gives its unit back: a granted one at once, a running one when its worker
 * ends it. */
START_TEST(a_cancelled_job_gives_its_unit_back) {
  const char *name;
  shms_t *h = open_workers(&name, 1, 1);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit(h, "t", 1); /* granted to the idle worker at once */
  assert_used(h, 1);
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  assert_used(h, 0);
  shms_result res;
  ck_assert_int_eq(shms_wait_result(h, &t, 0, NULL, 0, &res), SHMS_ECANCELLED);
  t = submit(h, "t", 1);
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_int_eq(shms_worker_cancelled(w, &job), 1);
  assert_used(h, 1); /* running: the worker decides when it ends */
  ck_assert_shms_ok(shms_worker_complete(w, &job, 130, NULL, 0));
  assert_used(h, 0);
  ck_assert_shms_ok(shms_wait_result(h, &t, 0, NULL, 0, &res));
  ck_assert_int_eq(res.status, 130);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* A job quarantined by its worker keeps its unit until the cell is repaired; a worker closed
 * with a job granted and never taken gives it back (the job queues again). */
START_TEST(quarantine_keeps_the_unit_until_repair) {
  const char *name;
  shms_t *h = open_workers(&name, 1, 1);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit(h, "t", 1);
  shms_job job;
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_shms_ok(shms_worker_quarantine(w, &job, 137));
  assert_used(h, 1);
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_SMALL, -1), 1);
  assert_used(h, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  t = submit(h, "t", 1);
  assert_used(h, 1);                       /* granted to w, not taken */
  ck_assert_shms_ok(shms_worker_close(w)); /* its job back to the queue, the unit back */
  assert_used(h, 0);
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_uint_eq(job.ticket.seq, t.seq);
  assert_used(h, 1);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  assert_used(h, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* A worker SIGKILLed while its job runs: the job is lost, its cell quarantined with the unit;
 * the repair of lost workers gives it back, and the next job runs. */
START_TEST(a_killed_workers_unit_comes_back_at_repair) {
  const char *name;
  shms_t *h = open_workers(&name, 1, 1);
  struct shared *sh =
      mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(sh, MAP_FAILED);
  int got[2];
  ck_assert_int_eq(pipe(got), 0);
  pid_t a = spawn_worker(name, sh, 0, got[1], -1, 1);
  shms_ticket t = submit(h, "t", 1);
  char who;
  ck_assert_int_eq(read(got[0], &who, 1), 1);
  assert_used(h, 1);
  kill(a, SIGKILL);
  ck_assert_int_eq(child_status(a), 128 + SIGKILL);
  shms_result res;
  ck_assert_int_eq(shms_wait_result(h, &t, UINT64_MAX, NULL, 0, &res), SHMS_EWORKERLOST);
  assert_used(h, 1); /* its cell is quarantined: cleanup unproven */
  ck_assert_int_eq(shms_repair_lost_workers(h), 1);
  assert_used(h, 0);
  munmap(sh, sizeof *sh);
  sched_close(h, name);
}
END_TEST

/* A worker SIGKILLed with a job granted and not yet taken: recovery queues the job again and
 * the unit comes back with the cell. */
START_TEST(a_killed_workers_granted_job_gives_its_unit_back) {
  const char *name;
  shms_t *h = open_workers(&name, 1, 1);
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  pid_t a = fork();
  ck_assert_int_ge(a, 0);
  if (a == 0) {
    shms_t *c;
    shms_worker_t *w;
    if (shms_attach(name, 0, &c) != SHMS_OK ||
        shms_worker_open(c, SHMS_CLASS_SMALL, &w) != SHMS_OK || write(ready[1], "r", 1) != 1)
      _exit(1);
    for (;;)
      pause(); /* bound, never taking */
  }
  char b;
  ck_assert_int_eq(read(ready[0], &b, 1), 1);
  shms_ticket t = submit(h, "t", 1); /* granted to a's idle cell */
  assert_used(h, 1);
  kill(a, SIGKILL);
  ck_assert_int_eq(child_status(a), 128 + SIGKILL);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(h, &rec));
  assert_used(h, 0);
  shms_worker_t *w;
  shms_job job;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  ck_assert_shms_ok(shms_worker_take(w, UINT64_MAX, &job));
  ck_assert_uint_eq(job.ticket.seq, t.seq);
  assert_used(h, 1);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  assert_used(h, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* A submitter gone before its granted job starts: the worker ends it owner-lost, and the unit
 * comes back. */
START_TEST(a_gone_submitters_job_gives_its_unit_back) {
  const char *name;
  shms_t *h = open_workers(&name, 1, 1);
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    shms_t *ch;
    shms_request r = job_req("t", 1);
    shms_ticket t;
    _exit(shms_attach(name, 0, &ch) == SHMS_OK && shms_submit(ch, &r, "x", 1, 0, &t) == SHMS_OK
              ? 0
              : 1); /* dies holding a granted job */
  }
  ck_assert_int_eq(child_status(c), 0);
  ck_assert_uint_eq(gpu_row(h).used, 1); /* (the audit: a dead owner's job, recovery's) */
  shms_job job;
  ck_assert_int_eq(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT); /* ended owner-lost */
  assert_used(h, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* A keyed job holds its quotas once, however many join it; batches carry each job's quotas. */
START_TEST(keyed_and_batched_jobs_hold_their_units) {
  const char *name;
  shms_t *h = open_workers(&name, 2, 1);
  shms_request r = job_req("t", 1);
  shms_ticket k1, k2;
  int joined = -1;
  ck_assert_shms_ok(shms_submit_key(h, &r, "build", "x", 1, 0, &k1, &joined));
  ck_assert_int_eq(joined, 0);
  ck_assert_shms_ok(shms_submit_key(h, &r, "build", "x", 1, 0, &k2, &joined));
  ck_assert_int_eq(joined, 1);
  shms_batch_job jobs[3] = {{.tenant = "u", .payload = "a", .len = 1, .quotas = gpu, .nquotas = 1},
                            {.tenant = "u", .payload = "b", .len = 1},
                            {.tenant = "v", .payload = "c", .len = 1, .quotas = gpu, .nquotas = 1}};
  shms_ticket bt[3];
  ck_assert_shms_ok(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 3, 0, bt, NULL));
  shms_worker_t *w[2];
  shms_job j0, j1;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w[0]));
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w[1]));
  ck_assert_shms_ok(shms_worker_take(w[0], UINT64_MAX, &j0));
  ck_assert_shms_ok(shms_worker_take(w[1], UINT64_MAX, &j1));
  /* One job naming the quota runs (the keyed one came first), and the batch's job naming none. */
  ck_assert_uint_eq(j0.ticket.seq == k1.seq ? j1.ticket.seq : j0.ticket.seq, bt[1].seq);
  ck_assert(j0.ticket.seq == k1.seq || j1.ticket.seq == k1.seq);
  ck_assert_uint_eq(gpu_row(h).waiters, 2);
  assert_used(h, 1);
  shms_worker_t *wk = j0.ticket.seq == k1.seq ? w[0] : w[1];
  ck_assert_shms_ok(shms_worker_complete(wk, j0.ticket.seq == k1.seq ? &j0 : &j1, 0, NULL, 0));
  shms_result res;
  ck_assert_shms_ok(shms_wait_result(h, &k1, 0, NULL, 0, &res));
  ck_assert_shms_ok(shms_wait_result(h, &k2, 0, NULL, 0, &res));
  shms_job jb;
  ck_assert_shms_ok(shms_worker_take(wk, UINT64_MAX, &jb));
  ck_assert(jb.ticket.seq == bt[0].seq || jb.ticket.seq == bt[2].seq);
  ck_assert_uint_eq(gpu_row(h).waiters, 1);
  assert_used(h, 1);
  for (int i = 0; i < 2; i++)
    (void)shms_worker_close(w[i]); /* the test is over: a job still held goes as the close says */
  sched_close(h, name);
}
END_TEST

/* A quota shared by a lease class and a worker class: a lease and a job never hold its one unit
 * at once, and each one's end lets the other's waiter in (by its class's next pass: a worker's or
 * waiter's poll at the latest). */
START_TEST(a_quota_is_shared_with_lease_classes) {
  const char *name;
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = PAYLOAD};
  cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){.configured = 1, .cells = 1, .queue = 4};
  cfg.quota_count = 1;
  strcpy(cfg.quotas[0].name, "gpu");
  cfg.quotas[0].max = 1;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_request lr = {.cls = SHMS_CLASS_STANDARD, .tenant = "l", .quotas = gpu, .nquotas = 1};
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &lr, &l));
  shms_worker_t *w;
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w));
  shms_ticket t = submit(h, "j", 1);
  shms_job job;
  ck_assert_int_eq(shms_worker_take(w, 0, &job), SHMS_ETIMEDOUT);
  ck_assert_uint_eq(gpu_row(h).waiters, 1);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_ok(shms_worker_take(w, UINT64_MAX, &job));
  ck_assert_uint_eq(job.ticket.seq, t.seq);
  assert_used(h, 1);
  shms_ticket lt;
  ck_assert_shms_ok(shms_enqueue(h, &lr, &lt));
  ck_assert_int_eq(shms_wait(h, &lt, 0, &l), SHMS_ETIMEDOUT);
  ck_assert_uint_eq(gpu_row(h).waiters, 1);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 0, NULL, 0));
  ck_assert_shms_ok(shms_wait(h, &lt, UINT64_MAX, &l));
  assert_used(h, 1);
  ck_assert_shms_ok(shms_release(h, &l));
  assert_used(h, 0);
  ck_assert_shms_ok(shms_worker_close(w));
  sched_close(h, name);
}
END_TEST

/* A job's end ends its tenant's count: with tenant-max-active 1, the tenant's next job runs once
 * the first completes (the count a quota's job takes too). */
START_TEST(a_completed_job_ends_its_tenants_count) {
  const char *name;
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1,
                                                      .cells = 2,
                                                      .queue = 8,
                                                      .mode = SHMS_MODE_WORKER,
                                                      .payload = PAYLOAD,
                                                      .tenant_max_active = 1};
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_worker_t *w[2];
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w[0]));
  ck_assert_shms_ok(shms_worker_open(h, SHMS_CLASS_SMALL, &w[1]));
  for (int round = 0; round < 3; round++) {
    shms_ticket a = submit(h, "t", 0), b = submit(h, "t", 0);
    shms_job ja, jb;
    int first = shms_worker_take(w[0], 0, &ja) == SHMS_OK ? 0 : 1;
    if (first == 1)
      ck_assert_shms_ok(shms_worker_take(w[1], 0, &ja));
    ck_assert_uint_eq(ja.ticket.seq, a.seq);
    ck_assert_int_eq(shms_worker_take(w[1 - first], 0, &jb), SHMS_ETIMEDOUT); /* at its limit */
    ck_assert_shms_ok(shms_worker_complete(w[first], &ja, 0, NULL, 0));
    int got = shms_worker_take(w[0], 0, &jb) == SHMS_OK ? 0 : 1;
    if (got == 1)
      ck_assert_shms_ok(shms_worker_take(w[1], 0, &jb));
    ck_assert_uint_eq(jb.ticket.seq, b.seq);
    ck_assert_shms_ok(shms_worker_complete(w[got], &jb, 0, NULL, 0));
    assert_audit_clean(h);
  }
  for (int i = 0; i < 2; i++)
    ck_assert_shms_ok(shms_worker_close(w[i]));
  sched_close(h, name);
}
END_TEST

START_TEST(bad_quotas_are_refused_and_change_nothing) {
  const char *name;
  shms_t *h = open_workers(&name, 1, 1);
  shms_ticket t;
  const char *const nope[] = {"nope"}, *const twice[] = {"gpu", "gpu"},
                    *const bad[] = {"has space"};
  const char *const nine[9] = {"gpu", "gpu", "gpu", "gpu", "gpu", "gpu", "gpu", "gpu", "gpu"};
  shms_request r = job_req("t", 0);
  r.quotas = nope;
  r.nquotas = 1;
  ck_assert_shms_err(shms_submit(h, &r, "x", 1, 0, &t), SHMS_EINVAL, "no quota 'nope'");
  r.quotas = twice;
  r.nquotas = 2;
  ck_assert_shms_err(shms_submit(h, &r, "x", 1, 0, &t), SHMS_EINVAL, "named twice");
  r.quotas = bad;
  r.nquotas = 1;
  ck_assert_shms_err(shms_submit_key(h, &r, "k", "x", 1, 0, &t, NULL), SHMS_EINVAL, "quota 1");
  r.quotas = nine;
  r.nquotas = 9;
  ck_assert_shms_err(shms_submit(h, &r, "x", 1, 0, &t), SHMS_EINVAL, "at most 8");
  r.quotas = NULL;
  r.nquotas = 1;
  ck_assert_shms_err(shms_submit(h, &r, "x", 1, 0, &t), SHMS_EINVAL, "quotas is NULL");
  shms_batch_job jobs[2] = {{.tenant = "t", .quotas = gpu, .nquotas = 1},
                            {.tenant = "t", .quotas = nope, .nquotas = 1}};
  shms_ticket bt[2];
  size_t failed = 9;
  ck_assert_shms_err(shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, 2, 0, bt, &failed), SHMS_EINVAL,
                     "job 1: no quota 'nope'");
  ck_assert_uint_eq(failed, 1);
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.queue_depth, 0);
  assert_used(h, 0);
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("worker_quota");
  TCase *tc = harness_tcase("worker_quota");
  tcase_add_test(tc, a_quota_of_two_runs_two_jobs_at_once);
  tcase_add_test(tc, a_job_waiting_for_a_quota_holds_back_no_other);
  tcase_add_test(tc, a_cancelled_job_gives_its_unit_back);
  tcase_add_test(tc, quarantine_keeps_the_unit_until_repair);
  tcase_add_test(tc, a_killed_workers_unit_comes_back_at_repair);
  tcase_add_test(tc, a_killed_workers_granted_job_gives_its_unit_back);
  tcase_add_test(tc, a_gone_submitters_job_gives_its_unit_back);
  tcase_add_test(tc, keyed_and_batched_jobs_hold_their_units);
  tcase_add_test(tc, a_quota_is_shared_with_lease_classes);
  tcase_add_test(tc, a_completed_job_ends_its_tenants_count);
  tcase_add_test(tc, bad_quotas_are_refused_and_change_nothing);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

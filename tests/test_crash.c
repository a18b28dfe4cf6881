/*
 * Crash points, the way SQLite tests crashes: a victim process is SIGKILLed at
 * its k-th crash point (shm/crashpoint.c) inside an operation, for every k
 * until the operation completes. After each death, recovery runs, the audit
 * (shms_check) must find nothing, and nothing may be lost: every request ends
 * in exactly one terminal state, and capacity is conserved.
 */
#include <ck_pr.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"

#define MAX_STEPS 400

/* One run: the survivor's handle, the victim's channel, and what was set up. */
struct run {
  const char *name;
  shms_t *h;
  int to_victim[2], from_victim[2], victim_owner[2];
  shms_lease held, held2;
  shms_ticket ticket;
  int has_ticket;
};

enum { LEASE, WORKER, TIMED, MULTI, WORKER_ONE_TENANT, QUOTA, WORKER_QUOTA };

struct scenario {
  const char *what;
  int kind; /* LEASE: a lease class; WORKER: a worker class; TIMED: a lease class fair by time;
               MULTI: a lease class of 3 cells fair by time, for requests of 2 cells;
               WORKER_ONE_TENANT: a worker class in a segment of one tenant a class;
               QUOTA: a lease class whose requests (lease_req) name a quota of 1;
               WORKER_QUOTA: a worker class whose jobs (job_req) name a quota of 1 */
  void (*before)(struct run *);               /* survivor, before the victim starts */
  void (*victim_pre)(struct run *, shms_t *); /* victim, unarmed */
  void (*middle)(struct run *);               /* survivor, after victim_pre */
  void (*victim_op)(struct run *, shms_t *);  /* victim, armed: the operation under test */
  void (*after)(struct run *);                /* survivor, after recovery: nothing lost */
};

static void send_msg(int fd, const void *p, size_t n) {
  if (write(fd, p, n) != (ssize_t)n)
    _exit(90);
}
static void recv_msg(int fd, void *p, size_t n) {
  if (read(fd, p, n) != (ssize_t)n)
    _exit(91);
}

/* A QUOTA (WORKER_QUOTA) scenario's run names the quota in it (set before the victim forks). */
static shms_request lease_req = {.cls = SHMS_CLASS_STANDARD, .tenant = "t"};
static const char *const quota_q[] = {"q"};
static shms_request job_req = {.cls = SHMS_CLASS_SMALL, .tenant = "t"};
static const shms_request pair_req = {.cls = SHMS_CLASS_STANDARD, .tenant = "p", .cells = 2};

static shms_t *fresh(struct run *r, int kind) {
  shms_config cfg;
  shms_config_init(&cfg);
  if (kind == WORKER_ONE_TENANT)
    cfg.max_tenants = 1; /* a batch of two tenants is refused at the index */
  if (kind == WORKER || kind == WORKER_ONE_TENANT || kind == WORKER_QUOTA)
    cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
        .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 64};
  else
    cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){
        .configured = 1,
        .cells = kind == MULTI ? 3 : 1,
        .queue = 4,
        .on_holder_death = SHMS_ON_DEATH_RELEASE,
        .fairness = kind == TIMED || kind == MULTI ? SHMS_FAIRNESS_TIME : SHMS_FAIRNESS_DEFAULT};
  if (kind == QUOTA || kind == WORKER_QUOTA) {
    cfg.quota_count = 1;
    strcpy(cfg.quotas[0].name, "q");
    cfg.quotas[0].max = 1;
  }
  lease_req.quotas = kind == QUOTA ? quota_q : NULL;
  lease_req.nquotas = kind == QUOTA ? 1 : 0;
  job_req.quotas = kind == WORKER_QUOTA ? quota_q : NULL;
  job_req.nquotas = kind == WORKER_QUOTA ? 1 : 0;
  return sched_open(&r->name, 0, 0, &cfg);
}

/*
 * The supervisor's targeted recovery of the dead victim (shms__recover_owner,
 * from its record of what it owns, or by a scan if it died changing that
 * record): none of its requests may be left waiting, granted, or settled and
 * uncollected. A request it was still publishing (CLAIMED) is the full
 * recovery's.
 */
static void recover_victim(struct run *r, uint32_t owner, const char *what, uint32_t step) {
  shms__recover_owner(r->h, owner, 1, 0);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &r->h->cls[c];
    for (uint32_t i = 0; k->id >= 0 && i < k->nslots; i++) {
      const struct shms__slot *s = shms__slot_at(k, i);
      uint64_t w = ck_pr_load_64(&s->word);
      uint32_t st = SHMS__SLOT_STATE(w);
      int left = st == SHMS__SLOT_QUEUED || st == SHMS__SLOT_GRANTED ||
                 (st == SHMS__SLOT_SETTLED && !(w & SHMS__SLOT_COLLECTED));
      ck_assert_msg(!left || ck_pr_load_32(&s->owner) != owner,
                    "%s, killed at step %u: the victim's request in slot %u is left in state %u "
                    "(word 0x%llx)",
                    what, step, i, st, (unsigned long long)w);
    }
  }
}

/* Recovery, then the audit: after any death, nothing may be out of place. */
static void recover_and_audit(struct run *r, const char *what, uint32_t step) {
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(r->h, &rec));
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(r->h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s, killed at step %u: check found %u violations:\n%s", what,
                step, violations, report);
}

/* Everything is back: one cell, free; no request queued; no slot used. */
static void assert_idle(struct run *r, shms_class_t c) {
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(r->h, c, &s)); /* returns: a writer's death cannot hang it */
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.leased + s.granted_unaccepted + s.quarantined + s.reserved, 0);
  ck_assert_uint_eq(s.available, s.cells);
  ck_assert_uint_eq(ck_pr_load_32(&r->h->cls[c].ctl->used), 0);
  shms_quota_row q;
  uint32_t nq = 0;
  ck_assert_shms_ok(shms_quota_list(r->h, &q, 1, &nq));
  ck_assert_msg(nq == 0 || (q.used == 0 && q.waiters == 0), "quota %s: %u units used, %u waiters",
                q.name, q.used, q.waiters);
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(r->h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
}

static uint32_t unmarked_steps;
static void count_unmarked(void) { unmarked_steps += !shms__test_op_marked(); }

/*
 * Run the scenario with the victim killed at step k; returns 1 once the victim completes.
 * k = 0 runs it to the end instead, checking that each crash point lies inside an operation a
 * freezer sees (else a recovery or an audit could run while the victim is half way).
 */
static int run_once(const struct scenario *sc, uint32_t k) {
  struct run r = {0};
  r.h = fresh(&r, sc->kind);
  ck_assert(pipe(r.to_victim) == 0 && pipe(r.from_victim) == 0 && pipe(r.victim_owner) == 0);
  if (sc->before)
    sc->before(&r);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *v;
    if (shms_attach(r.name, 0, &v) != SHMS_OK)
      _exit(92);
    send_msg(r.victim_owner[1], &v->owner, sizeof v->owner);
    if (sc->victim_pre)
      sc->victim_pre(&r, v);
    char go;
    recv_msg(r.to_victim[0], &go, 1);
    if (k == 0)
      shms__test_step_check(count_unmarked);
    else
      shms__test_crash_at(k);
    sc->victim_op(&r, v);
    _exit(unmarked_steps == 0 ? 0 : 95); /* completed before step k: it simply exits */
  }
  uint32_t owner;
  recv_msg(r.victim_owner[0], &owner, sizeof owner);
  if (sc->middle)
    sc->middle(&r);
  send_msg(r.to_victim[1], "g", 1);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  int completed = WIFEXITED(status);
  ck_assert_msg(!completed || WEXITSTATUS(status) != 95,
                "%s: the victim reached crash points outside any marked operation", sc->what);
  ck_assert_msg(completed ? WEXITSTATUS(status) == 0 : WTERMSIG(status) == SIGKILL,
                "%s: victim ended oddly (status 0x%x)", sc->what, status);
  recover_victim(&r, owner, sc->what, k);
  recover_and_audit(&r, sc->what, k);
  sc->after(&r);
  sched_close(r.h, r.name);
  close(r.to_victim[0]);
  close(r.to_victim[1]);
  close(r.from_victim[0]);
  close(r.from_victim[1]);
  close(r.victim_owner[0]);
  close(r.victim_owner[1]);
  return completed;
}

static void run_all_points(const struct scenario *sc) {
  ck_assert_msg(run_once(sc, 0), "%s: the unarmed run did not complete", sc->what);
  uint32_t k = 1;
  while (k < MAX_STEPS && !run_once(sc, k))
    k++;
  ck_assert_msg(k > 1, "%s: no crash point was reached", sc->what);
  fprintf(stderr, "crash: %s: %u crash points\n", sc->what, k - 1);
  ck_assert_msg(k < MAX_STEPS, "%s: never completed", sc->what);
}

/* ---- Lease mode ---- */

static void op_acquire_release(struct run *r, shms_t *v) {
  (void)r;
  shms_lease l;
  if (shms_acquire(v, &lease_req, &l) != SHMS_OK || shms_release(v, &l) != SHMS_OK)
    _exit(93);
}

static void after_idle(struct run *r) { assert_idle(r, SHMS_CLASS_STANDARD); }

/* The victim's prepared request, made unarmed (the victim is a forked child: its own copy). */
static shms_prepared victim_prepared;

static void victim_prepares(struct run *r, shms_t *v) {
  (void)r;
  if (shms_request_prepare(v, &lease_req, &victim_prepared) != SHMS_OK)
    _exit(93);
}

static void op_prepared_acquire_release(struct run *r, shms_t *v) {
  (void)r;
  shms_lease l;
  if (shms_acquire_prepared(v, &victim_prepared, &l) != SHMS_OK || shms_release(v, &l) != SHMS_OK)
    _exit(93);
}

static void survivor_holds(struct run *r) {
  ck_assert_shms_ok(shms_acquire(r->h, &lease_req, &r->held));
}

static void op_enqueue(struct run *r, shms_t *v) {
  (void)r;
  shms_ticket t;
  if (shms_enqueue(v, &lease_req, &t) != SHMS_OK)
    _exit(94);
}

static void after_release_held(struct run *r) {
  ck_assert_shms_ok(shms_release(r->h, &r->held)); /* a dead owner's request never gets it */
  assert_idle(r, SHMS_CLASS_STANDARD);
}

/* The victim holds the cell; the survivor queues behind it; the victim's release grants. */
static void victim_holds(struct run *r, shms_t *v) {
  if (shms_acquire(v, &lease_req, &r->held) != SHMS_OK)
    _exit(95);
  send_msg(r->from_victim[1], "h", 1);
}

static void survivor_queues(struct run *r) {
  char b;
  recv_msg(r->from_victim[0], &b, 1);
  ck_assert_shms_ok(shms_enqueue(r->h, &lease_req, &r->ticket));
}

static void op_release(struct run *r, shms_t *v) {
  if (shms_release(v, &r->held) != SHMS_OK)
    _exit(96);
}

/* The survivor's queued request is granted in the end, however the victim died. */
static void after_survivor_granted(struct run *r) {
  shms_lease l;
  ck_assert_shms_ok(shms_wait(r->h, &r->ticket, 5ull * 1000 * 1000 * 1000, &l));
  ck_assert_shms_ok(shms_release(r->h, &l));
  assert_idle(r, SHMS_CLASS_STANDARD);
}

/* The victim queues; the survivor's release grants to it; the victim accepts. */
static void victim_queues(struct run *r, shms_t *v) {
  if (shms_enqueue(v, &lease_req, &r->ticket) != SHMS_OK)
    _exit(97);
  send_msg(r->from_victim[1], &r->ticket, sizeof r->ticket);
}

static void survivor_grants(struct run *r) {
  recv_msg(r->from_victim[0], &r->ticket, sizeof r->ticket);
  ck_assert_shms_ok(shms_release(r->h, &r->held));
}

static void op_accept_release(struct run *r, shms_t *v) {
  shms_lease l;
  if (shms_wait(v, &r->ticket, UINT64_MAX, &l) != SHMS_OK || shms_release(v, &l) != SHMS_OK)
    _exit(98);
}

/* The survivor holds the cell and queues; the victim cancels the survivor's request. */
static void survivor_holds_and_queues(struct run *r) {
  survivor_holds(r);
  ck_assert_shms_ok(shms_enqueue(r->h, &lease_req, &r->ticket));
  send_msg(r->to_victim[1], &r->ticket, sizeof r->ticket);
}

static void victim_learns_ticket(struct run *r, shms_t *v) {
  (void)v;
  recv_msg(r->to_victim[0], &r->ticket, sizeof r->ticket);
}

static void op_cancel(struct run *r, shms_t *v) {
  if (shms_cancel(v, &r->ticket) < 0)
    _exit(99);
}

/* Cancelled, or still queued (and then granted): one terminal state either way. */
static void after_cancel(struct run *r) {
  shms_lease l;
  int rc = shms_wait(r->h, &r->ticket, 0, &l);
  if (rc == SHMS_ETIMEDOUT) {
    ck_assert_shms_ok(shms_release(r->h, &r->held));
    ck_assert_shms_ok(shms_wait(r->h, &r->ticket, 5ull * 1000 * 1000 * 1000, &l));
    ck_assert_shms_ok(shms_release(r->h, &l));
  } else {
    ck_assert_int_eq(rc, SHMS_ECANCELLED);
    ck_assert_shms_ok(shms_release(r->h, &r->held));
  }
  assert_idle(r, SHMS_CLASS_STANDARD);
}

/* As above, but the survivor's request was already granted when the victim cancels it. */
static void survivor_queues_and_is_granted(struct run *r) {
  survivor_holds_and_queues(r);
  ck_assert_shms_ok(shms_release(r->h, &r->held)); /* granted, not accepted */
  r->held.token = 0;
}

static void after_cancel_granted(struct run *r) {
  shms_lease l;
  int rc = shms_wait(r->h, &r->ticket, 5ull * 1000 * 1000 * 1000, &l);
  if (rc == SHMS_OK)
    ck_assert_shms_ok(shms_release(r->h, &l));
  else
    ck_assert_int_eq(rc, SHMS_ECANCELLED);
  assert_idle(r, SHMS_CLASS_STANDARD);
}

/* The victim's clock runs ahead of everyone's by more than the default grant-timeout. */
static uint64_t clock_ahead(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 10ull * 1000000000ull;
}

static void victim_runs_late(struct run *r, shms_t *v) {
  (void)v;
  shms_set_clock(clock_ahead, NULL);
  recv_msg(r->to_victim[0], &r->ticket, sizeof r->ticket);
}

/* The survivor's grant, unaccepted, is due by the victim's clock: the victim's request revokes
 * it (its pass sweeps), is granted the cell, accepts it and releases it. */
static void op_revoke_acquire(struct run *r, shms_t *v) {
  (void)r;
  shms_lease l;
  if (shms_acquire(v, &lease_req, &l) != SHMS_OK || shms_release(v, &l) != SHMS_OK)
    _exit(102);
}

/* The survivor's request was revoked or not: either way it is served in the end. */
static void after_revoke(struct run *r) {
  shms_lease l;
  ck_assert_shms_ok(shms_wait(r->h, &r->ticket, 5ull * 1000 * 1000 * 1000, &l));
  ck_assert_shms_ok(shms_release(r->h, &l));
  assert_idle(r, SHMS_CLASS_STANDARD);
}

/* The victim queues three requests behind the survivor's lease; the survivor cancels the
 * middle one, whose outcome the victim then takes: off the middle of its record. */
static void victim_queues_three(struct run *r, shms_t *v) {
  shms_ticket t[3];
  for (int n = 0; n < 3; n++)
    if (shms_enqueue(v, &lease_req, &t[n]) != SHMS_OK)
      _exit(102);
  r->ticket = t[1];
  send_msg(r->from_victim[1], &r->ticket, sizeof r->ticket);
}

static void survivor_cancels_middle(struct run *r) {
  recv_msg(r->from_victim[0], &r->ticket, sizeof r->ticket);
  ck_assert_int_eq(shms_cancel(r->h, &r->ticket), 1);
}

static void op_collect_cancelled(struct run *r, shms_t *v) {
  shms_lease l;
  if (shms_wait(v, &r->ticket, 0, &l) != SHMS_ECANCELLED)
    _exit(103);
}

/* ---- Requests of several cells (a class of 3 cells) ---- */

static void op_pair_acquire_release(struct run *r, shms_t *v) {
  (void)r;
  shms_lease l;
  if (shms_acquire(v, &pair_req, &l) != SHMS_OK || shms_release(v, &l) != SHMS_OK)
    _exit(104);
}

/* The victim holds two cells; the survivor's request of two gathers the third; the victim's
 * releases let it gather the rest, bind them and grant them. */
static void victim_holds_two(struct run *r, shms_t *v) {
  if (shms_acquire(v, &lease_req, &r->held) != SHMS_OK ||
      shms_acquire(v, &lease_req, &r->held2) != SHMS_OK)
    _exit(105);
  send_msg(r->from_victim[1], "h", 1);
}

static void survivor_queues_pair(struct run *r) {
  char b;
  recv_msg(r->from_victim[0], &b, 1);
  ck_assert_shms_ok(shms_enqueue(r->h, &pair_req, &r->ticket));
}

static void op_release_two(struct run *r, shms_t *v) {
  if (shms_release(v, &r->held) != SHMS_OK || shms_release(v, &r->held2) != SHMS_OK)
    _exit(106);
}

static void after_pair_granted(struct run *r) {
  shms_lease l;
  ck_assert_shms_ok(shms_wait(r->h, &r->ticket, 5ull * 1000 * 1000 * 1000, &l));
  ck_assert_uint_eq(l.cells, 2);
  uint32_t cells[2];
  ck_assert_int_eq(shms_lease_cells(r->h, &l, cells, 2), 2);
  ck_assert_shms_ok(shms_release(r->h, &l));
  assert_idle(r, SHMS_CLASS_STANDARD);
}

/* The survivor holds two cells; the victim's request of two gathers; the survivor's releases
 * grant it; the victim accepts and releases its two cells. */
static void survivor_holds_two(struct run *r) {
  ck_assert_shms_ok(shms_acquire(r->h, &lease_req, &r->held));
  ck_assert_shms_ok(shms_acquire(r->h, &lease_req, &r->held2));
}

static void victim_queues_pair(struct run *r, shms_t *v) {
  if (shms_enqueue(v, &pair_req, &r->ticket) != SHMS_OK)
    _exit(107);
  send_msg(r->from_victim[1], &r->ticket, sizeof r->ticket);
}

static void survivor_releases_two(struct run *r) {
  recv_msg(r->from_victim[0], &r->ticket, sizeof r->ticket);
  ck_assert_shms_ok(shms_release(r->h, &r->held));
  ck_assert_shms_ok(shms_release(r->h, &r->held2));
}

/* The survivor holds two cells and queues a request of two, which gathers the third; the
 * victim cancels it: the cell gathered goes back. */
static void survivor_holds_two_and_queues_pair(struct run *r) {
  survivor_holds_two(r);
  ck_assert_shms_ok(shms_enqueue(r->h, &pair_req, &r->ticket));
  send_msg(r->to_victim[1], &r->ticket, sizeof r->ticket);
}

static void after_cancel_pair(struct run *r) {
  shms_lease l;
  int rc = shms_wait(r->h, &r->ticket, 0, &l);
  ck_assert_shms_ok(shms_release(r->h, &r->held));
  ck_assert_shms_ok(shms_release(r->h, &r->held2));
  if (rc == SHMS_ETIMEDOUT) { /* the cancel never landed: it is served */
    ck_assert_shms_ok(shms_wait(r->h, &r->ticket, 5ull * 1000 * 1000 * 1000, &l));
    ck_assert_shms_ok(shms_release(r->h, &l));
  } else {
    ck_assert_int_eq(rc, SHMS_ECANCELLED);
  }
  assert_idle(r, SHMS_CLASS_STANDARD);
}

/* ---- Worker mode ---- */

static void victim_opens_worker(struct run *r, shms_t *v) {
  shms_worker_t *w;
  if (shms_worker_open(v, SHMS_CLASS_SMALL, &w) != SHMS_OK)
    _exit(100);
  memcpy(&r->held, &w, sizeof w); /* carried to the op in the victim's own memory */
  send_msg(r->from_victim[1], "w", 1);
}

static void survivor_submits(struct run *r) {
  char b;
  recv_msg(r->from_victim[0], &b, 1);
  ck_assert_shms_ok(shms_submit(r->h, &job_req, "job", 3, 0, &r->ticket));
}

static void op_take_complete(struct run *r, shms_t *v) {
  (void)v;
  shms_worker_t *w;
  memcpy(&w, &r->held, sizeof w);
  shms_job job;
  if (shms_worker_take(w, UINT64_MAX, &job) != SHMS_OK ||
      shms_worker_complete(w, &job, 7, "JOB", 3) != SHMS_OK)
    _exit(101);
}

/* The job completed, or was lost with its worker, or never ran: then a new worker runs it. */
static void after_job(struct run *r) {
  char buf[8];
  shms_result res;
  int rc = shms_wait_result(r->h, &r->ticket, 0, buf, sizeof buf, &res);
  if (rc == SHMS_ETIMEDOUT) {
    shms_worker_t *w;
    shms_job job;
    ck_assert_shms_ok(shms_worker_open(r->h, SHMS_CLASS_SMALL, &w));
    ck_assert_shms_ok(shms_worker_take(w, 0, &job));
    ck_assert_shms_ok(shms_worker_complete(w, &job, 7, "JOB", 3));
    ck_assert_shms_ok(shms_wait_result(r->h, &r->ticket, 0, buf, sizeof buf, &res));
    ck_assert_shms_ok(shms_worker_close(w));
  } else if (rc != SHMS_EWORKERLOST) {
    ck_assert_shms_ok(rc);
  }
  if (rc == SHMS_OK)
    ck_assert_int_eq(res.status, 7);
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(r->h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.leased, 0);
  ck_assert_uint_eq(ck_pr_load_32(&r->h->cls[SHMS_CLASS_SMALL].ctl->used), 0);
  shms_repair(r->h, SHMS_CLASS_SMALL, -1); /* a dead worker's cell: back for the next worker */
  ck_assert_shms_ok(shms_observe(r->h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.offline, 1);
}

static void op_submit_batch(struct run *r, shms_t *v) {
  (void)r;
  shms_batch_job jobs[3] = {{.tenant = "t", .payload = "a", .len = 1},
                            {.tenant = "u", .payload = "b", .len = 1},
                            {.tenant = "t", .payload = "c", .len = 1}};
  shms_ticket t[3];
  if (shms_submit_batch(v, SHMS_CLASS_SMALL, jobs, 3, 0, t, NULL) != SHMS_OK)
    _exit(102);
}

/* A batch of two tenants where the table holds one: the index refuses the second, and the
 * submitter takes the first back. */
static void op_submit_batch_refused(struct run *r, shms_t *v) {
  (void)r;
  shms_batch_job jobs[3] = {{.tenant = "t", .payload = "a", .len = 1},
                            {.tenant = "t", .payload = "b", .len = 1},
                            {.tenant = "u", .payload = "c", .len = 1}};
  shms_ticket t[3];
  size_t failed = 0;
  if (shms_submit_batch(v, SHMS_CLASS_SMALL, jobs, 3, 0, t, &failed) != SHMS_EQUEUEFULL ||
      failed != 2)
    _exit(103);
}

/* The dead submitter's batch left nothing: no slot reserved, nothing queued, and the queue
 * takes a batch of its full size again. */
static void after_batch(struct run *r) {
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(r->h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(ck_pr_load_32(&r->h->cls[SHMS_CLASS_SMALL].ctl->used), 0);
  shms_batch_job jobs[4] = {{.tenant = "t"}, {.tenant = "t"}, {.tenant = "t"}, {.tenant = "t"}};
  shms_ticket t[4];
  ck_assert_shms_ok(shms_submit_batch(r->h, SHMS_CLASS_SMALL, jobs, 4, 0, t, NULL));
  size_t cancelled;
  ck_assert_shms_ok(shms_cancel_batch(r->h, t, 4, &cancelled));
  ck_assert_uint_eq(cancelled, 4);
}

/* The survivor's keyed job, queued: a keyed batch of the victim joins it. */
static void survivor_submits_keyed(struct run *r) {
  ck_assert_shms_ok(shms_submit_key(r->h, &job_req, "k", "orig", 4, 0, &r->ticket, NULL));
  r->has_ticket = 1;
}

/* Keyed lines: one joins the survivor's job, one queues a job the next joins, one has no key. */
static void op_submit_keyed_batch(struct run *r, shms_t *v) {
  (void)r;
  shms_batch_job jobs[4] = {{.tenant = "t", .payload = "a", .len = 1, .key = "k"},
                            {.tenant = "t", .payload = "b", .len = 1, .key = "n"},
                            {.tenant = "t", .payload = "c", .len = 1, .key = "n"},
                            {.tenant = "t", .payload = "d", .len = 1}};
  shms_ticket t[4];
  if (shms_submit_batch(v, SHMS_CLASS_SMALL, jobs, 4, 0, t, NULL) != SHMS_OK)
    _exit(104);
}

/* The same, with a tenant the table has no room for: refused at the index, after the joins. */
static void op_submit_keyed_batch_refused(struct run *r, shms_t *v) {
  (void)r;
  shms_batch_job jobs[4] = {{.tenant = "t", .payload = "a", .len = 1, .key = "k"},
                            {.tenant = "t", .payload = "b", .len = 1, .key = "n"},
                            {.tenant = "t", .payload = "c", .len = 1, .key = "n"},
                            {.tenant = "u", .payload = "d", .len = 1}};
  shms_ticket t[4];
  size_t failed = 0;
  if (shms_submit_batch(v, SHMS_CLASS_SMALL, jobs, 4, 0, t, &failed) != SHMS_EQUEUEFULL ||
      failed != 3)
    _exit(105);
}

/* The dead victim's shares are gone and its jobs with them: the survivor's job waits for its
 * submitter alone, runs once, and gives it its result; then nothing is left. */
static void after_keyed_batch(struct run *r) {
  const struct shms__cls *k = &r->h->cls[SHMS_CLASS_SMALL];
  uint64_t w = ck_pr_load_64(&shms__slot_at(k, r->ticket.slot)->waiters);
  ck_assert_uint_eq(SHMS__WAIT_COUNT(w), 0);
  ck_assert(w & SHMS__WAIT_OWNER);
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(r->h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.queue_depth, 1);
  ck_assert_uint_eq(ck_pr_load_32(&k->ctl->used), 1);
  shms_worker_t *wk;
  shms_job job;
  ck_assert_shms_ok(shms_worker_open(r->h, SHMS_CLASS_SMALL, &wk));
  ck_assert_shms_ok(shms_worker_take(wk, 0, &job));
  ck_assert_uint_eq(job.payload_len, 4);
  ck_assert_shms_ok(shms_worker_complete(wk, &job, 7, "JOB", 3));
  ck_assert_int_eq(shms_worker_take(wk, 0, &job), SHMS_ETIMEDOUT);
  char buf[8];
  shms_result res;
  ck_assert_shms_ok(shms_wait_result(r->h, &r->ticket, 0, buf, sizeof buf, &res));
  ck_assert_int_eq(res.status, 7);
  ck_assert_shms_ok(shms_worker_close(wk));
  ck_assert_uint_eq(ck_pr_load_32(&k->ctl->used), 0);
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(r->h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
}

/* ---- Worker jobs naming a quota of 1 ---- */

/* The quota's unit is back (a quarantined cell repaired by after_job) and nothing is amiss. */
static void assert_quota_free(struct run *r) {
  shms_quota_row q;
  uint32_t nq = 0;
  ck_assert_shms_ok(shms_quota_list(r->h, &q, 1, &nq));
  ck_assert_uint_eq(nq, 1);
  ck_assert_msg(q.used == 0 && q.waiters == 0, "quota %s: %u units used, %u waiters", q.name,
                q.used, q.waiters);
  char report[4096];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(r->h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
}

static void after_quota_job(struct run *r) {
  after_job(r);
  assert_quota_free(r);
}

/* The survivor's own worker, bound before the victim submits (its kick grants to it). */
static shms_worker_t *survivor_worker;

static void survivor_opens_worker(struct run *r) {
  ck_assert_shms_ok(shms_worker_open(r->h, SHMS_CLASS_SMALL, &survivor_worker));
}

static void op_submit_quota_job(struct run *r, shms_t *v) {
  (void)r;
  shms_ticket t;
  if (shms_submit(v, &job_req, "job", 3, 0, &t) != SHMS_OK)
    _exit(104);
}

/* The dead submitter's job never ran (recovery ended it owner-lost) and its unit is back; the
 * survivor's worker runs the next job. */
static void after_submitter_gone(struct run *r) {
  shms_job job;
  ck_assert_int_eq(shms_worker_take(survivor_worker, 0, &job), SHMS_ETIMEDOUT);
  assert_quota_free(r);
  ck_assert_shms_ok(shms_submit(r->h, &job_req, "job", 3, 0, &r->ticket));
  ck_assert_shms_ok(shms_worker_take(survivor_worker, 0, &job));
  ck_assert_shms_ok(shms_worker_complete(survivor_worker, &job, 0, NULL, 0));
  ck_assert_shms_ok(shms_worker_close(survivor_worker));
  assert_quota_free(r);
}

static void op_worker_close(struct run *r, shms_t *v) {
  (void)v;
  shms_worker_t *w;
  memcpy(&w, &r->held, sizeof w);
  if (shms_worker_close(w) != SHMS_OK)
    _exit(105);
}

/* The job granted to the closing worker is queued again, its unit back: a new worker runs it. */
static void after_worker_closed(struct run *r) {
  shms_worker_t *w;
  shms_job job;
  ck_assert_shms_ok(shms_worker_open(r->h, SHMS_CLASS_SMALL, &w));
  ck_assert_shms_ok(shms_worker_take(w, 0, &job));
  ck_assert_uint_eq(job.ticket.seq, r->ticket.seq);
  ck_assert_shms_ok(shms_worker_complete(w, &job, 7, "JOB", 3));
  shms_result res;
  char buf[8];
  ck_assert_shms_ok(shms_wait_result(r->h, &r->ticket, 0, buf, sizeof buf, &res));
  ck_assert_shms_ok(shms_worker_close(w));
  assert_quota_free(r);
}

static void op_submit_quota_batch(struct run *r, shms_t *v) {
  (void)r;
  shms_batch_job jobs[2] = {
      {.tenant = "t", .payload = "a", .len = 1, .quotas = quota_q, .nquotas = 1},
      {.tenant = "u", .payload = "b", .len = 1, .quotas = quota_q, .nquotas = 1}};
  shms_ticket t[2];
  if (shms_submit_batch(v, SHMS_CLASS_SMALL, jobs, 2, 0, t, NULL) != SHMS_OK)
    _exit(106);
}

static void after_quota_batch(struct run *r) {
  shms_job job;
  ck_assert_int_eq(shms_worker_take(survivor_worker, 0, &job), SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_worker_close(survivor_worker));
  after_batch(r);
  assert_quota_free(r);
}

static const struct scenario scenarios[] = {
    {"acquire and release", 0, NULL, NULL, NULL, op_acquire_release, after_idle},
    {"prepared acquire and release", 0, NULL, victim_prepares, NULL, op_prepared_acquire_release,
     after_idle},
    {"enqueue", 0, survivor_holds, NULL, NULL, op_enqueue, after_release_held},
    {"release, dispatch and grant", 0, NULL, victim_holds, survivor_queues, op_release,
     after_survivor_granted},
    {"accept and release", 0, survivor_holds, victim_queues, survivor_grants, op_accept_release,
     after_idle},
    {"collect a cancelled request", 0, survivor_holds, victim_queues_three, survivor_cancels_middle,
     op_collect_cancelled, after_release_held},
    {"cancel a queued request", 0, survivor_holds_and_queues, victim_learns_ticket, NULL, op_cancel,
     after_cancel},
    {"cancel a granted request", 0, survivor_queues_and_is_granted, victim_learns_ticket, NULL,
     op_cancel, after_cancel_granted},
    {"revoke a late grant", 0, survivor_queues_and_is_granted, victim_runs_late, NULL,
     op_revoke_acquire, after_revoke},
    {"worker take and complete", WORKER, NULL, victim_opens_worker, survivor_submits,
     op_take_complete, after_job},
    {"worker batch submit", WORKER, NULL, NULL, NULL, op_submit_batch, after_batch},
    {"worker batch refused at the index", WORKER_ONE_TENANT, NULL, NULL, NULL,
     op_submit_batch_refused, after_batch},
    {"worker keyed batch: joins and queues", WORKER, survivor_submits_keyed, NULL, NULL,
     op_submit_keyed_batch, after_keyed_batch},
    {"worker keyed batch refused at the index", WORKER_ONE_TENANT, survivor_submits_keyed, NULL,
     NULL, op_submit_keyed_batch_refused, after_keyed_batch},
    /* A class fair by time: its grants charge, its lease ends correct the charge. */
    {"by time: release, dispatch and grant", TIMED, NULL, victim_holds, survivor_queues, op_release,
     after_survivor_granted},
    {"by time: accept and release", TIMED, survivor_holds, victim_queues, survivor_grants,
     op_accept_release, after_idle},
    {"by time: cancel a granted request", TIMED, survivor_queues_and_is_granted,
     victim_learns_ticket, NULL, op_cancel, after_cancel_granted},
    {"by time: revoke a late grant", TIMED, survivor_queues_and_is_granted, victim_runs_late, NULL,
     op_revoke_acquire, after_revoke},
    /* Requests of two cells: gathered, bound, granted, released, cancelled while gathering. */
    {"two cells: acquire and release", MULTI, NULL, NULL, NULL, op_pair_acquire_release,
     after_idle},
    {"two cells: release, gather and grant", MULTI, NULL, victim_holds_two, survivor_queues_pair,
     op_release_two, after_pair_granted},
    {"two cells: accept and release", MULTI, survivor_holds_two, victim_queues_pair,
     survivor_releases_two, op_accept_release, after_idle},
    {"two cells: cancel a gathering request", MULTI, survivor_holds_two_and_queues_pair,
     victim_learns_ticket, NULL, op_cancel, after_cancel_pair},
    /* Requests naming a quota of 1: a unit taken at the grant, given back at every end. */
    {"quota: acquire and release", QUOTA, NULL, NULL, NULL, op_acquire_release, after_idle},
    {"quota: release, dispatch and grant", QUOTA, NULL, victim_holds, survivor_queues, op_release,
     after_survivor_granted},
    {"quota: accept and release", QUOTA, survivor_holds, victim_queues, survivor_grants,
     op_accept_release, after_idle},
    {"quota: cancel a granted request", QUOTA, survivor_queues_and_is_granted, victim_learns_ticket,
     NULL, op_cancel, after_cancel_granted},
    {"quota: revoke a late grant", QUOTA, survivor_queues_and_is_granted, victim_runs_late, NULL,
     op_revoke_acquire, after_revoke},
    /* Worker jobs naming a quota of 1: the unit taken at the grant, back at the job's end. */
    {"quota: worker take and complete", WORKER_QUOTA, NULL, victim_opens_worker, survivor_submits,
     op_take_complete, after_quota_job},
    {"quota: submit a job granted at once", WORKER_QUOTA, survivor_opens_worker, NULL, NULL,
     op_submit_quota_job, after_submitter_gone},
    {"quota: worker closes with a job granted", WORKER_QUOTA, NULL, victim_opens_worker,
     survivor_submits, op_worker_close, after_worker_closed},
    {"quota: worker batch submit", WORKER_QUOTA, survivor_opens_worker, NULL, NULL,
     op_submit_quota_batch, after_quota_batch},
};

START_TEST(every_crash_point_recovers) { run_all_points(&scenarios[_i]); }
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("crash");
  TCase *tc = harness_tcase("points");
  tcase_set_timeout(tc, 240);
  tcase_add_loop_test(tc, every_crash_point_recovers, 0,
                      (int)(sizeof scenarios / sizeof scenarios[0]));
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * Chaos: processes churn random operations on two lease classes (one fair by grants, one by
 * time, with a weighted tenant and a team of two; a request in four asks for both cells of its
 * class at once, and a request of one cell in three names a quota of 1 that the two classes
 * share) and a worker class (a job in three names that quota too) while the test SIGKILLs them
 * at random and recovers after each death, as the supervisor would. After every recovery the audit
 * must be clean, while the survivors keep running; at the end, with everyone gone, nothing is lost.
 *
 * Two of the processes submit keyed jobs of three keys (so that they join each other's jobs,
 * leave them, and now and then supersede them) and small atomic batches to the worker class.
 * What each of them saw is logged in shared memory, and at the end the log must show what a
 * user depends on: every ticket that was waited for to its end had exactly one outcome; a keyed
 * job was completed at most once; the waiters of one job that did not leave it saw the same
 * outcome; a batch refused was queued not at all, one accepted had an outcome for every job.
 *
 * The event ring records all along (a small one, so that it wraps): every record read back is
 * whole and well formed, whoever was killed in the middle of writing one.
 *
 * A fixed seed and a bounded time (SHMS_CHAOS_SECONDS, default 3): the ctest
 * label "chaos" runs a long version, the default suite a short one.
 */
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"

#define PROCS 8

static const char *tenants[] = {"a", "b", "c"};
static const char *const quota_q[] = {"q"};

static void lease_step(shms_t *h, unsigned *seed) {
  shms_request r = {.cls = rand_r(seed) % 2 ? SHMS_CLASS_STANDARD : SHMS_CLASS_TINY,
                    .tenant = tenants[rand_r(seed) % 3],
                    .priority = (int32_t)(rand_r(seed) % 3)};
  /* One request in four asks for both cells of its class at once. */
  r.cells = rand_r(seed) % 4 == 0 ? 2 : 1;
  if (r.cells == 1 && rand_r(seed) % 3 == 0) {
    r.quotas = quota_q;
    r.nquotas = 1;
  }
  shms_lease l;
  shms_ticket t;
  switch (rand_r(seed) % 4) {
  case 0:
    if (shms_acquire(h, &r, &l) == SHMS_OK)
      shms_release(h, &l);
    return;
  case 1:
    if (shms_try_acquire(h, &r, &l) == SHMS_OK)
      shms_release(h, &l);
    return;
  default:
    if (shms_enqueue(h, &r, &t) != SHMS_OK)
      return;
    if (rand_r(seed) % 2)
      shms_cancel(h, &t);
    if (shms_wait(h, &t, UINT64_MAX, &l) == SHMS_OK)
      shms_release(h, &l);
  }
}

static void client_step(shms_t *h, unsigned *seed) {
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = tenants[rand_r(seed) % 3]};
  if (rand_r(seed) % 3 == 0) {
    r.quotas = quota_q;
    r.nquotas = 1;
  }
  shms_ticket t;
  char buf[16];
  shms_result res;
  if (shms_submit(h, &r, "payload", 7, rand_r(seed) % 2 ? SHMS_SUBMIT_RETRY_ONCE : 0, &t) !=
      SHMS_OK)
    return;
  if (rand_r(seed) % 4 == 0)
    shms_cancel(h, &t);
  /* Bounded: a job may wait for a worker that is being restarted. */
  while (shms_wait_result(h, &t, 500ull * 1000 * 1000, buf, sizeof buf, &res) == SHMS_ETIMEDOUT)
    ;
}

/*
 * The keyed clients' log, in memory shared by every child: one entry per ticket waited for
 * (a keyed submit or a job of a batch), one per batch, and what the workers completed. An
 * entry counts once its writer set `done` (written last): a child killed in the middle leaves
 * it out. Fixed sizes: what does not fit is run but not logged.
 */
#define LOG_TICKETS 65536
#define LOG_JOBS    65536
#define LOG_BATCHES 16384
#define RESULT_MAX  16

struct ticket_log {
  shms_ticket ticket;
  uint32_t batch;     /* 0: a keyed submit; else its batch's id */
  uint32_t owner;     /* a keyed submit that queued the job (not a join) */
  uint32_t cancelled; /* a cancel was asked (logged before the call) */
  int32_t rc;         /* the wait's outcome */
  int32_t status;
  char result[RESULT_MAX];
  char payload[RESULT_MAX]; /* what it submitted */
  int32_t again;            /* a second wait after the outcome */
  uint32_t done;
};

struct batch_log {
  uint32_t n;
  int32_t rc;      /* shms_submit_batch's */
  uint32_t taken;  /* bit j: a worker took job j */
  uint32_t waited; /* its jobs' outcomes were all waited for */
  uint32_t done;   /* rc is written */
};

struct keyed_log {
  uint32_t tickets, jobs, batches;
  uint32_t completed[LOG_JOBS]; /* keyed job id: completions a worker saw succeed */
  struct ticket_log t[LOG_TICKETS];
  struct batch_log b[LOG_BATCHES];
};

static struct keyed_log *klog;

static int is_final(int rc) {
  return rc == SHMS_OK || rc == SHMS_ECANCELLED || rc == SHMS_ESUPERSEDED ||
         rc == SHMS_EOWNERLOST || rc == SHMS_EWORKERLOST || rc == SHMS_EDEADLINE ||
         rc == SHMS_EQUARANTINED || rc == SHMS_ESHUTDOWN;
}

/* Wait for the ticket's outcome (a job may wait for a worker being restarted), then once more. */
static void wait_logged(shms_t *h, struct ticket_log *e) {
  shms_result res = {0};
  char buf[64];
  int rc;
  while ((rc = shms_wait_result(h, &e->ticket, 500ull * 1000 * 1000, buf, sizeof buf, &res)) ==
         SHMS_ETIMEDOUT)
    ;
  e->rc = rc;
  e->status = res.status;
  if (rc == SHMS_OK)
    memcpy(e->result, buf, res.result_len < RESULT_MAX ? res.result_len : RESULT_MAX - 1);
  e->again = shms_wait_result(h, &e->ticket, 0, buf, sizeof buf, &res);
  ck_pr_fence_store();
  ck_pr_store_32(&e->done, 1);
}

/* A log entry for e, or e itself when the log is full. */
static struct ticket_log *log_ticket(struct ticket_log *e) {
  uint32_t n = ck_pr_faa_32(&klog->tickets, 1);
  if (n >= LOG_TICKETS)
    return e;
  klog->t[n] = *e;
  return &klog->t[n];
}

static void keyed_submit(shms_t *h, unsigned *seed) {
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = tenants[rand_r(seed) % 3]};
  char key[3] = {'k', (char)('0' + rand_r(seed) % 3), 0};
  uint32_t id = ck_pr_faa_32(&klog->jobs, 1);
  char payload[RESULT_MAX];
  int len = snprintf(payload, sizeof payload, "K%u", id);
  unsigned flags = rand_r(seed) % 8 == 0 ? SHMS_SUBMIT_SUPERSEDE : 0;
  shms_ticket t;
  int joined = 0;
  if (shms_submit_key(h, &r, key, payload, (size_t)len, flags, &t, &joined) != SHMS_OK)
    return;
  struct ticket_log e = {.ticket = t, .owner = !joined};
  memcpy(e.payload, payload, (size_t)len);
  struct ticket_log *l = log_ticket(&e);
  if (rand_r(seed) % 5 == 0) {
    ck_pr_store_32(&l->cancelled, 1);
    shms_cancel(h, &t);
  }
  wait_logged(h, l);
}

/* Two or three jobs at once; one batch in four has a job too long for the class, and must be
 * refused whole. */
static void batch_submit(shms_t *h, unsigned *seed) {
  uint32_t id = ck_pr_faa_32(&klog->batches, 1) + 1;
  if (id >= LOG_BATCHES)
    return;
  struct batch_log *b = &klog->b[id];
  size_t n = 2 + (size_t)(rand_r(seed) % 2);
  char payloads[3][80];
  shms_batch_job jobs[3];
  int bad = rand_r(seed) % 4 == 0 ? (int)(rand_r(seed) % n) : -1;
  for (size_t j = 0; j < n; j++) {
    int len = snprintf(payloads[j], sizeof payloads[j], "B%u.%zu", id, j);
    jobs[j] = (shms_batch_job){.tenant = tenants[rand_r(seed) % 3],
                               .payload = payloads[j],
                               .len = (int)j == bad ? 65 : (size_t)len}; /* the class's is 64 */
  }
  b->n = (uint32_t)n;
  shms_ticket tickets[3];
  size_t failed = 0;
  int rc = shms_submit_batch(h, SHMS_CLASS_SMALL, jobs, n, 0, tickets, &failed);
  b->rc = rc;
  ck_pr_fence_store();
  ck_pr_store_32(&b->done, 1);
  if (rc != SHMS_OK)
    return;
  int logged = 1;
  for (size_t j = 0; j < n; j++) {
    struct ticket_log e = {.ticket = tickets[j], .batch = id};
    memcpy(e.payload, payloads[j], strlen(payloads[j]));
    struct ticket_log *l = log_ticket(&e);
    logged &= l != &e;
    wait_logged(h, l);
  }
  ck_pr_store_32(&b->waited, (uint32_t)logged); /* its every outcome is in the log */
}

static void keyed_step(shms_t *h, unsigned *seed) {
  if (rand_r(seed) % 4 == 0)
    batch_submit(h, seed);
  else
    keyed_submit(h, seed);
}

/* The job's payload as a string ("K<id>": a keyed job; "B<batch>.<j>": a batch's). */
static void payload_of(const shms_job *job, char *p) {
  size_t n = job->payload_len < RESULT_MAX ? job->payload_len : RESULT_MAX - 1;
  memcpy(p, job->payload, n);
  p[n] = '\0';
}

/* Taken: p is the job's payload, read while the job is ours. */
static void note_taken(const char *p) {
  unsigned id, j;
  if (sscanf(p, "B%u.%u", &id, &j) == 2 && id < LOG_BATCHES && j < 3)
    ck_pr_or_32(&klog->b[id].taken, 1u << j);
}

/* Completed: p read before the completion, after which the slot may hold another job. */
static void note_completed(const char *p) {
  unsigned id;
  if (sscanf(p, "K%u", &id) == 1 && id < LOG_JOBS)
    ck_pr_inc_32(&klog->completed[id]);
}

/* Whether the job of log entry i was left by its submitter (who then hears "cancelled"). */
static int left_as_submitter(uint32_t i) {
  const struct ticket_log *e = &klog->t[i];
  if (e->owner)
    return e->cancelled && e->rc == SHMS_ECANCELLED;
  for (uint32_t j = 0; j < i; j++)
    if (klog->t[j].done && klog->t[j].owner && klog->t[j].cancelled &&
        memcmp(&klog->t[j].ticket, &e->ticket, sizeof e->ticket) == 0)
      return 1;
  return 0;
}

static int by_ticket(const void *a, const void *b) {
  const shms_ticket *x = &klog->t[*(const uint32_t *)a].ticket,
                    *y = &klog->t[*(const uint32_t *)b].ticket;
  if (x->slot != y->slot)
    return x->slot < y->slot ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The log, once everyone is gone: see the top of the file. */
static void check_keyed_log(void) {
  uint32_t nt = ck_pr_load_32(&klog->tickets), tickets = 0, joins = 0, compared = 0;
  nt = nt < LOG_TICKETS ? nt : LOG_TICKETS;
  for (uint32_t i = 0; i < LOG_JOBS; i++)
    ck_assert_msg(klog->completed[i] <= 1, "keyed job K%u completed %u times", i,
                  klog->completed[i]);
  for (uint32_t i = 0; i < nt; i++) {
    const struct ticket_log *e = &klog->t[i];
    if (!e->done)
      continue;
    tickets++;
    joins += e->batch == 0 && !e->owner;
    /* A waiter that left the job hears so if it waits before the job is gone, else finds its
     * ticket retired. */
    ck_assert_msg(is_final(e->rc) || (e->cancelled && e->rc == SHMS_ENOTFOUND),
                  "ticket %u (%s, %s%s): its wait ended %s", i, e->payload,
                  e->batch   ? "batch"
                  : e->owner ? "submitter"
                             : "joiner",
                  e->cancelled ? ", cancelled" : "", shms_err_name(e->rc));
    /* One outcome: then the ticket is retired. A submitter that left keeps its mark on the job
     * until the job ends, and is told so again (also when it joined the job again after leaving
     * it: the same ticket); a joiner whose share is gone is told the job is another process's
     * while the job waits for its other waiters. */
    ck_assert_msg(e->again == SHMS_ENOTFOUND ||
                      (e->batch == 0 && !e->owner && e->again == SHMS_EINVAL) ||
                      (e->again == SHMS_ECANCELLED && left_as_submitter(i)),
                  "ticket %u (%s, %s%s): %s, then %s", i, e->payload,
                  e->batch   ? "batch"
                  : e->owner ? "submitter"
                             : "joiner",
                  e->cancelled ? ", cancelled" : "", shms_err_name(e->rc), shms_err_name(e->again));
    if (e->rc == SHMS_OK)
      ck_assert_msg(e->result[0] == e->payload[0] &&
                        (!e->owner || strcmp(e->result, e->payload) == 0),
                    "ticket %u (%s): result %s", i, e->payload, e->result);
  }
  /* The waiters of one job that stayed with it, side by side: the same outcome. */
  uint32_t *by = malloc(sizeof *by * (nt + 1)), m = 0;
  ck_assert_ptr_nonnull(by);
  for (uint32_t i = 0; i < nt; i++)
    if (klog->t[i].done && klog->t[i].batch == 0 && !klog->t[i].cancelled)
      by[m++] = i;
  qsort(by, m, sizeof *by, by_ticket);
  for (uint32_t x = 1; x < m; x++) {
    const struct ticket_log *e = &klog->t[by[x - 1]], *o = &klog->t[by[x]];
    if (by_ticket(&by[x - 1], &by[x]) != 0)
      continue;
    compared++;
    ck_assert_msg(o->rc == e->rc && o->status == e->status && strcmp(o->result, e->result) == 0,
                  "waiters of one job saw %s/%d/%s and %s/%d/%s", shms_err_name(e->rc), e->status,
                  e->result, shms_err_name(o->rc), o->status, o->result);
  }
  free(by);
  static uint32_t outcomes[LOG_BATCHES];
  for (uint32_t i = 0; i < nt; i++)
    if (klog->t[i].done && klog->t[i].batch != 0)
      outcomes[klog->t[i].batch]++;
  uint32_t nb = ck_pr_load_32(&klog->batches), refused = 0, accepted = 0;
  for (uint32_t id = 1; id <= nb && id < LOG_BATCHES; id++) {
    const struct batch_log *b = &klog->b[id];
    if (!b->done)
      continue;
    if (b->rc != SHMS_OK) {
      refused++;
      ck_assert_msg(b->taken == 0, "batch %u refused (%s), yet job(s) %#x of it ran", id,
                    shms_err_name(b->rc), b->taken);
      continue;
    }
    accepted++;
    if (!b->waited)
      continue;
    ck_assert_msg(outcomes[id] == b->n, "batch %u: %u jobs, %u outcomes", id, b->n, outcomes[id]);
  }
  ck_assert_uint_gt(tickets, 0);
  ck_assert_uint_gt(accepted, 0);
  fprintf(stderr,
          "chaos: keyed and batches: %u tickets waited for (%u joins, %u pairs of waiters "
          "compared), %u batches accepted, %u refused\n",
          tickets, joins, compared, accepted, refused);
}

/* A heartbeat; a full pipe just drops it. Only a parent that is gone (EPIPE) ends the child. */
static void heartbeat(int beat) {
  if (write(beat, "x", 1) < 0 && errno == EPIPE)
    _exit(1);
}

static void worker_loop(shms_t *h, int beat) {
  shms_worker_t *w;
  while (shms_worker_open(h, SHMS_CLASS_SMALL, &w) != SHMS_OK)
    heartbeat(beat); /* no free cell yet: a dead worker's awaits repair */
  for (;;) {
    shms_job job;
    int rc = shms_worker_take(w, 200ull * 1000 * 1000, &job);
    if (rc == SHMS_OK) {
      char p[RESULT_MAX];
      payload_of(&job, p);
      note_taken(p);
      /* The payload back as the result: a keyed job's waiters can tell whose job they got. */
      if (shms_worker_complete(w, &job, 0, p, strlen(p)) == SHMS_OK)
        note_completed(p);
    } else if (rc != SHMS_ETIMEDOUT) { /* quarantined or repaired away: leave cleanly */
      shms_worker_close(w);
      shms_detach(h);
      _exit(0);
    }
    heartbeat(beat);
  }
}

/* Crash points the children reached outside an operation a freezer sees (shared with them). */
static uint32_t *unmarked;
static void count_unmarked(void) {
  if (!shms__test_op_marked())
    ck_pr_inc_32(unmarked);
}

static pid_t spawn(const char *name, int role, unsigned seed, int beat) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid != 0)
    return pid;
  shms_t *h;
  if (shms_attach(name, 0, &h) != SHMS_OK)
    _exit(2);
  /* Half the children check every crash point; the others run at the library's own pace, in
   * case the check's cost hides a race. */
  if (seed % 2 != 0)
    shms__test_step_check(count_unmarked);
  if (role == 0)
    worker_loop(h, beat);
  for (;;) {
    if (role == 1)
      lease_step(h, &seed);
    else if (role == 3)
      keyed_step(h, &seed);
    else
      client_step(h, &seed);
    heartbeat(beat);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void audit(shms_t *h, const char *when) {
  char report[8192];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0,
                "%s: %u violations (crash points reached unmarked so far: %u):\n%s", when,
                violations, *unmarked, report);
}

/* The ring read as a follower would, from *cursor on: every record well formed. Counts the
 * process-died records; skip: also pass records still being written (all writers are dead). */
static uint32_t read_ring(shms_t *h, uint64_t *cursor, int skip, uint64_t *seen) {
  static shms_event_record recs[256];
  uint32_t died = 0;
  size_t n;
  do {
    ck_assert_shms_ok(
        shms_events_read(h, cursor, skip ? SHMS_EVENTS_SKIP_PENDING : 0, recs, 256, &n, NULL));
    for (size_t i = 0; i < n; i++) {
      const shms_event_record *r = &recs[i];
      const char *kind = shms_event_name(r->event.kind);
      ck_assert_msg(strcmp(kind, "unknown") != 0, "record %llu: kind %u",
                    (unsigned long long)r->position, r->event.kind);
      ck_assert(r->event.cls == -1 || r->event.cls == SHMS_CLASS_STANDARD ||
                r->event.cls == SHMS_CLASS_SMALL || r->event.cls == SHMS_CLASS_TINY);
      ck_assert(r->event.cell >= -1 && r->event.cell < 2);
      ck_assert(r->event.tenant[0] == '\0' ||
                (strchr("abc", r->event.tenant[0]) != NULL && r->event.tenant[1] == '\0'));
      ck_assert_int_gt(r->writer, 0);
      ck_assert_uint_ne(r->wall_ns, 0);
      died += r->event.kind == SHMS_EVENT_PROCESS_DIED;
    }
    *seen += n;
  } while (n == 256);
  return died;
}

START_TEST(random_kills_lose_nothing) {
  const char *env = getenv("SHMS_CHAOS_SECONDS");
  double seconds = env ? atof(env) : 3.0;
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){.configured = 1,
                                                         .cells = 2,
                                                         .queue = 64,
                                                         .on_holder_death = SHMS_ON_DEATH_RELEASE,
                                                         .fairness = SHMS_FAIRNESS_GRANTS};
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 2, .queue = 64, .mode = SHMS_MODE_WORKER, .payload = 64};
  cfg.classes[SHMS_CLASS_TINY] = (shms_class_config){.configured = 1,
                                                     .cells = 2,
                                                     .queue = 64,
                                                     .on_holder_death = SHMS_ON_DEATH_RELEASE,
                                                     .fairness = SHMS_FAIRNESS_TIME};
  cfg.events = 256;
  cfg.quota_count = 1;
  strcpy(cfg.quotas[0].name, "q");
  cfg.quotas[0].max = 1;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  ck_assert_shms_ok(shms_policy_tenant(h, "a", 3));
  ck_assert_shms_ok(shms_policy_tenant_team(h, "b", "red")); /* b and c share a team's part */
  ck_assert_shms_ok(shms_policy_tenant_team(h, "c", "red"));
  ck_assert_shms_ok(shms_policy_team(h, "red", 2));
  unmarked =
      mmap(NULL, sizeof *unmarked, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(unmarked, MAP_FAILED);
  int beat[2];
  ck_assert_int_eq(pipe2(beat, O_NONBLOCK), 0);
  klog = mmap(NULL, sizeof *klog, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(klog, MAP_FAILED);
  int roles[PROCS] = {0, 0, 1, 1, 1, 2, 3, 3};
  pid_t pids[PROCS];
  unsigned seed = 20261129u;
  for (int i = 0; i < PROCS; i++)
    pids[i] = spawn(name, roles[i], seed + (unsigned)i, beat[1]);
  uint32_t kills = 0, died_recorded = 0;
  uint64_t cursor = 0, records = 0;
  for (double end = now_s() + seconds; now_s() < end;) {
    /* Let the survivors make progress, then kill one of them wherever it happens to be. */
    struct pollfd p = {.fd = beat[0], .events = POLLIN};
    char sink[256];
    for (int beats = 0; beats < 20 + rand_r(&seed) % 200;) {
      if (poll(&p, 1, 100) <= 0)
        break;
      ssize_t n = read(beat[0], sink, sizeof sink);
      beats += n > 0 ? (int)n : 0;
    }
    int victim = rand_r(&seed) % PROCS;
    kill(pids[victim], SIGKILL);
    ck_assert_int_eq(waitpid(pids[victim], NULL, 0), pids[victim]);
    kills++;
    shms_recovery rec;
    ck_assert_shms_ok(shms_recover(h, &rec));
    char when[256];
    snprintf(when, sizeof when,
             "after kill %u (a %s), with the others running; recovery: requeued %u, lost %u, "
             "unbound %u, owner-lost %u, returned %u, counts fixed %u",
             kills,
             roles[victim] == 0   ? "worker"
             : roles[victim] == 1 ? "lease client"
             : roles[victim] == 3 ? "keyed client"
                                  : "job client",
             rec.jobs_requeued, rec.jobs_lost, rec.workers_unbound, rec.requests_owner_lost,
             rec.grants_returned, rec.counts_fixed);
    audit(h, when);
    shms_quota_row q;
    uint32_t nq = 0;
    ck_assert_shms_ok(shms_quota_list(h, &q, 1, &nq));
    ck_assert_msg(nq == 1 && q.used <= 1, "%s: quota q: %u units held of 1", when, q.used);
    died_recorded += read_ring(h, &cursor, 0, &records);
    shms_repair(h, SHMS_CLASS_SMALL, -1); /* the dead worker's cell, for its successor */
    pids[victim] = spawn(name, roles[victim], seed + kills * 131u, beat[1]);
  }
  for (int i = 0; i < PROCS; i++) {
    kill(pids[i], SIGKILL);
    waitpid(pids[i], NULL, 0);
  }
  ck_assert_shms_ok(shms_recover(h, NULL));
  audit(h, "at the end");
  died_recorded += read_ring(h, &cursor, 1, &records);
  ck_assert_uint_gt(died_recorded, 0); /* the recoveries' items are in the ring */
  ck_assert_msg(*unmarked == 0, "%u crash points were reached outside a marked operation",
                *unmarked);
  shms_repair(h, SHMS_CLASS_SMALL, -1);
  shms_repair(h, SHMS_CLASS_STANDARD, -1);
  shms_repair(h, SHMS_CLASS_TINY, -1);
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_TINY, &s));
  ck_assert_uint_eq(s.available, 2); /* the class fair by time too */
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_gt(s.granted, 0);
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_STANDARD, &s));
  ck_assert_uint_eq(s.available, 2); /* every lease cell back in service */
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_gt(s.granted, kills); /* and work got done between the kills */
  uint64_t lease_grants = s.granted;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.offline, 2); /* every worker cell free for a new worker */
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_gt(s.granted, 0);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (h->cls[c].id >= 0)
      ck_assert_uint_eq(ck_pr_load_32(&h->cls[c].ctl->used), 0);
  shms_quota_row q;
  uint32_t nq = 0;
  ck_assert_shms_ok(shms_quota_list(h, &q, 1, &nq));
  ck_assert_uint_eq(q.used, 0); /* every unit back: nothing leaked by a death */
  ck_assert_uint_eq(q.waiters, 0);
  check_keyed_log();
  fprintf(stderr,
          "chaos: %u kills in %.0f s, audit clean after each; %llu leases, %llu jobs; %llu "
          "events read whole (%u deaths recorded)\n",
          kills, seconds, (unsigned long long)lease_grants, (unsigned long long)s.granted,
          (unsigned long long)records, died_recorded);
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("chaos");
  TCase *tc = harness_tcase("kills");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, random_kills_lose_nothing);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

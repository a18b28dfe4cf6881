/*
 * Chaos: processes churn random operations on two lease classes (one fair by grants, one by
 * time, with a weighted tenant and a team of two; a request in four asks for both cells of its
 * class at once, and a request of one cell in three names a quota of 1 that the two classes
 * share) and a worker class (a job in three names that quota too) while the test SIGKILLs them
 * at random and recovers after each death, as the supervisor would. After every recovery the audit
 * must be clean, while the survivors keep running; at the end, with everyone gone, nothing is lost.
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

#define PROCS 6

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
    if (rc == SHMS_OK)
      shms_worker_complete(w, &job, 0, "done", 4);
    else if (rc != SHMS_ETIMEDOUT) { /* quarantined or repaired away: leave cleanly */
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
  int roles[PROCS] = {0, 0, 1, 1, 1, 2};
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

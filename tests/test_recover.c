/*
 * Recovery and audit as operators and the supervisor use them: the audit
 * finds what is wrong (and says where), recovery makes it right, the policy
 * for dead lease holders holds, dead workers' cells come back, and only one
 * supervisor watches a segment.
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

static uint32_t audit(shms_t *h, char *report, size_t n) {
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, n, &violations));
  return violations;
}

/* A child that attaches, does what `act` says, reports, and then waits to be killed. */
static pid_t doomed(const char *name, void (*act)(shms_t *), int *ready) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *h;
    if (shms_attach(name, 0, &h) != SHMS_OK)
      _exit(1);
    act(h);
    if (write(p[1], "r", 1) != 1)
      _exit(2);
    for (;;)
      pause();
  }
  char b;
  ck_assert_int_eq(read(p[0], &b, 1), 1);
  close(p[0]);
  close(p[1]);
  *ready = 1;
  return pid;
}

static void take_a_lease(shms_t *h) {
  shms_request r = sched_req("doomed", 0);
  shms_lease l;
  if (shms_acquire(h, &r, &l) != SHMS_OK)
    _exit(3);
}

static void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

START_TEST(the_audit_finds_corruption_and_recovery_fixes_it) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  ck_pr_and_64(&k->ctl->fast, ~1ull); /* cell 0 missing from the free-cell map */
  shms__fast_queue(k, 1);             /* a queued count one over */
  ck_pr_store_32(&k->ctl->used, 3);
  ck_assert_uint_eq(audit(h, report, sizeof report), 3);
  ck_assert_ptr_nonnull(strstr(report, "free-cell map 0x2, but the available cells are 0x3"));
  ck_assert_ptr_nonnull(strstr(report, "queued count 1, but 0 requests are queued"));
  ck_assert_ptr_nonnull(strstr(report, "used count 3, but 0 slots are in use"));
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r));
  ck_assert_uint_eq(r.counts_fixed, 3);
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  sched_close(h, name);
}
END_TEST

/* A class of more than 32 cells counts its free cells instead of mapping them. */
/* The state bench_worker once hung in (docs/testing.md, "What the model found", 3): a request's
 * slot GRANTED, its cell returned under it. The audit names it; recovery queues the request
 * again and it is granted. */
START_TEST(the_audit_finds_a_lost_grant_and_recovery_grants_it_again) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  char report[4096];
  shms_ticket t = sched_enqueue(h, "lost", 0, 0);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  struct shms__slot *s = shms__slot_at(k, t.slot);
  ck_assert_uint_eq(SHMS__SLOT_STATE(s->word), SHMS__SLOT_GRANTED);
  shms__op_enter(h, k);
  ck_assert_int_eq(shms__return_and_kick(h, k, s->cell, s->generation), 1);
  shms__op_leave(h, k);
  ck_assert_uint_eq(audit(h, report, sizeof report), 1);
  ck_assert_ptr_nonnull(
      strstr(report, "slot 0: granted cell 0 (generation 1), which is not granted"));
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r));
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_uint_eq(l.generation, 2); /* the returned grant moved the generation on */
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

START_TEST(the_audit_checks_a_large_class_free_count) {
  const char *name;
  shms_t *h = sched_open(&name, 40, 4, NULL);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  ck_assert_int_eq(k->fast_map, 0);
  shms_request r = sched_req("t", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_pr_sub_64(&k->ctl->fast, 1); /* one free cell short */
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 1);
  ck_assert_ptr_nonnull(strstr(report, "free count 38, but 39 cells are available"));
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(h, &rec));
  ck_assert_uint_eq(rec.counts_fixed, 1);
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_uint_eq(sched_stats(h).available, 40);
  sched_close(h, name);
}
END_TEST

static void dead_holder_case(unsigned policy) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = policy;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int ready = 0;
  pid_t pid = doomed(name, take_a_lease, &ready);
  shms_ticket t = sched_enqueue(h, "waiting", 0, 0);
  kill_and_reap(pid);
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 1);
  ck_assert_ptr_nonnull(strstr(report, "leased to a dead process"));
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r));
  ck_assert_uint_eq(r.dead_processes, 1);
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  shms_lease l;
  shms_class_stats s = sched_stats(h);
  if (policy == SHMS_ON_DEATH_RELEASE) {
    ck_assert_uint_eq(r.leases_released, 1);
    ck_assert_shms_ok(shms_wait(h, &t, 0, &l)); /* the released cell went to the waiter */
    ck_assert_shms_ok(shms_release(h, &l));
  } else {
    ck_assert_uint_eq(r.leases_quarantined, 1);
    ck_assert_uint_eq(s.quarantined, 1);
    ck_assert_int_eq(shms_wait(h, &t, 0, &l), SHMS_EQUARANTINED); /* the only cell is out */
  }
  sched_close(h, name);
}

START_TEST(a_dead_holders_lease_is_quarantined_by_default) {
  dead_holder_case(SHMS_ON_DEATH_QUARANTINE);
}
END_TEST

START_TEST(a_dead_holders_lease_is_released_when_the_class_says_so) {
  dead_holder_case(SHMS_ON_DEATH_RELEASE);
}
END_TEST

static void do_nothing(shms_t *h) { (void)h; }

/* No supervisor: the waiter itself finds the dead holder at its next poll and recovers it by
 * the class's on-holder-death; or, when another process takes the dead one's entry over (the
 * process table full), that process does as it attaches. */
static void waiter_recovers_dead_holder(unsigned policy, int taken_over) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = policy;
  if (taken_over)
    cfg.max_processes = 2; /* us and the holder: a third attach takes the dead one's entry */
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int ready = 0;
  pid_t pid = doomed(name, take_a_lease, &ready), taker = 0;
  shms_ticket t = sched_enqueue(h, "waiting", 0, 0);
  kill_and_reap(pid);
  if (taken_over)
    taker = doomed(name, do_nothing, &ready);
  shms_lease l;
  /* Not a timing bound: without the waiter's look the request would wait for a supervisor. */
  int rc = shms_wait(h, &t, 30ull * 1000 * 1000 * 1000, &l);
  shms_class_stats s = sched_stats(h);
  if (policy == SHMS_ON_DEATH_RELEASE) {
    ck_assert_shms_ok(rc);
    ck_assert_shms_ok(shms_release(h, &l));
  } else {
    ck_assert_int_eq(rc, SHMS_EQUARANTINED); /* the only cell is out */
    ck_assert_uint_eq(s.quarantined, 1);
  }
  /* Told in the event ring as a supervisor's recovery tells it. */
  shms_event_record ev[64];
  uint64_t cursor = 0;
  size_t got = 0;
  uint32_t died = 0, disposed = 0;
  ck_assert_shms_ok(shms_events_read(h, &cursor, SHMS_EVENTS_SKIP_PENDING, ev, 64, &got, NULL));
  for (size_t i = 0; i < got; i++) {
    died += ev[i].event.kind == SHMS_EVENT_PROCESS_DIED && ev[i].event.pid == pid;
    /* By the process that took the dead one's entry over, as it attached; else the waiter. */
    disposed +=
        ev[i].event.kind == (policy == SHMS_ON_DEATH_RELEASE ? SHMS_EVENT_LEASE_RELEASED
                                                             : SHMS_EVENT_LEASE_QUARANTINED) &&
        ev[i].writer == (taken_over ? taker : getpid());
  }
  ck_assert_uint_eq(died, taken_over ? 0 : 1); /* a taken entry names its new owner only */
  ck_assert_uint_eq(disposed, 1);
  if (taker != 0)
    kill_and_reap(taker);
  char report[4096];
  ck_assert_shms_ok(shms_recover(h, NULL)); /* the taker's entry, dead now too */
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  sched_close(h, name);
}

START_TEST(a_waiter_releases_a_dead_holders_lease_without_a_supervisor) {
  waiter_recovers_dead_holder(SHMS_ON_DEATH_RELEASE, 0);
}
END_TEST

START_TEST(a_waiter_quarantines_a_dead_holders_lease_without_a_supervisor) {
  waiter_recovers_dead_holder(SHMS_ON_DEATH_QUARANTINE, 0);
}
END_TEST

START_TEST(taking_over_a_dead_holders_entry_disposes_of_its_lease) {
  waiter_recovers_dead_holder(SHMS_ON_DEATH_RELEASE, 1);
}
END_TEST

static void open_a_worker(shms_t *h) {
  shms_worker_t *w;
  if (shms_worker_open(h, SHMS_CLASS_SMALL, &w) != SHMS_OK)
    _exit(4);
}

START_TEST(processes_are_listed_and_dead_workers_cells_come_back) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 16};
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int ready = 0;
  pid_t pid = doomed(name, open_a_worker, &ready);
  shms_process_info procs[4];
  uint32_t n;
  ck_assert_shms_ok(shms_processes(h, procs, 4, &n));
  ck_assert_uint_eq(n, 2);
  int found = 0;
  for (uint32_t i = 0; i < n; i++)
    found |= procs[i].pid == pid && procs[i].alive && procs[i].start_time != 0;
  ck_assert(found);
  /* The worker dies holding a job: lost, its cell quarantined, then repaired for a successor. */
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "t"};
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "x", 1, 0, &t));
  kill_and_reap(pid);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(h, &rec));
  ck_assert_uint_eq(rec.workers_unbound, 1); /* granted, never taken: the job goes back */
  ck_assert_shms_ok(shms_processes(h, procs, 4, &n));
  ck_assert_uint_eq(n, 1); /* the dead one's entry was freed */
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.offline, 1);
  ck_assert_uint_eq(s.queue_depth, 1);
  ck_assert_int_eq(shms_repair_lost_workers(h), 0); /* nothing was quarantined */
  sched_close(h, name);
}
END_TEST

static void freeze_standard(shms_t *h) { shms__freeze(h, &h->cls[SHMS_CLASS_STANDARD]); }

static uint32_t steps_seen, steps_unmarked;
static void count_unmarked(void) {
  steps_seen++;
  steps_unmarked += !shms__test_op_marked();
}

/*
 * An operation that finds its class frozen by a dead freezer recovers the class itself, then
 * dispatches what was queued. A later freezer (an audit, another recovery) must see that
 * dispatch as an operation under way: every step it takes is marked in the segment.
 */
START_TEST(the_dispatch_after_a_recovery_by_a_waiting_operation_is_marked) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("holder", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  shms_ticket t = sched_enqueue(h, "waiting", 0, 0);
  int ready = 0;
  pid_t pid = doomed(name, freeze_standard, &ready);
  kill_and_reap(pid);
  shms__test_step_check(count_unmarked);
  ck_assert_shms_ok(shms_release(h, &l)); /* waits, finds the freezer dead, recovers */
  shms__test_step_check(NULL);
  ck_assert_uint_gt(steps_seen, 0);
  ck_assert_uint_eq(steps_unmarked, 0);
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l)); /* and the queued request was granted */
  ck_assert_shms_ok(shms_release(h, &l));
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  sched_close(h, name);
}
END_TEST

static void rebuild_by_recovery(shms_t *h, const char *name) {
  (void)name;
  ck_assert_shms_ok(shms_recover(h, NULL));
}

static void hold_the_baton(shms_t *h) {
  ck_pr_store_64(&h->cls[SHMS_CLASS_STANDARD].ctl->baton, (1ull << 32) | h->owner);
}

/* The dispatcher baton's holder dies (its index possibly torn): the next to look rebuilds. */
static void rebuild_after_a_dead_baton_holder(shms_t *h, const char *name) {
  int ready = 0;
  kill_and_reap(doomed(name, hold_the_baton, &ready));
  shms__baton_check_holder(h, &h->cls[SHMS_CLASS_STANDARD]);
  ck_assert_uint_eq(ck_pr_load_64(&h->cls[SHMS_CLASS_STANDARD].ctl->baton), 0);
}

/*
 * The order in which tenants and requests are served survives a rebuild of the index. Tenants
 * a, b and c join the ring in that order and a's first request is granted, so the ring turns to
 * b, c, a. A request of a queued after its others takes the lowest slot, so slot order is not
 * sequence order. After the rebuild the grants must go on b, c, then a's in sequence order: a
 * ring rebuilt in slot order would put a first again.
 */
static void ring_order_survives(void (*rebuild)(shms_t *h, const char *name)) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_request r = sched_req("holder", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  shms_ticket x = sched_enqueue(h, "x", 0, 0), t[5];
  t[0] = sched_enqueue(h, "a", 0, 0);
  t[1] = sched_enqueue(h, "b", 0, 0);
  t[2] = sched_enqueue(h, "c", 0, 0);
  t[3] = sched_enqueue(h, "a", 0, 0);
  ck_assert_int_eq(shms_cancel(h, &x), 1);
  shms_lease none;
  ck_assert_int_eq(shms_wait(h, &x, 0, &none), SHMS_ECANCELLED);
  t[4] = sched_enqueue(h, "a", 0, 0);
  ck_assert_uint_eq(t[4].slot, x.slot);
  ck_assert_uint_lt(t[4].slot, t[3].slot);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, t, 5, &l), 0); /* a's first; the ring is now b, c, a */
  rebuild(h, name);
  static const int expected[] = {1, 2, 3, 4};
  for (int i = 0; i < 4; i++) {
    ck_assert_shms_ok(shms_release(h, &l));
    ck_assert_int_eq(sched_granted(h, t, 5, &l), expected[i]);
  }
  ck_assert_shms_ok(shms_release(h, &l));
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  sched_close(h, name);
}

START_TEST(the_ring_order_survives_a_recovery) { ring_order_survives(rebuild_by_recovery); }
END_TEST

START_TEST(the_ring_order_survives_a_dead_baton_holder) {
  ring_order_survives(rebuild_after_a_dead_baton_holder);
}
END_TEST

/* Events told by a recovery, in order. */
struct told {
  shms_event ev[32];
  int n;
};

static void tell(const shms_event *ev, void *ctx) {
  struct told *t = ctx;
  ck_assert_int_lt(t->n, 32);
  t->ev[t->n++] = *ev;
}

static int count_kind(const struct told *t, uint32_t kind) {
  int n = 0;
  for (int i = 0; i < t->n; i++)
    n += t->ev[i].kind == kind;
  return n;
}

static const shms_event *find_kind(const struct told *t, uint32_t kind) {
  for (int i = 0; i < t->n; i++)
    if (t->ev[i].kind == kind)
      return &t->ev[i];
  ck_abort_msg("no %s event", shms_event_name(kind));
  return NULL;
}

static void lease_and_queue(shms_t *h) {
  take_a_lease(h);
  shms_request r = sched_req("doomed", 0);
  shms_ticket t;
  if (shms_enqueue(h, &r, &t) != SHMS_OK)
    _exit(3);
}

/*
 * A process killed outside every operation, holding a lease and a queued request: both are
 * settled by the ordinary transitions, each told as an event naming the class, cell, tenant,
 * ticket and pid; the class is never held still and its index never rebuilt.
 */
START_TEST(a_dead_process_outside_operations_is_recovered_without_freezing) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int ready = 0;
  pid_t pid = doomed(name, lease_and_queue, &ready);
  shms_ticket mine = sched_enqueue(h, "waiting", 0, 0);
  kill_and_reap(pid);
  struct told t = {.n = 0};
  shms_recovery r;
  ck_assert_shms_ok(shms_recover_dead(h, 0, tell, &t, &r));
  ck_assert_int_eq(t.n, 3);
  ck_assert_uint_eq(r.dead_processes, 1);
  ck_assert_uint_eq(r.leases_released, 1);
  ck_assert_uint_eq(r.requests_owner_lost, 1);
  ck_assert_uint_eq(t.ev[0].kind, SHMS_EVENT_PROCESS_DIED);
  ck_assert_int_eq(t.ev[0].pid, pid);
  ck_assert_int_eq(t.ev[0].cls, -1);
  const shms_event *lost = find_kind(&t, SHMS_EVENT_REQUEST_OWNER_LOST);
  ck_assert_int_eq(lost->cls, SHMS_CLASS_STANDARD);
  ck_assert_str_eq(lost->tenant, "doomed");
  ck_assert_int_eq(lost->pid, pid);
  ck_assert_int_eq(lost->reason, SHMS_EOWNERLOST);
  ck_assert_uint_ne(lost->ticket.seq, 0);
  const shms_event *released = find_kind(&t, SHMS_EVENT_LEASE_RELEASED);
  ck_assert_int_eq(released->cell, 0);
  ck_assert_int_eq(released->pid, pid);
  ck_assert_int_eq(count_kind(&t, SHMS_EVENT_CLASS_RECOMPUTED), 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &mine, 0, &l)); /* the released cell went to the waiter */
  ck_assert_shms_ok(shms_release(h, &l));
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  /* Nothing is left: a second pass finds nothing to do. */
  t.n = 0;
  ck_assert_shms_ok(shms_recover_dead(h, 0, tell, &t, &r));
  ck_assert_int_eq(t.n, 0);
  ck_assert_uint_eq(r.dead_processes, 0);
  sched_close(h, name);
}
END_TEST

static void enter_standard(shms_t *h) { shms__op_enter(h, &h->cls[SHMS_CLASS_STANDARD]); }

static void detach_at_once(shms_t *h) {
  take_a_lease(h);
  shms_detach(h);
}

/* A process that died inside an operation has its class recovered frozen; one that detached
 * left nothing and costs nothing. */
START_TEST(a_death_inside_an_operation_recomputes_its_class) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  int ready = 0;
  kill_and_reap(doomed(name, detach_at_once, &ready));
  struct told t = {.n = 0};
  shms_recovery r;
  ck_assert_shms_ok(shms_recover_dead(h, 0, tell, &t, &r));
  ck_assert_int_eq(t.n, 0);
  pid_t pid = doomed(name, enter_standard, &ready);
  kill_and_reap(pid);
  ck_assert_shms_ok(shms_recover_dead(h, 0, tell, &t, &r));
  ck_assert_int_eq(count_kind(&t, SHMS_EVENT_PROCESS_DIED), 1);
  ck_assert_int_eq(find_kind(&t, SHMS_EVENT_PROCESS_DIED)->pid, pid);
  ck_assert_int_eq(find_kind(&t, SHMS_EVENT_CLASS_RECOMPUTED)->cls, SHMS_CLASS_STANDARD);
  shms_process_info procs[4];
  uint32_t n;
  ck_assert_shms_ok(shms_processes(h, procs, 4, &n));
  ck_assert_uint_eq(n, 1); /* its entry was freed */
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  ck_assert_int_eq(shms_recover_dead(h, 1u << 7, NULL, NULL, NULL), SHMS_EINVAL);
  sched_close(h, name);
}
END_TEST

static void take_a_job(shms_t *h) {
  shms_worker_t *w;
  shms_job job;
  if (shms_worker_open(h, SHMS_CLASS_SMALL, &w) != SHMS_OK ||
      shms_worker_take(w, 10ull * 1000 * 1000 * 1000, &job) != SHMS_OK)
    _exit(4);
}

/* A worker killed mid-job, recovered by itself: the job is lost (told with its ticket and
 * tenant), the cell quarantined, and with the repair flag back offline for a new worker. */
START_TEST(a_dead_worker_is_recovered_by_itself) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 16};
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "jobs"};
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "x", 1, 0, &t));
  int ready = 0;
  pid_t pid = doomed(name, take_a_job, &ready);
  kill_and_reap(pid);
  struct told told = {.n = 0};
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover_dead(h, SHMS_RECOVER_REPAIR_LOST_WORKERS, tell, &told, &rec));
  ck_assert_uint_eq(rec.dead_processes, 1);
  ck_assert_uint_eq(rec.jobs_lost, 1);
  const shms_event *lost = find_kind(&told, SHMS_EVENT_JOB_LOST);
  ck_assert_int_eq(lost->cls, SHMS_CLASS_SMALL);
  ck_assert_int_eq(lost->cell, 0);
  ck_assert_int_eq(lost->pid, pid);
  ck_assert_str_eq(lost->tenant, "jobs");
  ck_assert_uint_eq(lost->ticket.seq, t.seq);
  ck_assert_int_eq(lost->reason, SHMS_EWORKERLOST);
  ck_assert_int_eq(find_kind(&told, SHMS_EVENT_CELL_REPAIRED)->cell, 0);
  ck_assert_int_eq(count_kind(&told, SHMS_EVENT_CLASS_RECOMPUTED), 0);
  char buf[16];
  shms_result res;
  ck_assert_int_eq(shms_wait_result(h, &t, 0, buf, sizeof buf, &res), SHMS_EWORKERLOST);
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_SMALL, &s));
  ck_assert_uint_eq(s.offline, 1);
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  sched_close(h, name);
}
END_TEST

START_TEST(one_supervisor_per_segment) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 1, NULL);
  ck_assert_shms_ok(shms_supervisor_claim(h));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    char me[32];
    snprintf(me, sizeof me, "pid %d", (int)getppid());
    if (shms_attach(name, 0, &c) != SHMS_OK)
      _exit(1);
    int rc = shms_supervisor_claim(c);
    _exit(rc == SHMS_EBUSY && strstr(shms_last_error_detail(), me) ? 0 : 2);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  sched_close(h, name);
}
END_TEST

static void queue_a_request(shms_t *h) {
  shms_request r = sched_req("waiter", 0);
  shms_ticket t;
  if (shms_enqueue(h, &r, &t) != SHMS_OK)
    _exit(3);
}

/*
 * An ordinary death is no anomaly: a killed holder's lease is told as quarantined, a killed
 * waiter's request as ended owner-lost, the process's death before either, and no count is
 * reported fixed, since none was wrong before the recovery settled what the dead left.
 */
START_TEST(an_ordinary_death_fixes_no_count_and_is_told_cause_first) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int ready = 0;
  pid_t holder = doomed(name, take_a_lease, &ready);
  pid_t waiter = doomed(name, queue_a_request, &ready);
  kill_and_reap(holder);
  kill_and_reap(waiter);
  struct told t = {.n = 0};
  shms_recovery r;
  ck_assert_shms_ok(shms_recover_dead(h, SHMS_RECOVER_FULL, tell, &t, &r));
  ck_assert_uint_eq(r.dead_processes, 2);
  ck_assert_uint_eq(r.leases_quarantined, 1);
  ck_assert_uint_eq(r.requests_owner_lost, 1);
  ck_assert_uint_eq(r.counts_fixed, 0);
  ck_assert_int_eq(count_kind(&t, SHMS_EVENT_COUNT_FIXED), 0);
  /* Both deaths come first, then what was done about them. */
  ck_assert_uint_eq(t.ev[0].kind, SHMS_EVENT_PROCESS_DIED);
  ck_assert_uint_eq(t.ev[1].kind, SHMS_EVENT_PROCESS_DIED);
  ck_assert_int_eq(t.ev[0].pid + t.ev[1].pid, holder + waiter);
  ck_assert_int_eq(find_kind(&t, SHMS_EVENT_LEASE_QUARANTINED)->pid, holder);
  ck_assert_int_eq(find_kind(&t, SHMS_EVENT_REQUEST_OWNER_LOST)->pid, waiter);
  /* Two items settled for the dead: the class's recoveries count those, not the recompute. */
  ck_assert_uint_eq(sched_stats(h).recovered, 2);
  char report[4096];
  ck_assert_uint_eq(audit(h, report, sizeof report), 0);
  sched_close(h, name);
}
END_TEST

/* A full recovery with nobody dead recovers nothing: no class counts a recovery. */
START_TEST(a_recovery_with_nobody_dead_counts_none) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r));
  ck_assert_uint_eq(r.counts_fixed, 0);
  ck_assert_uint_eq(r.dead_processes, 0);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    shms_class_stats st;
    if (shms_observe(h, (shms_class_t)c, &st) == SHMS_OK)
      ck_assert_uint_eq(st.recovered, 0);
  }
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("recover");
  TCase *tc = harness_tcase("recovery");
  tcase_add_test(tc, the_audit_finds_corruption_and_recovery_fixes_it);
  tcase_add_test(tc, the_audit_finds_a_lost_grant_and_recovery_grants_it_again);
  tcase_add_test(tc, the_audit_checks_a_large_class_free_count);
  tcase_add_test(tc, a_dead_holders_lease_is_quarantined_by_default);
  tcase_add_test(tc, a_dead_holders_lease_is_released_when_the_class_says_so);
  tcase_add_test(tc, a_waiter_releases_a_dead_holders_lease_without_a_supervisor);
  tcase_add_test(tc, a_waiter_quarantines_a_dead_holders_lease_without_a_supervisor);
  tcase_add_test(tc, taking_over_a_dead_holders_entry_disposes_of_its_lease);
  tcase_add_test(tc, processes_are_listed_and_dead_workers_cells_come_back);
  tcase_add_test(tc, one_supervisor_per_segment);
  tcase_add_test(tc, the_dispatch_after_a_recovery_by_a_waiting_operation_is_marked);
  tcase_add_test(tc, the_ring_order_survives_a_recovery);
  tcase_add_test(tc, a_dead_process_outside_operations_is_recovered_without_freezing);
  tcase_add_test(tc, a_death_inside_an_operation_recomputes_its_class);
  tcase_add_test(tc, a_dead_worker_is_recovered_by_itself);
  tcase_add_test(tc, the_ring_order_survives_a_dead_baton_holder);
  tcase_add_test(tc, an_ordinary_death_fixes_no_count_and_is_told_cause_first);
  tcase_add_test(tc, a_recovery_with_nobody_dead_counts_none);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

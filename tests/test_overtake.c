/*
 * Bounded overtaking (docs/protocol.md, "Bounded overtaking"): within the class's overtake
 * bound an acquire may take a free cell ahead of queued requests, and the release wakes one
 * waiter (a nudge) instead of granting; once the oldest queued request has waited the bound, a
 * release hands its cell to the queue before any acquire can take it; overtake=0 keeps strict
 * hand-off. Time is the test clock (sched_fake_now): the bound passes when the test moves it.
 */
#include <ck_pr.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/account.h"
#include "core/sched.h"
#include "core/tally.h"
#include "sched_util.h"
#include "shm/clock.h"
#include "shm/crashpoint.h"
#include "shm/handle.h"

#define US (1000ull)

static shms_t *open_class(const char **name, unsigned cells, uint64_t overtake) {
  shms_config cfg;
  harness_config(&cfg, cells, 8);
  cfg.classes[SHMS_CLASS_STANDARD].overtake_ns = overtake;
  shms_set_clock(sched_fake_clock, NULL);
  return sched_open(name, cells, 8, &cfg);
}

static uint32_t state_of(shms_t *h, const shms_ticket *t) {
  shms_explanation e;
  ck_assert_shms_ok(shms_explain(h, t, &e));
  return e.state;
}

static uint64_t slot_word(shms_t *h, const shms_ticket *t) {
  return ck_pr_load_64(&shms__slot_at(&h->cls[SHMS_CLASS_STANDARD], t->slot)->word);
}

static void audit_clean(shms_t *h) {
  char report[2048];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "audit: %s", report);
}

START_TEST(a_strict_class_hands_every_release_to_the_queue) {
  const char *name;
  shms_t *h = open_class(&name, 1, SHMS_OVERTAKE_STRICT);
  shms_request r = sched_req("a", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "a", 0, 0);
  ck_assert_shms_ok(shms_release(h, &held)); /* the queue's at once, however young */
  ck_assert_uint_eq(state_of(h, &t), SHMS_REQ_GRANTED);
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_EWOULDBLOCK, "queued work goes first");
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* A child that queues a request and waits for it, asleep; it tells the parent its slot. */
static void sleeping_child(const char *name, int tell) {
  shms_t *h;
  if (shms_attach(name, 0, &h) != SHMS_OK)
    _exit(2);
  shms_request r = sched_req("a", 0);
  shms_ticket t;
  shms_lease l;
  if (shms_enqueue(h, &r, &t) != SHMS_OK || write(tell, &t.slot, sizeof t.slot) != sizeof t.slot)
    _exit(3);
  if (shms_wait(h, &t, UINT64_MAX, &l) != SHMS_OK)
    _exit(4);
  _exit(shms_release(h, &l) == SHMS_OK && shms_detach(h) == SHMS_OK ? 0 : 5);
}

/* A sleeping_child forked and, once asleep on its request, held still (SIGSTOP), so that nothing
 * it would do when woken races the caller's checks: the word of its request's slot. */
static uint64_t *stopped_sleeper(const char *name, const struct shms__cls *k, pid_t *pid) {
  int tell[2];
  ck_assert_int_eq(pipe(tell), 0);
  *pid = fork();
  ck_assert_int_ge(*pid, 0);
  if (*pid == 0)
    sleeping_child(name, tell[1]);
  uint32_t slot;
  ck_assert_int_eq(read(tell[0], &slot, sizeof slot), (ssize_t)sizeof slot);
  close(tell[0]);
  close(tell[1]);
  uint64_t *word = &shms__slot_at(k, slot)->word;
  while (!(ck_pr_load_64(word) & SHMS__SLOT_SLEEPING)) /* asleep on its request */
    ck_assert_int_eq(sched_yield(), 0);
  int status;
  ck_assert_int_eq(kill(*pid, SIGSTOP), 0);
  ck_assert_int_eq(waitpid(*pid, &status, WUNTRACED), *pid);
  return word;
}

START_TEST(within_the_bound_a_release_nudges_the_sleeper_and_an_acquire_overtakes) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_request r = sched_req("a", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  pid_t pid;
  uint64_t *word = stopped_sleeper(name, k, &pid);
  int status;
  sched_fake_now += 50 * US; /* half the bound */
  ck_assert_shms_ok(shms_release(h, &held));
  /* Not granted: the cell is free for whoever comes first, and the sleeper is asked to kick. */
  uint64_t w = ck_pr_load_64(word);
  ck_assert_uint_eq(SHMS__SLOT_STATE(w), SHMS__SLOT_QUEUED);
  ck_assert(w & SHMS__SLOT_HELP);
  ck_assert(!(w & SHMS__SLOT_SLEEPING));
  ck_assert_shms_ok(shms_try_acquire(h, &r, &held)); /* overtakes the queued request */
  ck_assert_shms_ok(shms_release(h, &held));         /* a nudge is in flight: none more */
  ck_assert_uint_eq(SHMS__SLOT_STATE(ck_pr_load_64(word)), SHMS__SLOT_QUEUED);
  /* No wake-up lost: the nudged waiter's kick grants it the cell nobody else took. */
  ck_assert_int_eq(kill(pid, SIGCONT), 0);
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* The cell-time tenant's fast-path leases were charged: kept in this process's tally until it
 * sums to SHMS__FAST_PENDING_NS, then in its record (fast_ns), until a pass takes it (cell_ns). */
static uint64_t fast_charged(shms_t *h, const struct shms__cls *k, const char *tenant) {
  uint64_t words[SHMS__NAME_WORDS];
  ck_assert_int_eq(shms__tenant_pack(tenant, words), 0);
  const struct shms__tally *t = shms__tally_of(h, k, words);
  ck_assert_ptr_nonnull(t);
  uint64_t sum = ck_pr_load_64((uint64_t *)&t->pending_ns);
  uint32_t ref = shms__account_lookup(k, words, 0);
  if (ref == 0)
    return sum;
  const struct shms__account_class *a = &k->accts[ref - 1].cls[k->id];
  return sum + ck_pr_load_64((uint64_t *)&a->fast_ns) + ck_pr_load_64((uint64_t *)&a->cell_ns);
}

/*
 * On the real clock, fair by time: a lease that overtakes a queued request is charged what it
 * held, however much shorter than a tick of the coarse clock. Measured on that clock, a lease of
 * 100 us was charged a whole tick if it straddled one (4 ms on our guests), or else nothing, and
 * its tenant's next request then waited up to several ticks for the others to catch up. Each lease
 * here is held at least HOLD, so each must add at least HOLD to its tenant's charge.
 */
START_TEST(an_overtaking_lease_is_charged_what_it_held) {
  enum { LEASES = 20, HOLD = 100 * 1000 };
  const char *name;
  shms_config cfg;
  harness_config(&cfg, 1, 8);
  cfg.classes[SHMS_CLASS_STANDARD].overtake_ns = 1000ull * 1000 * 1000; /* the longest: 1 s */
  shms_t *h = sched_open(&name, 1, 8, &cfg);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  ck_assert(k->timed);
  shms_request r = sched_req("a", 0), fast = sched_req("fast", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  pid_t pid;
  uint64_t *word = stopped_sleeper(name, k, &pid);
  int status;
  ck_assert_shms_ok(shms_release(h, &held)); /* within the bound: the cell free, a nudge */
  uint64_t before = 0;
  for (int i = 0; i < LEASES; i++) {
    ck_assert_shms_ok(shms_try_acquire(h, &fast, &held)); /* overtakes the queued request */
    for (uint64_t until = shms__real_now_ns() + HOLD; shms__real_now_ns() < until;)
      ;
    ck_assert_shms_ok(shms_release(h, &held)); /* requests queued: charged */
    ck_assert_uint_eq(SHMS__SLOT_STATE(ck_pr_load_64(word)), SHMS__SLOT_QUEUED);
    uint64_t now = fast_charged(h, k, "fast");
    ck_assert_msg(now - before >= HOLD, "lease %d held %u ns, charged %llu", i, (unsigned)HOLD,
                  (unsigned long long)(now - before));
    before = now;
  }
  ck_assert_int_eq(kill(pid, SIGCONT), 0);
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* Nobody asleep on the oldest request (its caller will wait later): a nudge would reach nobody
 * until a poll, so the release hands the cell to the queue at once. */
START_TEST(within_the_bound_a_request_nobody_waits_on_is_granted_at_once) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  shms_request r = sched_req("a", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "a", 0, 0);
  sched_fake_now += 50 * US;
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_uint_eq(SHMS__SLOT_STATE(slot_word(h, &t)), SHMS__SLOT_GRANTED);
  ck_assert_shms_err(shms_try_acquire(h, &r, &held), SHMS_EWOULDBLOCK, "queued work goes first");
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

START_TEST(past_the_bound_a_release_hands_its_cell_to_the_queue_before_any_acquire) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  shms_request r = sched_req("a", 0);
  shms_lease held, l1, l2;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t1 = sched_enqueue(h, "a", 0, 0);
  sched_fake_now += 10 * US;
  shms_ticket t2 = sched_enqueue(h, "a", 0, 0);
  sched_fake_now += 140 * US; /* t1 waited 150 us, t2 140 us: both past the bound */
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_uint_eq(state_of(h, &t1), SHMS_REQ_GRANTED);
  ck_assert_shms_err(shms_try_acquire(h, &r, &held), SHMS_EWOULDBLOCK, "queued work goes first");
  ck_assert_shms_ok(shms_wait(h, &t1, 0, &l1));
  /* The next oldest has waited the bound too: its turn comes the same way. */
  ck_assert_shms_ok(shms_release(h, &l1));
  ck_assert_uint_eq(state_of(h, &t2), SHMS_REQ_GRANTED);
  ck_assert_shms_err(shms_try_acquire(h, &r, &held), SHMS_EWOULDBLOCK, "queued work goes first");
  ck_assert_shms_ok(shms_wait(h, &t2, 0, &l2));
  ck_assert_shms_ok(shms_release(h, &l2)); /* nobody queued: the cell is anyone's */
  ck_assert_shms_ok(shms_try_acquire(h, &r, &held));
  ck_assert_shms_ok(shms_release(h, &held));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* The child has had its lease and exited 0; the segment audits clean; close it. */
static void child_done_then_close(shms_t *h, const char *name, pid_t pid) {
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  audit_clean(h);
  sched_close(h, name);
}

/* A child that queues a request and waits for it; it exits 0 once it has had and returned a lease.
 */
static void queueing_child(const char *name) {
  shms_t *h;
  if (shms_attach(name, 0, &h) != SHMS_OK)
    _exit(2);
  shms_request r = sched_req("a", 0);
  shms_lease l;
  if (shms_acquire(h, &r, &l) != SHMS_OK)
    _exit(3);
  _exit(shms_release(h, &l) == SHMS_OK && shms_detach(h) == SHMS_OK ? 0 : 4);
}

/* The queue's request whose waiter sleeps: its slot, once there is one. */
static int64_t sleeping_request(const struct shms__cls *k) {
  for (uint32_t i = 0; i < k->nslots; i++) {
    uint64_t w = ck_pr_load_64(&shms__slot_at(k, i)->word);
    if (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED && (w & SHMS__SLOT_SLEEPING))
      return i;
  }
  return -1;
}

/* The bound counts from a request's publication, not from the pass that indexes it: with the
 * dispatcher away (a baton holder descheduled mid-pass, here the test holding the baton), a
 * release past the bound still hands its cell to the queue. It once judged by the oldest indexed
 * request only, so acquires overtook an unindexed one for as long as the holder stayed away. */
START_TEST(past_the_bound_an_unindexed_request_is_not_overtaken) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_request r = sched_req("a", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms__op_enter(h, k);
  ck_assert_shms_ok(shms__baton_acquire(h, k, 1000000000ull));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0)
    queueing_child(name);
  int64_t slot;
  while ((slot = sleeping_request(k)) < 0) /* published, and asleep waiting to be indexed */
    ck_assert_int_eq(sched_yield(), 0);
  ck_assert(!(ck_pr_load_64(&shms__slot_at(k, (uint32_t)slot)->word) & SHMS__SLOT_INDEXED));
  sched_fake_now += 150 * US; /* past the bound since its enqueue */
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert(ck_pr_load_64(&k->ctl->fast) & SHMS__FAST_STRICT);
  ck_assert_shms_err(shms_try_acquire(h, &r, &held), SHMS_EWOULDBLOCK, "queued work goes first");
  /* The holder back: its pass indexes the request and grants it the cell. */
  shms__baton_done(h, k);
  shms__op_leave(h, k);
  child_done_then_close(h, name, pid);
}
END_TEST

/* A request whose grant was revoked (LATE) and whose waiter came back is published again: its
 * bound, long passed, holds from then, even with the dispatcher away (the test holds the baton).
 * Without shms__overtake_arrived on the way back, the end was 0 (nothing indexed) and an
 * acquire overtook it. */
START_TEST(past_the_bound_an_unparked_request_is_not_overtaken) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_ticket late = sched_enqueue(h, "a", 0, 0); /* granted at once; nobody accepts it */
  ck_assert_uint_eq(state_of(h, &late), SHMS_REQ_GRANTED);
  sched_fake_now += 3000000 * US;                 /* past the default grant timeout (2 s) */
  shms_ticket next = sched_enqueue(h, "b", 0, 0); /* its kick revokes late's grant */
  ck_assert(slot_word(h, &late) & SHMS__SLOT_LATE);
  shms_lease ln, ll;
  ck_assert_shms_ok(shms_wait(h, &next, 0, &ln));
  shms__op_enter(h, k);
  ck_assert_shms_ok(shms__baton_acquire(h, k, 1000000000ull));
  /* Its waiter comes back: queued again, not yet indexed. */
  ck_assert_shms_err(shms_wait(h, &late, 0, &ll), SHMS_ETIMEDOUT, "still queued");
  uint64_t w = slot_word(h, &late);
  ck_assert(!(w & SHMS__SLOT_LATE) && !(w & SHMS__SLOT_INDEXED));
  ck_assert_shms_ok(shms_release(h, &ln));
  ck_assert(ck_pr_load_64(&k->ctl->fast) & SHMS__FAST_STRICT);
  shms_request r = sched_req("c", 0);
  ck_assert_shms_err(shms_try_acquire(h, &r, &ll), SHMS_EWOULDBLOCK, "queued work goes first");
  shms__baton_done(h, k); /* its pass indexes the request and grants it the cell */
  shms__op_leave(h, k);
  ck_assert_shms_ok(shms_wait(h, &late, 0, &ll));
  ck_assert_shms_ok(shms_release(h, &ll));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/*
 * A request published during the pass that grants an older one is not overtaken: the pass took
 * the attention bits before it arrived, and its end was no earlier than the older request's, so
 * its arrival once left the end as it was. The pass then replaced the end by none (nothing left
 * indexed) and, until a later pass indexed the newcomer (a time slice, with the baton holder
 * descheduled), acquires overtook it past its bound. The arrival now counts itself in the end's
 * pair and the pass's CAS fails. Checked at every crash point of the releasing process once the
 * newcomer (a child's) is published: the end is never none, nor later than its own.
 */
static struct {
  const struct shms__cls *k;
  uint32_t older;   /* the older request's slot */
  int go;           /* the pipe that starts the child */
  int64_t newcomer; /* its slot once published, -1 before */
  uint64_t end;     /* its end of overtaking */
  unsigned checks, violations;
  uint64_t seen_end; /* the end at the first violation */
} arrival;

static void publish_newcomer_then_watch(void) {
  const struct shms__cls *k = arrival.k;
  if (arrival.newcomer < 0) {
    uint64_t w = ck_pr_load_64(&shms__slot_at(k, arrival.older)->word);
    if (SHMS__SLOT_STATE(w) != SHMS__SLOT_GRANTED)
      return; /* the pass has not granted the older request yet: its bits are taken by now */
    if (write(arrival.go, "g", 1) != 1)
      abort();
    /* Its enqueue waits to be indexed, which takes this pass's end: asleep, it has published. */
    while ((arrival.newcomer = sleeping_request(k)) < 0)
      sched_yield();
    return;
  }
  uint64_t w = ck_pr_load_64(&shms__slot_at(k, (uint32_t)arrival.newcomer)->word);
  if (SHMS__SLOT_STATE(w) != SHMS__SLOT_QUEUED)
    return;
  uint64_t end = ck_pr_load_64(&k->ctl->overtake_end_ns);
  arrival.checks++;
  if ((end == 0 || end > arrival.end) && arrival.violations++ == 0)
    arrival.seen_end = end;
}

START_TEST(a_request_published_while_the_pass_grants_an_older_one_is_not_overtaken) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_request r = sched_req("a", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket older = sched_enqueue(h, "a", 0, 0); /* indexed: its end is the class's */
  ck_assert_uint_eq(ck_pr_load_64(&k->ctl->overtake_end_ns), sched_fake_now + 100 * US);
  sched_fake_now += 150 * US; /* the older request past its bound: the release is strict */
  int go[2];
  ck_assert_int_eq(pipe(go), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    char g;
    if (shms_attach(name, 0, &c) != SHMS_OK || read(go[0], &g, 1) != 1)
      _exit(2);
    shms_request cr = sched_req("b", 0);
    shms_lease cl;
    if (shms_acquire(c, &cr, &cl) != SHMS_OK || shms_release(c, &cl) != SHMS_OK)
      _exit(3);
    _exit(shms_detach(c) == SHMS_OK ? 0 : 4);
  }
  arrival.k = k;
  arrival.older = older.slot;
  arrival.go = go[1];
  arrival.newcomer = -1;
  arrival.end = sched_fake_now + 100 * US; /* the child's clock is ours, as of the fork */
  shms__test_step_check(publish_newcomer_then_watch);
  ck_assert_shms_ok(shms_release(h, &held)); /* strict: its kick's pass grants the older */
  shms__test_step_check(NULL);
  ck_assert_msg(arrival.newcomer >= 0, "the pass never granted the older request");
  ck_assert_uint_gt(arrival.checks, 0);
  ck_assert_msg(arrival.violations == 0,
                "%u of %u crash points saw the end of overtaking at %llu, the newcomer's %llu",
                arrival.violations, arrival.checks, (unsigned long long)arrival.seen_end,
                (unsigned long long)arrival.end);
  ck_assert_shms_ok(shms_wait(h, &older, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l)); /* the newcomer's turn: past its bound too */
  child_done_then_close(h, name, pid);
}
END_TEST

/*
 * A nudge in flight owes the queue a pass even if the cell its release freed is gone by the
 * holder's re-check. Between a baton holder's pass and its re-check, a release within the bound
 * sets WOKEN (its nudge finds nobody asleep: it kicks, into the held baton) and an acquire
 * overtakes and takes the cell. The re-check found no cell free and let go with WOKEN still set,
 * so the acquire's own release, finding a nudge in flight, did nothing: the request waited with
 * the cell free for its 1 s poll (seen in the contended benchmark; overtake.pml's
 * NO_WOKEN_RECHECK). The step after the holder's pass is where the test slips both in.
 */
static struct {
  shms_t *h;
  shms_lease *held, *taken;
  int done;
} between;

static void release_and_overtake_after_the_pass(void) {
  if (between.done)
    return;
  between.done = 1;
  shms_request r = sched_req("c", 0);
  if (shms_release(between.h, between.held) != SHMS_OK ||
      shms_try_acquire(between.h, &r, between.taken) != SHMS_OK)
    abort();
}

START_TEST(a_nudge_in_flight_gets_its_pass_though_its_cell_was_overtaken) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_request r = sched_req("a", 0);
  shms_lease held, taken, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "b", 0, 0); /* indexed; nobody waits on it: no nudge lands */
  between.h = h;
  between.held = &held;
  between.taken = &taken;
  between.done = 0;
  shms__test_step_check(release_and_overtake_after_the_pass);
  shms__kick(h, k); /* a pass with nothing to do, then the step, then the re-check */
  shms__test_step_check(NULL);
  ck_assert(between.done);
  /* The slot's word, not shms_explain: an explain kicks, and its pass would clear WOKEN. */
  ck_assert_uint_eq(SHMS__SLOT_STATE(slot_word(h, &t)), SHMS__SLOT_QUEUED); /* overtaken */
  ck_assert_shms_ok(shms_release(h, &taken));
  ck_assert_msg(SHMS__SLOT_STATE(slot_word(h, &t)) == SHMS__SLOT_GRANTED,
                "the cell is free and the request still queued (fast word %#llx)",
                (unsigned long long)ck_pr_load_64(&k->ctl->fast));
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* A step hook: the enqueuer of the class's only claimed slot descheduled for 5 ms once it has
 * filled it (its tenant's name is in), before it publishes (the test clock moves on meanwhile). */
static struct {
  const struct shms__cls *k;
  int done;
} delay;

static void deschedule_after_fill(void) {
  for (uint32_t i = 0; i < delay.k->nslots && !delay.done; i++) {
    const struct shms__slot *s = shms__slot_at(delay.k, i);
    if (SHMS__SLOT_STATE(ck_pr_load_64(&s->word)) == SHMS__SLOT_CLAIMED &&
        s->tenant_name[0] != '\0') {
      sched_fake_now += 5000 * US;
      delay.done = 1;
    }
  }
}

/* An enqueuer descheduled between filling its slot and publishing it: nobody could see the
 * request meanwhile, so its bound and its wait count from its publication. A release half the
 * bound after that is not strict (stamped at fill, the request would be 5 ms past its 1 ms
 * bound) and the grant records half the bound as the wait, not 5.5 ms. */
START_TEST(the_bound_and_the_wait_count_from_publication) {
  const char *name;
  shms_t *h = open_class(&name, 1, 1000 * US);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_request r = sched_req("a", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  delay.k = k;
  delay.done = 0;
  shms__test_step_check(deschedule_after_fill);
  shms_ticket t = sched_enqueue(h, "a", 0, 0);
  shms__test_step_check(NULL);
  ck_assert_int_eq(delay.done, 1);
  ck_assert_uint_eq(ck_pr_load_64(&k->ctl->overtake_end_ns), sched_fake_now + 1000 * US);
  sched_fake_now += 500 * US;
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_uint_eq(ck_pr_load_64(&k->ctl->fast) & SHMS__FAST_STRICT, 0);
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l)); /* nobody asleep to nudge: the release's kick */
  shms_class_stats st = sched_stats(h);
  ck_assert_uint_eq(st.max_wait_ns, 500 * US);
  ck_assert_shms_ok(shms_release(h, &l));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* What the queue gets past the bound, it gets in the dispatcher's order: tenants take turns. */
START_TEST(past_the_bound_tenants_still_take_turns) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  shms_request r = sched_req("a", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t[3] = {sched_enqueue(h, "a", 0, 0), sched_enqueue(h, "a", 0, 0),
                      sched_enqueue(h, "b", 0, 0)};
  sched_fake_now += 200 * US;
  int order[3];
  for (int n = 0; n < 3; n++) {
    ck_assert_shms_ok(shms_release(h, &held));
    order[n] = sched_granted(h, t, 3, &held);
  }
  ck_assert_int_eq(order[0], 0); /* a's first */
  ck_assert_int_eq(order[1], 2); /* then b's, ahead of a's second */
  ck_assert_int_eq(order[2], 1);
  ck_assert_shms_ok(shms_release(h, &held));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* The list by time is index: the audit finds it torn, and a recovery rebuilds it. */
START_TEST(a_torn_list_by_time_is_found_and_rebuilt) {
  const char *name;
  shms_t *h = open_class(&name, 1, 100 * US);
  shms_request r = sched_req("a", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t1 = sched_enqueue(h, "a", 0, 0);
  sched_fake_now += 10 * US;
  shms_ticket t2 = sched_enqueue(h, "b", 0, 0);
  struct shms__class_ctl *ctl = h->cls[SHMS_CLASS_STANDARD].ctl;
  ck_assert_uint_eq(ctl->all_head, t1.slot + 1);
  ck_assert_uint_eq(ctl->all_tail, t2.slot + 1);
  ctl->all_head = t2.slot + 1; /* as a baton holder dying mid-unlink could leave it */
  char report[2048];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_uint_ge(violations, 1);
  ck_assert_msg(strstr(report, "list by time") != NULL, "audit: %s", report);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(h, &rec));
  audit_clean(h);
  ck_assert_uint_eq(ctl->all_head, t1.slot + 1); /* oldest first again */
  sched_fake_now += 200 * US;
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_uint_eq(state_of(h, &t1), SHMS_REQ_GRANTED);
  ck_assert_shms_ok(shms_wait(h, &t1, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_shms_ok(shms_wait(h, &t2, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("overtake");
  TCase *tc = harness_tcase("overtake");
  tcase_add_test(tc, a_strict_class_hands_every_release_to_the_queue);
  tcase_add_test(tc, within_the_bound_a_release_nudges_the_sleeper_and_an_acquire_overtakes);
  tcase_add_test(tc, an_overtaking_lease_is_charged_what_it_held);
  tcase_add_test(tc, within_the_bound_a_request_nobody_waits_on_is_granted_at_once);
  tcase_add_test(tc, past_the_bound_a_release_hands_its_cell_to_the_queue_before_any_acquire);
  tcase_add_test(tc, past_the_bound_an_unindexed_request_is_not_overtaken);
  tcase_add_test(tc, past_the_bound_an_unparked_request_is_not_overtaken);
  tcase_add_test(tc, a_request_published_while_the_pass_grants_an_older_one_is_not_overtaken);
  tcase_add_test(tc, a_nudge_in_flight_gets_its_pass_though_its_cell_was_overtaken);
  tcase_add_test(tc, the_bound_and_the_wait_count_from_publication);
  tcase_add_test(tc, past_the_bound_tenants_still_take_turns);
  tcase_add_test(tc, a_torn_list_by_time_is_found_and_rebuilt);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

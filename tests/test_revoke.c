/*
 * Grant revocation (docs/protocol.md, "Revocation"): a grant not accepted within the class's
 * grant-timeout goes to the next request; the late request keeps its place and is served when
 * its waiter comes back. Time is a test clock shared by every process of a test (no sleeps):
 * a grant falls due when the test moves the clock past it.
 */
#include <ck_pr.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"

#define SEC (1000ull * 1000 * 1000)

/* The clock, in shared memory so that forked processes read the same time. */
static uint64_t *shared_now;

static uint64_t shared_clock(void *ctx) {
  (void)ctx;
  return ck_pr_load_64(shared_now);
}

static void clock_install(void) {
  shared_now =
      mmap(NULL, sizeof *shared_now, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(shared_now, MAP_FAILED);
  ck_pr_store_64(shared_now, 1000 * SEC);
  shms_set_clock(shared_clock, NULL);
}

static void clock_advance(uint64_t ns) { ck_pr_add_64(shared_now, ns); }

static shms_t *open_class(const char **name, unsigned cells, uint64_t grant_timeout) {
  shms_config cfg;
  harness_config(&cfg, cells, 8);
  cfg.classes[SHMS_CLASS_STANDARD].grant_timeout_ns = grant_timeout;
  /* Revocation is about grants: every release here hands its cell to the queue at once. */
  cfg.classes[SHMS_CLASS_STANDARD].overtake_ns = SHMS_OVERTAKE_STRICT;
  return sched_open(name, cells, 8, &cfg);
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

START_TEST(a_grant_accepted_in_time_is_never_revoked) {
  clock_install();
  const char *name;
  shms_t *h = open_class(&name, 1, 0); /* the default: 2 s */
  shms_ticket a = sched_enqueue(h, "t", 0, 0);
  clock_advance(2 * SEC - 1000 * 1000); /* just short of due */
  shms_ticket b = sched_enqueue(h, "t", 0, 0);
  shms_lease la, lb;
  ck_assert_shms_ok(shms_wait(h, &a, 0, &la));
  ck_assert_shms_err(shms_wait(h, &b, 0, &lb), SHMS_ETIMEDOUT, "still queued");
  ck_assert_uint_eq(sched_stats(h).revoked, 0);
  clock_advance(10 * SEC); /* an accepted lease is the holder's however long it runs */
  ck_assert_shms_err(shms_wait(h, &b, 0, &lb), SHMS_ETIMEDOUT, "still queued");
  ck_assert_shms_ok(shms_release(h, &la));
  ck_assert_shms_ok(shms_wait(h, &b, 0, &lb));
  ck_assert_shms_ok(shms_release(h, &lb));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* One process plays everyone: a grant left unaccepted falls due when the next request comes. */
START_TEST(a_late_grant_goes_to_the_next_request_and_the_late_one_keeps_its_place) {
  clock_install();
  const char *name;
  shms_t *h = open_class(&name, 1, SEC);
  shms_ticket late = sched_enqueue(h, "t", 0, 0); /* granted at once; nobody accepts it */
  ck_assert_uint_eq(SHMS__SLOT_STATE(slot_word(h, &late)), SHMS__SLOT_GRANTED);
  clock_advance(SEC);
  shms_ticket next = sched_enqueue(h, "t", 0, 0); /* its kick revokes the grant */
  ck_assert_uint_eq(slot_word(h, &late) & 0xf, SHMS__SLOT_QUEUED);
  ck_assert(slot_word(h, &late) & SHMS__SLOT_LATE);
  ck_assert_uint_eq(sched_stats(h).revoked, 1);
  audit_clean(h); /* a late request is neither indexed nor awaiting the dispatcher: allowed */
  shms_lease ln, ll, lt;
  ck_assert_shms_ok(shms_wait(h, &next, 0, &ln));
  shms_ticket third = sched_enqueue(h, "t", 0, 0);
  /* The late waiter comes back: queued again, ahead of the request that came after it. */
  ck_assert_shms_err(shms_wait(h, &late, 0, &ll), SHMS_ETIMEDOUT, "still queued");
  ck_assert(!(slot_word(h, &late) & SHMS__SLOT_LATE));
  ck_assert_shms_ok(shms_release(h, &ln));
  ck_assert_shms_ok(shms_wait(h, &late, 0, &ll));
  ck_assert_shms_err(shms_wait(h, &third, 0, &lt), SHMS_ETIMEDOUT, "still queued");
  ck_assert_shms_ok(shms_release(h, &ll));
  ck_assert_shms_ok(shms_wait(h, &third, 0, &lt));
  ck_assert_shms_ok(shms_release(h, &lt));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/*
 * A late request the dispatcher also asked to help (a hand-off can pick a parked request whose
 * attention bit a recovery raised again): its waiter answers both flags, in whichever order,
 * before it sleeps, and the request is back in line at its old place.
 */
START_TEST(a_late_request_asked_to_help_answers_both) {
  clock_install();
  const char *name;
  shms_t *h = open_class(&name, 1, SEC);
  shms_ticket late = sched_enqueue(h, "t", 0, 0);
  clock_advance(SEC);
  shms_ticket next = sched_enqueue(h, "t", 0, 0); /* its kick revokes late's grant */
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  uint64_t w = slot_word(h, &late);
  ck_assert(w & SHMS__SLOT_LATE);
  ck_assert(shms__slot_flag(k, late.slot, &w, SHMS__SLOT_HELP));
  shms_lease ln, ll;
  ck_assert_shms_ok(shms_wait(h, &next, 0, &ln));
  shms_ticket third = sched_enqueue(h, "t", 0, 0);
  ck_assert_shms_err(shms_wait(h, &late, 0, &ll), SHMS_ETIMEDOUT, "still queued");
  w = slot_word(h, &late);
  ck_assert_msg(!(w & (SHMS__SLOT_LATE | SHMS__SLOT_HELP)), "flags left: %#llx",
                (unsigned long long)w);
  ck_assert(w & SHMS__SLOT_INDEXED);
  ck_assert_shms_ok(shms_release(h, &ln));
  ck_assert_shms_ok(shms_wait(h, &late, 0, &ll)); /* ahead of the request that came after it */
  ck_assert_shms_ok(shms_release(h, &ll));
  shms_lease lt;
  ck_assert_shms_ok(shms_wait(h, &third, 0, &lt));
  ck_assert_shms_ok(shms_release(h, &lt));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

START_TEST(a_late_request_can_be_cancelled_and_expires_on_return) {
  clock_install();
  const char *name;
  shms_t *h = open_class(&name, 1, SEC);
  shms_ticket a = sched_enqueue(h, "t", 0, 0);
  shms_ticket b = sched_enqueue(h, "t", 0, ck_pr_load_64(shared_now) + 3 * SEC);
  clock_advance(SEC); /* a's grant is due: b's waiter revokes it at its next look */
  shms_lease la, lb;
  ck_assert_shms_ok(shms_wait(h, &b, 0, &lb));
  ck_assert(slot_word(h, &a) & SHMS__SLOT_LATE);
  ck_assert_int_eq(shms_cancel(h, &a), 1);
  ck_assert_shms_err(shms_wait(h, &a, 0, &la), SHMS_ECANCELLED, "cancel");
  ck_assert_shms_ok(shms_release(h, &lb));
  /* A late request whose deadline passes while it is parked ends when its waiter returns. */
  shms_ticket c = sched_enqueue(h, "t", 0, ck_pr_load_64(shared_now) + 2 * SEC);
  clock_advance(SEC);
  shms_ticket d = sched_enqueue(h, "t", 0, 0);
  ck_assert(slot_word(h, &c) & SHMS__SLOT_LATE);
  clock_advance(SEC);
  ck_assert_shms_err(shms_wait(h, &c, 0, &la), SHMS_EDEADLINE, "deadline");
  ck_assert_shms_ok(shms_wait(h, &d, 0, &lb));
  ck_assert_shms_ok(shms_release(h, &lb));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

/* A child that enqueues, says so on its pipe, then waits for the word "go" before it waits. */
static void late_child(const char *name, int ready, int go, int done) {
  shms_t *h;
  shms_ticket t;
  shms_lease l;
  shms_request r = sched_req("t", 0);
  char b;
  if (shms_attach(name, 0, &h) != SHMS_OK || shms_enqueue(h, &r, &t) != SHMS_OK)
    _exit(1);
  if (write(ready, "q", 1) != 1 || read(go, &b, 1) != 1)
    _exit(2);
  if (shms_wait(h, &t, UINT64_MAX, &l) != SHMS_OK)
    _exit(3);
  if (write(done, "g", 1) != 1 || read(go, &b, 1) != 1 || shms_release(h, &l) != SHMS_OK)
    _exit(4);
  shms_detach(h);
  _exit(0);
}

/*
 * The case: a waiter is SIGSTOPped when its grant arrives. The request behind it gets
 * the cell; after SIGCONT the stopped one is served, before a request that came after it.
 */
START_TEST(a_stopped_waiters_grant_goes_to_the_next_and_it_is_served_later) {
  clock_install();
  const char *name;
  shms_t *h = open_class(&name, 1, SEC);
  shms_request r = sched_req("t", 0);
  shms_lease held, next_lease, third_lease;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  int ready[2], go[2], done[2];
  ck_assert_int_eq(pipe(ready), 0);
  ck_assert_int_eq(pipe(go), 0);
  ck_assert_int_eq(pipe(done), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0)
    late_child(name, ready[1], go[0], done[1]);
  char b;
  ck_assert_int_eq(read(ready[0], &b, 1), 1);
  kill(pid, SIGSTOP);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
  ck_assert(WIFSTOPPED(status));
  ck_assert_shms_ok(shms_release(h, &held)); /* granted to the stopped child */
  ck_assert_uint_eq(sched_stats(h).available, 0);
  clock_advance(SEC);
  shms_ticket next = sched_enqueue(h, "t", 0, 0);
  ck_assert_shms_ok(shms_wait(h, &next, 0, &next_lease)); /* the cell came to us */
  ck_assert_uint_eq(sched_stats(h).revoked, 1);
  shms_ticket third = sched_enqueue(h, "t", 0, 0);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  uint32_t child = 0;
  while (child < k->nslots && !(ck_pr_load_64(&shms__slot_at(k, child)->word) & SHMS__SLOT_LATE))
    child++;
  ck_assert_uint_lt(child, k->nslots); /* the child's request, parked */
  kill(pid, SIGCONT);
  ck_assert_int_eq(write(go[1], "w", 1), 1);
  /* The child is back in line once it has unparked its request and it is indexed again. */
  for (uint64_t w; !((w = ck_pr_load_64(&shms__slot_at(k, child)->word)) & SHMS__SLOT_INDEXED) ||
                   (w & SHMS__SLOT_LATE);)
    ck_assert_int_eq(sched_yield(), 0);
  ck_assert_shms_ok(shms_release(h, &next_lease));
  ck_assert_int_eq(read(done[0], &b, 1), 1); /* the child was served, the third still waits */
  ck_assert_shms_err(shms_wait(h, &third, 0, &third_lease), SHMS_ETIMEDOUT, "still queued");
  ck_assert_int_eq(write(go[1], "r", 1), 1);
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ck_assert_shms_ok(shms_wait(h, &third, UINT64_MAX, &third_lease));
  ck_assert_shms_ok(shms_release(h, &third_lease));
  audit_clean(h);
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("revoke");
  TCase *tc = harness_tcase("revocation");
  tcase_add_test(tc, a_grant_accepted_in_time_is_never_revoked);
  tcase_add_test(tc, a_late_grant_goes_to_the_next_request_and_the_late_one_keeps_its_place);
  tcase_add_test(tc, a_late_request_asked_to_help_answers_both);
  tcase_add_test(tc, a_late_request_can_be_cancelled_and_expires_on_return);
  tcase_add_test(tc, a_stopped_waiters_grant_goes_to_the_next_and_it_is_served_later);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

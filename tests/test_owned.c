/*
 * What a client costs: detach and the recovery of a dead process find the
 * process's requests through its record of what it owns (core/owned.c), so
 * they touch what it held, not every slot of a class of 1,048,576. Measured
 * in pages (page faults, the mapping's resident set), never in time. Then the
 * record's own guarantees: a record torn by a death or overtaken by a reaper
 * falls back to the scan, threads of one process keep it whole, and only a
 * request's owner may take its outcome.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"
#include "shm/proc.h"

#define BIG_QUEUE 1048576u
/* Scanning the slots of a 1,048,576-slot class maps 192 MiB: at least 3,072 page faults even
 * when the kernel maps 16 pages around each fault. What a client owns costs a few dozen. */
#define FAULTS_BOUND 256
/* The resident part of the mapping a recovery may add: a few pages per object it touches,
 * each fault mapping up to 64 KiB around it. A scan adds the whole 192 MiB slot array. */
#define RSS_BOUND_KB 4096

static shms_t *open_class(const char **name, unsigned cells, unsigned queue) {
  shms_config cfg;
  harness_config(&cfg, cells, queue);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  return sched_open(name, 0, 0, &cfg);
}

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Resident kB of the mapping that holds addr (/proc/self/smaps), -1 if not found. */
static long mapping_rss_kb(const void *addr) {
  FILE *f = fopen("/proc/self/smaps", "r");
  ck_assert_ptr_nonnull(f);
  char line[512];
  int inside = 0;
  long rss = -1;
  while (rss < 0 && fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && line[0] != ' ')
      inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
    else if (inside && sscanf(line, "Rss: %ld kB", &rss) != 1)
      rss = -1;
  }
  fclose(f);
  return rss;
}

static void send_all(int fd, const void *p, size_t n) {
  if (write(fd, p, n) != (ssize_t)n)
    _exit(90);
}

/*
 * What a client holds in the tests below: both cells (two leases), then a
 * request granted to it and not yet accepted (one lease released), and three
 * queued behind.
 */
static void hold_a_bit_of_everything(shms_t *h) {
  shms_request r = sched_req("client", 0);
  shms_lease a, b;
  shms_ticket t;
  if (shms_acquire(h, &r, &a) != SHMS_OK || shms_acquire(h, &r, &b) != SHMS_OK)
    _exit(91);
  for (int n = 0; n < 4; n++)
    if (shms_enqueue(h, &r, &t) != SHMS_OK)
      _exit(92);
  if (shms_release(h, &a) != SHMS_OK) /* the first queued request is granted */
    _exit(93);
}

/* After its owner left: nothing queued or granted, no slot used, both cells free. */
static void assert_all_back(shms_t *h) {
  shms_class_stats s = sched_stats(h);
  ck_assert_uint_eq(s.queue_depth, 0);
  ck_assert_uint_eq(s.leased, 0);
  ck_assert_uint_eq(s.available, 2);
  ck_assert_uint_eq(ck_pr_load_32(&h->cls[SHMS_CLASS_STANDARD].ctl->used), 0);
}

START_TEST(detach_touches_what_the_client_owned_not_every_slot) {
  const char *name;
  shms_t *h = open_class(&name, 2, BIG_QUEUE);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    if (shms_attach(name, 0, &c) != SHMS_OK)
      _exit(94);
    hold_a_bit_of_everything(c);
    long before = minor_faults();
    if (shms_detach(c) != SHMS_OK)
      _exit(95);
    long faults = minor_faults() - before;
    send_all(p[1], &faults, sizeof faults);
    _exit(0);
  }
  long faults = -1;
  ck_assert_int_eq(read(p[0], &faults, sizeof faults), (ssize_t)sizeof faults);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_int_eq(status, 0);
  ck_assert_msg(faults >= 0 && faults < FAULTS_BOUND,
                "detach of a client holding 2 leases, a grant and 3 requests on a %u-slot class "
                "took %ld page faults (bound %d)",
                BIG_QUEUE, faults, FAULTS_BOUND);
  assert_all_back(h);
  close(p[0]);
  close(p[1]);
  sched_close(h, name);
}
END_TEST

/* A child that attaches, runs act, sends its owner id (and what act wrote), then waits to die. */
static pid_t doomed(const char *name, void (*act)(shms_t *, int), uint32_t *owner, int *from) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    if (shms_attach(name, 0, &c) != SHMS_OK)
      _exit(96);
    send_all(p[1], &c->owner, sizeof c->owner);
    act(c, p[1]);
    send_all(p[1], "r", 1);
    for (;;)
      pause();
  }
  close(p[1]);
  ck_assert_int_eq(read(p[0], owner, sizeof *owner), (ssize_t)sizeof *owner);
  *from = p[0];
  return pid;
}

static void wait_ready_and_kill(pid_t pid, int from) {
  char b;
  ck_assert_int_eq(read(from, &b, 1), 1);
  ck_assert_int_eq(b, 'r');
  close(from);
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

static void everything(shms_t *c, int to_parent) {
  (void)to_parent;
  hold_a_bit_of_everything(c);
}

START_TEST(recovering_a_dead_client_touches_what_it_owned) {
  const char *name;
  shms_t *h = open_class(&name, 2, BIG_QUEUE);
  uint32_t owner;
  int from;
  pid_t pid = doomed(name, everything, &owner, &from);
  wait_ready_and_kill(pid, from);
  long before = mapping_rss_kb(h->base);
  ck_assert_int_ge(before, 0);
  shms__recover_owner(h, owner, 1, 0); /* what the supervisor runs for a dead process */
  long grown = mapping_rss_kb(h->base) - before;
  ck_assert_msg(grown < RSS_BOUND_KB,
                "recovering a dead client on a %u-slot class mapped %ld kB more (bound %d kB)",
                BIG_QUEUE, grown, RSS_BOUND_KB);
  assert_all_back(h);
  sched_close(h, name);
}
END_TEST

/* A check reads every slot, but lets go of them as it goes (core/audit.c): of the 192 MiB of
 * slots, at most a window of 16 MiB, and the pages around it, stays mapped. */
#define CHECK_RSS_BOUND_KB (48 * 1024)

START_TEST(a_check_lets_go_of_the_slots_it_read) {
  const char *name;
  shms_t *h = open_class(&name, 2, BIG_QUEUE);
  long before = mapping_rss_kb(h->base);
  char report[256];
  uint32_t violations;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_uint_eq(violations, 0);
  long grown = mapping_rss_kb(h->base) - before;
  ck_assert_msg(grown < CHECK_RSS_BOUND_KB,
                "a check of a %u-slot class left %ld kB more mapped (bound %d kB)", BIG_QUEUE,
                grown, CHECK_RSS_BOUND_KB);
  sched_close(h, name);
}
END_TEST

/* Three queued requests, their tickets sent to the parent. */
static void queue_three(shms_t *c, int to_parent) {
  shms_request r = sched_req("client", 0);
  for (int n = 0; n < 3; n++) {
    shms_ticket t;
    if (shms_enqueue(c, &r, &t) != SHMS_OK)
      _exit(97);
    send_all(to_parent, &t, sizeof t);
  }
}

static pid_t doomed_with_three(const char *name, uint32_t *owner, shms_ticket t[3]) {
  int from;
  pid_t pid = doomed(name, queue_three, owner, &from);
  for (int n = 0; n < 3; n++)
    ck_assert_int_eq(read(from, &t[n], sizeof t[n]), (ssize_t)sizeof t[n]);
  wait_ready_and_kill(pid, from);
  return pid;
}

START_TEST(a_record_torn_by_a_death_is_replaced_by_a_scan) {
  const char *name;
  shms_t *h = open_class(&name, 1, 64);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  uint32_t owner;
  shms_ticket t[3];
  doomed_with_three(name, &owner, t);
  struct shms__owned l;
  ck_assert_int_eq(shms__owned_take(h, owner, &l), 1);
  ck_assert_uint_eq(l.n, 3);
  shms__owned_done(h, owner, &l);
  /* As a death in the middle of a change leaves it. */
  ck_pr_store_32(&shms__proc_at(h, SHMS__OWNER_INDEX(owner))->own_dirty, 1);
  ck_assert_int_eq(shms__owned_take(h, owner, &l), 0);
  shms__owned_done(h, owner, &l);
  shms__recover_owner(h, owner, 1, 0);
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  ck_assert_uint_eq(ck_pr_load_32(&h->cls[SHMS_CLASS_STANDARD].ctl->used), 0);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

START_TEST(a_slot_reaped_and_reused_sends_the_recovery_to_a_scan) {
  const char *name;
  shms_t *h = open_class(&name, 1, 64);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  uint32_t owner;
  shms_ticket t[3];
  doomed_with_three(name, &owner, t);
  /* Someone ends the middle request for its dead owner and takes its outcome, as a reaper
   * does; then our own request takes the slot it freed. */
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms__op_enter(h, k);
  ck_assert_int_eq(
      shms__settle_and_kick(h, k, t[1].slot, t[1].seq, 1u << SHMS__SLOT_QUEUED, SHMS_EOWNERLOST),
      1);
  shms__slot_collect(k, t[1].slot, t[1].seq);
  shms__op_leave(h, k);
  shms_ticket mine;
  ck_assert_shms_ok(shms_enqueue(h, &r, &mine));
  ck_assert_uint_eq(mine.slot, t[1].slot);
  struct shms__owned l;
  ck_assert_int_eq(shms__owned_take(h, owner, &l), 0);
  shms__owned_done(h, owner, &l);
  shms__recover_owner(h, owner, 1, 0);
  /* The dead owner's other two are gone; ours still waits. */
  ck_assert_uint_eq(sched_stats(h).queue_depth, 1);
  ck_assert_uint_eq(ck_pr_load_32(&k->ctl->used), 1);
  shms_lease got;
  ck_assert_int_eq(shms_wait(h, &mine, 0, &got), SHMS_ETIMEDOUT);
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &mine, UINT64_MAX, &got));
  ck_assert_shms_ok(shms_release(h, &got));
  sched_close(h, name);
}
END_TEST

/* Threads of one process queue, cancel and collect at once; each leaves one request queued. */
#define THREADS 4
#define ROUNDS  2000

static void *churn(void *arg) {
  shms_t *c = arg;
  shms_request r = sched_req("churn", 0);
  shms_ticket t;
  shms_lease l;
  for (int n = 0; n < ROUNDS; n++)
    if (shms_enqueue(c, &r, &t) != SHMS_OK || shms_cancel(c, &t) != 1 ||
        shms_wait(c, &t, 0, &l) != SHMS_ECANCELLED)
      _exit(98);
  if (shms_enqueue(c, &r, &t) != SHMS_OK)
    _exit(99);
  return NULL;
}

static void threads_churn(shms_t *c, int to_parent) {
  (void)to_parent;
  pthread_t th[THREADS];
  for (int n = 0; n < THREADS; n++)
    if (pthread_create(&th[n], NULL, churn, c) != 0)
      _exit(100);
  for (int n = 0; n < THREADS; n++)
    pthread_join(th[n], NULL);
}

START_TEST(threads_of_one_process_keep_its_record_whole) {
  const char *name;
  shms_t *h = open_class(&name, 1, 64);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  uint32_t owner;
  int from;
  pid_t pid = doomed(name, threads_churn, &owner, &from);
  wait_ready_and_kill(pid, from);
  struct shms__owned l;
  ck_assert_int_eq(shms__owned_take(h, owner, &l), 1);
  ck_assert_uint_eq(l.n, THREADS);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  for (uint32_t n = 0; n < l.n; n++) {
    const struct shms__slot *s = shms__slot_at(k, SHMS__OWNED_INDEX(l.v[n].ref));
    ck_assert_uint_eq(SHMS__SLOT_STATE(ck_pr_load_64(&s->word)), SHMS__SLOT_QUEUED);
  }
  shms__owned_done(h, owner, &l);
  shms__recover_owner(h, owner, 1, 0);
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  ck_assert_uint_eq(ck_pr_load_32(&k->ctl->used), 0);
  ck_assert_shms_ok(shms_release(h, &held));
  sched_close(h, name);
}
END_TEST

START_TEST(only_the_owner_takes_a_requests_outcome) {
  const char *name;
  shms_t *h = open_class(&name, 1, 64);
  shms_lease held;
  shms_request r = sched_req("holder", 0);
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t;
  ck_assert_shms_ok(shms_enqueue(h, &r, &t));
  ck_assert_shms_ok(shms_release(h, &held)); /* granted to t, not yet accepted */
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *other;
    shms_lease l;
    if (shms_attach(name, 0, &other) != SHMS_OK)
      _exit(1);
    int rc = shms_wait(other, &t, 0, &l);
    _exit(rc == SHMS_EINVAL && strstr(shms_last_error_detail(), "another process") ? 0 : 2);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "another process's wait was not refused (status 0x%x)", status);
  shms_lease got;
  ck_assert_shms_ok(shms_wait(h, &t, 0, &got)); /* the grant is still ours */
  ck_assert_shms_ok(shms_release(h, &got));
  sched_close(h, name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("owned");
  TCase *cost = harness_tcase("cost");
  tcase_add_test(cost, detach_touches_what_the_client_owned_not_every_slot);
  tcase_add_test(cost, recovering_a_dead_client_touches_what_it_owned);
  tcase_add_test(cost, a_check_lets_go_of_the_slots_it_read);
  suite_add_tcase(s, cost);
  TCase *record = harness_tcase("record");
  tcase_add_test(record, a_record_torn_by_a_death_is_replaced_by_a_scan);
  tcase_add_test(record, a_slot_reaped_and_reused_sends_the_recovery_to_a_scan);
  tcase_add_test(record, threads_of_one_process_keep_its_record_whole);
  tcase_add_test(record, only_the_owner_takes_a_requests_outcome);
  suite_add_tcase(s, record);
  return harness_run(s);
}

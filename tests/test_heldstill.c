/*
 * A class held still by a process that does not let go: a freezer that is stopped (^Z on a
 * check, a paused container, a debugger), or an operation mark that never clears (a corrupt
 * word). Waiters sleep and keep their deadline meanwhile; a freeze gives up after a bounded
 * wait, says who held it up, and leaves the class as it was: nothing spins, nothing wedges.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/atomic.h"
#include "shm/handle.h"
#include "shm/proc.h"

static void put(int fd) { ck_assert_int_eq(write(fd, "x", 1), 1); }
static void get(int fd) {
  char b;
  ck_assert_int_eq(read(fd, &b, 1), 1);
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Every invariant of h's segment holds. */
static void assert_clean(shms_t *h) {
  char report[4096];
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
}

/* Continue a stopped freezer: it lets the class go, detaches and exits 0. */
static void continue_freezer(pid_t freezer) {
  int st;
  kill(freezer, SIGCONT);
  ck_assert_int_eq(waitpid(freezer, &st, 0), freezer);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The process entry of pid in h's table. */
static struct shms__proc *entry_of(shms_t *h, pid_t pid) {
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    struct shms__proc *p = shms__proc_at(h, i);
    if (shms__load_32(&p->state) == SHMS__PROC_LIVE &&
        shms__load_32((uint32_t *)&p->pid) == (uint32_t)pid)
      return p;
  }
  ck_abort_msg("no live entry for pid %d", (int)pid);
  return NULL;
}

/* A child attached and alive, doing nothing, until killed. */
static pid_t idle_child(const char *name) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    if (shms_attach(name, 0, &c) != SHMS_OK || write(p[1], "r", 1) != 1)
      _exit(1);
    for (;;)
      pause();
  }
  get(p[0]);
  close(p[0]);
  close(p[1]);
  return pid;
}

START_TEST(a_corrupt_operation_mark_fails_the_freeze_and_wedges_nothing) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  pid_t pid = idle_child(name);
  struct shms__proc *p = entry_of(h, pid);
  shms__store_32(&p->marks[3], 1u << SHMS_CLASS_STANDARD); /* "inside an operation", for good */

  char report[4096], want[64];
  snprintf(want, sizeof want, "its operation mark marks[3] is %#x", 1u << SHMS_CLASS_STANDARD);
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_uint_eq(violations, 1);
  ck_assert_msg(strstr(report, "class standard: not checked: process ") != NULL &&
                    strstr(report, want) != NULL,
                "%s", report);
  /* Left as it was: not frozen, nobody recorded as its freezer. */
  ck_assert_uint_eq(shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN, 0);
  ck_assert_uint_eq(shms__load_32(&k->ctl->freezer), 0);

  shms_recovery r;
  ck_assert_shms_err(shms_recover(h, &r), SHMS_EVIOLATION, want);
  ck_assert_uint_eq(shms__load_64(&k->ctl->fast) & SHMS__FAST_FROZEN, 0);

  /* Everyone else goes on. */
  shms_request req = sched_req("t", 0);
  req.deadline_ns = mono_ns() + 5000000000ull;
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &req, &l));
  ck_assert_shms_ok(shms_release(h, &l));

  shms__store_32(&p->marks[3], 0);
  assert_clean(h);
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
  sched_close(h, name);
}
END_TEST

/* A child that freezes the class, says so, stops itself; continued, lets the class go. */
static pid_t stopped_freezer(const char *name) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    if (shms_attach(name, 0, &c) != SHMS_OK)
      _exit(1);
    const struct shms__cls *k = &c->cls[SHMS_CLASS_STANDARD];
    if (shms__freeze(c, k) != SHMS_OK || write(p[1], "f", 1) != 1)
      _exit(2);
    raise(SIGSTOP);
    shms__thaw(c, k, shms__load_64(&k->ctl->fast));
    _exit(shms_detach(c) == SHMS_OK ? 0 : 3);
  }
  get(p[0]);
  close(p[0]);
  close(p[1]);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
  ck_assert(WIFSTOPPED(st));
  return pid;
}

/*
 * A waiter with a deadline of 300 ms that cannot be granted: exits 0 if its acquire ended with
 * deadline-exceeded. Its CPU time is read by the parent from wait4.
 */
static pid_t deadline_waiter(const char *name, int ready_fd, int go_fd) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    char b;
    if (shms_attach(name, 0, &c) != SHMS_OK)
      _exit(1);
    if (go_fd >= 0 && (write(ready_fd, "r", 1) != 1 || read(go_fd, &b, 1) != 1))
      _exit(2);
    shms_request req = sched_req("waiter", 0);
    uint64_t start = mono_ns(), cpu = cpu_ns();
    req.deadline_ns = start + 300000000ull;
    shms_lease l;
    int rc = shms_acquire(c, &req, &l);
    /* A spinner is on a CPU the whole wait; a sleeper wakes every few milliseconds. */
    if (rc == SHMS_EDEADLINE && (cpu_ns() - cpu) * 4 >= mono_ns() - start)
      _exit(20);
    _exit(rc == SHMS_EDEADLINE ? 0 : 30 + (rc < 0 ? -rc : rc) % 100);
  }
  return pid;
}

/* Reap waiter pid: it ended with deadline-exceeded, having slept rather than spun (exit 20:
 * it spent a quarter or more of its wait on a CPU). */
static void reap_waiter(pid_t pid) {
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "waiter %d: status %#x", (int)pid, st);
}

START_TEST(a_stopped_freezer_costs_waiters_no_cpu_and_deadlines_hold) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_request mine = sched_req("holder", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &mine, &held)); /* nobody else can be granted */

  /* One waiter queued before the freeze, three arriving while the class is held still. */
  int ready[2], go[2];
  ck_assert_int_eq(pipe(ready), 0);
  ck_assert_int_eq(pipe(go), 0);
  pid_t queued = deadline_waiter(name, -1, -1);
  while (sched_stats(h).queue_depth == 0)
    sched_yield(); /* until its request is queued */
  pid_t freezer = stopped_freezer(name);
  pid_t late[3];
  for (int i = 0; i < 3; i++)
    late[i] = deadline_waiter(name, ready[1], go[0]);
  for (int i = 0; i < 3; i++)
    get(ready[0]);
  for (int i = 0; i < 3; i++)
    put(go[1]);

  reap_waiter(queued);
  for (int i = 0; i < 3; i++)
    reap_waiter(late[i]);
  /* All of them ended while the freezer was still stopped. */
  int st;
  ck_assert_int_eq(waitpid(freezer, &st, WNOHANG), 0);

  continue_freezer(freezer);
  ck_assert_shms_ok(shms_release(h, &held));
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r)); /* the queued waiter exited with its request queued */
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  assert_clean(h);
  sched_close(h, name);
}
END_TEST

START_TEST(a_freeze_behind_a_stopped_freezer_gives_up_and_says_who) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  pid_t freezer = stopped_freezer(name);
  char report[4096];
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_uint_eq(violations, 1);
  char want[128];
  snprintf(want, sizeof want, "is held still by process %d (entry ", (int)freezer);
  ck_assert_msg(strstr(report, want) != NULL && strstr(report, "stopped) for over 1 s") != NULL,
                "%s", report);
  continue_freezer(freezer);
  assert_clean(h);
  sched_close(h, name);
}
END_TEST

/* As a user meets it: `run --deadline` ends at its deadline, exit 75, and leaves (its detach
 * does not wait on the class held still), all while the freezer is stopped. */
START_TEST(run_keeps_its_deadline_and_leaves_while_a_freezer_is_stopped) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_request mine = sched_req("holder", 0);
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &mine, &held));
  pid_t freezer = stopped_freezer(name);
  static char out[4096], err[4096];
  int rc = harness_cli(out, sizeof out, err, sizeof err,
                       (const char *const[]){"run", name, "--class", "standard", "--tenant", "late",
                                             "--deadline", "300ms", "--", "true", NULL});
  ck_assert_msg(rc == 75 && strstr(err, "deadline") != NULL, "exit %d: %s", rc, err);
  int st;
  ck_assert_int_eq(waitpid(freezer, &st, WNOHANG), 0); /* still stopped */
  continue_freezer(freezer);
  ck_assert_shms_ok(shms_release(h, &held));
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r)); /* what the run left to recovery, if anything */
  assert_clean(h);
  ck_assert_uint_eq(sched_stats(h).queue_depth, 0);
  sched_close(h, name);
}
END_TEST

/*
 * A holder (on a class that quarantines a departed holder's lease) that takes the one cell, says
 * so, and on the word from go_fd releases it; exits 0 if the release succeeded (then detaches,
 * exit 0, unless stay: then it waits to be killed).
 */
static pid_t releasing_holder(const char *name, int ready_fd, int go_fd, int stay) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    shms_lease l;
    shms_request req = sched_req("holder", 0);
    char b;
    if (shms_attach(name, 0, &c) != SHMS_OK || shms_acquire(c, &req, &l) != SHMS_OK ||
        write(ready_fd, "h", 1) != 1 || read(go_fd, &b, 1) != 1)
      _exit(1);
    if (shms_release(c, &l) != SHMS_OK)
      _exit(2);
    if (stay) {
      if (write(ready_fd, "r", 1) != 1)
        _exit(3);
      for (;;)
        pause();
    }
    _exit(shms_detach(c) == SHMS_OK ? 0 : 4);
  }
  return pid;
}

static shms_t *quarantining_class(const char **name) {
  shms_config cfg;
  harness_config(&cfg, 1, 8);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_QUARANTINE;
  return sched_open(name, 1, 8, &cfg);
}

/* The class's one cell is leased, still, and by its holder: nothing moved while held still. */
static void assert_leased(shms_t *h) {
  shms_class_stats st = sched_stats(h);
  ck_assert_uint_eq(st.leased, 1);
  ck_assert_uint_eq(st.available + st.quarantined, 0);
}

/* The cell came back, released: free to take, nothing quarantined. */
static void assert_released(shms_t *h) {
  shms_class_stats st = sched_stats(h);
  ck_assert_uint_eq(st.quarantined, 0);
  ck_assert_uint_eq(st.available, 1);
  shms_request req = sched_req("next", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_try_acquire(h, &req, &l));
  ck_assert_shms_ok(shms_release(h, &l));
}

/* A holder whose command ended releases and exits while the class is held still: its release is
 * recorded and completed by the freezer as it lets go, not quarantined with its departure. */
START_TEST(a_holder_releases_and_exits_while_a_freezer_is_stopped) {
  const char *name;
  shms_t *h = quarantining_class(&name);
  int ready[2], go[2];
  ck_assert_int_eq(pipe(ready), 0);
  ck_assert_int_eq(pipe(go), 0);
  pid_t holder = releasing_holder(name, ready[1], go[0], 0);
  get(ready[0]);
  pid_t freezer = stopped_freezer(name);
  put(go[1]);
  int st;
  ck_assert_int_eq(waitpid(holder, &st, 0), holder);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "holder: status %#x", st);
  ck_assert_int_eq(waitpid(freezer, &st, WNOHANG), 0); /* all while it is stopped */
  assert_leased(h);

  continue_freezer(freezer);
  assert_released(h);
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r)); /* the holder's entry, left to recovery */
  ck_assert_uint_eq(r.leases_quarantined, 0);
  assert_clean(h);
  sched_close(h, name);
}
END_TEST

/* The same holder killed after its release returned, and the freezer killed too: the recovery
 * that finishes the dead freezer's freeze releases the lease as its holder asked. */
START_TEST(a_release_recorded_before_death_is_done_by_recovery) {
  const char *name;
  shms_t *h = quarantining_class(&name);
  int ready[2], go[2];
  ck_assert_int_eq(pipe(ready), 0);
  ck_assert_int_eq(pipe(go), 0);
  pid_t holder = releasing_holder(name, ready[1], go[0], 1);
  get(ready[0]);
  pid_t freezer = stopped_freezer(name);
  put(go[1]);
  get(ready[0]); /* its release returned */
  assert_leased(h);
  kill(holder, SIGKILL);
  kill(freezer, SIGKILL);
  ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
  ck_assert_int_eq(waitpid(freezer, NULL, 0), freezer);

  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r));
  ck_assert_uint_eq(r.dead_processes, 2);
  ck_assert_uint_eq(r.leases_released, 1);
  ck_assert_uint_eq(r.leases_quarantined, 0);
  assert_released(h);
  assert_clean(h);
  sched_close(h, name);
}
END_TEST

/* `check` on a class with a corrupt operation mark: one line naming the word, exit 1. */
START_TEST(check_names_a_corrupt_operation_mark_and_returns) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  pid_t pid = idle_child(name);
  shms__store_32(&entry_of(h, pid)->ops[SHMS_CLASS_STANDARD], 1);
  static char out[4096], err[4096];
  int rc =
      harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){"check", name, NULL});
  ck_assert_msg(rc == 1 && strstr(err, "invariant-violated") != NULL, "exit %d: %s", rc, err);
  char want[96];
  snprintf(want, sizeof want, "its count of operations under way, ops[%d], is 1",
           SHMS_CLASS_STANDARD);
  ck_assert_msg(strstr(out, want) != NULL, "%s", out);
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("heldstill");
  TCase *tc = tcase_create("heldstill");
  tcase_set_timeout(tc, SHMS_TEST_TIMEOUT);
  tcase_add_test(tc, a_corrupt_operation_mark_fails_the_freeze_and_wedges_nothing);
  tcase_add_test(tc, a_stopped_freezer_costs_waiters_no_cpu_and_deadlines_hold);
  tcase_add_test(tc, a_freeze_behind_a_stopped_freezer_gives_up_and_says_who);
  tcase_add_test(tc, run_keeps_its_deadline_and_leaves_while_a_freezer_is_stopped);
  tcase_add_test(tc, check_names_a_corrupt_operation_mark_and_returns);
  tcase_add_test(tc, a_holder_releases_and_exits_while_a_freezer_is_stopped);
  tcase_add_test(tc, a_release_recorded_before_death_is_done_by_recovery);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

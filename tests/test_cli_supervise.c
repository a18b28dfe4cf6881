/*
 * shmsched supervise and shmsched check, end to end: the supervisor sees a
 * process die and recovers its lease, refuses to run twice, survives being
 * killed and restarted, stops cleanly on SIGTERM; check reports a violation
 * and --repair fixes it. Ordered by reading the supervisor's log lines.
 */
#include <ck_pr.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "harness.h"
#include "shm/handle.h"

struct sup {
  pid_t pid;
  FILE *log;
};

static struct sup start_supervisor(const char *name) {
  int err[2];
  ck_assert_int_eq(pipe(err), 0);
  struct sup s = {.pid = fork()};
  ck_assert_int_ge(s.pid, 0);
  if (s.pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    execl(SHMS_BIN_DIR "/shmsched", "shmsched", "supervise", name, "--interval", "100ms",
          (char *)NULL);
    _exit(127);
  }
  close(err[1]);
  s.log = fdopen(err[0], "r");
  return s;
}

/* Read log lines until one contains needle; returns that line (static). */
static const char *await_line(struct sup *s, const char *needle) {
  static char line[1024];
  while (fgets(line, sizeof line, s->log) != NULL)
    if (strstr(line, needle) != NULL)
      return line;
  ck_abort_msg("the supervisor's log ended before '%s'", needle);
  return NULL;
}

static int stop(struct sup *s, int sig) {
  kill(s->pid, sig);
  int status;
  ck_assert_int_eq(waitpid(s->pid, &status, 0), s->pid);
  return status;
}

static pid_t holder(const char *name, int *ready_fd) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *h;
    shms_request r = {.cls = SHMS_CLASS_STANDARD, .tenant = "t"};
    shms_lease l;
    if (shms_attach(name, 0, &h) != SHMS_OK || shms_acquire(h, &r, &l) != SHMS_OK)
      _exit(1);
    if (write(p[1], "r", 1) != 1)
      _exit(2);
    for (;;)
      pause();
  }
  close(p[1]);
  *ready_fd = p[0];
  return pid;
}

START_TEST(the_supervisor_recovers_a_dead_processes_lease) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  const char *name = harness_name("sup");
  harness_create(name, &cfg);
  struct sup s = start_supervisor(name);
  await_line(&s, "supervising segment");
  int ready;
  pid_t victim = holder(name, &ready);
  char b;
  ck_assert_int_eq(read(ready, &b, 1), 1);
  char watching[64];
  snprintf(watching, sizeof watching, "watching process %d", (int)victim);
  await_line(&s, watching);
  kill(victim, SIGKILL);
  ck_assert_int_eq(waitpid(victim, NULL, 0), victim);
  const char *line = await_line(&s, "recovered:");
  ck_assert_ptr_nonnull(strstr(line, "1 leases released"));
  shms_t *h;
  shms_class_stats st;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_STANDARD, &st));
  ck_assert_uint_eq(st.available, 1);
  shms_detach(h);

  /* A second supervisor is refused; the first, killed outright, can simply be started again. */
  char out[256], err[512];
  const char *again[] = {"supervise", name, NULL};
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, again), 1);
  ck_assert_ptr_nonnull(strstr(err, "shmsched: busy: another supervisor"));
  int status = stop(&s, SIGKILL);
  ck_assert(WIFSIGNALED(status));
  fclose(s.log);
  s = start_supervisor(name);
  await_line(&s, "supervising segment");
  status = stop(&s, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  await_line(&s, "stopping (SIGTERM)");
  fclose(s.log);
  harness_remove(name);
}
END_TEST

START_TEST(check_reports_violations_and_repair_fixes_them) {
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  const char *name = harness_name("check");
  harness_create(name, &cfg);
  char out[4096], err[512];
  const char *check[] = {"check", name, NULL}, *repair[] = {"check", name, "--repair", NULL};
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, check), 0);
  ck_assert_ptr_nonnull(strstr(out, "ok: every invariant holds"));
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_pr_and_64(&h->cls[SHMS_CLASS_STANDARD].ctl->fast, ~1ull); /* cell 0 missing from the map */
  shms_detach(h);
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, check), 1);
  ck_assert_ptr_nonnull(
      strstr(out, "class standard: free-cell map 0x2, but the available cells are 0x3"));
  ck_assert_ptr_nonnull(strstr(err, "shmsched: invariant-violated: check: 1 violation"));
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, repair), 0);
  ck_assert_ptr_nonnull(strstr(out, "counts_fixed=1"));
  ck_assert_ptr_nonnull(strstr(out, "ok: every invariant holds"));
  harness_remove(name);
}
END_TEST

/*
 * A corrupt state word is beyond recovery: check says which violations
 * --repair cannot fix and what to do instead, and never suggests --repair for
 * those alone.
 */
START_TEST(check_names_what_repair_cannot_fix) {
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  const char *name = harness_name("corrupt");
  harness_create(name, &cfg);
  char out[4096], err[1024];
  const char *check[] = {"check", name, NULL}, *repair[] = {"check", name, "--repair", NULL};
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  /* Cell 1 gets a state that is no cell state; the free-cell map still counts it free. */
  ck_pr_store_64(&h->cls[SHMS_CLASS_STANDARD].cells[1].word, SHMS__CELL_WORD(1, 0, 9));
  shms_detach(h);
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, check), 1);
  ck_assert_ptr_nonnull(strstr(out, "class standard: cell 1: state 9 is not a cell state"));
  ck_assert_ptr_nonnull(strstr(out, "(cannot be repaired"));
  ck_assert_ptr_nonnull(strstr(out, "free-cell map 0x3, but the available cells are 0x1"));
  ck_assert_msg(strstr(err, "2 violations") && strstr(err, "--repair fixes 1 of them") &&
                    strstr(err, "cannot repair 1") && strstr(err, "shmsched drain ") &&
                    strstr(err, "destroy"),
                "%s", err);
  /* --repair fixes the map, then says what it could not fix, and what to do. */
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, repair), 1);
  ck_assert_ptr_nonnull(strstr(out, "counts_fixed=1"));
  ck_assert_ptr_null(strstr(out, "free-cell map"));
  ck_assert_ptr_nonnull(strstr(out, "cell 1: state 9 is not a cell state"));
  ck_assert_msg(strstr(err, "1 violation") && strstr(err, "cannot repair") &&
                    strstr(err, "shmsched drain ") && strstr(err, "check --repair") == NULL,
                "%s", err);
  /* Checked again, it no longer suggests --repair at all. */
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, check), 1);
  ck_assert_msg(strstr(err, "--repair") == NULL && strstr(err, "cannot repair"), "%s", err);
  harness_remove(name);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  Suite *s = suite_create("cli_supervise");
  TCase *tc = harness_tcase("supervise");
  tcase_add_test(tc, the_supervisor_recovers_a_dead_processes_lease);
  tcase_add_test(tc, check_reports_violations_and_repair_fixes_them);
  tcase_add_test(tc, check_names_what_repair_cannot_fix);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

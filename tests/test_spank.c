/*
 * The Slurm plugin's logic without Slurm: its plugstack.conf arguments, the account its prolog
 * keeps for the steps, and a step's leases driven as slurmstepd drives them, with plain
 * processes as the tasks. (tests/slurm_e2e.sh runs the plugin in a real slurmd.)
 *
 * A task here is a forked child that calls spank_step_task_wait as the plugin's task_init does,
 * reports what it got on a pipe, then waits for the test's word to exit. The test process is a
 * child subreaper, so the processes a task leaves behind become its children.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "spank_account.h"
#include "spank_conf.h"
#include "spank_step.h"

/* ---- plugstack.conf arguments ---- */

static int parse(struct spank_conf *c, char *err, size_t n, int ac, const char **av) {
  return spank_conf_parse(c, ac, (char **)av, err, n);
}

START_TEST(conf_defaults_and_every_key) {
  struct spank_conf c;
  char err[256] = "";
  const char *min[] = {"segment=jobs"};
  ck_assert_int_eq(parse(&c, err, sizeof err, 1, min), 0);
  ck_assert_str_eq(c.segment, "jobs");
  ck_assert_int_eq(c.cls, -1); /* no class: jobs that name none take no lease */
  ck_assert_int_eq(c.tenant_user, 0);
  ck_assert_uint_eq(c.cells, 1);
  ck_assert_uint_eq(c.steps, SPANK_STEP_NORMAL);
  ck_assert_str_eq(c.state, SPANK_STATE_DEFAULT);
  ck_assert(spank_conf_takes_step(&c, 0));
  ck_assert(spank_conf_takes_step(&c, SPANK_ID_INTERACTIVE));
  ck_assert(!spank_conf_takes_step(&c, SPANK_ID_BATCH));
  ck_assert(!spank_conf_takes_step(&c, SPANK_ID_EXTERN));

  const char *all[] = {"segment=gpus",
                       "class=large",
                       "tenant=user",
                       "cells=2",
                       "steps=batch,normal,extern",
                       "cell-env=CUDA_VISIBLE_DEVICES=0,1,2,3",
                       "kill-after=2s",
                       "state=/run/x"};
  ck_assert_int_eq(parse(&c, err, sizeof err, 8, all), 0);
  ck_assert_int_eq(c.cls, SHMS_CLASS_LARGE);
  ck_assert_int_eq(c.tenant_user, 1);
  ck_assert_uint_eq(c.cells, 2);
  ck_assert(spank_conf_takes_step(&c, SPANK_ID_BATCH) &&
            spank_conf_takes_step(&c, SPANK_ID_EXTERN));
  ck_assert_uint_eq(c.cell_env.n, 1);
  ck_assert(c.kill_after_ns == 2000000000ull);
  ck_assert_str_eq(c.state, "/run/x");

  /* The job's options over plugstack.conf's. */
  ck_assert_int_eq(spank_conf_class(&c, "small", err, sizeof err), 0);
  ck_assert_int_eq(c.cls, SHMS_CLASS_SMALL);
  ck_assert_int_eq(spank_conf_cells(&c, "3", err, sizeof err), 0);
  ck_assert_uint_eq(c.cells, 3);
}
END_TEST

/* Each bad argument: refused, with a line naming it and what is wrong. */
START_TEST(conf_bad_arguments) {
  static const struct {
    const char *arg, *needle;
  } bad[] = {
      {"class=huge", "class: 'huge': not a class"},
      {"cells=0", "cells: '0': must be at least 1"},
      {"cells=x", "cells: 'x': "},
      {"tenant=group", "tenant is 'account'"},
      {"steps=normal,all", "steps are a comma list"},
      {"steps=", "steps are a comma list"},
      {"cell-env=1X=a", "cell-env: '1X=a': expected VAR=LIST"},
      {"kill-after=5", "kill-after: "},
      {"state=relative", "absolute directory"},
      {"colour=blue", "unknown argument"},
      {"segment", "expected KEY=VALUE"},
      {"segment=a b", "segment: "},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct spank_conf c;
    char err[256] = "";
    const char *av[] = {"segment=jobs", bad[i].arg};
    ck_assert_int_eq(parse(&c, err, sizeof err, 2, av), -1);
    ck_assert_msg(strstr(err, bad[i].needle) != NULL, "%s: '%s' lacks '%s'", bad[i].arg, err,
                  bad[i].needle);
  }
  struct spank_conf c;
  char err[256] = "";
  const char *none[] = {"class=small"};
  ck_assert_int_eq(parse(&c, err, sizeof err, 1, none), -1);
  ck_assert_str_eq(err, "segment=NAME is required");
}
END_TEST

/* ---- the account from the prolog to the steps ---- */

START_TEST(account_kept_for_the_steps) {
  char dir[] = "/tmp/shmst-spank-XXXXXX", state[64], got[64], err[512];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(state, sizeof state, "%s/state", dir);
  ck_assert_int_eq(spank_account_save(state, 42, "acme", err, sizeof err), 0);
  struct stat st;
  ck_assert_int_eq(stat(state, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0700); /* made for root alone */
  ck_assert_int_eq(spank_account_load(state, 42, got, sizeof got, err, sizeof err), 0);
  ck_assert_str_eq(got, "acme");

  /* No account: the step is told to give one, not that the prolog did not run. */
  ck_assert_int_eq(spank_account_save(state, 43, "", err, sizeof err), 0);
  ck_assert_int_eq(spank_account_load(state, 43, got, sizeof got, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "job 43 has no Slurm account") != NULL, "%s", err);
  ck_assert_int_eq(spank_account_load(state, 44, got, sizeof got, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "job prolog did not run") != NULL, "%s", err);

  /* Not a tenant name. */
  ck_assert_int_eq(
      spank_account_save(state, 45, "a very long account name beyond 31", err, sizeof err), 0);
  ck_assert_int_eq(spank_account_load(state, 45, got, sizeof got, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "longer than 31 bytes") != NULL, "%s", err);

  /* A directory others may write is not trusted: anyone could plant an account. */
  ck_assert_int_eq(chmod(state, 0777), 0);
  ck_assert_int_eq(spank_account_load(state, 42, got, sizeof got, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "writable by root alone") != NULL, "%s", err);
  ck_assert_int_eq(chmod(state, 0700), 0);

  spank_account_forget(state, 42);
  ck_assert_int_eq(spank_account_load(state, 42, got, sizeof got, err, sizeof err), -1);
  for (int j = 43; j <= 45; j++)
    spank_account_forget(state, (uint32_t)j);
  ck_assert_int_eq(rmdir(state), 0);
  ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- a step's leases ---- */

struct task {
  pid_t pid;
  int report;   /* the task writes what it got here: 'Y' and its environment, or 'N' and why */
  int go;       /* the test writes here for the task to exit (a byte: its exit code) */
  int go_extra; /* and here for the process it left to exit */
  pid_t extra;  /* a process the task left in its group, reported after the grant */
};

enum task_kind { PLAIN, LEAVES_ONE, LEAVES_STUBBORN };

/* In the task: as the plugin's task_init; then report, and exit when told. */
__attribute__((noreturn)) static void task_main(struct spank_step *s, uint32_t i, int report,
                                                int go, int go_extra, enum task_kind kind) {
  char err[512], buf[2048];
  /* The runner's handler would end the whole test; SIGTERM was blocked across the fork. */
  signal(SIGTERM, SIG_DFL);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &term, NULL);
  char **env = spank_step_task_wait(s, i, err, sizeof err);
  if (env == NULL) {
    snprintf(buf, sizeof buf, "N%s", err);
    (void)!write(report, buf, strlen(buf) + 1);
    _exit(1);
  }
  size_t o = 0;
  buf[o++] = 'Y';
  for (char **e = env; *e != NULL; e++)
    o += (size_t)snprintf(buf + o, sizeof buf - o, "%s;", *e);
  buf[o++] = '\0';
  if (kind != PLAIN) { /* a process of its group that outlives it */
    /* Ignoring SIGTERM from its first instruction on: set before the fork, not after. */
    if (kind == LEAVES_STUBBORN)
      signal(SIGTERM, SIG_IGN);
    pid_t extra = fork();
    if (extra != 0)
      signal(SIGTERM, SIG_DFL);
    if (extra == 0) {
      char b;
      (void)!read(go_extra, &b, 1);
      _exit(0);
    }
    o += (size_t)snprintf(buf + o, sizeof buf - o, "%d", (int)extra) + 1;
  }
  (void)!write(report, buf, o);
  char code = 0;
  (void)!read(go, &code, 1);
  _exit(code);
}

static void start_task(struct spank_step *s, uint32_t i, struct task *t, enum task_kind kind) {
  int r[2], g[2], x[2];
  ck_assert_int_eq(pipe(r), 0);
  ck_assert_int_eq(pipe(g), 0);
  ck_assert_int_eq(pipe(x), 0);
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &old);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(r[0]);
    close(g[1]);
    close(x[1]);
    task_main(s, i, r[1], g[0], x[0], kind);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(r[1]);
  close(g[0]);
  close(x[0]);
  t->pid = pid;
  t->report = r[0];
  t->go = g[1];
  t->go_extra = x[1];
  t->extra = 0;
  char err[256];
  ck_assert_int_eq(spank_step_task_forked(s, i, pid, err, sizeof err), 0);
}

/* What the task reported: blocks until it has (its grant, or why none). */
static void task_report(struct task *t, char *buf, size_t n) {
  ssize_t len = read(t->report, buf, n - 1);
  ck_assert_int_gt(len, 0);
  buf[len] = '\0';
  size_t first = strlen(buf) + 1;
  if ((size_t)len > first)
    t->extra = (pid_t)strtol(buf + first, NULL, 10);
}

/* Tell the task to exit with code, reap it, and tell the step as task_exit does. */
static void task_end(struct spank_step *s, uint32_t i, struct task *t, char code) {
  ck_assert_int_eq(write(t->go, &code, 1), 1);
  int st;
  ck_assert_int_eq(waitpid(t->pid, &st, 0), t->pid);
  spank_step_task_exited(s, i, st);
}

static void conf_for(struct spank_conf *c, const char *name, uint32_t cells) {
  const char *av[] = {"segment=x", "class=standard"};
  char err[256];
  ck_assert_int_eq(spank_conf_parse(c, 2, (char **)av, err, sizeof err), 0);
  snprintf(c->segment, sizeof c->segment, "%s", name);
  c->cells = cells;
}

static shms_class_stats stats(const char *name) {
  shms_t *h;
  shms_class_stats st;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_STANDARD, &st));
  shms_detach(h);
  return st;
}

static void assert_clean(const char *name) {
  shms_t *h;
  char report[4096];
  uint32_t v = 99;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &v));
  ck_assert_msg(v == 0, "check: %s", report);
  shms_detach(h);
}

static const char *setup_segment(unsigned cells, const char *allow) {
  const char *name = harness_name("spank");
  shms_config cfg;
  harness_config(&cfg, cells, 8);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_QUARANTINE;
  if (allow != NULL) {
    snprintf(cfg.classes[SHMS_CLASS_STANDARD].allow[0], SHMS_TENANT_MAX + 1, "%s", allow);
    cfg.classes[SHMS_CLASS_STANDARD].allow_count = 1;
  }
  harness_create(name, &cfg);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  return name;
}

/* Two tasks, one cell: the first runs, the second waits until the first and its group are gone,
 * and each task's program gets the environment `shmsched run` gives. */
START_TEST(tasks_take_turns_on_one_cell) {
  const char *name = setup_segment(1, NULL);
  struct spank_conf c;
  conf_for(&c, name, 1);
  char err[512], buf[2048];
  ck_assert_int_eq(run_cell_env_add(&c.cell_env, "GPU=7", err, sizeof err), 0);
  struct spank_step *s = spank_step_open(&c, "acme", 2, err, sizeof err);
  ck_assert_msg(s != NULL, "%s", err);
  ck_assert_uint_eq(stats(name).queue_depth, 1); /* the first took the cell at once */
  struct task t[2];
  start_task(s, 0, &t[0], PLAIN);
  start_task(s, 1, &t[1], PLAIN);
  task_report(&t[0], buf, sizeof buf);
  ck_assert_msg(strstr(buf, "Y") == buf, "%s", buf);
  char want[256];
  snprintf(want, sizeof want,
           "SHMSCHED_SEGMENT=%s;SHMSCHED_CLASS=standard;SHMSCHED_CELL=0;"
           "SHMSCHED_TENANT=acme;GPU=7;",
           name);
  ck_assert_str_eq(buf + 1, want);
  /* The second is still waiting: the cell is the first's. */
  ck_assert_uint_eq(stats(name).queue_depth, 1);
  task_end(s, 0, &t[0], 3);
  task_report(&t[1], buf, sizeof buf);
  ck_assert_msg(strstr(buf, ";SHMSCHED_TICKET=standard.") != NULL, "%s", buf);
  task_end(s, 1, &t[1], 0);
  spank_step_close(s);
  shms_class_stats st = stats(name);
  ck_assert_uint_eq(st.available, 1);
  ck_assert_uint_eq(st.granted, 2);
  assert_clean(name);
  harness_remove(name);
}
END_TEST

/* A task killed while it waits (scancel, a time limit): its request is cancelled, nothing held. */
START_TEST(task_killed_while_waiting_cancels) {
  const char *name = setup_segment(1, NULL);
  struct spank_conf c;
  conf_for(&c, name, 1);
  char err[512], buf[2048];
  struct spank_step *s = spank_step_open(&c, "acme", 2, err, sizeof err);
  ck_assert_msg(s != NULL, "%s", err);
  struct task t[2];
  start_task(s, 0, &t[0], PLAIN);
  start_task(s, 1, &t[1], PLAIN);
  task_report(&t[0], buf, sizeof buf);
  ck_assert_int_eq(kill(t[1].pid, SIGTERM), 0);
  int st;
  ck_assert_int_eq(waitpid(t[1].pid, &st, 0), t[1].pid);
  ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  spank_step_task_exited(s, 1, st);
  task_end(s, 0, &t[0], 0);
  spank_step_close(s);
  shms_class_stats cs = stats(name);
  ck_assert_uint_eq(cs.cancelled, 1);
  ck_assert_uint_eq(cs.granted, 1);
  ck_assert_uint_eq(cs.available, 1);
  ck_assert_uint_eq(cs.queue_depth, 0);
  assert_clean(name);
  harness_remove(name);
}
END_TEST

static void *close_step(void *s) {
  spank_step_close(s);
  return NULL;
}

/* What a task leaves in its group holds its lease until it is gone; at the step's end what is
 * left is ended, SIGKILL after kill-after for what ignores SIGTERM. */
START_TEST(lease_covers_what_the_task_left) {
  const char *name = setup_segment(1, NULL);
  struct spank_conf c;
  conf_for(&c, name, 1);
  c.kill_after_ns = 100000000ull;
  char err[512], buf[2048];
  struct spank_step *s = spank_step_open(&c, "acme", 1, err, sizeof err);
  ck_assert_msg(s != NULL, "%s", err);
  struct task t;
  start_task(s, 0, &t, LEAVES_ONE);
  task_report(&t, buf, sizeof buf);
  ck_assert_int_gt(t.extra, 0);
  ck_assert_int_eq(getpgid(t.extra), t.pid);      /* the task led a group of its own */
  task_end(s, 0, &t, 0);                          /* its byte: the task exits, its child lives on */
  ck_assert_uint_eq(stats(name).leased, 1);       /* still the task's: its group is not empty */
  ck_assert_int_eq(write(t.go_extra, "x", 1), 1); /* now the child ends too */
  ck_assert_int_eq(waitpid(t.extra, NULL, 0), t.extra);
  spank_step_close(s);
  ck_assert_uint_eq(stats(name).available, 1);

  /* At the step's end: SIGTERM ignored, SIGKILL after kill-after. */
  s = spank_step_open(&c, "acme", 1, err, sizeof err);
  ck_assert_msg(s != NULL, "%s", err);
  start_task(s, 0, &t, LEAVES_STUBBORN);
  task_report(&t, buf, sizeof buf);
  task_end(s, 0, &t, 0);
  ck_assert_uint_eq(stats(name).leased, 1);
  /* close waits for the group to be empty; this thread, the subreaper, reaps the child. */
  pthread_t closer;
  ck_assert_int_eq(pthread_create(&closer, NULL, close_step, s), 0);
  int st;
  ck_assert_int_eq(waitpid(t.extra, &st, 0), t.extra);
  ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  ck_assert_int_eq(pthread_join(closer, NULL), 0);
  ck_assert_uint_eq(stats(name).available, 1);
  assert_clean(name);
  harness_remove(name);
}
END_TEST

/* Refused before anything is taken: the class's allow list, more cells than the class has, a
 * --cell-env list shorter than the class. */
START_TEST(refusals_take_nothing) {
  const char *name = setup_segment(2, "ci");
  struct spank_conf c;
  conf_for(&c, name, 1);
  char err[512];
  ck_assert_ptr_null(spank_step_open(&c, "acme", 2, err, sizeof err));
  ck_assert_msg(strstr(err, "no lease: ") == err, "%s", err);
  ck_assert_msg(strstr(err, "acme") != NULL, "%s", err);
  c.cells = 3;
  ck_assert_ptr_null(spank_step_open(&c, "ci", 1, err, sizeof err));
  ck_assert_str_eq(err, "3 cells asked of class standard, which has 2");
  c.cells = 1;
  ck_assert_int_eq(run_cell_env_add(&c.cell_env, "GPU=0", err, sizeof err), 0);
  ck_assert_ptr_null(spank_step_open(&c, "ci", 1, err, sizeof err));
  ck_assert_msg(strstr(err, "GPU: 1 value for class standard's 2 cells") != NULL, "%s", err);
  c.cell_env.n = 0;
  shms_class_stats st = stats(name);
  ck_assert_uint_eq(st.available, 2);
  ck_assert_uint_eq(st.queue_depth, 0);
  snprintf(c.segment, sizeof c.segment, "shmst-no-such-segment");
  ck_assert_ptr_null(spank_step_open(&c, "ci", 1, err, sizeof err));
  ck_assert_msg(strstr(err, "cannot attach: ") == err, "%s", err);
  assert_clean(name);
  harness_remove(name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("spank");
  TCase *tc = harness_tcase("conf");
  tcase_add_test(tc, conf_defaults_and_every_key);
  tcase_add_test(tc, conf_bad_arguments);
  tcase_add_test(tc, account_kept_for_the_steps);
  suite_add_tcase(s, tc);
  tc = harness_tcase("step");
  tcase_add_test(tc, tasks_take_turns_on_one_cell);
  tcase_add_test(tc, task_killed_while_waiting_cancels);
  tcase_add_test(tc, lease_covers_what_the_task_left);
  tcase_add_test(tc, refusals_take_nothing);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * shmsched supervise and shmsched check, end to end: the supervisor sees a
 * process die and recovers its lease, refuses to run twice, survives being
 * killed and restarted, stops cleanly on SIGTERM; check reports a violation
 * and --repair fixes it. Ordered by reading the supervisor's log lines.
 */
#include <ck_pr.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "harness.h"
#include "shm/handle.h"
#include "shm/proc.h"

struct sup {
  pid_t pid;
  FILE *log;
};

static struct sup start_supervisor_with(const char *name, const char *option) {
  int err[2];
  ck_assert_int_eq(pipe(err), 0);
  struct sup s = {.pid = fork()};
  ck_assert_int_ge(s.pid, 0);
  if (s.pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    execl(SHMS_BIN_DIR "/shmsched", "shmsched", "supervise", name, "--interval", "100ms", option,
          (char *)NULL);
    _exit(127);
  }
  close(err[1]);
  s.log = fdopen(err[0], "r");
  return s;
}

static struct sup start_supervisor(const char *name) { return start_supervisor_with(name, NULL); }

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
  struct sup s = start_supervisor_with(name, "--verbose");
  await_line(&s, "supervising segment");
  int ready;
  pid_t victim = holder(name, &ready);
  char b;
  ck_assert_int_eq(read(ready, &b, 1), 1);
  char watching[64], expect[128];
  snprintf(watching, sizeof watching, "watching process %d", (int)victim);
  await_line(&s, watching);
  kill(victim, SIGKILL);
  ck_assert_int_eq(waitpid(victim, NULL, 0), victim);
  snprintf(expect, sizeof expect, "process-died pid=%d", (int)victim);
  await_line(&s, expect);
  snprintf(expect, sizeof expect, "lease-released class=standard cell=0 tenant=t pid=%d",
           (int)victim);
  await_line(&s, expect);
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

/*
 * A shell that runs `shmsched run NAME --tenant TENANT -- sleep 0.02` again and again (n times,
 * or until killed with n = 0), in its own process group, writing one byte to out per grant.
 */
static pid_t looper(const char *name, const char *tenant, int n, int out) {
  static const char script[] = "i=0\n"
                               "while [ \"$4\" -eq 0 ] || [ \"$i\" -lt \"$4\" ]; do\n"
                               "  \"$1\" run \"$2\" --class standard --tenant \"$3\" -- sleep 0.02"
                               " || exit 1\n"
                               "  printf x\n"
                               "  i=$((i + 1))\n"
                               "done\n";
  char count[16];
  snprintf(count, sizeof count, "%d", n);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out, 1);
    execl("/bin/sh", "sh", "-c", script, "sh", SHMS_BIN_DIR "/shmsched", name, tenant, count,
          (char *)NULL);
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

/* Read the supervisor's log to its end in a child of ours, so that it never blocks on it. */
static pid_t drain(struct sup *s) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char buf[4096];
    while (fread(buf, 1, sizeof buf, s->log) > 0)
      ;
    _exit(0);
  }
  return pid;
}

/*
 * Churn of short-lived clients, as in issue 12: tenants a, b and c with 4, 2 and 1 looping
 * `run` clients, each looping a fixed number of times, and one looping client of tenant d, on
 * 2 cells. Returns d's share of all grants made until the others are done, in thousandths.
 */
static unsigned lone_tenants_share(int supervised) {
  shms_config cfg;
  harness_config(&cfg, 2, 64);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  const char *name = harness_name(supervised ? "fairsup" : "fair");
  harness_create(name, &cfg);
  struct sup s = {0};
  pid_t drainer = 0;
  if (supervised) {
    s = start_supervisor(name);
    await_line(&s, "supervising segment");
    drainer = drain(&s);
  }
  enum { ROUNDS = 5 };
  static const struct {
    const char *tenant;
    int loopers;
  } busy[] = {{"a", 12}, {"b", 6}, {"c", 2}};
  int null = open("/dev/null", O_WRONLY), d[2];
  ck_assert_int_ge(null, 0);
  ck_assert_int_eq(pipe(d), 0);
  pid_t lone = looper(name, "d", 0, d[1]), others[20];
  close(d[1]);
  int n = 0, grants = 0;
  for (size_t t = 0; t < sizeof busy / sizeof busy[0]; t++)
    for (int i = 0; i < busy[t].loopers; i++, grants += ROUNDS)
      others[n++] = looper(name, busy[t].tenant, ROUNDS, null);
  for (int i = 0; i < n; i++) {
    int status;
    ck_assert_int_eq(waitpid(others[i], &status, 0), others[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a looper failed: %#x", status);
  }
  kill(-lone, SIGKILL);
  ck_assert_int_eq(waitpid(lone, NULL, 0), lone);
  char buf[4096];
  unsigned mine = 0;
  for (ssize_t got; (got = read(d[0], buf, sizeof buf)) > 0;)
    mine += (unsigned)got;
  close(d[0]);
  close(null);
  if (supervised) {
    int status = stop(&s, SIGTERM);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(waitpid(drainer, NULL, 0), drainer);
    fclose(s.log);
  }
  const char *destroy[] = {"destroy", name, "--force", NULL};
  char out[256], err[512];
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, destroy), 0);
  fprintf(stderr, "lone tenant %s the supervisor: %u of %u grants\n",
          supervised ? "with" : "without", mine, mine + (unsigned)grants);
  return 1000 * mine / (mine + (unsigned)grants);
}

/* The supervisor leaves fairness alone: the lone tenant's share is much the same with it. */
START_TEST(fairness_under_client_churn_is_the_same_with_the_supervisor) {
  unsigned without = lone_tenants_share(0), with = lone_tenants_share(1);
  ck_assert_msg(2 * with >= without,
                "the lone tenant's share fell from %u to %u thousandths under the supervisor",
                without, with);
}
END_TEST

/* The line is "YYYY-MM-DDTHH:MM:SS.mmmZ shmsched supervise: ...": RFC 3339, UTC, milliseconds. */
static void assert_stamped(const char *line) {
  static const char shape[] = "####-##-##T##:##:##.###Z shmsched supervise: ";
  for (size_t i = 0; i < sizeof shape - 1; i++)
    ck_assert_msg(shape[i] == '#' ? line[i] >= '0' && line[i] <= '9' : line[i] == shape[i],
                  "not an RFC 3339 time at column %zu: %s", i, line);
}

/* A child that attaches and says so on *attached; then, told to go on by a byte on *go, takes a
 * lease and gives it back, detaches and exits 0. */
static pid_t clean_client(const char *name, int *attached, int *go) {
  int a[2], g[2];
  ck_assert_int_eq(pipe(a), 0);
  ck_assert_int_eq(pipe(g), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *h;
    shms_request r = {.cls = SHMS_CLASS_STANDARD, .tenant = "t"};
    shms_lease l;
    char b;
    if (shms_attach(name, 0, &h) != SHMS_OK || write(a[1], "a", 1) != 1 || read(g[0], &b, 1) != 1)
      _exit(1);
    if (shms_acquire(h, &r, &l) != SHMS_OK || shms_release(h, &l) != SHMS_OK ||
        shms_detach(h) != SHMS_OK)
      _exit(1);
    _exit(0);
  }
  close(a[1]);
  close(g[0]);
  *attached = a[0];
  *go = g[1];
  return pid;
}

/*
 * A process that detached is only a line under --verbose: no recovery runs for it. Every line
 * carries its time. A plain destroy is not refused for the supervisor, which then leaves.
 */
START_TEST(clean_exits_are_quiet_and_destroy_lets_the_supervisor_go) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name = harness_name("supclean");
  harness_create(name, &cfg);
  struct sup s = start_supervisor_with(name, "--verbose");
  assert_stamped(await_line(&s, "supervising segment"));
  int attached, go;
  pid_t pid = clean_client(name, &attached, &go);
  char b, expect[128];
  ck_assert_int_eq(read(attached, &b, 1), 1);
  snprintf(expect, sizeof expect, "watching process %d", (int)pid);
  assert_stamped(await_line(&s, expect));
  ck_assert_int_eq(write(go, "g", 1), 1);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  snprintf(expect, sizeof expect, "process %d (entry", (int)pid);
  static char line[1024];
  while (fgets(line, sizeof line, s.log) != NULL && strstr(line, expect) == NULL) {
    assert_stamped(line);
    ck_assert_msg(strstr(line, "process-died") == NULL, "a clean exit was recovered: %s", line);
  }
  ck_assert_ptr_nonnull(strstr(line, "exited after detaching: nothing to recover"));
  close(attached);
  close(go);
  /* One that dies without detaching is recovered. */
  int ready;
  pid_t keeper = holder(name, &ready);
  ck_assert_int_eq(read(ready, &b, 1), 1);
  snprintf(expect, sizeof expect, "watching process %d", (int)keeper);
  assert_stamped(await_line(&s, expect));
  kill(keeper, SIGKILL);
  ck_assert_int_eq(waitpid(keeper, NULL, 0), keeper);
  snprintf(expect, sizeof expect, "process-died pid=%d", (int)keeper);
  assert_stamped(await_line(&s, expect));
  char out[256], err[512];
  const char *destroy[] = {"destroy", name, NULL};
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, destroy), 0);
  assert_stamped(await_line(&s, "segment removed: stopping"));
  ck_assert_int_eq(waitpid(s.pid, &status, 0), s.pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fclose(s.log);
}
END_TEST

/*
 * `shmsched run` SIGKILLed while its command runs: the supervisor's line for the lease it
 * settles names its tenant, though the lease was taken on the fast path (no request slot).
 */
START_TEST(the_log_names_a_dead_runs_tenant) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name = harness_name("suptenant");
  harness_create(name, &cfg);
  struct sup s = start_supervisor(name);
  await_line(&s, "supervising segment");
  int out[2];
  ck_assert_int_eq(pipe(out), 0);
  pid_t run = fork();
  ck_assert_int_ge(run, 0);
  if (run == 0) {
    dup2(out[1], 1);
    close(out[0]);
    execl(SHMS_BIN_DIR "/shmsched", "shmsched", "run", name, "-c", "standard", "-t", "alice", "--",
          "sh", "-c", "echo up; exec sleep 600", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  char up[8] = "";
  ck_assert_int_eq(read(out[0], up, 3), 3); /* the command runs: run holds the lease */
  ck_assert_int_eq(kill(run, SIGKILL), 0);
  ck_assert_int_eq(waitpid(run, NULL, 0), run);
  char expect[128];
  snprintf(expect, sizeof expect, "lease-quarantined class=standard cell=0 tenant=alice pid=%d",
           (int)run);
  assert_stamped(await_line(&s, expect));
  close(out[0]);
  int status = stop(&s, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fclose(s.log);
  harness_remove(name);
}
END_TEST

/* Run the CLI to its end (stdout and stderr to /dev/null): its exit status. */
static int cli_quiet(char *const argv[]) {
  pid_t p = fork();
  ck_assert_int_ge(p, 0);
  if (p == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execv(SHMS_BIN_DIR "/shmsched", argv);
    _exit(127);
  }
  int status;
  ck_assert_int_eq(waitpid(p, &status, 0), p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A quarantine a client makes itself (run after its command crashed) and an operator's repair
 * are in the log too, though no recovery made them. */
START_TEST(the_log_tells_quarantines_and_repairs_made_by_others) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_command_crash = SHMS_ON_CRASH_QUARANTINE;
  const char *name = harness_name("supcells");
  harness_create(name, &cfg);
  struct sup s = start_supervisor(name);
  await_line(&s, "supervising segment");
  char *crash[] = {"shmsched", "run", (char *)name, "-c", "standard",      "-t",
                   "bob",      "--",  "sh",         "-c", "kill -SEGV $$", NULL};
  ck_assert_int_eq(cli_quiet(crash), 128 + SIGSEGV);
  const char *q = await_line(&s, "cell-quarantined class=standard cell=0 tenant=bob pid=");
  assert_stamped(q);
  ck_assert_ptr_nonnull(strstr(q, " code=139"));
  char *repair[] = {"shmsched", "repair", (char *)name, "--class", "standard", NULL};
  ck_assert_int_eq(cli_quiet(repair), 0);
  q = await_line(&s, "cell-repaired class=standard cell=0 pid=");
  assert_stamped(q);
  ck_assert_ptr_nonnull(strstr(q, " now=in-service"));
  /* A drain, read from the event ring too. */
  char *drain[] = {"shmsched", "drain", (char *)name, NULL};
  ck_assert_int_eq(cli_quiet(drain), 0);
  q = await_line(&s, "drained pid=");
  assert_stamped(q);
  int status = stop(&s, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fclose(s.log);
  harness_remove(name);
}
END_TEST

/* A segment file grown under the supervisor (which new processes then refuse) is reported, and
 * so is its size restored. */
START_TEST(the_log_tells_a_segment_file_grown_under_it) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name = harness_name("supgrow");
  harness_create(name, &cfg);
  char path[256];
  harness_shm_path(path, sizeof path, name);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  struct sup s = start_supervisor(name);
  await_line(&s, "supervising segment");
  ck_assert_int_eq(truncate(path, st.st_size + 4096), 0);
  char want[200];
  snprintf(want, sizeof want, "segment file grew to %lld bytes (its layout: %lld)",
           (long long)st.st_size + 4096, (long long)st.st_size);
  const char *q = await_line(&s, want);
  ck_assert_ptr_nonnull(strstr(q, "processes attaching from now on refuse it"));
  ck_assert_int_eq(truncate(path, st.st_size), 0);
  await_line(&s, "segment file is its layout's size again");
  int status = stop(&s, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fclose(s.log);
  harness_remove(name);
}
END_TEST

/* A stopped supervisor (SIGSTOP, ^Z, a debugger) recovers nothing: status, metrics and a second
 * supervise say so, and `supervise --replace` kills it and takes over at once. */
START_TEST(a_stopped_supervisor_is_visible_and_replaced) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name = harness_name("supstop");
  harness_create(name, &cfg);
  struct sup a = start_supervisor(name);
  await_line(&a, "ready:"); /* past the start's recovery, which holds each class a moment */
  ck_assert_int_eq(kill(a.pid, SIGSTOP), 0);
  int st;
  ck_assert_int_eq(waitpid(a.pid, &st, WUNTRACED), a.pid); /* stopped now, for certain */
  ck_assert(WIFSTOPPED(st));
  static char out[65536], err[4096];
  ck_assert_int_eq(
      harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){"status", name, NULL}),
      0);
  ck_assert_msg(strstr(out, "\nsupervisor_state: stopped\n") != NULL, "%s", out);
  ck_assert_int_eq(
      harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){"metrics", name, NULL}),
      0);
  char want[200];
  snprintf(want, sizeof want, "shmsched_supervisor_stopped{segment=\"%s\"} 1", name);
  ck_assert_msg(strstr(out, want) != NULL, "%s", out);
  ck_assert_int_eq(
      harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){"supervise", name, NULL}),
      1);
  ck_assert_msg(strstr(err, "shmsched: busy: supervise: the segment's supervisor (pid ") == err &&
                    strstr(err, ") is stopped") != NULL && strstr(err, "--replace") != NULL,
                "%s", err);
  struct sup b = start_supervisor_with(name, "--replace");
  snprintf(want, sizeof want, "replaced the segment's supervisor (pid %d, stopped)", (int)a.pid);
  await_line(&b, want);
  await_line(&b, "supervising segment");
  ck_assert_int_eq(waitpid(a.pid, &st, 0), a.pid);
  ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  fclose(a.log);
  st = stop(&b, SIGTERM);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  fclose(b.log);
  harness_remove(name);
}
END_TEST

/* A live process whose entry says, for good, that it is inside an operation (a corrupt word):
 * the supervisor's recovery gives up on that class after about a second, says why once, and the
 * supervisor still answers SIGTERM. */
START_TEST(a_recovery_held_up_by_a_corrupt_mark_is_told_and_sigterm_still_answered) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name = harness_name("heldup");
  harness_create(name, &cfg);
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  pid_t idle = fork();
  ck_assert_int_ge(idle, 0);
  if (idle == 0) {
    shms_t *c;
    if (shms_attach(name, 0, &c) != SHMS_OK || write(ready[1], "r", 1) != 1)
      _exit(1);
    for (;;)
      pause();
  }
  char b;
  ck_assert_int_eq(read(ready[0], &b, 1), 1);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  struct shms__proc *p = NULL;
  for (uint32_t i = 0; i < h->layout.procs_count && p == NULL; i++)
    if (ck_pr_load_32((uint32_t *)&shms__proc_at(h, i)->pid) == (uint32_t)idle)
      p = shms__proc_at(h, i);
  ck_assert_ptr_nonnull(p);
  ck_pr_store_32(&p->ops[SHMS_CLASS_STANDARD], 1);
  shms_detach(h);
  struct sup s = start_supervisor(name);
  char want[96];
  snprintf(want, sizeof want, "its count of operations under way, ops[%d], is 1",
           SHMS_CLASS_STANDARD);
  const char *line = await_line(&s, "recovery failed: class standard: process ");
  ck_assert_msg(strstr(line, want) != NULL, "%s", line);
  await_line(&s, "ready:");
  int st = stop(&s, SIGTERM);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  fclose(s.log);
  kill(idle, SIGKILL);
  ck_assert_int_eq(waitpid(idle, NULL, 0), idle);
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

/* A process that queues a request behind a held cell and waits to be killed. */
static pid_t waiter(const char *name, int *ready_fd) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *h;
    shms_request r = {.cls = SHMS_CLASS_STANDARD, .tenant = "w"};
    shms_ticket t;
    if (shms_attach(name, 0, &h) != SHMS_OK || shms_enqueue(h, &r, &t) != SHMS_OK)
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

static void kill_when_ready(pid_t pid, int ready) {
  char b;
  ck_assert_int_eq(read(ready, &b, 1), 1);
  close(ready);
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

/* An ordinary death is no anomaly: check --repair names what became of what the dead left, the
 * death first, and fixes no count. */
START_TEST(check_repair_tells_ordinary_deaths_as_what_happened) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name = harness_name("deaths");
  harness_create(name, &cfg);
  int ready;
  pid_t h = holder(name, &ready);
  kill_when_ready(h, ready);
  char out[4096], err[512], want[128];
  const char *repair[] = {"check", name, "--repair", NULL};
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, repair), 0);
  snprintf(want, sizeof want,
           "process-died pid=%d\nlease-quarantined class=standard cell=0 "
           "tenant=t pid=%d",
           (int)h, (int)h);
  ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
  ck_assert_msg(strstr(out, "leases_quarantined=1") && strstr(out, "counts_fixed=0"), "%s", out);
  ck_assert_ptr_null(strstr(out, "count-fixed"));
  /* A waiter killed in the queue: its request ends owner-lost, again no count fixed. */
  const char *repair_cell[] = {"repair", name, "--class", "standard", "--cell", "0", NULL};
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, repair_cell), 0);
  int held;
  pid_t keeper = holder(name, &held);
  char b;
  ck_assert_int_eq(read(held, &b, 1), 1);
  pid_t w = waiter(name, &ready);
  kill_when_ready(w, ready);
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, repair), 0);
  snprintf(want, sizeof want, "process-died pid=%d\nrequest-owner-lost class=standard tenant=w",
           (int)w);
  ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
  ck_assert_msg(strstr(out, "requests_owner_lost=1") && strstr(out, "counts_fixed=0"), "%s", out);
  close(held);
  kill(keeper, SIGKILL);
  ck_assert_int_eq(waitpid(keeper, NULL, 0), keeper);
  harness_remove(name);
}
END_TEST

/* A supervisor started with nobody dead recovers nothing, and counts no recovery in any class;
 * started after a death, it logs the death before what it did about it. */
START_TEST(a_supervisor_start_counts_only_what_it_recovered_and_tells_the_cause_first) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  const char *name = harness_name("start");
  harness_create(name, &cfg);
  struct sup s = start_supervisor(name);
  await_line(&s, "supervising segment");
  shms_t *h;
  shms_class_stats st;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (shms_observe(h, (shms_class_t)c, &st) == SHMS_OK)
      ck_assert_uint_eq(st.recovered, 0);
  int status = stop(&s, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fclose(s.log);
  int ready;
  pid_t victim = holder(name, &ready);
  kill_when_ready(victim, ready);
  s = start_supervisor(name);
  await_line(&s, "supervising segment");
  char want[128];
  snprintf(want, sizeof want, "process-died pid=%d", (int)victim);
  await_line(&s, want); /* the log is read in order: the cause, then its consequence */
  await_line(&s, "lease-quarantined class=standard cell=0 tenant=t");
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_STANDARD, &st));
  ck_assert_uint_eq(st.recovered, 1);
  shms_detach(h);
  status = stop(&s, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  fclose(s.log);
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
  tcase_add_test(tc, the_log_names_a_dead_runs_tenant);
  tcase_add_test(tc, the_log_tells_quarantines_and_repairs_made_by_others);
  tcase_add_test(tc, the_log_tells_a_segment_file_grown_under_it);
  tcase_add_test(tc, a_stopped_supervisor_is_visible_and_replaced);
  tcase_add_test(tc, a_recovery_held_up_by_a_corrupt_mark_is_told_and_sigterm_still_answered);
  tcase_add_test(tc, check_reports_violations_and_repair_fixes_them);
  tcase_add_test(tc, check_names_what_repair_cannot_fix);
  tcase_add_test(tc, check_repair_tells_ordinary_deaths_as_what_happened);
  tcase_add_test(tc, a_supervisor_start_counts_only_what_it_recovered_and_tells_the_cause_first);
  tcase_add_test(tc, clean_exits_are_quiet_and_destroy_lets_the_supervisor_go);
  tcase_add_test(tc, fairness_under_client_churn_is_the_same_with_the_supervisor);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

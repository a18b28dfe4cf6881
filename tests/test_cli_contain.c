/*
 * Ordinary stops release, and commands never outlive their lease, through
 * <build>/bin/shmsched: every stop signal in each state of `run`, Ctrl-C in a
 * pseudo-terminal, --kill-after, leftover and daemonized descendants, SIGKILL
 * of `run` and of a worker, --job-timeout, and the command's environment.
 *
 * The commands that fork and daemonize are this test program itself, run as
 * a helper ("helper daemon ..."), so that no shell quoting stands between the
 * test and setsid + double fork. A helper writes the pids it made to a file
 * and then says "up" on stderr: the test reads that line, never sleeps. The
 * test process is a child subreaper, so the orphans of a killed tree become
 * its children and cannot be reaped (and their pids reused) behind its back.
 */
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

static char out[65536], err[8192], pout[16384], perr[8192];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/* The number after "key: " in `status NAME`. */
static unsigned long long status_figure(const char *name, const char *key) {
  char needle[96];
  ck_assert_int_eq(CLI("status", name), 0);
  snprintf(needle, sizeof needle, "\n%s: ", key);
  const char *at = strstr(out, needle);
  ck_assert_msg(at != NULL, "status lacks '%s':\n%s", key, out);
  return strtoull(at + strlen(needle), NULL, 10);
}

/* The class's one cell is back in service: available, not quarantined, and the next run gets it. */
static void assert_released(const char *name) {
  ck_assert_uint_eq(status_figure(name, "cells_quarantined"), 0);
  ck_assert_uint_eq(status_figure(name, "cells_available"), 1);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "next", "--", "true"), 0);
  ck_assert_int_eq(CLI("check", name), 0);
}

static int reap(struct cli_proc *p, int close_in) {
  return cli_reap(p, close_in, pout, sizeof pout, NULL, perr, sizeof perr);
}

/* The pid a helper wrote to file (in the scratch directory). */
static pid_t pid_from(const char *file) {
  char path[256];
  FILE *f = fopen(cli_path(path, sizeof path, file), "re");
  ck_assert_ptr_nonnull(f);
  int pid = 0;
  ck_assert_int_eq(fscanf(f, "%d", &pid), 1);
  fclose(f);
  ck_assert_int_gt(pid, 1);
  return (pid_t)pid;
}

/* Read lines of fd until one equals want. */
static void await_line(int fd, const char *want) {
  char line[512];
  do
    cli_read_line(fd, line, sizeof line);
  while (strcmp(line, want) != 0);
}

static void subreaper(void) { ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }

/* ---- the helper: a command that leaves processes behind -------------------------- */

static char self_exe[4096];

/* Write pid to path atomically (the test reads it once "up" is said). */
static void write_pid(const char *path, pid_t pid) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "we");
  if (f == NULL || fprintf(f, "%d\n", (int)pid) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
    _exit(90);
}

/* A process that waits to be killed; SIGALRM (default action) ends it should a test fail. */
__attribute__((noreturn)) static void linger(int ignore_term) {
  if (ignore_term)
    signal(SIGTERM, SIG_IGN);
  signal(SIGALRM, SIG_DFL);
  alarm(SHMS_TEST_TIMEOUT);
  for (;;)
    pause();
}

/*
 * helper daemon|group PIDFILE stay|exit [ignterm]: make a daemon (setsid and
 * double fork) or a member of our own process group, write its pid to
 * PIDFILE, say "up" on stderr, then stay (until killed) or exit 0.
 */
static int helper(int argc, char **argv) {
  if (argc < 5)
    return 99;
  int daemon = strcmp(argv[2], "daemon") == 0, ignterm = argc > 5;
  int p[2];
  if (pipe(p) != 0)
    return 91;
  pid_t a = fork();
  if (a == 0) {
    if (daemon) {
      setsid();
      if (fork() != 0)
        _exit(0);
    }
    pid_t self = getpid();
    if (write(p[1], &self, sizeof self) != (ssize_t)sizeof self)
      _exit(92);
    close(p[0]);
    close(p[1]);
    /* Let go of the test's pipes: it reads them to their end. */
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd <= 2; fd++)
      dup2(null, fd);
    linger(ignterm);
  }
  pid_t kept;
  if (read(p[0], &kept, sizeof kept) != (ssize_t)sizeof kept)
    return 93;
  if (daemon)
    waitpid(a, NULL, 0); /* the intermediate: the daemon is nobody's child of ours now */
  write_pid(argv[3], kept);
  dprintf(STDERR_FILENO, "up\n");
  if (strcmp(argv[4], "stay") == 0)
    linger(0);
  return 0;
}

/* ---- each stop signal, in each state -------------------------------------------- */

/* A stop signal while queued cancels the request: exit 75, and nothing is left behind. */
START_TEST(stop_signal_while_queued) {
  int sig = stops[_i];
  const char *name = cli_segment("sq", "standard:cells=1,queue=4", NULL);
  struct cli_proc holder, q;
  char line[128], sn[16];
  CLI_SPAWN(&holder, "run", name, "-c", "standard", "-t", "holder", "--", "sh", "-c",
            "echo held; read x; exit 0");
  cli_read_line(holder.out, line, sizeof line);
  CLI_SPAWN(&q, "run", name, "-c", "standard", "-t", "b", "--print-ticket", "--", "true");
  cli_read_line(q.err, line, sizeof line); /* the ticket: it is queued */
  ck_assert_int_eq(kill(q.pid, sig), 0);
  ck_assert_int_eq(reap(&q, 1), 75);
  snprintf(sn, sizeof sn, "SIG%s",
           sig == SIGINT    ? "INT"
           : sig == SIGTERM ? "TERM"
           : sig == SIGHUP  ? "HUP"
           : sig == SIGQUIT ? "QUIT"
           : sig == SIGUSR1 ? "USR1"
                            : "USR2");
  ck_assert_msg(strstr(perr, "interrupted by ") && strstr(perr, sn), "%s", perr);
  ck_assert_uint_eq(status_figure(name, "queue_depth"), 0);
  ck_assert_uint_eq(status_figure(name, "cancelled"), 1);
  ck_assert_int_eq(reap(&holder, 1), 0);
  assert_released(name);
}
END_TEST

/* A stop signal while the command runs is forwarded to it; it ended: the cell is released. */
START_TEST(stop_signal_while_running) {
  int sig = stops[_i];
  const char *name = cli_segment("sr", "standard:cells=1,queue=4", NULL);
  struct cli_proc p;
  char line[64];
  CLI_SPAWN(&p, "run", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "echo up; read x");
  cli_read_line(p.out, line, sizeof line);
  ck_assert_int_eq(kill(p.pid, sig), 0);
  ck_assert_int_eq(reap(&p, 0), 128 + sig); /* its stdin stays open: only the signal ends it */
  ck_assert_str_eq(perr, "");
  assert_released(name);
}
END_TEST

/* A command that ignores the forwarded signal is killed --kill-after later. */
START_TEST(kill_after_escalates) {
  const char *name = cli_segment("ka", "standard:cells=1,queue=4", NULL);
  struct cli_proc p;
  char line[64];
  CLI_SPAWN(&p, "run", name, "-c", "standard", "-t", "a", "--kill-after", "100ms", "--", "sh", "-c",
            "trap '' TERM INT; echo up; read x");
  cli_read_line(p.out, line, sizeof line);
  ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&p, 0), 128 + SIGKILL);
  assert_released(name);
}
END_TEST

/* ---- the whole tree ------------------------------------------------------------- */

/* What the command leaves behind when it exits is ended (SIGTERM, then SIGKILL) before run
 * releases: a background child, and a daemon that ignores SIGTERM. */
START_TEST(leftovers_end_before_release) {
  subreaper();
  const char *name = cli_segment("left", "standard:cells=1,queue=4", NULL);
  char bg[256], dm[256];
  cli_path(bg, sizeof bg, "bg.pid");
  cli_path(dm, sizeof dm, "daemon.pid");
  /* A plain background child: SIGTERM ends it when its parent exits. */
  ck_assert_int_eq(
      CLI("run", name, "-c", "standard", "-t", "a", "--", self_exe, "helper", "group", bg, "exit"),
      0);
  ck_assert(!harness_running(pid_from("bg.pid")));
  /* A daemon that ignores SIGTERM: SIGKILL, --kill-after later. */
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--kill-after", "100ms", "--",
                       self_exe, "helper", "daemon", dm, "exit", "ignterm"),
                   0);
  ck_assert(!harness_running(pid_from("daemon.pid")));
  assert_released(name);
}
END_TEST

/*
 * run SIGKILLed mid-command: its command and a daemon it started keep running while nobody
 * disposes of the lease; recovery (check --repair) kills them all first, then releases.
 */
static void run_killed_case(const char *helper_kind, const char *cgroup) {
  subreaper();
  if (cgroup != NULL)
    setenv("SHMSCHED_CGROUP", cgroup, 1);
  const char *name = cli_segment("rk", "standard:cells=1,queue=4,on-holder-death=release", NULL);
  char pidfile[256];
  cli_path(pidfile, sizeof pidfile, "kept.pid");
  struct cli_proc p;
  CLI_SPAWN(&p, "run", name, "-c", "standard", "-t", "a", "--", self_exe, "helper", helper_kind,
            pidfile, "stay");
  await_line(p.err, "up");
  pid_t kept = pid_from("kept.pid");
  ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
  ck_assert_int_eq(reap(&p, 1), 128 + SIGKILL);
  ck_assert_msg(harness_running(kept), "the daemon died with run: nothing to prove");
  ck_assert_uint_eq(status_figure(name, "cells_leased"), 1);
  ck_assert_int_eq(CLI("check", name, "--repair"), 0);
  ck_assert_msg(!harness_running(kept), "process %d outlived its holder's lease", (int)kept);
  assert_released(name);
}

START_TEST(run_killed_daemon_in_cgroup) { run_killed_case("daemon", NULL); }
END_TEST

START_TEST(run_killed_group_without_cgroup) { run_killed_case("group", "off"); }
END_TEST

/* SHMSCHED_CGROUP names another directory of the hierarchy (a delegated subtree): there too. */
START_TEST(run_killed_daemon_in_named_cgroup) {
  char dir[128];
  snprintf(dir, sizeof dir, "/sys/fs/cgroup/unified/shmst-%d", (int)getpid());
  if (access("/sys/fs/cgroup/unified/cgroup.procs", W_OK) != 0)
    return; /* no writable cgroup v2 hierarchy there on this machine */
  run_killed_case("daemon", dir);
  ck_assert_int_eq(rmdir(dir), 0); /* only its (removed) cgroups were in it */
}
END_TEST

/* ---- a terminal ----------------------------------------------------------------- */

/* Read the pty master until text appears (or EOF: the slave side is gone). */
static int pty_until(int fd, const char *text, char *buf, size_t n) {
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, n - 1 - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return 0;
    len += (size_t)r;
    buf[len] = '\0';
    if (text != NULL && strstr(buf, text) != NULL)
      return 1;
    if (len + 1 >= n)
      len = 0;
  }
}

/* Ctrl-C at a terminal: the command has the terminal (its group is the foreground one), sees
 * isatty, is ended by the ^C, and the cell is released. */
START_TEST(ctrl_c_in_a_terminal) {
  const char *name = cli_segment("tty", "standard:cells=1,queue=4", NULL);
  int master;
  pid_t pid = forkpty(&master, NULL, NULL, NULL);
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    const char *argv[] = {SHMS_BIN_DIR "/shmsched",
                          "run",
                          name,
                          "-c",
                          "standard",
                          "-t",
                          "a",
                          "--",
                          "sh",
                          "-c",
                          "[ -t 0 ] && [ -t 1 ] && echo istty; set -- $(cat /proc/$$/stat); "
                          "[ \"$5\" = \"$8\" ] && echo foreground; echo ready; read x; echo never",
                          NULL};
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  char buf[4096];
  ck_assert(pty_until(master, "ready", buf, sizeof buf));
  ck_assert_msg(strstr(buf, "istty") && strstr(buf, "foreground"), "%s", buf);
  ck_assert_int_eq(write(master, "\003", 1), 1);
  pty_until(master, NULL, buf, sizeof buf);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  close(master);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGINT, "status 0x%x: %s", st, buf);
  ck_assert_msg(strstr(buf, "never") == NULL, "%s", buf);
  assert_released(name);
}
END_TEST

/* Ctrl-Z at a terminal stops the command and then run, as the shell expects of its job;
 * SIGCONT (what fg sends) continues both, and the command has the terminal again. */
START_TEST(ctrl_z_in_a_terminal) {
  const char *name = cli_segment("tstp", "standard:cells=1,queue=4", NULL);
  int master;
  pid_t pid = forkpty(&master, NULL, NULL, NULL);
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    const char *argv[] = {SHMS_BIN_DIR "/shmsched",
                          "run",
                          "-c",
                          "standard",
                          "-t",
                          "a",
                          name,
                          "--",
                          "sh",
                          "-c",
                          "echo ready; read x; echo \"got $x\"",
                          NULL};
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  char buf[4096];
  ck_assert(pty_until(master, "ready", buf, sizeof buf));
  ck_assert_int_eq(write(master, "\032", 1), 1);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
  ck_assert_msg(WIFSTOPPED(st), "run did not stop: 0x%x", st);
  ck_assert_uint_eq(status_figure(name, "cells_leased"), 1); /* stopped, still holding */
  ck_assert_int_eq(kill(pid, SIGCONT), 0);
  ck_assert_int_eq(write(master, "more\n", 5), 5);
  ck_assert(pty_until(master, "got more", buf, sizeof buf));
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  close(master);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
  assert_released(name);
}
END_TEST

/* ---- workers -------------------------------------------------------------------- */

/* A worker SIGKILLed mid-job: its job's daemon dies before the client hears worker-lost. */
START_TEST(worker_killed_job_tree_dies) {
  subreaper();
  const char *name = cli_segment("wk", "small:cells=1,queue=4,mode=worker,payload=64", NULL);
  char pidfile[256];
  cli_path(pidfile, sizeof pidfile, "job.pid");
  struct cli_proc w, s;
  CLI_SPAWN(&w, "worker", name, "-c", "small", "--", self_exe, "helper", "daemon", pidfile, "stay");
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "a", "--payload", "x", "--wait");
  await_line(w.err, "up");
  pid_t kept = pid_from("job.pid");
  ck_assert_int_eq(kill(w.pid, SIGKILL), 0);
  ck_assert_int_eq(reap(&w, 1), 128 + SIGKILL);
  ck_assert_msg(harness_running(kept), "the daemon died with the worker: nothing to prove");
  ck_assert_int_eq(reap(&s, 1), 75);
  ck_assert_msg(strstr(perr, "worker-lost") != NULL, "%s", perr);
  ck_assert_msg(!harness_running(kept), "process %d outlived its worker's job", (int)kept);
}
END_TEST

/* --job-timeout ends a job that runs too long (status 124); the worker goes on. */
START_TEST(job_timeout) {
  const char *name = cli_segment("jt", "small:cells=1,queue=4,mode=worker,payload=64", NULL);
  struct cli_proc w;
  CLI_SPAWN(&w, "worker", name, "-c", "small", "--job-timeout", "100ms", "--kill-after", "50ms",
            "--", "sh", "-c",
            "trap '' TERM; x=$(cat); if [ \"$x\" = slow ]; then while :; do sleep 1; done; fi; "
            "echo \"$x\"");
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--payload", "fast", "--wait"), 0);
  ck_assert_str_eq(out, "fast\n");
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--payload", "slow", "--wait"),
                   124);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--payload", "again", "--wait"),
                   0);
  ck_assert_str_eq(out, "again\n");
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&w, 1), 0);
  ck_assert_msg(strstr(perr, "ran longer than --job-timeout (0.100s): its processes were ended; "
                             "completed with status 124") != NULL,
                "%s", perr);
  ck_assert_uint_eq(status_figure(name, "cells_quarantined"), 0);
}
END_TEST

/* ---- the command's environment ---------------------------------------------------- */

START_TEST(run_environment) {
  const char *name = cli_segment("env", "standard:cells=2,queue=4", NULL);
  static const char script[] =
      "echo \"$SHMSCHED_SEGMENT $SHMSCHED_CLASS $SHMSCHED_CELL $SHMSCHED_TENANT "
      "${SHMSCHED_TICKET-none} $GPU $NODE\"";
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--cell-env", "GPU=g0,g1",
                       "--cell-env", "NODE=n0,n1,n2", "--", "sh", "-c", script),
                   0);
  char want[512];
  snprintf(want, sizeof want, "%s standard 0 a none g0 n0\n", name);
  ck_assert_str_eq(out, want);
  /* Cell 1 while cell 0 is held; queued with a ticket, which the command gets. */
  struct cli_proc holder;
  char line[64];
  CLI_SPAWN(&holder, "run", name, "-c", "standard", "-t", "h", "--", "sh", "-c",
            "echo held; read x; exit 0");
  cli_read_line(holder.out, line, sizeof line);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "b", "--print-ticket", "--cell-env",
                       "GPU=g0,g1", "--", "sh", "-c", script),
                   0);
  char ticket[SHMS_TICKET_STRLEN];
  snprintf(ticket, sizeof ticket, "%.*s", (int)strcspn(err, "\n"), err);
  snprintf(want, sizeof want, "%s standard 1 b %s g1 \n", name, ticket);
  ck_assert_str_eq(out, want);
  ck_assert_int_eq(reap(&holder, 1), 0);
}
END_TEST

/* --cells K: the command starts holding K cells, listed in SHMSCHED_CELL and mapped by
 * --cell-env; while one is held elsewhere, the others are reserved for it, not handed out. */
START_TEST(run_on_several_cells) {
  const char *name = cli_segment("cells", "standard:cells=3,queue=4", NULL);
  static const char script[] = "echo \"$SHMSCHED_CELL $GPU\"";
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--cells", "2", "--cell-env",
                       "GPU=g0,g1,g2", "--", "sh", "-c", script),
                   0);
  ck_assert_str_eq(out, "0,1 g0,g1\n");
  struct cli_proc holder, big;
  char line[64];
  CLI_SPAWN(&holder, "run", name, "-c", "standard", "-t", "h", "--", "sh", "-c",
            "echo held; read x; exit 0");
  cli_read_line(holder.out, line, sizeof line);
  CLI_SPAWN(&big, "run", name, "-c", "standard", "-t", "b", "-n", "3", "--print-ticket",
            "--cell-env", "GPU=g0,g1,g2", "--", "sh", "-c", script);
  cli_read_line(big.err, line, sizeof line); /* queued */
  /* The two free cells are held for it: a request of one cell does not get them. */
  ck_assert_int_eq(
      CLI("run", name, "-c", "standard", "-t", "c", "--deadline", "50ms", "--", "true"), 75);
  ck_assert_msg(strstr(err, "deadline-exceeded") != NULL, "%s", err);
  ck_assert_uint_eq(status_figure(name, "cells_reserved"), 2);
  ck_assert_int_eq(reap(&holder, 1), 0);
  ck_assert_int_eq(reap(&big, 1), 0);
  ck_assert_str_eq(pout, "0,1,2 g0,g1,g2\n");
  ck_assert_uint_eq(status_figure(name, "cells_available"), 3);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--cells", "4", "--", "true"), 2);
  ck_assert_msg(strstr(err, "run: --cells 4: class standard has 3 cells") != NULL, "%s", err);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--cells", "0", "--", "true"), 2);
  ck_assert_msg(strstr(err, "run: --cells: must be at least 1") != NULL, "%s", err);
}
END_TEST

START_TEST(cell_env_errors) {
  const char *name = cli_segment("enverr", "standard:cells=3,queue=4", NULL);
  static const struct {
    const char *arg, *msg;
  } bad[] = {
      {"GPU=0,1", "run: --cell-env GPU: 2 values for class standard's 3 cells (one per cell)"},
      {"1GPU=0,1,2", "run: --cell-env: '1GPU=0,1,2': expected VAR=LIST"},
      {"GPU", "run: --cell-env: 'GPU': expected VAR=LIST"},
      {"GPU=0,,2", "run: --cell-env: 'GPU=0,,2': the list has an empty item"},
      {"GPU=", "run: --cell-env: 'GPU=': the list has an empty item"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--cell-env", bad[i].arg, "--",
                         "echo", "ran"),
                     2);
    ck_assert_msg(strstr(err, bad[i].msg) != NULL, "%s: %s", bad[i].arg, err);
    ck_assert_str_eq(out, "");
  }
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--cell-env", "G=0,1,2",
                       "--cell-env", "G=3,4,5", "--", "true"),
                   2);
  ck_assert_msg(strstr(err, "run: --cell-env: G: given twice") != NULL, "%s", err);
  ck_assert_int_eq(
      CLI("run", name, "-c", "standard", "-t", "a", "--kill-after", "0s", "--", "true"), 2);
  ck_assert_uint_eq(status_figure(name, "granted"), 0); /* nothing was attempted */
}
END_TEST

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "helper") == 0)
    return helper(argc, argv);
  ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (n <= 0)
    return 1;
  self_exe[n] = '\0';
  Suite *s = suite_create("cli_contain");
  TCase *tc = harness_tcase("signals");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_loop_test(tc, stop_signal_while_queued, 0, sizeof stops / sizeof stops[0]);
  tcase_add_loop_test(tc, stop_signal_while_running, 0, sizeof stops / sizeof stops[0]);
  tcase_add_test(tc, kill_after_escalates);
  tcase_add_test(tc, ctrl_c_in_a_terminal);
  tcase_add_test(tc, ctrl_z_in_a_terminal);
  suite_add_tcase(s, tc);
  tc = harness_tcase("tree");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, leftovers_end_before_release);
  tcase_add_test(tc, run_killed_daemon_in_cgroup);
  tcase_add_test(tc, run_killed_group_without_cgroup);
  tcase_add_test(tc, run_killed_daemon_in_named_cgroup);
  tcase_add_test(tc, worker_killed_job_tree_dies);
  tcase_add_test(tc, job_timeout);
  suite_add_tcase(s, tc);
  tc = harness_tcase("env");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, run_environment);
  tcase_add_test(tc, run_on_several_cells);
  tcase_add_test(tc, cell_env_errors);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

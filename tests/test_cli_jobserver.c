/*
 * `shmsched jobserver` with the real clients: GNU make (Debian 12's 4.3, pipe
 * style) and cargo (pipe style, and fifo style where cargo reads FIFOs), through
 * <build>/bin/shmsched.
 *
 * Concurrency is counted by the jobs themselves: each appends "start T" when
 * it begins and "end T" before it ends, under flock, to one log; the largest
 * number of starts not yet ended is the most jobs that ran at once (never
 * more than really ran: each record is inside its job's life). Jobs that must
 * wait for the test say "up PID" on make's stdout and then read a line from a
 * FIFO the test holds open (the gate): the test reads their lines, never
 * sleeps. The only time figure is a sanity bound: a build of N jobs of D
 * seconds on C cells finishes before N*D, the time it takes one at a time.
 *
 * `cargo` runs as its own ctest test (argument "cargo"), skipped (exit 77)
 * only when no cargo is installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

static char out[65536], err[8192], pout[65536], perr[16384];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

/* ---- helpers ------------------------------------------------------------------- */

/* The number after "key: " in class standard's section of `status NAME`. */
static unsigned long long status_figure(const char *name, const char *key) {
  char needle[96];
  ck_assert_int_eq(CLI("status", name), 0);
  const char *section = strstr(out, "# Class standard");
  ck_assert_msg(section != NULL, "status lacks class standard:\n%s", out);
  snprintf(needle, sizeof needle, "\n%s: ", key);
  const char *at = strstr(section, needle);
  ck_assert_msg(at != NULL, "status lacks '%s':\n%s", key, out);
  return strtoull(at + strlen(needle), NULL, 10);
}

/* Every cell free, none quarantined, and every invariant holds. */
static void assert_all_free(const char *name, unsigned cells) {
  ck_assert_uint_eq(status_figure(name, "cells_available"), cells);
  ck_assert_uint_eq(status_figure(name, "cells_leased"), 0);
  ck_assert_uint_eq(status_figure(name, "cells_quarantined"), 0);
  ck_assert_msg(CLI("check", name) == 0, "check: %s%s", out, err);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "we");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_ge(fputs(text, f), 0);
  ck_assert_int_eq(fclose(f), 0);
}

/* file in the scratch directory, made this test's own (the tests of a case share it). */
static const char *scratch(char *buf, size_t n, const char *file) {
  char own[128];
  snprintf(own, sizeof own, "%d-%s", (int)getpid(), file);
  return cli_path(buf, n, own);
}

/* A directory sub (in the scratch directory) with a Makefile of text. */
static const char *makefile_dir(char *buf, size_t n, const char *sub, const char *text) {
  scratch(buf, n, sub);
  ck_assert_int_eq(mkdir(buf, 0755), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/Makefile", buf);
  write_file(path, text);
  return buf;
}

/* N jobs of `sleep D`, each logging its start and end (tagged T) to LOG under flock. */
static const char sleep_jobs[] = "J := $(shell seq 1 $(N))\n"
                                 "all: $(addprefix j,$(J))\n"
                                 "j%:\n"
                                 "\t@flock $(LOG) sh -c 'echo start $(T) >> $(LOG)'; sleep $(D); "
                                 "flock $(LOG) sh -c 'echo end $(T) >> $(LOG)'\n";

/* J jobs that log, say "up PID" on stdout and wait for a line on GATE. */
static const char gated_jobs[] =
    "J := $(shell seq 1 $(N))\n"
    "all: $(addprefix j,$(J))\n"
    "j%:\n"
    "\t@flock $(LOG) sh -c 'echo start $(T) >> $(LOG)'; echo up $$$$; read x < $(GATE); "
    "flock $(LOG) sh -c 'echo end $(T) >> $(LOG)'\n";

struct log_figures {
  unsigned peak;        /* jobs at once, of any tenant */
  unsigned starts[2];   /* tenants a and b */
  unsigned window[2];   /* starts while both tenants were busy */
  unsigned both_busy_n; /* starts in that window */
};

/* Read the jobs' log. The window runs from the first start of the second tenant to start to
 * the last start of the first tenant to run out of jobs. */
static struct log_figures read_log(const char *path) {
  struct log_figures f = {0};
  char line[128], tags[4096];
  FILE *fp = fopen(path, "re");
  ck_assert_ptr_nonnull(fp);
  unsigned running = 0, n = 0;
  while (fgets(line, sizeof line, fp) != NULL && n < sizeof tags) {
    int start = strncmp(line, "start ", 6) == 0;
    ck_assert_msg(start || strncmp(line, "end ", 4) == 0, "bad log line '%s'", line);
    char t = line[start ? 6 : 4];
    if (!start) {
      ck_assert_uint_gt(running, 0);
      running--;
      continue;
    }
    if (++running > f.peak)
      f.peak = running;
    f.starts[t == 'b']++;
    tags[n++] = t;
  }
  fclose(fp);
  size_t first_b = n, first_a = n, last_a = 0, last_b = 0;
  for (size_t i = 0; i < n; i++) {
    if (tags[i] == 'a') {
      first_a = first_a == n ? i : first_a;
      last_a = i;
    } else {
      first_b = first_b == n ? i : first_b;
      last_b = i;
    }
  }
  size_t from = first_a > first_b ? first_a : first_b, to = last_a < last_b ? last_a : last_b;
  for (size_t i = from; i <= to && i < n; i++) {
    f.window[tags[i] == 'b']++;
    f.both_busy_n++;
  }
  return f;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int reap(struct cli_proc *p) {
  return cli_reap(p, 1, pout, sizeof pout, NULL, perr, sizeof perr);
}

/* Read "up PID" lines of fd until k of them came; their pids into pids. */
static void await_ups(int fd, pid_t *pids, int k) {
  char line[256];
  for (int got = 0; got < k;) {
    cli_read_line(fd, line, sizeof line);
    int pid;
    if (sscanf(line, "up %d", &pid) == 1) // NOLINT(cert-err34-c)
      pids[got++] = (pid_t)pid;
  }
}

/* Read lines of fd until one holds text. */
static void await_text(int fd, const char *text) {
  char line[512];
  do
    cli_read_line(fd, line, sizeof line);
  while (strstr(line, text) == NULL);
}

static pid_t parent_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'), state;
  int ppid = 0;
  ck_assert_int_eq(sscanf(p + 1, " %c %d", &state, &ppid), 2); // NOLINT(cert-err34-c)
  return (pid_t)ppid;
}

/* The gate: a FIFO the test holds open for reading and writing, so no job blocks opening it. */
static int open_gate(char *path, size_t n, const char *file) {
  scratch(path, n, file);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  return fd;
}

static void open_gate_for(int gate, int jobs) {
  for (int i = 0; i < jobs; i++)
    ck_assert_int_eq(write(gate, "\n", 1), 1);
}

/* ---- make: never more jobs than cells ------------------------------------------ */

/* 16 jobs of 0.5 s on a class of 4 cells: at most 4 at once, 4 reached, and in well under the
 * 8 s they take one at a time; every lease back after. */
START_TEST(make_never_more_than_cells) {
  const char *name = cli_segment("mk", "standard:cells=4,queue=16,on-holder-death=release", NULL);
  char dir[256], log[256], var_log[300];
  makefile_dir(dir, sizeof dir, "b", sleep_jobs);
  scratch(log, sizeof log, "log");
  snprintf(var_log, sizeof var_log, "LOG=%s", log);
  double t0 = now_s();
  ck_assert_msg(CLI("jobserver", name, "-c", "standard", "-t", "ci", "--", "make", "-s", "-C", dir,
                    var_log, "N=16", "D=0.5", "T=a") == 0,
                "%s", err);
  double took = now_s() - t0;
  ck_assert_msg(strstr(err, "jobserver") == NULL, "make said: %s", err);
  struct log_figures f = read_log(log);
  ck_assert_uint_eq(f.starts[0], 16);
  ck_assert_msg(f.peak == 4, "at most %u jobs ran at once on 4 cells", f.peak);
  ck_assert_msg(took < 8.0, "16 jobs of 0.5 s on 4 cells took %.1f s: not in parallel", took);
  assert_all_free(name, 4);
}
END_TEST

/* make -j8 ignores the jobserver: the bridge warns, and the log sees it run 8 at once (the
 * count above would catch a bridge that let make run more jobs than its leases). */
START_TEST(make_minus_j_warned) {
  const char *name = cli_segment("mj", "standard:cells=4,queue=16,on-holder-death=release", NULL);
  char dir[256], log[256], var_log[300];
  makefile_dir(dir, sizeof dir, "b", sleep_jobs);
  scratch(log, sizeof log, "log");
  snprintf(var_log, sizeof var_log, "LOG=%s", log);
  ck_assert_int_eq(CLI("jobserver", name, "-c", "standard", "-t", "ci", "--", "make", "-s", "-C",
                       dir, "-j8", var_log, "N=8", "D=0.5", "T=a"),
                   0);
  ck_assert_msg(strstr(err, "shmsched: jobserver: warning: 'make' is given '-j8'") != NULL, "%s",
                err);
  ck_assert_msg(strstr(err, "-j8 forced in submake") != NULL, "make said: %s", err);
  ck_assert_uint_gt(read_log(log).peak, 4);
  assert_all_free(name, 4);
}
END_TEST

/* MAKEFLAGS as the command sees it: the inherited jobserver words gone, ours in, flag letters
 * first; CARGO_MAKEFLAGS the same. */
START_TEST(makeflags_seen_by_the_command) {
  const char *name = cli_segment("mf", "standard:cells=3,queue=16", NULL);
  setenv("MAKEFLAGS", "k -j16 --jobserver-auth=7,8 -- V=1", 1);
  ck_assert_int_eq(CLI("jobserver", name, "-c", "standard", "-t", "ci", "--max", "2", "--", "sh",
                       "-c", "printf '[%s]\\n[%s]\\n' \"$MAKEFLAGS\" \"$CARGO_MAKEFLAGS\""),
                   0);
  int r, w;
  ck_assert_msg(sscanf(out, "[k -j2 --jobserver-auth=%d,%d -- V=1]", &r, &w) == 2, "%s", out);
  char want[256];
  snprintf(want, sizeof want, "[k -j2 --jobserver-auth=%d,%d -- V=1]\n", r, w);
  ck_assert_str_eq(strchr(out, '\n') + 1, want);
  unsetenv("MAKEFLAGS");
  ck_assert_int_eq(CLI("jobserver", name, "-c", "standard", "-t", "ci", "--style", "fifo", "--",
                       "sh", "-c", "echo \"[$MAKEFLAGS]\"; test -p \"${MAKEFLAGS#*fifo:}\""),
                   0);
  ck_assert_msg(strncmp(out, "[ -j3 --jobserver-auth=fifo:/", 29) == 0, "%s", out);
}
END_TEST

/* ---- two builds, two tenants ----------------------------------------------------- */

/* Four gated jobs first, then N jobs of `sleep D`: the build holds every cell until the gate
 * opens. */
static const char gated_then_sleep[] =
    "J := $(shell seq 1 $(N))\n"
    "all: g1 g2 g3 g4 $(addprefix j,$(J))\n"
    "g%:\n"
    "\t@flock $(LOG) sh -c 'echo start $(T) >> $(LOG)'; echo up $$$$; read x < $(GATE); "
    "flock $(LOG) sh -c 'echo end $(T) >> $(LOG)'\n"
    "j%:\n"
    "\t@flock $(LOG) sh -c 'echo start $(T) >> $(LOG)'; sleep $(D); "
    "flock $(LOG) sh -c 'echo end $(T) >> $(LOG)'\n";

/* Build a holds all 4 cells when build b starts: while both then have jobs to start, each
 * starts about half of them. (A bridge that let its build keep the tokens it writes back,
 * as one pipe for both would, never lets b in until a is done.) The class shares by grants:
 * by time, a is charged at the gate's opening for all it held while the test started b, a
 * lead the documented bound allows but that this count of starts cannot tell apart. */
START_TEST(two_builds_share_fairly) {
  const char *name = cli_segment(
      "fair", "standard:cells=4,queue=16,on-holder-death=release,fairness=grants", NULL);
  char a[256], b[256], log[256], gpath[256], var_log[300], var_gate[300];
  makefile_dir(a, sizeof a, "a", gated_then_sleep);
  makefile_dir(b, sizeof b, "b", sleep_jobs);
  scratch(log, sizeof log, "log");
  snprintf(var_log, sizeof var_log, "LOG=%s", log);
  int gate = open_gate(gpath, sizeof gpath, "gate");
  snprintf(var_gate, sizeof var_gate, "GATE=%s", gpath);
  struct cli_proc pa, pb;
  CLI_SPAWN(&pa, "jobserver", name, "-c", "standard", "-t", "a", "--", "make", "-s", "-C", a,
            var_log, var_gate, "N=24", "D=0.2", "T=a");
  pid_t held[4];
  await_ups(pa.out, held, 4);
  ck_assert_uint_eq(status_figure(name, "cells_leased"), 4);
  CLI_SPAWN(&pb, "jobserver", name, "-c", "standard", "-t", "b", "--", "make", "-s", "-C", b,
            var_log, "N=24", "D=0.2", "T=b");
  open_gate_for(gate, 4);
  ck_assert_msg(reap(&pa) == 0, "%s", perr);
  ck_assert_msg(reap(&pb) == 0, "%s", perr);
  struct log_figures f = read_log(log);
  ck_assert_uint_eq(f.starts[0], 28);
  ck_assert_uint_eq(f.starts[1], 24);
  ck_assert_uint_le(f.peak, 4);
  unsigned diff = f.window[0] > f.window[1] ? f.window[0] - f.window[1] : f.window[1] - f.window[0];
  ck_assert_msg(f.both_busy_n >= 16 && diff * 5 <= f.both_busy_n,
                "while both were busy, a started %u jobs and b %u", f.window[0], f.window[1]);
  assert_all_free(name, 4);
  close(gate);
}
END_TEST

/* ---- kill -9 ------------------------------------------------------------------------ */

/* A build of 6 gated jobs on 4 cells, running 4 of them; their pids into pids. */
static void gated_build(struct cli_proc *p, const char *name, int *gate, pid_t pids[4]) {
  char dir[256], log[256], gpath[256], var_log[300], var_gate[300];
  makefile_dir(dir, sizeof dir, "b", gated_jobs);
  scratch(log, sizeof log, "log");
  snprintf(var_log, sizeof var_log, "LOG=%s", log);
  *gate = open_gate(gpath, sizeof gpath, "gate");
  snprintf(var_gate, sizeof var_gate, "GATE=%s", gpath);
  CLI_SPAWN(p, "jobserver", name, "-c", "standard", "-t", "ci", "--", "make", "-s", "-C", dir,
            var_log, var_gate, "N=6", "T=a");
  await_ups(p->out, pids, 4);
  ck_assert_uint_eq(status_figure(name, "cells_leased"), 4);
}

/* make killed: what is left of its tree is ended, every lease released. */
START_TEST(kill_make) {
  const char *name = cli_segment("km", "standard:cells=4,queue=16,on-holder-death=release", NULL);
  struct cli_proc p;
  int gate;
  pid_t jobs[4];
  gated_build(&p, name, &gate, jobs);
  pid_t make = parent_of(jobs[0]);
  ck_assert_int_eq(kill(make, SIGKILL), 0);
  ck_assert_int_eq(reap(&p), 128 + SIGKILL);
  for (int i = 0; i < 4; i++)
    ck_assert_msg(!harness_running(jobs[i]), "job %d outlived the build", (int)jobs[i]);
  assert_all_free(name, 4);
  close(gate);
}
END_TEST

/* A recipe killed: make stops, its other jobs end, every lease released; exit make's 2. */
START_TEST(kill_recipe) {
  const char *name = cli_segment("kr", "standard:cells=4,queue=16,on-holder-death=release", NULL);
  struct cli_proc p;
  int gate;
  pid_t jobs[4];
  gated_build(&p, name, &gate, jobs);
  ck_assert_int_eq(kill(jobs[1], SIGKILL), 0);
  await_text(p.err, "Killed");
  open_gate_for(gate, 3);
  ck_assert_int_eq(reap(&p), 2);
  assert_all_free(name, 4);
  close(gate);
}
END_TEST

/* The bridge killed: make dies of PDEATHSIG; the recovery kills the rest of the build's tree
 * (its recorded process group) before it releases the leases (on-holder-death=release). */
START_TEST(kill_bridge) {
  ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); /* orphans come to us, unreaped */
  const char *name = cli_segment("kb", "standard:cells=4,queue=16,on-holder-death=release", NULL);
  struct cli_proc p;
  int gate;
  pid_t jobs[4];
  gated_build(&p, name, &gate, jobs);
  pid_t make = parent_of(jobs[0]);
  ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
  siginfo_t si; /* dead, not reaped: its jobs hold its pipes open until the recovery */
  ck_assert_int_eq(waitid(P_PID, (id_t)p.pid, &si, WEXITED | WNOWAIT), 0);
  ck_assert_uint_eq(status_figure(name, "cells_leased"), 4); /* held by a dead process */
  ck_assert_int_eq(CLI("check", name, "--repair"), 0);
  ck_assert_int_eq(reap(&p), 128 + SIGKILL);
  ck_assert_msg(!harness_running(make), "make outlived its bridge");
  for (int i = 0; i < 4; i++)
    ck_assert_msg(!harness_running(jobs[i]), "job %d outlived its bridge's leases", (int)jobs[i]);
  assert_all_free(name, 4);
  close(gate);
}
END_TEST

/* A sub-make killed holding tokens: while its orphaned jobs run they keep their leases; once
 * they are gone, the bridge reclaims the tokens no process can use during the build. */
static const char top_make[] = ".PHONY: all sub hold\n"
                               "all: sub hold\n"
                               "sub:\n"
                               "\t+@$(MAKE) -s -C sub N=3 T=a\n"
                               "hold:\n"
                               "\t@echo up hold $$$$; read x < $(HOLD)\n";

/* The three sub-make jobs' "up PID" (pids into jobs) and hold's "up hold PID", in any order. */
static void await_ups_and_hold(int fd, pid_t jobs[3]) {
  char line[256];
  int got = 0, hold = 0;
  while (got < 3 || !hold) {
    cli_read_line(fd, line, sizeof line);
    int pid;
    if (strncmp(line, "up hold ", 8) == 0)
      hold = 1;
    else if (sscanf(line, "up %d", &pid) == 1) // NOLINT(cert-err34-c)
      jobs[got++] = (pid_t)pid;
  }
}

START_TEST(dead_client_tokens_reclaimed) {
  ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const char *name = cli_segment("rc", "standard:cells=4,queue=16,on-holder-death=release", NULL);
  char dir[256], sub[512], log[256], gpath[256], hpath[256], var_log[300], var_gate[300],
      var_hold[300];
  makefile_dir(dir, sizeof dir, "b", top_make);
  snprintf(sub, sizeof sub, "%s/sub", dir);
  ck_assert_int_eq(mkdir(sub, 0755), 0);
  snprintf(sub, sizeof sub, "%s/sub/Makefile", dir);
  write_file(sub, gated_jobs);
  scratch(log, sizeof log, "log");
  snprintf(var_log, sizeof var_log, "LOG=%s", log);
  int gate = open_gate(gpath, sizeof gpath, "gate"), hold = open_gate(hpath, sizeof hpath, "hold");
  snprintf(var_gate, sizeof var_gate, "GATE=%s", gpath);
  snprintf(var_hold, sizeof var_hold, "HOLD=%s", hpath);
  struct cli_proc p;
  CLI_SPAWN(&p, "jobserver", name, "-c", "standard", "-t", "ci", "--", "make", "-s", "-C", dir,
            var_log, var_gate, var_hold);
  pid_t jobs[3];
  await_ups_and_hold(p.out, jobs);
  ck_assert_uint_eq(status_figure(name, "cells_leased"), 4);
  pid_t submake = parent_of(jobs[0]);
  ck_assert_int_gt(submake, 0);
  ck_assert_int_eq(kill(submake, SIGKILL), 0);
  await_text(p.err, "Killed"); /* the top make saw its sub-make die */
  open_gate_for(gate, 3);      /* the sub-make's orphaned jobs end: their tokens are lost */
  await_text(p.err, "shmsched: jobserver: reclaimed");
  ck_assert_uint_lt(status_figure(name, "cells_leased"), 4); /* while hold still runs */
  open_gate_for(hold, 1);
  ck_assert_int_eq(reap(&p), 2);
  assert_all_free(name, 4);
  close(gate);
  close(hold);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------- */

START_TEST(bad_arguments) {
  const char *name =
      cli_segment("ba", "standard:cells=2,queue=4", "small:cells=1,queue=4,mode=worker");
  static const struct {
    const char *args[12];
    const char *says;
  } cases[] = {
      {{"jobserver", NULL}, "missing NAME"},
      {{"jobserver", "x", "-c", "standard", "-t", "a", NULL}, "missing '-- CMD"},
      {{"jobserver", "x", "-t", "a", "--", "true", NULL}, "missing --class"},
      {{"jobserver", "x", "-c", "standard", "-t", "a b", "--", "true", NULL}, "--tenant"},
      {{"jobserver", "x", "-c", "huge", "-t", "a", "--", "true", NULL}, "huge"},
      {{"jobserver", "x", "-c", "standard", "-t", "a", "--style", "socket", "--", "true", NULL},
       "--style: expected auto, fifo or pipe, got 'socket'"},
      {{"jobserver", "x", "-c", "standard", "-t", "a", "--spare", "0", "--", "true", NULL},
       "--spare: must be 1..4096, got 0"},
      {{"jobserver", "x", "-c", "standard", "-t", "a", "--max", "x", "--", "true", NULL}, "--max"},
      {{"jobserver", "x", "-c", "standard", "-t", "a", "--poll", "5s", "--", "true", NULL},
       "--poll: must be 1ms..1s"},
      {{"jobserver", "x", "-c", "standard", "-t", "a", "-j", "4", "--", "true", NULL},
       "unknown option"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, cases[i].args), 2);
    ck_assert_msg(strstr(err, cases[i].says) != NULL, "case %zu: %s", i, err);
  }
  ck_assert_int_eq(CLI("jobserver", name, "-c", "standard", "-t", "a", "--max", "3", "--", "true"),
                   2);
  ck_assert_msg(strstr(err, "--max 3: more than class standard's 2 cells"), "%s", err);
  ck_assert_int_eq(CLI("jobserver", name, "-c", "small", "-t", "a", "--", "true"), 2);
  ck_assert_msg(strstr(err, "worker class"), "%s", err);
  ck_assert_int_eq(CLI("jobserver", name, "-c", "large", "-t", "a", "--", "true"), 2);
  ck_assert_int_eq(CLI("jobserver", name, "-c", "standard", "-t", "a", "--", "no-such-cmd-x"), 127);
  ck_assert_int_eq(CLI("jobserver", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "exit 7"),
                   7);
  assert_all_free(name, 2);
}
END_TEST

/* ---- cargo ------------------------------------------------------------------------ */

static char cargo[4096];

/* cargo on PATH, else in ~/.cargo/bin (rustup's); its directory goes first on PATH. */
static int find_cargo(void) {
  const char *path = getenv("PATH"), *home = getenv("HOME");
  char dirs[8192];
  snprintf(dirs, sizeof dirs, "%s:%s/.cargo/bin", path ? path : "/usr/bin:/bin",
           home ? home : "/root");
  for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(cargo, sizeof cargo, "%s/cargo", d);
    if (access(cargo, X_OK) == 0) {
      char newpath[8400];
      snprintf(newpath, sizeof newpath, "%s:%s", d, path ? path : "/usr/bin:/bin");
      setenv("PATH", newpath, 1);
      return 1;
    }
  }
  return 0;
}

/* A crate whose compile takes a moment: generic code instantiated many times. */
static void write_crate(const char *ws, int i) {
  char path[600], text[2048];
  snprintf(path, sizeof path, "%s/c%d", ws, i);
  ck_assert_int_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/c%d/src", ws, i);
  ck_assert_int_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/c%d/Cargo.toml", ws, i);
  snprintf(text, sizeof text,
           "[package]\nname = \"c%d\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n"
           "[dependencies]\n",
           i);
  write_file(path, text);
  snprintf(path, sizeof path, "%s/c%d/src/lib.rs", ws, i);
  write_file(path, "pub fn f<const N: usize>(x: u64) -> u64 { (0..N as u64).fold(x, |a, b| "
                   "a.wrapping_mul(31).wrapping_add(b)) }\n"
                   "macro_rules! many { ($($n:literal)*) => { pub fn all(x: u64) -> u64 { 0 "
                   "$(+ f::<$n>(x))* } } }\n"
                   "many!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 "
                   "27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50);\n");
}

/* A wrapper around rustc that logs each compile of a crate (not cargo's `rustc -vV` probes). */
static const char wrapper[] = "#!/bin/sh\n"
                              "case \" $* \" in *' --crate-name ___ '*) exec \"$@\" ;; esac\n"
                              "case \" $* \" in *' --crate-name '*) ;; *) exec \"$@\" ;; esac\n"
                              "flock \"$LOG\" sh -c 'echo start a >> \"$LOG\"'\n"
                              "\"$@\"; rc=$?\n"
                              "flock \"$LOG\" sh -c 'echo end a >> \"$LOG\"'\n"
                              "exit $rc\n";

/* The workspace of six local crates, with its rustc wrapper; RUSTC_WRAPPER, LOG and
 * CARGO_TARGET_DIR set for it. The manifest's path into manifest. */
static void cargo_workspace(char *manifest, size_t n, char *log, size_t log_n) {
  char ws[256], path[600];
  scratch(ws, sizeof ws, "ws");
  ck_assert_int_eq(mkdir(ws, 0755), 0);
  snprintf(manifest, n, "%s/Cargo.toml", ws);
  write_file(manifest, "[workspace]\nmembers = [\"c1\", \"c2\", \"c3\", \"c4\", \"c5\", \"c6\"]\n"
                       "resolver = \"2\"\n");
  for (int i = 1; i <= 6; i++)
    write_crate(ws, i);
  snprintf(path, sizeof path, "%s/rustc-log", ws);
  write_file(path, wrapper);
  ck_assert_int_eq(chmod(path, 0755), 0);
  setenv("RUSTC_WRAPPER", path, 1);
  scratch(log, log_n, "log");
  setenv("LOG", log, 1);
  snprintf(path, sizeof path, "%s/target", ws);
  setenv("CARGO_TARGET_DIR", path, 1);
  unsetenv("MAKEFLAGS");
  unsetenv("CARGO_MAKEFLAGS");
}

/* cargo builds the six crates through style, offline, asked for up to 8 jobs: it never runs
 * more compiles at once than the bridge's leases (--max 3), and says nothing of the jobserver.
 * (Without the bridge the same build runs all six at once.) */
static void cargo_build(const char *style) {
  const char *name = cli_segment("cg", "standard:cells=4,queue=16,on-holder-death=release", NULL);
  char manifest[600], log[256];
  cargo_workspace(manifest, sizeof manifest, log, sizeof log);
  ck_assert_msg(CLI("jobserver", name, "-c", "standard", "-t", "ci", "--style", style, "--max", "3",
                    "--", "cargo", "build", "--offline", "-q", "-j", "8", "--manifest-path",
                    manifest) == 0,
                "%s", err);
  ck_assert_msg(strstr(err, "jobserver") == NULL, "a jobserver warning: %s", err);
  struct log_figures f = read_log(log);
  ck_assert_uint_eq(f.starts[0], 6);
  ck_assert_msg(f.peak <= 3, "%u compiles at once on 3 leases", f.peak);
  assert_all_free(name, 4);
}

START_TEST(cargo_pipe) { cargo_build("pipe"); }
END_TEST

/* The jobserver crate reads a FIFO since 0.1.26 (2023): cargo 1.74 and later have it. Debian
 * 12's cargo (0.66, Rust 1.65) does not: it would run its own -j8 beside the FIFO. */
static int cargo_knows_fifo(void) {
  FILE *f = popen("cargo --version", "r");
  int major = 0, minor = 0;
  if (f == NULL)
    return 0;
  int ok = fscanf(f, "cargo %d.%d", &major, &minor) == 2; // NOLINT(cert-err34-c)
  pclose(f);
  return ok && (major > 1 || minor >= 74);
}

START_TEST(cargo_fifo) {
  if (!cargo_knows_fifo()) {
    printf("cargo_fifo: SKIPPED: this cargo predates FIFO jobservers (1.74); --style pipe is "
           "tested\n");
    return;
  }
  cargo_build("fifo");
}
END_TEST

int main(int argc, char **argv) {
  Suite *s = suite_create("cli_jobserver");
  TCase *tc;
  if (argc > 1 && strcmp(argv[1], "cargo") == 0) {
    if (!find_cargo()) {
      printf("test_cli_jobserver cargo: SKIPPED: no cargo on PATH nor in ~/.cargo/bin "
             "(scripts/setup.sh installs Debian's)\n");
      return 77;
    }
    tc = harness_tcase("cargo");
    tcase_set_timeout(tc, 240); /* a cold compile of six crates, under a sanitizer too */
    tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
    tcase_add_test(tc, cargo_pipe);
    tcase_add_test(tc, cargo_fifo);
    suite_add_tcase(s, tc);
    return harness_run(s);
  }
  tc = harness_tcase("make");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, make_never_more_than_cells);
  tcase_add_test(tc, make_minus_j_warned);
  tcase_add_test(tc, makeflags_seen_by_the_command);
  tcase_add_test(tc, two_builds_share_fairly);
  suite_add_tcase(s, tc);
  tc = harness_tcase("kill");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, kill_make);
  tcase_add_test(tc, kill_recipe);
  tcase_add_test(tc, kill_bridge);
  tcase_add_test(tc, dead_client_tokens_reclaimed);
  suite_add_tcase(s, tc);
  tc = harness_tcase("errors");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

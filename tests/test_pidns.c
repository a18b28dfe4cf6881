/*
 * A command's process group is a number of its holder's pid namespace: recovery in another
 * namespace must never signal that number as it is. Two nested pid namespaces (an outer one,
 * private to the test, and an inner one inside it, as a container on a host), each with decoy
 * process groups at the low numbers (live leaders with a member, and members whose leader has
 * exited); a holder in one records its command, is SIGKILLed, and a process of the other
 * disposes of what it left, through each path that does: recovery, the supervisor's
 * recovery of the dead, taking over its process entry, destroying the segment. From the outer
 * namespace the inner one is visible: the command is found and killed there, and its cell goes
 * on. From the inner namespace the outer one is not: the command is left alone and its cell
 * quarantined. No decoy is ever signalled. Then how holders are named across namespaces: a
 * holder that is a nested namespace's init (pid 1 there) is shown from outside by its pid
 * outside, with its own state, and the supervisor's log names it so when it dies; a holder
 * outside is shown from inside as of another namespace, state unknown. Needs root (unshare of
 * pid and mount namespaces): skips (77) without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"
#include "sched_util.h"

#define HOLDER_DECOYS    6  /* groups in the holder's namespace */
#define RECOVERER_DECOYS 24 /* more in the other: the holder's numbers fall among them */

enum path { BY_RECOVER, BY_RECOVER_DEAD, BY_TAKEOVER, BY_DESTROY, PATHS };
static const char *const path_names[PATHS] = {"recover", "recover-dead", "takeover", "destroy"};

static const char *seg_name;
/* The pipe ends of this side: closed in every process it forks, so that a side that dies is
 * seen (its pipe at end of file), whatever it leaves running. */
static int side_fds[2] = {-1, -1};

static void forget_side(void) {
  close(side_fds[0]);
  close(side_fds[1]);
}

__attribute__((noreturn)) static void wait_to_be_killed(void) {
  alarm(SHMS_TEST_TIMEOUT); /* should a failed test leave it behind */
  for (;;)
    pause();
}

static void say(int fd, char c) {
  if (write(fd, &c, 1) != 1)
    _exit(90);
}

static char hear(int fd) {
  char c;
  return read(fd, &c, 1) == 1 ? c : 0;
}

struct decoys {
  int n;
  pid_t pid[3 * RECOVERER_DECOYS];
};

/* Fill the low numbers of this namespace with process groups: even decoys keep their leader,
 * odd ones lose it (a group named by a number no process has, as a double-forked daemon's). */
static void make_decoys(struct decoys *d, int groups) {
  d->n = 0;
  for (int i = 0; i < groups; i++) {
    int p[2];
    if (pipe(p) != 0)
      _exit(91);
    pid_t leader = fork();
    if (leader == 0) {
      forget_side();
      setpgid(0, 0);
      pid_t member = fork();
      if (member == 0)
        wait_to_be_killed();
      if (write(p[1], &member, sizeof member) != (ssize_t)sizeof member)
        _exit(92);
      if (i % 2)
        _exit(0);
      wait_to_be_killed();
    }
    pid_t member;
    if (leader < 0 || read(p[0], &member, sizeof member) != (ssize_t)sizeof member)
      _exit(93);
    if (i % 2)
      waitpid(leader, NULL, 0);
    else
      d->pid[d->n++] = leader;
    d->pid[d->n++] = member;
    close(p[0]);
    close(p[1]);
  }
}

static char decoys_state(const struct decoys *d) {
  for (int i = 0; i < d->n; i++)
    if (!harness_running(d->pid[i])) {
      fprintf(stderr, "decoy %d of this namespace was killed\n", (int)d->pid[i]);
      return 'n';
    }
  return 'y';
}

/* Fork a process that is init of a new pid namespace (with its own /proc) and runs body. */
static pid_t spawn_ns(void (*body)(int, int), int in, int out) {
  pid_t proxy = fork();
  if (proxy != 0)
    return proxy;
  if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0)
    _exit(94);
  pid_t init = fork();
  if (init != 0)
    close_range(3, ~0u, 0); /* the namespace's init has what it needs */
  if (init == 0) {
    forget_side(); /* the parent side's */
    side_fds[0] = in;
    side_fds[1] = out;
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, NULL) != 0)
      _exit(95);
    body(in, out);
    _exit(0);
  }
  int st = 0;
  waitpid(init, &st, 0);
  _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 96);
}

/*
 * The holder's side (this namespace's init): decoys, then a holder of the class's one cell
 * whose command is a group (a leader and a member), recorded. Answers 'r' once it runs; then
 * 'k': the holder killed; 'c': whether the command was killed ('y') or still runs ('n');
 * 'd': whether every decoy lives; 'q': end, and the namespace with every process of it.
 */
static void holder_side(int in, int out) {
  struct decoys d;
  make_decoys(&d, HOLDER_DECOYS);
  int p[2], q[2];
  if (pipe(p) != 0 || pipe(q) != 0)
    _exit(97);
  pid_t holder = fork();
  if (holder == 0) {
    forget_side();
    shms_t *h;
    shms_request r = sched_req("holder", 0);
    shms_lease l;
    if (shms_attach(seg_name, 0, &h) != SHMS_OK || shms_acquire(h, &r, &l) != SHMS_OK)
      _exit(1);
    pid_t cmd[2];
    cmd[0] = fork();
    if (cmd[0] == 0) {
      setpgid(0, 0);
      pid_t member = fork();
      if (member == 0)
        wait_to_be_killed();
      pid_t both[2] = {getpid(), member};
      if (write(p[1], both, sizeof both) != (ssize_t)sizeof both)
        _exit(2);
      wait_to_be_killed();
    }
    setpgid(cmd[0], cmd[0]);
    if (shms_command_set(h, cmd[0]) != SHMS_OK) {
      fprintf(stderr, "command_set: %s\n", shms_last_error_detail());
      _exit(3);
    }
    say(q[1], 'r');
    wait_to_be_killed();
  }
  pid_t cmd[2];
  if (read(p[0], cmd, sizeof cmd) != (ssize_t)sizeof cmd || hear(q[0]) != 'r')
    _exit(98);
  say(out, 'r');
  for (char c; (c = hear(in)) != 0;) {
    if (c == 'k') {
      kill(holder, SIGKILL);
      waitpid(holder, NULL, 0);
    } else if (c == 'c') {
      c = harness_running(cmd[0]) || harness_running(cmd[1]) ? 'n' : 'y';
    } else if (c == 'd') {
      c = decoys_state(&d);
    }
    say(out, c);
    if (c == 'q')
      return;
  }
}

/* What the recoverer's way of disposing of the dead holder did, as one letter. */
static char dispose(enum path path) {
  shms_t *h;
  shms_recovery r = {0};
  int rc;
  switch (path) {
  case BY_TAKEOVER: /* the only entry is the dead holder's */
    rc = shms_attach(seg_name, 0, &h);
    if (rc == SHMS_OK)
      shms_detach(h);
    return rc == SHMS_OK ? 'T' : rc == SHMS_EBUSY ? 'B' : 'E';
  case BY_DESTROY:
    return shms_destroy(seg_name, SHMS_DESTROY_FORCE) == SHMS_OK ? 'D' : 'E';
  case BY_RECOVER:
  case BY_RECOVER_DEAD:
    if (shms_attach(seg_name, 0, &h) != SHMS_OK)
      return 'E';
    rc = path == BY_RECOVER ? shms_recover(h, &r) : shms_recover_dead(h, 0, NULL, NULL, &r);
    shms_detach(h);
    if (rc != SHMS_OK)
      return 'E';
    return r.leases_released == 1 ? 'R' : r.leases_quarantined == 1 ? 'Q' : 'N';
  default:
    return 'E';
  }
}

static enum path the_path;

static pid_t inner_proxy; /* in the outer namespace: the inner namespace's */

/* The recoverer's side (this namespace's init): decoys; 'g': dispose (the answer is dispose's
 * letter); 'd': whether every decoy lives; 'w': wait until the inner namespace has ended. */
static void recoverer_side(int in, int out) {
  struct decoys d;
  make_decoys(&d, RECOVERER_DECOYS);
  say(out, 'r');
  for (char c; (c = hear(in)) != 0;) {
    if (c == 'w')
      waitpid(inner_proxy, NULL, 0);
    say(out, c == 'g' ? dispose(the_path) : c == 'd' ? decoys_state(&d) : c);
  }
}

struct sides {
  int hin[2], hout[2], rin[2], rout[2];
};

static int inner_holds;

static struct sides sd;

/* The outer namespace's init: its side, and the inner namespace with the other side. */
static void outer_body(int in, int out) {
  (void)in;
  (void)out;
  int theirs[] = {sd.hin[1], sd.hout[0], sd.rin[1], sd.rout[0]}; /* the test's ends */
  for (int i = 0; i < 4; i++)
    close(theirs[i]);
  /* The inner namespace takes its side's pipe ends; this one keeps the other's. */
  int hold[2] = {sd.hin[0], sd.hout[1]}, rec[2] = {sd.rin[0], sd.rout[1]};
  int *inner = inner_holds ? hold : rec, *mine = inner_holds ? rec : hold;
  side_fds[0] = mine[0];
  side_fds[1] = mine[1];
  inner_proxy = spawn_ns(inner_holds ? holder_side : recoverer_side, inner[0], inner[1]);
  close(inner[0]);
  close(inner[1]);
  (inner_holds ? recoverer_side : holder_side)(mine[0], mine[1]);
}

static char ask(int to, int from, char c) {
  ck_assert_int_eq(write(to, &c, 1), 1);
  char a = 0;
  ck_assert_int_eq(read(from, &a, 1), 1);
  return a;
}

/* A segment whose one cell a holder in a namespace of the two holds, with the recoverer in the
 * other, both sides answering: returns the outer namespace's proxy. */
static pid_t start_sides(int holder_inside, enum path path) {
  ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  if (path == BY_TAKEOVER)
    cfg.max_processes = 1;
  seg_name = harness_name("pidns");
  harness_create(seg_name, &cfg);
  inner_holds = holder_inside;
  the_path = path;
  ck_assert_int_eq(pipe(sd.hin), 0);
  ck_assert_int_eq(pipe(sd.hout), 0);
  ck_assert_int_eq(pipe(sd.rin), 0);
  ck_assert_int_eq(pipe(sd.rout), 0);
  pid_t proxy = spawn_ns(outer_body, -1, -1);
  ck_assert_int_gt(proxy, 0);
  close(sd.hin[0]);
  close(sd.hout[1]);
  close(sd.rin[0]);
  close(sd.rout[1]);
  char b = 0;
  ck_assert_int_eq(read(sd.hout[0], &b, 1), 1);
  ck_assert_int_eq(b, 'r');
  ck_assert_int_eq(read(sd.rout[0], &b, 1), 1);
  ck_assert_int_eq(b, 'r');
  ck_assert_int_eq(ask(sd.hin[1], sd.hout[0], 'k'), 'k');
  return proxy;
}

static void end_sides(pid_t proxy) {
  close(sd.hin[1]);
  close(sd.rin[1]);
  int st;
  ck_assert_int_eq(waitpid(proxy, &st, 0), proxy);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "outer namespace: status 0x%x", st);
  close(sd.hout[0]);
  close(sd.rout[0]);
  harness_remove(seg_name);
}

static void across(int holder_inside, enum path path) {
  pid_t proxy = start_sides(holder_inside, path);
  char done = ask(sd.rin[1], sd.rout[0], 'g');
  char cmd = ask(sd.hin[1], sd.hout[0], 'c');
  char hd = ask(sd.hin[1], sd.hout[0], 'd'), rd = ask(sd.rin[1], sd.rout[0], 'd');
  ck_assert_msg(hd == 'y' && rd == 'y', "%s %s: a decoy was killed in the %s namespace",
                holder_inside ? "inner holder" : "outer holder", path_names[path],
                hd != 'y' ? "holder's" : "recoverer's");
  if (holder_inside) {
    /* The outer namespace sees the inner one: the command is found, killed, the cell goes on. */
    ck_assert_msg(cmd == 'y', "%s from outside: the command still runs", path_names[path]);
    const char want[PATHS] = {'R', 'R', 'T', 'D'};
    ck_assert_msg(done == want[path], "%s from outside: '%c', expected '%c'", path_names[path],
                  done, want[path]);
  } else {
    /* The inner namespace cannot see the outer one: nothing is proven, nothing signalled, the
     * cell is not handed on. */
    ck_assert_msg(cmd == 'n', "%s from inside: the outer command was killed", path_names[path]);
    const char want[PATHS] = {'Q', 'Q', 'B', 'D'};
    ck_assert_msg(done == want[path], "%s from inside: '%c', expected '%c'", path_names[path], done,
                  want[path]);
  }
  end_sides(proxy);
}

static int in_initial_pidns(void) {
  char buf[64];
  ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  return strcmp(buf, "pid:[4026531836]") == 0;
}

/*
 * The holder's namespace ends (its init exits: every process of it dies). The initial
 * namespace sees every namespace, so a namespace it cannot find has ended, and with it the
 * command: the cell is released. The outer namespace cannot tell an ended namespace from one
 * it cannot see: the cell is quarantined.
 */
START_TEST(an_ended_namespace) {
  pid_t proxy = start_sides(1, BY_RECOVER);
  ck_assert_int_eq(ask(sd.hin[1], sd.hout[0], 'q'), 'q');
  ck_assert_int_eq(ask(sd.rin[1], sd.rout[0], 'w'), 'w');
  if (_i == 0) {
    if (!in_initial_pidns()) {
      printf("an_ended_namespace: not in the initial pid namespace: its case is not tried\n");
    } else {
      shms_t *h;
      shms_recovery r;
      ck_assert_shms_ok(shms_attach(seg_name, 0, &h));
      ck_assert_shms_ok(shms_recover(h, &r));
      ck_assert_uint_eq(r.leases_released, 1);
      shms_detach(h);
    }
  } else {
    ck_assert_int_eq(ask(sd.rin[1], sd.rout[0], 'g'), 'Q');
  }
  ck_assert_int_eq(ask(sd.rin[1], sd.rout[0], 'd'), 'y');
  end_sides(proxy);
}
END_TEST

START_TEST(inner_holder_outer_recoverer) { across(1, (enum path)_i); }
END_TEST

START_TEST(outer_holder_inner_recoverer) { across(0, (enum path)_i); }
END_TEST

/* ---- Holders named as the viewer sees them ---- */

/* A nested namespace's init (pid 1 there, as a container's) that takes the one cell, says 'r',
 * and holds it until its pipe ends or it is killed. */
static void init_holder(int in, int out) {
  shms_t *h;
  shms_request r = sched_req("boxed", 0);
  shms_lease l;
  if (shms_attach(seg_name, 0, &h) != SHMS_OK || shms_acquire(h, &r, &l) != SHMS_OK)
    _exit(1);
  say(out, 'r');
  hear(in);
  _exit(0);
}

struct nested {
  pid_t proxy;
  int to, from; /* our ends of its pipes */
};

static void one_cell_segment(void) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  seg_name = harness_name("pidview");
  harness_create(seg_name, &cfg);
}

/* A nested namespace whose init runs body with a pipe each way. */
static void nested_start(struct nested *n, void (*body)(int, int)) {
  int a[2], b[2];
  ck_assert_int_eq(pipe(a), 0);
  ck_assert_int_eq(pipe(b), 0);
  side_fds[0] = a[1]; /* ours: the namespace's processes close them (forget_side) */
  side_fds[1] = b[0];
  n->proxy = spawn_ns(body, a[0], b[1]);
  ck_assert_int_gt(n->proxy, 0);
  close(a[0]);
  close(b[1]);
  n->to = a[1];
  n->from = b[0];
  side_fds[0] = side_fds[1] = -1;
}

/* Let the namespace end (its init hears the end of its pipe), and the segment go. */
static void nested_end(struct nested *n) {
  close(n->to);
  close(n->from);
  waitpid(n->proxy, NULL, 0);
  harness_remove(seg_name);
}

static uint64_t pidns_of(const char *proc) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%s/ns/pid", proc);
  return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The one cell as this process sees it. */
static shms_cell_info the_cell(void) {
  shms_t *h;
  shms_cell_info ci;
  uint32_t count;
  memset(&ci, 0, sizeof ci);
  if (shms_attach(seg_name, SHMS_ATTACH_OBSERVER, &h) == SHMS_OK) {
    shms_cells(h, SHMS_CLASS_STANDARD, &ci, 1, &count);
    shms_detach(h);
  }
  return ci;
}

/* `shmsched status NAME --leases`' output into buf. */
static void status_leases(char *buf, size_t n) {
  struct cli_proc p;
  char err[512];
  CLI_SPAWN(&p, "status", seg_name, "--leases");
  ck_assert_int_eq(cli_reap(&p, 1, buf, n, NULL, err, sizeof err), 0);
}

/* Wait until pid shows state letter c in /proc (a stop takes effect once the process runs). */
static void await_state(pid_t pid, char c) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  for (;;) {
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *end = strrchr(buf, ')');
    if (end != NULL && end[1] == ' ' && end[2] == c)
      return;
    sched_yield();
  }
}

START_TEST(a_nested_holder_is_shown_by_its_pid_here) {
  struct nested n;
  one_cell_segment();
  nested_start(&n, init_holder);
  ck_assert_int_eq(hear(n.from), 'r');
  shms_cell_info ci = the_cell();
  ck_assert_uint_eq(ci.state, SHMS_CELL_LEASED);
  ck_assert_int_eq(ci.ns_pid, 1); /* its namespace's init */
  ck_assert_uint_eq(ci.pid_foreign, 0);
  ck_assert_int_gt(ci.pid, 1);
  /* The number is the holder's here: of its namespace, not ours. */
  char proc[16];
  snprintf(proc, sizeof proc, "%d", (int)ci.pid);
  ck_assert_uint_eq(pidns_of(proc), ci.pidns);
  ck_assert_uint_ne(pidns_of("self"), ci.pidns);
  char want[128], out[8192];
  snprintf(want, sizeof want, " pid=%d holder=running ", (int)ci.pid);
  status_leases(out, sizeof out);
  ck_assert_msg(strstr(out, want) != NULL, "status --leases: no '%s' in:\n%s", want, out);
  /* Its state, not that of whatever has the number 1 here. */
  ck_assert_int_eq(kill(ci.pid, SIGSTOP), 0);
  await_state(ci.pid, 'T');
  snprintf(want, sizeof want, " pid=%d holder=stopped proc_state=T", (int)ci.pid);
  status_leases(out, sizeof out);
  ck_assert_msg(strstr(out, want) != NULL, "status --leases: no '%s' in:\n%s", want, out);
  ck_assert_int_eq(kill(ci.pid, SIGCONT), 0);
  nested_end(&n);
}
END_TEST

/* What the inner viewer found of the outer holder: the cell, and status --leases' output. */
struct inner_view {
  shms_cell_info ci;
  char out[4096];
};

static void inner_viewer(int in, int out) {
  (void)in;
  static struct inner_view v;
  v.ci = the_cell();
  status_leases(v.out, sizeof v.out);
  if (write(out, &v, sizeof v) != (ssize_t)sizeof v)
    _exit(2);
}

START_TEST(an_outer_holder_is_shown_from_inside_as_foreign) {
  one_cell_segment();
  shms_t *h;
  shms_request r = sched_req("outside", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_attach(seg_name, 0, &h));
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  struct nested n;
  nested_start(&n, inner_viewer);
  static struct inner_view v;
  size_t got = 0;
  for (ssize_t k; got < sizeof v && (k = read(n.from, (char *)&v + got, sizeof v - got)) > 0;)
    got += (size_t)k;
  ck_assert_uint_eq(got, sizeof v);
  ck_assert_uint_eq(v.ci.state, SHMS_CELL_LEASED);
  ck_assert_int_eq(v.ci.pid, 0); /* never a number of the inner namespace */
  ck_assert_uint_eq(v.ci.pid_foreign, 1);
  ck_assert_int_eq(v.ci.ns_pid, getpid());
  ck_assert_uint_eq(v.ci.pidns, pidns_of("self"));
  char want[128];
  snprintf(want, sizeof want, " pid=ns:%llu:%d holder=unknown proc_state=- ",
           (unsigned long long)pidns_of("self"), (int)getpid());
  ck_assert_msg(strstr(v.out, want) != NULL, "inner status --leases: no '%s' in:\n%s", want, v.out);
  ck_assert_shms_ok(shms_release(h, &l));
  shms_detach(h);
  nested_end(&n);
}
END_TEST

/* Read the supervisor's log until a line holding what; that line into line. */
static void log_until(const struct cli_proc *sup, const char *what, char *line, size_t n) {
  do
    cli_read_line(sup->err, line, n);
  while (strstr(line, what) == NULL);
}

START_TEST(the_supervisor_names_a_nested_holder_by_its_pid_here) {
  one_cell_segment();
  struct cli_proc sup;
  char line[1024], want[128];
  CLI_SPAWN(&sup, "supervise", seg_name, "--verbose", "--interval", "20ms");
  log_until(&sup, " ready", line, sizeof line);
  struct nested n;
  nested_start(&n, init_holder);
  ck_assert_int_eq(hear(n.from), 'r');
  shms_cell_info ci = the_cell();
  ck_assert_int_gt(ci.pid, 1);
  ck_assert_uint_eq(ci.pid_foreign, 0);
  /* Watched by its number here (a pidfd on pid 1 here would be another process's). */
  snprintf(want, sizeof want, "watching process %d ", (int)ci.pid);
  log_until(&sup, want, line, sizeof line);
  ck_assert_int_eq(kill(ci.pid, SIGKILL), 0);
  log_until(&sup, "process-died", line, sizeof line);
  snprintf(want, sizeof want, " pid=%d", (int)ci.pid);
  char *at = strstr(line, want);
  ck_assert_msg(at != NULL && (at[strlen(want)] == ' ' || at[strlen(want)] == '\0'),
                "process-died names pid %d: %s", (int)ci.pid, line);
  log_until(&sup, "lease-", line, sizeof line);
  ck_assert_msg(strstr(line, want) != NULL, "the lease's line names pid %d: %s", (int)ci.pid, line);
  kill(sup.pid, SIGTERM);
  ck_assert_int_eq(cli_reap(&sup, 1, line, sizeof line, NULL, line, sizeof line), 0);
  /* The ring keeps the number with its namespace: once its process is gone it is named there. */
  struct cli_proc ev;
  static char out[16384];
  char err[512];
  CLI_SPAWN(&ev, "events", seg_name);
  ck_assert_int_eq(cli_reap(&ev, 1, out, sizeof out, NULL, err, sizeof err), 0);
  snprintf(want, sizeof want, "process-died pid=ns:%llu:1", (unsigned long long)ci.pidns);
  ck_assert_msg(strstr(out, want) != NULL, "events: no '%s' in:\n%s", want, out);
  nested_end(&n);
}
END_TEST

/* Whether this process may make pid and mount namespaces. */
static int can_unshare(void) {
  pid_t p = fork();
  if (p == 0)
    _exit(unshare(CLONE_NEWPID | CLONE_NEWNS) == 0 ? 0 : 1);
  int st;
  return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void) {
  if (!can_unshare()) {
    printf("test_pidns: skipped: it needs to make pid and mount namespaces (root)\n");
    return 77;
  }
  Suite *s = suite_create("pidns");
  TCase *tc = harness_tcase("across");
  tcase_add_loop_test(tc, inner_holder_outer_recoverer, 0, PATHS);
  tcase_add_loop_test(tc, outer_holder_inner_recoverer, 0, PATHS);
  tcase_add_loop_test(tc, an_ended_namespace, 0, 2);
  suite_add_tcase(s, tc);
  TCase *view = harness_tcase("view");
  tcase_add_unchecked_fixture(view, cli_left_setup, cli_left_teardown);
  tcase_add_test(view, a_nested_holder_is_shown_by_its_pid_here);
  tcase_add_test(view, an_outer_holder_is_shown_from_inside_as_foreign);
  tcase_add_test(view, the_supervisor_names_a_nested_holder_by_its_pid_here);
  suite_add_tcase(s, view);
  return harness_run(s);
}

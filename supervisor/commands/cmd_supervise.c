/*
 * shmsched supervise: the foreground daemon that watches every registered
 * process and recovers what the dead leave behind (docs/operations.md).
 *
 * Each live process is watched with a pidfd (poll() reports its death at
 * once); the byte-range lock stays the ground truth: recovery runs whenever
 * any registered entry is found dead, so a missed event or a process that
 * died before we started is caught at the next tick. All state is in the
 * segment, so the supervisor can be killed and restarted at any moment.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../cli/event_fmt.h"
#include "../cli/holder_state.h"
#include "sup_cells.h"

#define MAX_WATCHED 4096

static const char supervise_help[] =
    "Usage: shmsched supervise NAME [--interval DUR] [--no-auto-repair] [--verbose]\n"
    "                          [--create CREATE-OPTIONS...]\n"
    "\n"
    "Run the segment's supervisor in the foreground: watch every attached process\n"
    "(a pidfd each; the process's lock on the segment is the ground truth) and,\n"
    "when one dies without detaching, recover what it left, and only that: its\n"
    "queued requests end owner-lost, its unaccepted grants return their cells, its\n"
    "leases are released or quarantined per the class's on-holder-death, a\n"
    "worker's job ends worker-lost (or is queued again once), and its process\n"
    "entry is freed. Only a class it died inside an operation on (or whose\n"
    "dispatcher baton it held) is held still and recomputed. A process that\n"
    "detached left nothing and costs nothing. At start it recovers everything once,\n"
    "as 'check --repair' does. A dead worker's quarantined cell\n"
    "goes back offline for a new worker once its job is settled (unless\n"
    "--no-auto-repair). One line per event on stderr, each with its UTC time.\n"
    "SIGTERM or SIGINT stop it cleanly, and it leaves by itself once the segment\n"
    "is destroyed; it can be killed and restarted at any moment: all state is in\n"
    "the segment. Only one supervisor runs per segment, and 'destroy' does not\n"
    "count it as keeping the segment in use. For the segment's owner, root and\n"
    "the members of its admin-group.\n"
    "Under systemd (Type=notify) it reports readiness on $NOTIFY_SOCKET.\n"
    "\n"
    "Options:\n"
    "  -i, --interval DUR     how often to look over the process table, and whether\n"
    "                         the segment was removed, even without an event\n"
    "                         (default 1s)\n"
    "      --no-auto-repair   leave dead workers' quarantined cells for 'repair'\n"
    "      --replace          if another supervisor holds the segment, SIGKILL it\n"
    "                         and take over (for one that is stopped or hung)\n"
    "  -v, --verbose          also log each process watched and each clean exit\n"
    "      --create ...       create NAME first, with the rest of the arguments as\n"
    "                         'shmsched create' options, if it does not exist yet\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 stopped by SIGTERM/SIGINT, or the segment was removed; 1 failed\n"
    "(not-found, busy: another supervisor runs, ...), 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched supervise jobs\n"
    "  shmsched supervise jobs --create --class standard:cells=4,queue=256\n";

struct sup_args {
  uint64_t interval_ns;
  int auto_repair;
  int verbose;
  int replace;     /* --replace: SIGKILL the supervisor there is, and take over */
  int create_argc; /* arguments after --create, or -1 */
  char **create_argv;
};

/* One log line: an RFC 3339 UTC time with milliseconds (wall_ns, 0: now), then the line. */
static void say_line(uint64_t wall_ns, const char *line) {
  char stamp[40];
  if (wall_ns == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    wall_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  }
  fprintf(stderr, "%s shmsched supervise: %s\n", event_time(stamp, sizeof stamp, wall_ns), line);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  say_line(0, line);
}

/* Returns -1 to go on, else an exit code. Stops at --create: the rest is create's. */
static int sup_options(int argc, char **argv, struct sup_args *a) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--create") == 0) {
      a->create_argc = argc - i - 1;
      a->create_argv = argv + i + 1;
      argc = i;
      break;
    }
  static const struct option opts[] = {
      {"interval", required_argument, NULL, 'i'}, {"no-auto-repair", no_argument, NULL, 'R'},
      {"verbose", no_argument, NULL, 'v'},        {"replace", no_argument, NULL, 'P'},
      {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
  char err[256];
  int c;
  while ((c = getopt_long(argc, argv, ":i:vh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(supervise_help);
    if (c == 'v') {
      a->verbose = 1;
      continue;
    }
    if (c == 'i') {
      if (cli_parse_duration(optarg, &a->interval_ns, err, sizeof err) != 0)
        return cli_usage("supervise: --interval: %s", err);
    } else if (c == 'R') {
      a->auto_repair = 0;
    } else if (c == 'P') {
      a->replace = 1;
    } else {
      return cli_bad_option("supervise", c, argv);
    }
  }
  return -1;
}

/* Create NAME from the --create arguments, unless it exists. Returns 0 or an exit code. */
static int maybe_create(const char *name, const struct sup_args *a) {
  shms_t *h;
  if (shms_attach(name, SHMS_ATTACH_OBSERVER, &h) == SHMS_OK) {
    shms_detach(h);
    say("segment '%s' exists: supervising it as it is", name);
    return 0;
  }
  char **argv = calloc((size_t)a->create_argc + 3, sizeof *argv);
  if (argv == NULL)
    return cli_fail(SHMS_ENOMEM, "supervise: out of memory");
  argv[0] = "create";
  argv[1] = (char *)name;
  for (int i = 0; i < a->create_argc; i++)
    argv[i + 2] = a->create_argv[i];
  optind = 0; /* let create's getopt start afresh */
  int rc = cmd_create(a->create_argc + 2, argv);
  free(argv);
  return rc;
}

/* Tell systemd (Type=notify) we are ready, if it asked. */
static void notify_ready(void) {
  const char *path = secure_getenv("NOTIFY_SOCKET");
  if (path == NULL || (path[0] != '/' && path[0] != '@') || strlen(path) >= 108)
    return;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path, path, strlen(path));
  if (sa.sun_path[0] == '@')
    sa.sun_path[0] = '\0'; /* an abstract socket */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  sendto(fd, "READY=1", 7, 0, (struct sockaddr *)&sa,
         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path)));
  close(fd);
}

struct watched {
  int fd; /* pidfd, -1 for none */
  int32_t pid;
  uint64_t start_time;
  uint32_t index;
};

/* What a supervisor keeps between events. */
struct supervisor {
  shms_t *h;
  const struct sup_args *a;
  pid_t self;
  struct watched w[MAX_WATCHED];
  uint32_t n;
  int32_t died[MAX_WATCHED]; /* pids a recovery found dead without detaching */
  uint32_t ndied;
  struct sup_cells cells; /* the last look at the cells, for what changed outside recoveries */
  uint64_t told_size;     /* the file size last reported as not the layout's, 0 none */
  /* A recovery a live process held up (a class held still: docs/protocol.md, "Held still"):
   * what it said, told once, and when the dead it left are looked at again (0: at once). */
  char held_up[256];
  uint64_t retry_ns;
};

/* How long the dead a held-up recovery left wait for the next try, unless a death comes first:
 * each try may wait a second on the class that held it up. */
#define HELD_UP_RETRY_NS (10ull * 1000 * 1000 * 1000)

/* Look over the process table: watch new live processes; 1 if some entry is dead. */
static int scan(struct supervisor *v) {
  static shms_process_info procs[MAX_WATCHED];
  uint32_t count;
  if (shms_processes(v->h, procs, MAX_WATCHED, &count) != SHMS_OK)
    return 0;
  int dead = 0;
  for (uint32_t i = 0; i < count && i < MAX_WATCHED; i++) {
    if (!procs[i].alive) {
      dead = 1;
      continue;
    }
    if (procs[i].pid <= 0)
      continue; /* of a pid namespace not seen from here: its lock alone tells its death */
    int known = procs[i].pid == v->self;
    for (uint32_t j = 0; j < v->n && !known; j++)
      known = v->w[j].pid == procs[i].pid && v->w[j].start_time == procs[i].start_time;
    if (known || v->n >= MAX_WATCHED)
      continue;
    int fd = (int)syscall(SYS_pidfd_open, procs[i].pid, 0);
    if (fd < 0) { /* gone already (or another namespace): the lock will tell */
      dead |= errno == ESRCH;
      continue;
    }
    v->w[v->n++] = (struct watched){fd, procs[i].pid, procs[i].start_time, procs[i].index};
    if (v->a->verbose)
      say("watching process %d (entry %u)", procs[i].pid, procs[i].index);
  }
  return dead;
}

/* One line per event: its kind, then what it concerns as key=value. */
static void log_event(const shms_event *ev, void *ctx) {
  struct supervisor *v = ctx;
  /* A recompute is how a recovery works, not what it found: the items it settled are told. */
  if (ev->kind == SHMS_EVENT_CLASS_RECOMPUTED && !v->a->verbose)
    return;
  char line[512];
  say_line(0, event_line(line, sizeof line, ev, 0, NULL));
  if (ev->kind == SHMS_EVENT_PROCESS_DIED && v->ndied < MAX_WATCHED)
    v->died[v->ndied++] = ev->pid;
}

/* Recover what the dead left, and only that (or, full, everything: at start, for what died
 * before we watched, even a dead owner whose entry was taken over since); one line per item. */
static void recover(struct supervisor *v, int full) {
  unsigned flags =
      (v->a->auto_repair ? SHMS_RECOVER_REPAIR_LOST_WORKERS : 0) | (full ? SHMS_RECOVER_FULL : 0);
  v->ndied = 0;
  sup_cells_tell(v->h, &v->cells, say_line); /* what others changed before this recovery */
  if (shms_recover_dead(v->h, flags, log_event, v, NULL) == SHMS_OK) {
    v->held_up[0] = '\0';
    v->retry_ns = 0;
  } else {
    const char *why = shms_last_error_detail();
    if (strcmp(why, v->held_up) != 0)
      say("recovery failed: %s", why);
    snprintf(v->held_up, sizeof v->held_up, "%s", why);
    v->retry_ns = cli_mono_ns() + HELD_UP_RETRY_NS;
  }
  sup_cells_look(v->h, &v->cells); /* what the recovery changed, it told itself */
}

static int died_unclean(const struct supervisor *v, int32_t pid) {
  for (uint32_t i = 0; i < v->ndied; i++)
    if (v->died[i] == pid)
      return 1;
  return 0;
}

/* Wait for a death, a signal or the interval. Returns 1 to stop, 0 to go on. */
static int wait_event(struct supervisor *v, int sigfd) {
  static struct pollfd p[MAX_WATCHED + 1];
  static struct watched gone[MAX_WATCHED];
  p[0] = (struct pollfd){.fd = sigfd, .events = POLLIN};
  for (uint32_t i = 0; i < v->n; i++)
    p[i + 1] = (struct pollfd){.fd = v->w[i].fd, .events = POLLIN};
  int rc = poll(p, v->n + 1, (int)(v->a->interval_ns / 1000000));
  if (rc < 0 && errno != EINTR)
    return say("poll: %s", strerror(errno)), 1;
  if (p[0].revents & POLLIN) {
    struct signalfd_siginfo si;
    if (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si)
      say("stopping (%s)", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
    return 1;
  }
  uint32_t ngone = 0;
  for (uint32_t i = v->n; i-- > 0;)
    if (p[i + 1].revents & (POLLIN | POLLHUP)) {
      close(v->w[i].fd);
      gone[ngone++] = v->w[i];
      v->w[i] = v->w[--v->n];
    }
  if (ngone == 0)
    return 0;
  /* A process that detached left its entry free (or to a newcomer): nothing to recover, and
   * nothing is done. One that did not is found by its lock. */
  recover(v, 0);
  for (uint32_t i = 0; i < ngone && v->a->verbose; i++)
    if (!died_unclean(v, gone[i].pid))
      say("process %d (entry %u) exited after detaching: nothing to recover", gone[i].pid,
          gone[i].index);
  return 0;
}

/* A segment file someone grew (or shrank) under us: every process attaching from now on refuses
 * it, though those attached go on. Said once per size it takes, and when it is right again. */
static void check_size(struct supervisor *v) {
  shms_segment_info info;
  if (shms_segment_info_get(v->h, &info) != SHMS_OK)
    return;
  uint64_t wrong = info.file_size != info.size ? info.file_size : 0;
  if (wrong == v->told_size)
    return;
  if (wrong > info.size)
    say("segment file grew to %llu bytes (its layout: %llu): processes attaching from now on "
        "refuse it (incompatible-segment), those attached go on; truncate it back, or drain it "
        "and create it again",
        (unsigned long long)info.file_size, (unsigned long long)info.size);
  else if (wrong != 0)
    say("segment file was cut to %llu bytes (its layout: %llu): processes touching past its end "
        "fail (SIGBUS); destroy it and create it again",
        (unsigned long long)info.file_size, (unsigned long long)info.size);
  else
    say("segment file is its layout's size again (%llu bytes)", (unsigned long long)info.size);
  v->told_size = wrong;
}

/* 1 once the segment was removed: then there is nothing left to supervise. */
static int removed(const struct supervisor *v) {
  int rc = shms_segment_removed(v->h);
  if (rc == 1)
    say("segment removed: stopping");
  return rc == 1;
}

static int supervise(shms_t *h, const char *name, const struct sup_args *a) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, NULL);
  int sigfd = signalfd(-1, &stop, SFD_CLOEXEC);
  if (sigfd < 0)
    return cli_fail(SHMS_ESYSTEM, "supervise: signalfd: %s", strerror(errno));
  static struct supervisor v;
  v = (struct supervisor){.h = h, .a = a, .self = getpid()};
  v.cells.verbose = a->verbose;
  say("supervising segment '%s' (pid %d)", name, (int)v.self);
  sup_cells_look(h, &v.cells);
  recover(&v, 1); /* whatever died before we started */
  notify_ready();
  say(v.held_up[0] == '\0' ? "ready: whatever died before this start is recovered"
                           : "ready: the recovery of what died before this start was held up "
                             "(above): tried again within 10 s");
  while (!removed(&v)) {
    sup_cells_tell(h, &v.cells, say_line);
    check_size(&v);
    shms_upkeep(h); /* cannot fail on our member handle; a lease's start is all it writes */
    if (scan(&v) && cli_mono_ns() >= v.retry_ns)
      recover(&v, 0);
    if (wait_event(&v, sigfd))
      break;
  }
  for (uint32_t i = 0; i < v.n; i++)
    close(v.w[i].fd);
  close(sigfd);
  sup_cells_free(&v.cells);
  return CLI_EXIT_OK;
}

/* The supervisor there is: its pid here (0: none, or of a pid namespace not seen from here) and
 * what /proc says it is doing. */
static pid_t current_supervisor(shms_t *h, const char **state) {
  shms_segment_info info;
  pid_t pid = shms_segment_info_get(h, &info) == SHMS_OK ? info.supervisor_pid : 0;
  *state = supervisor_state(pid);
  return pid;
}

/* The supervisor lock: ours, or (--replace) taken from the supervisor there is, SIGKILLed: the
 * kernel drops its lock as it dies, a stopped process included. 0, or an exit code. */
static int claim(shms_t *h, const struct sup_args *a) {
  int rc = shms_supervisor_claim(h);
  if (rc != SHMS_EBUSY)
    return rc == SHMS_OK ? 0 : cli_fail_lib(rc);
  char busy[256]; /* the claim's own words, before another call clears them */
  snprintf(busy, sizeof busy, "%s", shms_last_error_detail());
  const char *state;
  pid_t old = current_supervisor(h, &state);
  if (!a->replace) {
    if (strcmp(state, "stopped") == 0)
      return cli_fail(SHMS_EBUSY,
                      "supervise: the segment's supervisor (pid %d) is stopped (SIGSTOP, ^Z or a "
                      "debugger) and recovers nothing until it runs again; --replace kills it "
                      "and takes over",
                      (int)old);
    return cli_fail(SHMS_EBUSY, "%s", busy);
  }
  if (old <= 0)
    return cli_fail(SHMS_EBUSY,
                    "supervise: --replace: the supervisor holding the segment is of a pid "
                    "namespace not seen from here: it cannot be told which process to kill");
  if (kill(old, SIGKILL) != 0 && errno != ESRCH)
    return cli_fail(errno == EPERM ? SHMS_EPERM : SHMS_ESYSTEM,
                    "supervise: --replace: cannot kill pid %d: %s", (int)old, strerror(errno));
  for (int tries = 0; tries < 500; tries++) { /* its lock goes as it dies: up to 5 s */
    if (shms_supervisor_claim(h) == SHMS_OK) {
      say("replaced the segment's supervisor (pid %d, %s): SIGKILLed", (int)old, state);
      return 0;
    }
    struct timespec ms10 = {0, 10000000L};
    nanosleep(&ms10, NULL);
  }
  return cli_fail(SHMS_EBUSY,
                  "supervise: --replace: pid %d still holds the segment 5 s after "
                  "SIGKILL",
                  (int)old);
}

int cmd_supervise(int argc, char **argv) {
  struct sup_args a = {.interval_ns = 1000000000ull, .auto_repair = 1, .create_argc = -1};
  int rc = sup_options(argc, argv, &a);
  if (rc >= 0)
    return rc;
  const char *name;
  if (cli_take_name("supervise", argc - (a.create_argc >= 0 ? a.create_argc + 1 : 0), argv,
                    &name) != 0)
    return CLI_EXIT_USAGE;
  if (a.create_argc >= 0 && (rc = maybe_create(name, &a)) != 0)
    return rc;
  shms_t *h;
  if ((rc = cli_attach(name, 0, &h)) != 0)
    return rc;
  if ((rc = claim(h, &a)) != 0) {
    shms_detach(h);
    return rc;
  }
  rc = supervise(h, name, &a);
  shms_detach(h);
  return rc;
}

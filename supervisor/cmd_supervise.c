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

#include "cli.h"
#include "cli_config.h"
#include "cli_sched.h"

#define MAX_WATCHED 4096

static const char supervise_help[] =
    "Usage: shmsched supervise NAME [--interval DUR] [--no-auto-repair] [--create "
    "CREATE-OPTIONS...]\n"
    "\n"
    "Run the segment's supervisor in the foreground: watch every attached process\n"
    "(a pidfd each; the process's lock on the segment is the ground truth) and,\n"
    "when one dies, recover what it left: its queued requests end owner-lost, its\n"
    "unaccepted grants return their cells, its leases are released or quarantined\n"
    "per the class's on-holder-death, a worker's job ends worker-lost (or is\n"
    "queued again once), a dispatcher baton it held is taken back and the indexes\n"
    "it may have torn are rebuilt, and its process entry is freed. A dead\n"
    "worker's quarantined cell goes back offline for a new worker once its job is\n"
    "settled (unless --no-auto-repair). One line per event on stderr. SIGTERM or\n"
    "SIGINT stop it cleanly; it can also be killed and restarted at any moment:\n"
    "all state is in the segment. Only one supervisor runs per segment.\n"
    "Under systemd (Type=notify) it reports readiness on $NOTIFY_SOCKET.\n"
    "\n"
    "Options:\n"
    "  -i, --interval DUR     how often to look over the process table even without\n"
    "                         an event (default 1s)\n"
    "      --no-auto-repair   leave dead workers' quarantined cells for 'repair'\n"
    "      --create ...       create NAME first, with the rest of the arguments as\n"
    "                         'shmsched create' options, if it does not exist yet\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 stopped by SIGTERM/SIGINT, 1 failed (not-found, busy: another\n"
    "supervisor runs, ...), 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched supervise jobs\n"
    "  shmsched supervise jobs --create --class standard:cells=4,queue=256\n";

struct sup_args {
  uint64_t interval_ns;
  int auto_repair;
  int create_argc; /* arguments after --create, or -1 */
  char **create_argv;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "shmsched supervise: %s\n", line);
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
  static const struct option opts[] = {{"interval", required_argument, NULL, 'i'},
                                       {"no-auto-repair", no_argument, NULL, 'R'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  char err[256];
  int c;
  while ((c = getopt_long(argc, argv, ":i:h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(supervise_help);
    if (c == 'i') {
      if (cli_parse_duration(optarg, &a->interval_ns, err, sizeof err) != 0)
        return cli_usage("supervise: --interval: %s", err);
    } else if (c == 'R') {
      a->auto_repair = 0;
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
  const char *path = getenv("NOTIFY_SOCKET");
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

/* Look over the process table: watch new live processes; 1 if some entry is dead. */
static int scan(shms_t *h, struct watched *w, uint32_t *n, pid_t self) {
  static shms_process_info procs[MAX_WATCHED];
  uint32_t count;
  if (shms_processes(h, procs, MAX_WATCHED, &count) != SHMS_OK)
    return 0;
  int dead = 0;
  for (uint32_t i = 0; i < count && i < MAX_WATCHED; i++) {
    if (!procs[i].alive) {
      dead = 1;
      continue;
    }
    int known = procs[i].pid == self;
    for (uint32_t j = 0; j < *n && !known; j++)
      known = w[j].pid == procs[i].pid && w[j].start_time == procs[i].start_time;
    if (known || *n >= MAX_WATCHED)
      continue;
    int fd = (int)syscall(SYS_pidfd_open, procs[i].pid, 0);
    if (fd < 0) { /* gone already (or another namespace): the lock will tell */
      dead |= errno == ESRCH;
      continue;
    }
    w[(*n)++] = (struct watched){fd, procs[i].pid, procs[i].start_time, procs[i].index};
    say("watching process %d (entry %u)", procs[i].pid, procs[i].index);
  }
  return dead;
}

static void report(const shms_recovery *r) {
  char line[512];
  size_t len = 0;
#define PART(field, what)                                                                          \
  if (r->field && len < sizeof line)                                                               \
    len += (size_t)snprintf(line + len, sizeof line - len, "%s%u " what, len ? ", " : "", r->field);
  PART(dead_processes, "dead process entries freed")
  PART(requests_owner_lost, "requests ended owner-lost")
  PART(grants_returned, "unaccepted grants returned")
  PART(leases_released, "leases released")
  PART(leases_quarantined, "leases quarantined")
  PART(jobs_requeued, "jobs queued again")
  PART(jobs_lost, "jobs ended worker-lost")
  PART(workers_unbound, "dead workers' cells offline")
  PART(slots_freed, "slots freed")
  PART(batons_recovered, "dispatcher batons taken back")
  PART(counts_fixed, "counts recomputed")
#undef PART
  if (len > 0)
    say("recovered: %s", line);
}

static void recover(shms_t *h, int auto_repair) {
  shms_recovery r;
  int rc = shms_recover(h, &r);
  if (rc != SHMS_OK) {
    say("recovery failed: %s: %s", shms_err_name(rc), shms_last_error_detail());
    return;
  }
  report(&r);
  int n = auto_repair ? shms_repair_lost_workers(h) : 0;
  if (n > 0)
    say("repaired %d dead worker%s cell%s: offline, for a new worker", n, n == 1 ? "'s" : "s'",
        n == 1 ? "" : "s");
}

/* Wait for a death, a signal or the interval. Returns 1 to stop, 0 to go on. */
static int wait_event(shms_t *h, struct watched *w, uint32_t *n, int sigfd, int auto_repair,
                      uint64_t interval_ns) {
  static struct pollfd p[MAX_WATCHED + 1];
  p[0] = (struct pollfd){.fd = sigfd, .events = POLLIN};
  for (uint32_t i = 0; i < *n; i++)
    p[i + 1] = (struct pollfd){.fd = w[i].fd, .events = POLLIN};
  int rc = poll(p, *n + 1, (int)(interval_ns / 1000000));
  if (rc < 0 && errno != EINTR)
    return say("poll: %s", strerror(errno)), 1;
  if (p[0].revents & POLLIN) {
    struct signalfd_siginfo si;
    if (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si)
      say("stopping (%s)", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
    return 1;
  }
  int died = 0;
  for (uint32_t i = *n; i-- > 0;)
    if (p[i + 1].revents & (POLLIN | POLLHUP)) {
      say("process %d (entry %u) exited", w[i].pid, w[i].index);
      close(w[i].fd);
      w[i] = w[--*n];
      died = 1;
    }
  if (died)
    recover(h, auto_repair);
  return 0;
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
  static struct watched w[MAX_WATCHED];
  uint32_t n = 0;
  pid_t self = getpid();
  say("supervising segment '%s' (pid %d)", name, (int)self);
  recover(h, a->auto_repair); /* whatever died before we started */
  notify_ready();
  for (;;) {
    if (scan(h, w, &n, self))
      recover(h, a->auto_repair);
    if (wait_event(h, w, &n, sigfd, a->auto_repair, a->interval_ns))
      break;
  }
  for (uint32_t i = 0; i < n; i++)
    close(w[i].fd);
  close(sigfd);
  return CLI_EXIT_OK;
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
  if ((rc = shms_supervisor_claim(h)) != SHMS_OK) {
    rc = cli_fail_lib(rc);
    shms_detach(h);
    return rc;
  }
  rc = supervise(h, name, &a);
  shms_detach(h);
  return rc;
}

/*
 * shmsched worker: bind to a cell of a worker class and run its jobs, one at
 * a time: each job's payload on CMD's stdin, CMD's stdout as the result, its
 * exit status as the job's status. The command itself runs in worker_exec.c
 * (worker.h); this file parses the options and decides how each job ends.
 */
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../run/worker.h"

static const char help[] =
    "Usage: shmsched worker NAME --class CLASS [options] -- CMD [ARGS...]\n"
    "\n"
    "Bind to a free cell of CLASS (a class with mode=worker) and run the jobs the\n"
    "scheduler grants it, one at a time: CMD runs once per job, with the job's\n"
    "payload on its stdin; what it writes on stdout is the job's result and its\n"
    "exit status the job's status. Its stderr is the worker's. It gets the job in\n"
    "its environment: SHMSCHED_SEGMENT, SHMSCHED_CLASS, SHMSCHED_CELL,\n"
    "SHMSCHED_TICKET, SHMSCHED_TENANT and SHMSCHED_PRIORITY.\n"
    "- A result longer than the class's payload size is never cut short: CMD's\n"
    "  stdout is closed on it and the job completes with status 125 and no result.\n"
    "CMD runs in a process group (and, where cgroup v2 is writable, a cgroup) of\n"
    "its own; a job ends once CMD and every process it started are gone (what is\n"
    "left when CMD exits gets SIGTERM, then SIGKILL after --kill-after). If the\n"
    "worker is killed, CMD's tree is killed before the job is declared worker-lost.\n"
    "- A job its client cancels while CMD runs: CMD gets SIGTERM, and the job\n"
    "  completes with however CMD then ends (143 if SIGTERM killed it).\n"
    "- A job that runs longer than --job-timeout: CMD gets SIGTERM, then SIGKILL\n"
    "  after --kill-after, and the job completes with status 124.\n"
    "- CMD crashes (killed by SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS or\n"
    "  SIGTRAP): the job completes with status 128+signal and the worker goes on,\n"
    "  unless the class says on-command-crash=quarantine: then its cell is\n"
    "  quarantined and the worker exits 1 ('shmsched repair' returns the cell for\n"
    "  a new worker). Killed by any other signal: the job completes with 128+signal.\n"
    "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 while idle stops the\n"
    "worker (exit 0, its cell offline), and so does a drained segment (within about\n"
    "a second: no job will come); while CMD runs, one sent to the worker is\n"
    "forwarded to CMD's group, the job completes with CMD's status, and then the\n"
    "worker stops.\n"
    "\n"
    "Options:\n"
    "  -c, --class CLASS   a worker class: tiny, small, standard, large or\n"
    "                      extra-large (required)\n"
    "  -n, --jobs N        exit after N jobs, 1..4294967295 (default: run until\n"
    "                      stopped)\n"
    "  -v, --verbose       one line per job on stderr: ticket, tenant, status,\n"
    "                      result size, run time (default: off)\n"
    "  -T, --job-timeout DUR  end a job's CMD that runs longer than DUR (ms, s, m\n"
    "                      or h): SIGTERM, then SIGKILL; status 124 (default: none)\n"
    "  -k, --kill-after DUR  from SIGTERM (a cancel, the time limit, a forwarded\n"
    "                      signal, CMD's exit with processes left) to SIGKILL of\n"
    "                      what is left (default 10s)\n"
    "  -h, --help          show this help\n"
    "CMD must follow '--'; it is looked up in PATH.\n"
    "\n"
    "Exit status: 0 stopped (by --jobs, a stop signal or a drain); 1 CMD crashed\n"
    "and its cell was quarantined, or the worker failed (busy:\n"
    "every cell of the class has a worker; not-found; ...); 75 the scheduler took\n"
    "its cell (all-cells-quarantined, ...), or busy: the segment's process table\n"
    "is full; 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched worker jobs --class small -- sha256sum\n"
    "  shmsched worker jobs -c small --jobs 100 --verbose -- sh -c 'tr a-z A-Z'\n"
    "  shmsched worker jobs -c large -- ./infer.py --model m.bin 2>>infer.log &\n";

/* A job's status when its result was too long (a 125 of our own, like env(1)'s and git's). */
#define WORKER_STATUS_OVERFLOW 125
/* A job's status when it ran past --job-timeout: timeout(1)'s. */
#define WORKER_STATUS_TIMEOUT 124

static const struct option opts[] = {
    {"class", required_argument, NULL, 'c'},
    {"jobs", required_argument, NULL, 'n'},
    {"verbose", no_argument, NULL, 'v'},
    {"job-timeout", required_argument, NULL, 'T'},
    {"kill-after", required_argument, NULL, 'k'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct worker_args {
  const char *name;
  const char *cls_name;
  shms_class_t cls;
  uint32_t jobs; /* 0: no limit */
  int verbose;
  uint64_t job_timeout_ns; /* 0: none */
  uint64_t kill_after_ns;
  char **cmd;
};

/* One option into a; returns -1 to go on, else an exit code. */
static int take_option(int c, char **argv, struct worker_args *a) {
  char err[256];
  switch (c) {
  case 'c':
    a->cls_name = optarg;
    return -1;
  case 'n':
    if (cli_parse_u32(optarg, &a->jobs, err, sizeof err) != 0)
      return cli_usage("worker: --jobs: %s", err);
    if (a->jobs == 0)
      return cli_usage("worker: --jobs: must be at least 1 (leave it out to run until stopped)");
    return -1;
  case 'v':
    a->verbose = 1;
    return -1;
  case 'T':
    if (cli_parse_duration(optarg, &a->job_timeout_ns, err, sizeof err) != 0)
      return cli_usage("worker: --job-timeout: %s", err);
    return -1;
  case 'k':
    if (cli_parse_duration(optarg, &a->kill_after_ns, err, sizeof err) != 0)
      return cli_usage("worker: --kill-after: %s", err);
    return -1;
  case 'h':
    return cli_help(help);
  default:
    return cli_bad_option("worker", c, argv);
  }
}

/* Options before the first "--", NAME among them; CMD after it. Returns -1 to go on. */
static int parse(int argc, char **argv, struct worker_args *a) {
  int dashes = cli_dashes(argc, argv);
  int c, rc;
  while ((c = getopt_long(dashes, argv, ":c:n:vT:k:h", opts, NULL)) != -1)
    if ((rc = take_option(c, argv, a)) >= 0)
      return rc;
  if ((rc = cli_take_name_before_cmd("worker", dashes, argv, &a->name)) != 0)
    return rc;
  if (a->cls_name == NULL)
    return cli_usage("worker: missing --class (see 'shmsched worker --help')");
  if ((rc = cli_parse_class("worker", a->cls_name, &a->cls)) != 0)
    return rc;
  if ((rc = cli_take_cmd("worker", argc, argv, dashes, &a->cmd)) != 0)
    return rc;
  return -1;
}

/* What the worker holds while it runs. */
struct worker {
  const struct worker_args *a;
  shms_t *h;
  shms_worker_t *w; /* NULL once closed */
  struct run_signals sigs;
  int sigfd;
  char *out; /* payload size + 1 bytes */
  size_t cap;
  shms_job job; /* the job in hand */
  struct contain contain;
  uint32_t on_crash; /* the class's on-command-crash */
  uint64_t done;
  unsigned idle_slices;
};

/* The library said no (rc): one line naming the class and cell, and the exit code. */
static int worker_fail(const struct worker *k, int rc) {
  const char *detail = shms_last_error_detail();
  if (k->w == NULL)
    cli_fail(rc, "worker: %s (class %s)", detail[0] ? detail : shms_strerror(rc), k->a->cls_name);
  else
    cli_fail(rc, "worker: %s (class %s cell %" PRIu32 ")", detail[0] ? detail : shms_strerror(rc),
             k->a->cls_name, shms_worker_cell(k->w));
  if (cli_sched_outcome(rc))
    return CLI_EXIT_SCHED;
  return rc == SHMS_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

/* The class is a worker class of this segment: its payload size into k->cap. */
static int check_class(struct worker *k) {
  shms_config cfg;
  int rc = shms_get_config(k->h, &cfg);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  const shms_class_config *c = &cfg.classes[k->a->cls];
  if (!c->configured)
    return cli_usage("worker: segment '%s' has no class %s", k->a->name, k->a->cls_name);
  if (c->mode != SHMS_MODE_WORKER)
    return cli_usage("worker: class %s is a lease class (mode=lease): run commands on it with "
                     "'shmsched run'",
                     k->a->cls_name);
  k->cap = c->payload;
  k->on_crash = c->on_command_crash;
  return 0;
}

/* Without a watching thread: idle slices between looks at the segment's state. */
#define DRAIN_CHECK_SLICES 4

/* One shms_worker_take; now and then, SHMS_ESHUTDOWN once the segment drains (no job will come). */
static int take_slice(void *ctx, uint64_t slice_ns) {
  struct worker *k = ctx;
  int rc = shms_worker_take(k->w, slice_ns, &k->job);
  shms_segment_info info;
  if (rc == SHMS_ETIMEDOUT && ++k->idle_slices % DRAIN_CHECK_SLICES == 0 &&
      shms_segment_info_get(k->h, &info) == SHMS_OK && info.state != SHMS_SEG_ACTIVE)
    return SHMS_ESHUTDOWN;
  return rc;
}

/* A stop signal while the worker is idle: its wait returns (then the worker stops). */
static void interrupt_on_signal(void *ctx, int signo, int nth) {
  (void)signo;
  if (nth == 1)
    shms_interrupt(((struct worker *)ctx)->h, 1);
}

/* An idle worker looks at the segment's state this often: a drain stops it (no job will come).
 * As often as the library's safety poll, with which it coincides: an idle worker wakes once a
 * second. */
#define DRAIN_CHECK_NS (1000ull * 1000 * 1000)

/*
 * One wait for a job, while a thread takes the stop signals: nothing wakes the worker but a job,
 * a stop signal, and once a second the look at the segment's state. Returns as next_job.
 */
static int take_watched(struct worker *k, int *signo) {
  struct run_watch watch;
  if (run_watch_start(&watch, &k->sigs, interrupt_on_signal, k) != 0)
    return run_wait_sliced(&k->sigs, take_slice, k, UINT64_MAX, signo); /* no thread: slices */
  int rc;
  shms_segment_info info;
  while ((rc = shms_worker_take(k->w, DRAIN_CHECK_NS, &k->job)) == SHMS_ETIMEDOUT &&
         ck_pr_load_int(&watch.count) == 0)
    if (shms_segment_info_get(k->h, &info) == SHMS_OK && info.state != SHMS_SEG_ACTIVE) {
      rc = SHMS_ESHUTDOWN;
      break;
    }
  run_watch_stop(&watch);
  shms_interrupt(k->h, 0);
  *signo = watch.first;
  if (*signo == 0)
    return rc;
  if (rc == SHMS_OK) {
    /* The job came with the signal: it goes to the job's command, as one that comes while the
     * job runs (pending again: we block it), and the worker stops after the job. */
    kill(getpid(), *signo);
    *signo = 0;
    return rc;
  }
  return SHMS_ETIMEDOUT;
}

/*
 * Wait for the next job; a stop signal ends the wait. A cell repaired away from us (not-found)
 * is bound afresh. Returns SHMS_OK with k->job, SHMS_ETIMEDOUT with *signo when a stop signal
 * came, or the error.
 */
static int next_job(struct worker *k, int *signo) {
  for (;;) {
    int rc = take_watched(k, signo);
    if (rc != SHMS_ENOTFOUND)
      return rc;
    shms_worker_close(k->w);
    k->w = NULL;
    if ((rc = shms_worker_open(k->h, k->a->cls, &k->w)) != SHMS_OK)
      return rc;
  }
}

static int job_cancelled(void *ctx) {
  struct worker *k = ctx;
  return shms_worker_cancelled(k->w, &k->job) == 1;
}

/* "KEY=VALUE" strings of the job for CMD's environment. */
struct job_env {
  char segment[24 + SHMS_NAME_MAX], cls[32], cell[32], ticket[32 + SHMS_TICKET_STRLEN],
      tenant[32 + SHMS_TENANT_MAX], priority[48];
  char *list[7];
};

static void job_env(const struct worker *k, struct job_env *e) {
  char ticket[SHMS_TICKET_STRLEN];
  shms_ticket_format(&k->job.ticket, ticket);
  snprintf(e->segment, sizeof e->segment, "SHMSCHED_SEGMENT=%s", k->a->name);
  snprintf(e->cls, sizeof e->cls, "SHMSCHED_CLASS=%s", k->a->cls_name);
  snprintf(e->cell, sizeof e->cell, "SHMSCHED_CELL=%" PRIu32, shms_worker_cell(k->w));
  snprintf(e->ticket, sizeof e->ticket, "SHMSCHED_TICKET=%s", ticket);
  snprintf(e->tenant, sizeof e->tenant, "SHMSCHED_TENANT=%s", k->job.tenant);
  snprintf(e->priority, sizeof e->priority, "SHMSCHED_PRIORITY=%" PRId32, k->job.priority);
  char *list[] = {e->segment, e->cls, e->cell, e->ticket, e->tenant, e->priority, NULL};
  memcpy(e->list, list, sizeof list);
}

/* CMD crashed in a class with on-command-crash=quarantine: quarantine its cell; the worker
 * stops. */
static int quarantine(struct worker *k, const struct job_run *j) {
  int sig = WTERMSIG(j->status), rc = shms_worker_quarantine(k->w, &k->job, 128 + sig);
  if (rc != SHMS_OK)
    return worker_fail(k, rc);
  char sn[24];
  uint32_t cell = shms_worker_cell(k->w);
  fprintf(stderr,
          "shmsched: worker: '%s' crashed (%s): quarantined class %s cell %" PRIu32
          " (on-command-crash=quarantine; return it with 'shmsched repair %s --class %s --cell "
          "%" PRIu32 "', then start a worker again)\n",
          k->a->cmd[0], cli_signal_name(sig, sn, sizeof sn), k->a->cls_name, cell, k->a->name,
          k->a->cls_name, cell);
  return CLI_EXIT_FAIL;
}

/* --verbose: one line for the job just completed. */
static void report(const struct worker *k, const struct job_run *j, int status, uint64_t ns) {
  char ticket[SHMS_TICKET_STRLEN];
  shms_ticket_format(&k->job.ticket, ticket);
  fprintf(stderr,
          "shmsched: worker: class %s cell %" PRIu32
          ": job %s for tenant '%s': status %d, %zu result bytes, %.1fms%s\n",
          k->a->cls_name, shms_worker_cell(k->w), ticket, k->job.tenant, status, j->out_len,
          (double)ns / 1e6, j->cancel_sent ? ", cancelled" : "");
}

/* One line on stderr about job j, prefixed with its ticket. */
static void job_note(const struct worker *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void job_note(const struct worker *k, const char *fmt, ...) {
  char ticket[SHMS_TICKET_STRLEN], text[512];
  shms_ticket_format(&k->job.ticket, ticket);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  fprintf(stderr, "shmsched: worker: job %s: %s\n", ticket, text);
}

/* The job's status for how CMD ended, and a line about it when it did not simply exit. */
static int job_status(const struct worker *k, const struct job_run *j) {
  int st = j->status, status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  char sn[24];
  if (j->timed_out) {
    job_note(k,
             "'%s' ran longer than --job-timeout (%.3fs): its processes were ended; completed "
             "with status %d",
             k->a->cmd[0], (double)k->a->job_timeout_ns / 1e9, WORKER_STATUS_TIMEOUT);
    return WORKER_STATUS_TIMEOUT;
  }
  if (j->overflow) {
    job_note(k,
             "'%s' wrote more than class %s's payload size of %zu bytes: completed with status "
             "%d and no result",
             k->a->cmd[0], k->a->cls_name, k->cap, WORKER_STATUS_OVERFLOW);
    return WORKER_STATUS_OVERFLOW;
  }
  if (contain_crashed(&k->contain, st))
    job_note(k, "'%s' crashed (%s): completed with status %d; the worker goes on", k->a->cmd[0],
             cli_signal_name(WTERMSIG(st), sn, sizeof sn), status);
  return status;
}

/* CMD ended: complete the job with its status and output. Returns -1 to go on, or an exit code. */
static int finish(struct worker *k, const struct job_run *j, uint64_t started) {
  /* While the job still holds its cell: the record names its tenant and ticket. */
  shms_lease_event(k->h, &k->job.lease, &k->job.ticket, SHMS_EVENT_LEASE_ENDED,
                   WIFEXITED(j->status) ? SHMS_LEASE_EXITED(WEXITSTATUS(j->status))
                                        : SHMS_LEASE_SIGNALLED(WTERMSIG(j->status)));
  if (!j->timed_out && !j->overflow && contain_crashed(&k->contain, j->status) &&
      k->on_crash == SHMS_ON_CRASH_QUARANTINE)
    return quarantine(k, j);
  int status = job_status(k, j); /* an overflow has no result: out_len is 0 */
  int rc = shms_worker_complete(k->w, &k->job, status, j->out, j->out_len);
  if (rc != SHMS_OK)
    return worker_fail(k, rc);
  k->done++;
  if (k->a->verbose)
    report(k, j, status, run_monotonic_ns() - started);
  return -1;
}

/* Run the job in hand. Returns -1 to go on, or an exit code. */
static int run_job(struct worker *k) {
  struct job_env env;
  job_env(k, &env);
  struct job_run j = {.cmd = k->a->cmd,
                      .s = &k->sigs,
                      .sigfd = k->sigfd,
                      .payload = k->job.payload,
                      .payload_len = k->job.payload_len,
                      .out = k->out,
                      .cap = k->cap,
                      .env = env.list,
                      .cancelled = job_cancelled,
                      .ctx = k,
                      .c = &k->contain,
                      .timeout_ns = k->a->job_timeout_ns};
  uint64_t started = run_monotonic_ns();
  shms_lease_event(k->h, &k->job.lease, &k->job.ticket, SHMS_EVENT_LEASE_STARTED, 0);
  if (worker_run_job(&j) != 0) {
    int e = errno;
    shms_lease_event(k->h, &k->job.lease, &k->job.ticket, SHMS_EVENT_LEASE_ENDED, 0);
    shms_worker_complete(k->w, &k->job, 126, NULL, 0); /* as if it could not be executed */
    return cli_fail(SHMS_ESYSTEM, "worker: cannot start '%s': %s", k->a->cmd[0], strerror(e));
  }
  int code = finish(k, &j, started);
  /* Stopped while CMD ran: the job has ended, and so does the worker. */
  return code < 0 && j.stop_signo != 0 ? CLI_EXIT_OK : code;
}

/* Take and run jobs until --jobs, a stop signal or a failure. Returns the exit code. */
static int serve(struct worker *k) {
  while (k->a->jobs == 0 || k->done < k->a->jobs) {
    int signo, rc = next_job(k, &signo);
    if (rc == SHMS_ETIMEDOUT && signo != 0)
      return CLI_EXIT_OK;
    if (rc == SHMS_ESHUTDOWN) {
      if (k->a->verbose)
        fprintf(stderr, "shmsched: worker: segment '%s' is draining: stopping\n", k->a->name);
      return CLI_EXIT_OK;
    }
    if (rc != SHMS_OK)
      return worker_fail(k, rc);
    int code = run_job(k);
    if (code >= 0)
      return code;
  }
  return CLI_EXIT_OK;
}

/* A closed fd 0, 1 or 2 on /dev/null, so that no pipe of ours is ever given one of them. */
static void keep_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
      break;
}

/* Block SIGPIPE as well: a command that stops reading its stdin must not kill the worker. */
static int block_signals(struct worker *k) {
  run_signals_block(&k->sigs);
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  sigprocmask(SIG_BLOCK, &pipe, NULL);
  k->sigfd = signalfd(-1, &k->sigs.taken, SFD_NONBLOCK | SFD_CLOEXEC);
  if (k->sigfd < 0)
    return cli_fail(SHMS_ESYSTEM, "worker: signalfd: %s", strerror(errno));
  return 0;
}

int cmd_worker(int argc, char **argv) {
  struct worker_args a = {.jobs = 0, .kill_after_ns = CONTAIN_KILL_AFTER_NS};
  int rc = parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  keep_std_fds();
  struct worker k = {.a = &a, .sigfd = -1};
  if ((rc = block_signals(&k)) != 0)
    return rc;
  if ((rc = cli_attach_to_queue("worker", a.name, &k.h)) != 0)
    return rc;
  if ((rc = check_class(&k)) == 0 && (k.out = malloc(k.cap + 1)) == NULL)
    rc = cli_fail(SHMS_ENOMEM, "worker: no memory for a %zu-byte result", k.cap);
  if (rc == 0 && contain_init(&k.contain, k.h, a.kill_after_ns, 0) != 0)
    rc = cli_fail(SHMS_ESYSTEM, "worker: cannot become a child subreaper: %s", strerror(errno));
  if (rc == 0 && (rc = shms_worker_open(k.h, a.cls, &k.w)) != SHMS_OK)
    rc = worker_fail(&k, rc);
  if (rc == 0)
    rc = serve(&k);
  if (k.w != NULL)
    shms_worker_close(k.w);
  shms_detach(k.h);
  free(k.out);
  close(k.sigfd);
  return rc;
}

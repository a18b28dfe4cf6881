/*
 * shmsched run: acquire a lease, run a command on it, and dispose of the
 * lease by how the command ended. The waiting and the child are in
 * run_exec.c (run.h); this file parses the options and decides.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../run/run.h"
#include "../run/run_env.h"

static const char help[] =
    "Usage: shmsched run NAME --class CLASS --tenant TENANT [options] -- CMD [ARGS...]\n"
    "\n"
    "Acquire a lease on a cell of CLASS for TENANT, run CMD on it, and exit with\n"
    "CMD's status. Requests wait fairly: tenants take round-robin turns, and within\n"
    "a tenant the highest priority, then the earliest deadline, goes first.\n"
    "CMD runs in a process group (and, where cgroup v2 is writable, a cgroup) of\n"
    "its own, with SHMSCHED_SEGMENT, SHMSCHED_CLASS, SHMSCHED_CELL, SHMSCHED_TENANT\n"
    "and SHMSCHED_TICKET (if it queued) in its environment. The lease is released\n"
    "once CMD and every process it started are gone: when CMD exits, what is left\n"
    "gets SIGTERM, then SIGKILL after --kill-after. A CMD that crashes (SIGSEGV,\n"
    "SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP) is released too, or its cell\n"
    "quarantined if the class says on-command-crash=quarantine.\n"
    "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 while waiting cancels the\n"
    "request (exit 75, cancelled); while CMD runs, it is forwarded to CMD's group,\n"
    "and --kill-after later whatever is left is killed. If run is killed, CMD's\n"
    "tree is killed before its cell is given to anyone else.\n"
    "\n"
    "Options:\n"
    "  -c, --class CLASS      tiny, small, standard, large or extra-large (required)\n"
    "  -t, --tenant TENANT    who the work is for, 1..31 graphic ASCII bytes (required)\n"
    "  -p, --priority P       integer, may be negative; higher runs first within the\n"
    "                         tenant's turn (default 0)\n"
    "  -d, --deadline DUR     give up unless granted within DUR (ms, s, m or h), fixed\n"
    "                         when run starts (default: no deadline)\n"
    "  -a, --activation ID    an id unique among the class's live requests, 1..31\n"
    "                         graphic bytes; a duplicate fails (default: none)\n"
    "  --quota NAME           hold a unit of quota NAME ('create --quota'); repeat\n"
    "  --print-ticket         print the request's ticket alone on the first line of\n"
    "                         stderr once it is queued, for 'cancel' and 'explain'\n"
    "                         (default: off; a free cell is then taken without queueing)\n"
    "  -k, --kill-after DUR   from a forwarded signal, or CMD's exit with processes\n"
    "                         left, to SIGKILL of what is left (default 10s)\n"
    "  -n, --cells K          hold K cells at once, all or none: CMD starts once it\n"
    "                         holds K, and SHMSCHED_CELL lists them (e.g. 0,2); 1..the\n"
    "                         class's cells, in a class without tenant-max-active\n"
    "                         (default 1)\n"
    "  --cell-env VAR=LIST    set VAR to the LIST item (comma-separated, one per cell)\n"
    "                         at the cell's index, or the items of each cell held;\n"
    "                         repeatable, at most 8\n"
    "                         (e.g. CUDA_VISIBLE_DEVICES=0,1,2,3) (default: none)\n"
    "  --release-on-signal    release the cell even when CMD crashed, whatever the\n"
    "                         class's on-command-crash says (default: off)\n"
    "  -h, --help             show this help\n"
    "CMD must follow '--'; it is looked up in PATH.\n"
    "\n"
    "Exit status: CMD's status (128+N if signal N killed it); 75 the scheduler did\n"
    "not grant a lease (queue-full, class-denied, duplicate-activation, cancelled,\n"
    "deadline-exceeded, all-cells-quarantined, shutdown, sequence-exhausted,\n"
    "owner-lost), or busy: the segment's process table is full, or system-error:\n"
    "CMD could not be forked for lack of processes (EAGAIN); 1 run failed\n"
    "otherwise (not-found, permission-denied, ...);\n"
    "2 usage error; 126/127 CMD could not be executed / was not found; 74 the\n"
    "segment was truncated under run (SIGBUS on it, one error line).\n"
    "\n"
    "Examples:\n"
    "  shmsched run jobs --class standard --tenant ci -- make -j4 test\n"
    "  shmsched run jobs -c standard -t nightly -p -5 --deadline 10m -- ./backup.sh\n"
    "  shmsched run jobs -c standard -t web --print-ticket -- ./render.sh 2>render.log &\n"
    "  shmsched cancel jobs \"$(head -n1 render.log)\"\n"
    "  shmsched run gpus -c large -t ml --cell-env CUDA_VISIBLE_DEVICES=0,1,2,3 -- ./train\n"
    "  shmsched run gpus -c large -t ml --cells 2 --cell-env CUDA_VISIBLE_DEVICES=0,1,2,3 \\\n"
    "      -- ./train-on-two\n";

enum { OPT_PRINT_TICKET = 256, OPT_RELEASE_ON_SIGNAL, OPT_CELL_ENV };

static const struct option opts[] = {
    {"class", required_argument, NULL, 'c'},
    {"tenant", required_argument, NULL, 't'},
    {"priority", required_argument, NULL, 'p'},
    {"deadline", required_argument, NULL, 'd'},
    {"activation", required_argument, NULL, 'a'},
    {"quota", required_argument, NULL, CLI_OPT_QUOTA},
    {"print-ticket", no_argument, NULL, OPT_PRINT_TICKET},
    {"release-on-signal", no_argument, NULL, OPT_RELEASE_ON_SIGNAL},
    {"kill-after", required_argument, NULL, 'k'},
    {"cell-env", required_argument, NULL, OPT_CELL_ENV},
    {"cells", required_argument, NULL, 'n'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct run_args {
  const char *name;
  const char *cls;
  shms_request req;
  uint64_t deadline_in_ns; /* 0: none */
  uint64_t kill_after_ns;
  int print_ticket, release_on_signal;
  struct cell_envs cell_env;
  char **cmd;
};

/* One option into a; returns -1 to go on, else an exit code. */
static int take_option(int c, char **argv, struct run_args *a) {
  int rc = cli_request_option("run", c, &a->cls, &a->req, &a->deadline_in_ns);
  if (rc != 0)
    return rc;
  char err[256];
  switch (c) {
  case 'k':
    if (cli_parse_duration(optarg, &a->kill_after_ns, err, sizeof err) != 0)
      return cli_usage("run: --kill-after: %s", err);
    return -1;
  case 'n':
    if (cli_parse_u32(optarg, &a->req.cells, err, sizeof err) != 0 || a->req.cells == 0)
      return cli_usage("run: --cells: %s", a->req.cells == 0 ? "must be at least 1" : err);
    return -1;
  case OPT_CELL_ENV:
    if (run_cell_env_add(&a->cell_env, optarg, err, sizeof err) != 0)
      return cli_usage("run: --cell-env: %s", err);
    return -1;
  case OPT_PRINT_TICKET:
    a->print_ticket = 1;
    return -1;
  case OPT_RELEASE_ON_SIGNAL:
    a->release_on_signal = 1;
    return -1;
  case 'h':
    return cli_help(help);
  default:
    return cli_bad_option("run", c, argv);
  }
}

/* Options before the first "--", NAME among them; CMD after it. Returns -1 to go on. */
static int parse(int argc, char **argv, struct run_args *a) {
  int dashes = cli_dashes(argc, argv);
  int c, rc;
  while ((c = getopt_long(dashes, argv, ":c:t:p:d:a:k:n:h", opts, NULL)) != -1)
    if ((rc = take_option(c, argv, a)) >= 0)
      return rc;
  if ((rc = cli_take_name_before_cmd("run", dashes, argv, &a->name)) != 0)
    return rc;
  if ((rc = cli_request_target("run", a->cls, &a->req)) != 0)
    return rc;
  if ((rc = cli_take_cmd("run", argc, argv, dashes, &a->cmd)) != 0)
    return rc;
  return -1;
}

/* Why no lease: one error line, exit 75 for the scheduler's answers. */
static int no_lease(const struct run_args *a, int rc, int signo) {
  char q[96], why[320], sn[24];
  if (!cli_sched_outcome(rc))
    return cli_sched_fail(rc);
  const char *detail = shms_last_error_detail();
  if (signo != 0 && rc == SHMS_ECANCELLED)
    snprintf(why, sizeof why, "interrupted by %s while waiting: the request was cancelled",
             cli_signal_name(signo, sn, sizeof sn));
  else
    snprintf(why, sizeof why, "%s", detail[0] != '\0' ? detail : shms_strerror(rc));
  cli_fail(rc, "run: %s (class %s, tenant '%s')", why, a->cls,
           cli_quote(q, sizeof q, a->req.tenant));
  return CLI_EXIT_SCHED;
}

/* CMD and its tree are gone, and CMD ended with wait status st: release the lease, or
 * quarantine it after a crash in a class that says so. Returns run's exit code. */
static int dispose(shms_t *h, const struct run_args *a, const struct contain *c,
                   const shms_config *cfg, const shms_lease *lease, const char *cells, int st) {
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), rc;
  /* Before the lease goes: the record names its cell and tenant while they are still its. */
  shms_lease_event(h, lease, NULL, SHMS_EVENT_LEASE_ENDED,
                   WIFEXITED(st) ? SHMS_LEASE_EXITED(code) : SHMS_LEASE_SIGNALLED(WTERMSIG(st)));
  char sn[24];
  int crashed = contain_crashed(c, st);
  if (crashed)
    cli_signal_name(WTERMSIG(st), sn, sizeof sn);
  if (crashed && !a->release_on_signal &&
      cfg->classes[a->req.cls].on_command_crash == SHMS_ON_CRASH_QUARANTINE) {
    rc = shms_quarantine(h, lease, code);
    if (rc == SHMS_OK && lease->cells <= 1)
      fprintf(stderr,
              "shmsched: run: '%s' crashed (%s): quarantined class %s cell %u "
              "(on-command-crash=quarantine; return it with 'shmsched repair %s --class %s "
              "--cell %u')\n",
              // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): parse set cmd
              a->cmd[0], sn, a->cls, lease->cell, a->name, a->cls, lease->cell);
    else if (rc == SHMS_OK)
      fprintf(stderr,
              "shmsched: run: '%s' crashed (%s): quarantined class %s %s "
              "(on-command-crash=quarantine; return them with 'shmsched repair %s --class %s')\n",
              // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): parse set cmd
              a->cmd[0], sn, a->cls, cells, a->name, a->cls);
  } else {
    rc = shms_release(h, lease);
    if (rc == SHMS_OK && crashed)
      fprintf(stderr,
              "shmsched: run: '%s' crashed (%s): its processes are gone, class %s %s released\n",
              // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): parse set cmd
              a->cmd[0], sn, a->cls, cells);
  }
  if (rc != SHMS_OK) /* the command ran: its status stays run's, the failure is reported */
    cli_sched_fail(rc);
  return code;
}

/* Check the options that depend on the segment: --cells and --cell-env against the class's
 * cells. */
static int check_segment(const struct run_args *a, const shms_config *cfg) {
  char err[256];
  if (!cfg->classes[a->req.cls].configured)
    return 0; /* the library says so, with its own reason */
  if (a->req.cells > cfg->classes[a->req.cls].cells)
    return cli_usage("run: --cells %" PRIu32 ": class %s has %" PRIu32 " cells", a->req.cells,
                     a->cls, cfg->classes[a->req.cls].cells);
  if (run_cell_env_check(&a->cell_env, cfg->classes[a->req.cls].cells, a->cls, err, sizeof err))
    return cli_usage("run: --cell-env %s", err);
  return 0;
}

/* The cells the lease holds (malloc'd, ascending), or NULL with *n 0 when out of memory. */
static uint32_t *lease_cells(shms_t *h, const shms_lease *lease, uint32_t *n) {
  uint32_t want = lease->cells > 1 ? lease->cells : 1;
  uint32_t *cells = calloc(want, sizeof *cells);
  int got = cells != NULL ? shms_lease_cells(h, lease, cells, want) : -1;
  if (got < 1 || (uint32_t)got > want) { /* we hold it: it is current */
    free(cells);
    *n = 0;
    return NULL;
  }
  *n = (uint32_t)got;
  return cells;
}

/* Run CMD on the lease, contained; returns run's exit code. */
static int run_on_lease(shms_t *h, const struct run_args *a, const shms_config *cfg,
                        const struct run_signals *sigs, const shms_lease *lease,
                        const shms_ticket *ticket) {
  struct contain c;
  struct run_env env = {.list = {NULL}};
  int st;
  uint32_t n;
  uint32_t *cells = lease_cells(h, lease, &n);
  if (cells == NULL)
    errno = ENOMEM;
  int ok = cells != NULL && contain_init(&c, h, a->kill_after_ns, 1) == 0 &&
           run_env_build(&env, a->name, a->cls, a->req.tenant, cells, n, ticket, &a->cell_env) == 0;
  if (ok) {
    /* Recorded by run, not by the library: a lease taken at once leaves no other trace. */
    shms_lease_event(h, lease, ticket, SHMS_EVENT_LEASE_STARTED, 0);
    ok = run_command(a->cmd, env.list, sigs, &c, &st) == 0;
    int e = errno;
    if (!ok) /* never started: ended without a status */
      shms_lease_event(h, lease, ticket, SHMS_EVENT_LEASE_ENDED, 0);
    errno = e;
  }
  if (!ok) {
    int e = errno;
    /* EAGAIN: the system's process table (or the user's RLIMIT_NPROC) is full; temporary. */
    // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): parse set cmd
    cli_fail(SHMS_ESYSTEM, "run: cannot start '%s': %s%s", a->cmd[0], strerror(e),
             e == EAGAIN
                 ? " (the process limit is reached; the lease was released: try again later)"
                 : "");
    shms_release(h, lease);
    run_env_free(&env);
    free(cells);
    return e == EAGAIN ? CLI_EXIT_SCHED : CLI_EXIT_FAIL;
  }
  /* "cell 3", or "cells 0,1" (SHMSCHED_CELL's value) for the lines that name them. */
  char named[96];
  const char *list = strchr(env.cell, '=') + 1;
  snprintf(named, sizeof named, "%s %s", n > 1 ? "cells" : "cell", list);
  run_env_free(&env);
  free(cells);
  if (c.tty >= 0)
    close(c.tty);
  return dispose(h, a, &c, cfg, lease, named, st);
}

int cmd_run(int argc, char **argv) {
  struct run_args a = {.req.priority = 0, .kill_after_ns = CONTAIN_KILL_AFTER_NS};
  int rc = parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if (a.deadline_in_ns != 0)
    a.req.deadline_ns = run_monotonic_ns() + a.deadline_in_ns;
  struct run_signals sigs;
  run_signals_block(&sigs);
  shms_t *h;
  if ((rc = cli_attach_to_queue("run", a.name, &h)) != 0)
    return rc;
  shms_config cfg;
  if ((rc = shms_get_config(h, &cfg)) != SHMS_OK || (rc = check_segment(&a, &cfg)) != 0) {
    shms_detach(h);
    return rc < 0 ? cli_fail_lib(rc) : rc;
  }
  /* The fast path never queues; with a tenant limit, or several cells, the library would queue
   * and cancel. */
  int fast = cfg.classes[a.req.cls].configured && cfg.classes[a.req.cls].tenant_max_active == 0 &&
             a.req.cells <= 1 && a.req.nquotas == 0;
  shms_lease lease;
  shms_ticket ticket;
  int signo, queued;
  rc = run_get_lease(h, &a.req, fast, a.print_ticket, &sigs, &lease, &ticket, &queued, &signo);
  if (rc != SHMS_OK) {
    int code = no_lease(&a, rc, signo);
    shms_detach(h);
    return code;
  }
  int code = run_on_lease(h, &a, &cfg, &sigs, &lease, queued ? &ticket : NULL);
  shms_detach(h);
  return code;
}

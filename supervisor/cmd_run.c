/*
 * shmsched run: acquire a lease, run a command on it, and dispose of the
 * lease by how the command ended. The waiting and the child are in
 * run_exec.c (run.h); this file parses the options and decides.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "cli_config.h"
#include "cli_sched.h"
#include "run.h"

static const char help[] =
    "Usage: shmsched run NAME --class CLASS --tenant TENANT [options] -- CMD [ARGS...]\n"
    "\n"
    "Acquire a lease on a cell of CLASS for TENANT, run CMD on it, and exit with\n"
    "CMD's status. Requests wait fairly: tenants take round-robin turns, and within\n"
    "a tenant the highest priority, then the earliest deadline, goes first.\n"
    "When CMD exits, the lease is released. When CMD is killed by a signal, its\n"
    "cell is quarantined (its cleanup cannot be proven; 'shmsched repair' returns\n"
    "it) unless --release-on-signal, and run exits 128+signal.\n"
    "SIGINT or SIGTERM while waiting cancels the request (exit 75, cancelled);\n"
    "while CMD runs, a SIGINT or SIGTERM sent to run is forwarded to CMD.\n"
    "\n"
    "Options:\n"
    "  -c, --class CLASS      tiny, small, standard, large or extra-large (required)\n"
    "  -t, --tenant TENANT    who the work is for, 1..31 graphic ASCII bytes (required)\n"
    "  -p, --priority P       integer, may be negative; higher runs first within the\n"
    "                         tenant's turn (default 0)\n"
    "  -d, --deadline DUR     give up unless granted within DUR (ms, s, m or h), fixed\n"
    "                         when the request is queued (default: no deadline)\n"
    "  -a, --activation ID    an id unique among the class's live requests, 1..31\n"
    "                         graphic bytes; a duplicate fails (default: none)\n"
    "  --print-ticket         print the request's ticket alone on the first line of\n"
    "                         stderr once it is queued, for 'cancel' and 'explain'\n"
    "                         (default: off; a free cell is then taken without queueing)\n"
    "  --release-on-signal    release the cell, not quarantine it, when CMD is killed\n"
    "                         by a signal (default: off)\n"
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
    "  shmsched cancel jobs \"$(head -n1 render.log)\"\n";

enum { OPT_PRINT_TICKET = 256, OPT_RELEASE_ON_SIGNAL };

static const struct option opts[] = {
    {"class", required_argument, NULL, 'c'},
    {"tenant", required_argument, NULL, 't'},
    {"priority", required_argument, NULL, 'p'},
    {"deadline", required_argument, NULL, 'd'},
    {"activation", required_argument, NULL, 'a'},
    {"print-ticket", no_argument, NULL, OPT_PRINT_TICKET},
    {"release-on-signal", no_argument, NULL, OPT_RELEASE_ON_SIGNAL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct run_args {
  const char *name;
  const char *cls;
  shms_request req;
  uint64_t deadline_in_ns; /* 0: none */
  int print_ticket, release_on_signal;
  char **cmd;
};

/* One option into a; returns -1 to go on, else an exit code. */
static int take_option(int c, char **argv, struct run_args *a) {
  int rc = cli_request_option("run", c, &a->cls, &a->req, &a->deadline_in_ns);
  if (rc != 0)
    return rc;
  switch (c) {
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
  int dashes = 1;
  while (dashes < argc && strcmp(argv[dashes], "--") != 0)
    dashes++;
  int c, rc;
  while ((c = getopt_long(dashes, argv, ":c:t:p:d:a:h", opts, NULL)) != -1)
    if ((rc = take_option(c, argv, a)) >= 0)
      return rc;
  char q[96];
  if (optind >= dashes)
    return cli_usage("run: missing NAME (see 'shmsched run --help')");
  if (optind + 1 < dashes)
    return cli_usage("run: unexpected argument '%s' (CMD must follow '--'; see 'shmsched run "
                     "--help')",
                     cli_quote(q, sizeof q, argv[optind + 1]));
  a->name = argv[optind];
  if (shms_name_check(a->name) != SHMS_OK)
    return cli_usage("run: %s", shms_last_error_detail());
  if (a->cls == NULL || a->req.tenant == NULL)
    return cli_usage("run: missing --%s (see 'shmsched run --help')",
                     a->cls == NULL ? "class" : "tenant");
  if ((rc = cli_parse_class("run", a->cls, &a->req.cls)) != 0)
    return rc;
  if (dashes + 1 >= argc)
    return cli_usage("run: missing '-- CMD [ARGS...]' (see 'shmsched run --help')");
  a->cmd = argv + dashes + 1;
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

/* CMD ended with wait status st: release or quarantine the lease. Returns run's exit code. */
static int dispose(shms_t *h, const struct run_args *a, const shms_lease *lease, int st) {
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), rc;
  char sn[24];
  if (WIFEXITED(st) || a->release_on_signal) {
    rc = shms_release(h, lease);
  } else {
    rc = shms_quarantine(h, lease, code);
    if (rc == SHMS_OK)
      fprintf(stderr,
              "shmsched: run: '%s' was killed by %s: quarantined class %s cell %u "
              "(return it with 'shmsched repair %s --class %s --cell %u')\n",
              a->cmd[0], cli_signal_name(WTERMSIG(st), sn, sizeof sn), a->cls, lease->cell, a->name,
              a->cls, lease->cell);
  }
  if (rc != SHMS_OK) /* the command ran: its status stays run's, the failure is reported */
    cli_sched_fail(rc);
  return code;
}

int cmd_run(int argc, char **argv) {
  struct run_args a = {.req.priority = 0};
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
  /* The fast path never queues; with a tenant limit the library would queue and cancel. */
  shms_config cfg;
  int fast = shms_get_config(h, &cfg) == SHMS_OK && cfg.classes[a.req.cls].configured &&
             cfg.classes[a.req.cls].tenant_max_active == 0;
  shms_lease lease;
  int signo;
  rc = run_get_lease(h, &a.req, fast, a.print_ticket, &sigs, &lease, &signo);
  if (rc != SHMS_OK) {
    int code = no_lease(&a, rc, signo);
    shms_detach(h);
    return code;
  }
  int st;
  if (run_command(a.cmd, &sigs, &st) != 0) {
    /* EAGAIN: the system's process table (or the user's RLIMIT_NPROC) is full; temporary. */
    int again = errno == EAGAIN;
    cli_fail(SHMS_ESYSTEM, "run: cannot start '%s': %s%s", a.cmd[0], strerror(errno),
             again ? " (the process limit is reached; the lease was released: try again later)"
                   : "");
    shms_release(h, &lease);
    shms_detach(h);
    return again ? CLI_EXIT_SCHED : CLI_EXIT_FAIL;
  }
  int code = dispose(h, &a, &lease, st);
  shms_detach(h);
  return code;
}

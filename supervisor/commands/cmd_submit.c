/*
 * shmsched submit: queue a job with a payload on a worker class, and either
 * print its ticket or (--wait) wait for its result, print the result bytes
 * and exit with the job's status. The payload is read in submit_payload.c;
 * the sliced wait and the signals are run_exec.c's (run.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../run/batch.h"
#include "../run/run.h"
#include "../run/submit.h"

static const char help[] =
    "Usage: shmsched submit NAME --class CLASS --tenant TENANT [options]\n"
    "       shmsched submit NAME --class CLASS --batch FILE [--tenant TENANT] [options]\n"
    "\n"
    "Queue a job for the workers of CLASS (a class with mode=worker) on behalf of\n"
    "TENANT. Its payload (--payload or --payload-file; default empty) is what the\n"
    "worker's command reads on its stdin. Jobs are granted fairly: tenants take\n"
    "round-robin turns, and within a tenant the highest priority, then the earliest\n"
    "deadline, goes first.\n"
    "Without --wait, print the job's ticket on stdout at once, and exit 0 once a\n"
    "worker has started the job: a job belongs to the submit that queued it and is\n"
    "withdrawn (owner-lost) if that submit ends first; once started it runs to its\n"
    "end, and its result is dropped.\n"
    "With --wait, wait for the job's result, write its bytes exactly to stdout, and\n"
    "exit with the job's status.\n"
    "With --batch, FILE ('-' for stdin) holds one job a line as a JSON object:\n"
    "  {\"tenant\": \"ci\", \"payload\": \"text\"} and optionally \"priority\" (integer),\n"
    "  \"deadline\" (a duration such as \"30s\"), \"quota\" (a name, or an array of\n"
    "  up to 8), \"key\" (single-flight, as --key: the line joins the key's live\n"
    "  job, or an earlier line's of the same key), and \"payload_b64\" (base64\n"
    "  bytes) or \"payload_file\" (a file's bytes) instead of \"payload\"; --tenant,\n"
    "  --priority, --deadline and --quota are the defaults for lines without them.\n"
    "  Every job is queued or none is: a bad line, a denied tenant or a queue\n"
    "  without room for them all refuses the whole batch, naming the line. Without\n"
    "  --wait the tickets are\n"
    "  printed one a line in input order; with --wait each job's result is printed\n"
    "  as a JSON line in input order, and the exit status is 0 when every job exited\n"
    "  0, else the first failing job's. A stop signal or --timeout cancels the\n"
    "  jobs not yet started; running ones go on to their end (docs/cli.md).\n"
    "SIGINT or SIGTERM while waiting cancels the job: a queued job ends at once\n"
    "(exit 75, cancelled); with --wait, a running job's worker is asked to stop it\n"
    "and submit waits for the worker's verdict (a second SIGINT or SIGTERM stops\n"
    "waiting: exit 75, cancelled).\n"
    "\n"
    "Options:\n"
    "  -c, --class CLASS        a worker class: tiny, small, standard, large or\n"
    "                           extra-large (required)\n"
    "  -t, --tenant TENANT      who the job is for, 1..31 graphic ASCII bytes (required)\n"
    "  -p, --priority P         integer, may be negative; higher runs first within the\n"
    "                           tenant's turn (default 0)\n"
    "  -d, --deadline DUR       give up unless the job starts within DUR (ms, s, m or\n"
    "                           h), fixed when submit starts (default: no deadline)\n"
    "  -a, --activation ID      an id unique among the class's live jobs, 1..31 graphic\n"
    "                           bytes; a duplicate fails (default: none)\n"
    "  --quota NAME             a quota of the segment: the job goes to a worker only\n"
    "                           while NAME has a unit free, and holds one until it\n"
    "                           ends; repeat for more, at most 8; a job waiting for a\n"
    "                           quota holds back no other (default: none)\n"
    "  -P, --payload STR        the payload: the bytes of STR (default: empty)\n"
    "  -f, --payload-file F     the payload: the bytes of file F, '-' for stdin; at most\n"
    "                           the class's payload size (default: empty)\n"
    "  -b, --batch FILE         submit the JSON-lines jobs of FILE ('-': stdin), all\n"
    "                           or none (default: one job from the options)\n"
    "  --key KEY                single-flight: while a job with KEY (1..31 graphic\n"
    "                           ASCII bytes) is queued or running in CLASS, join it\n"
    "                           instead of queueing another; every waiter gets its\n"
    "                           result (default: none)\n"
    "  --supersede[=running]    with --key: end the key's queued jobs (superseded)\n"
    "                           and queue this one; =running also asks the worker of\n"
    "                           a running one to stop it (default: off)\n"
    "  --retry-once             if the worker dies mid-job, queue the job once more\n"
    "                           instead of ending it worker-lost (default: off)\n"
    "  -w, --wait               wait for the result, print it, exit with the job's\n"
    "                           status (default: print the ticket, exit once the\n"
    "                           job has started)\n"
    "  --timeout DUR            with --wait: give up after DUR, cancelling the job\n"
    "                           (exit 75, timed-out) (default: no limit)\n"
    "  --print-ticket           with --wait: print the ticket alone on the first line\n"
    "                           of stderr once the job is queued (default: off)\n"
    "  -h, --help               show this help\n"
    "\n"
    "Exit status: without --wait 0 the job started (its ticket on stdout); with\n"
    "--wait the job's status (a status outside 0..255 exits 255); 75 the job did\n"
    "not start or did not complete (queue-full, class-denied, duplicate-activation,\n"
    "cancelled, superseded, deadline-exceeded, all-cells-quarantined, shutdown, worker-lost,\n"
    "owner-lost, timed-out, ...) or busy: the segment's process table is full;\n"
    "1 submit failed otherwise (not-found, ...);\n"
    "2 usage error, including a payload larger than the class's payload size.\n"
    "\n"
    "Examples:\n"
    "  shmsched submit jobs --class small --tenant web --payload 'hello' --wait\n"
    "  shmsched submit jobs -c small -t ci --payload-file report.txt --wait >digest\n"
    "  shmsched submit jobs -c small -t batch -P 'rebuild index'    # prints the ticket\n"
    "  git log | shmsched submit jobs -c small -t ci -f - --wait --timeout 30s\n"
    "  shmsched submit jobs -c small -t ci -P 'make docs' --key docs --wait   # once\n";

enum { OPT_RETRY_ONCE = 256, OPT_TIMEOUT, OPT_PRINT_TICKET, OPT_KEY, OPT_SUPERSEDE };

static const struct option opts[] = {
    {"class", required_argument, NULL, 'c'},
    {"tenant", required_argument, NULL, 't'},
    {"priority", required_argument, NULL, 'p'},
    {"deadline", required_argument, NULL, 'd'},
    {"activation", required_argument, NULL, 'a'},
    {"quota", required_argument, NULL, CLI_OPT_QUOTA},
    {"payload", required_argument, NULL, 'P'},
    {"payload-file", required_argument, NULL, 'f'},
    {"batch", required_argument, NULL, 'b'},
    {"retry-once", no_argument, NULL, OPT_RETRY_ONCE},
    {"key", required_argument, NULL, OPT_KEY},
    {"supersede", optional_argument, NULL, OPT_SUPERSEDE},
    {"wait", no_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"print-ticket", no_argument, NULL, OPT_PRINT_TICKET},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A duration option's value into *ns; returns -1 to go on, else an exit code. */
static int take_duration(const char *opt, uint64_t *ns) {
  char err[256];
  if (cli_parse_duration(optarg, ns, err, sizeof err) != 0)
    return cli_usage("submit: --%s: %s", opt, err);
  return -1;
}

/* One option into a; returns -1 to go on, else an exit code. */
static int take_option(int c, char **argv, struct submit_args *a) {
  int rc = cli_request_option("submit", c, &a->cls, &a->req, &a->deadline_in_ns);
  if (rc != 0)
    return rc;
  switch (c) {
  case 'P':
    a->payload = optarg;
    a->payload_file = NULL;
    return -1;
  case 'f':
    a->payload_file = optarg;
    a->payload = NULL;
    return -1;
  case 'b':
    a->batch = optarg;
    return -1;
  case OPT_RETRY_ONCE:
    a->flags |= SHMS_SUBMIT_RETRY_ONCE;
    return -1;
  case OPT_KEY:
    a->key = optarg;
    return -1;
  case OPT_SUPERSEDE:
    if (optarg != NULL && strcmp(optarg, "running") != 0)
      return cli_usage("submit: --supersede=%s: expected --supersede or --supersede=running",
                       optarg);
    a->flags |= SHMS_SUBMIT_SUPERSEDE | (optarg != NULL ? SHMS_SUBMIT_SUPERSEDE_RUNNING : 0);
    return -1;
  case 'w':
    a->wait = 1;
    return -1;
  case OPT_TIMEOUT:
    a->timeout_text = optarg;
    return take_duration("timeout", &a->timeout_ns);
  case OPT_PRINT_TICKET:
    a->print_ticket = 1;
    return -1;
  case 'h':
    return cli_help(help);
  default:
    return cli_bad_option("submit", c, argv);
  }
}

/* --key and --supersede as given: -1 to go on, else an exit code. */
static int check_key(const struct submit_args *a) {
  if (a->key == NULL)
    return (a->flags & SHMS_SUBMIT_SUPERSEDE)
               ? cli_usage("submit: --supersede needs --key (it replaces the key's queued jobs)")
               : -1;
  size_t n = strlen(a->key);
  if (n == 0 || n > SHMS_KEY_MAX)
    return cli_usage("submit: --key: %s: 1..%d graphic ASCII bytes", n == 0 ? "empty" : "too long",
                     SHMS_KEY_MAX);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)a->key[i] <= 0x20 || (unsigned char)a->key[i] >= 0x7f)
      return cli_usage("submit: --key: byte %zu (0x%02x) is not graphic ASCII", i + 1,
                       (unsigned char)a->key[i]);
  if (a->req.activation != NULL)
    return cli_usage("submit: --key and --activation exclude each other: the key already names "
                     "the job among the class's live jobs");
  return -1;
}

/* Returns -1 to go on, else an exit code. */
static int parse(int argc, char **argv, struct submit_args *a) {
  int c, rc;
  while ((c = getopt_long(argc, argv, ":c:t:p:d:a:P:f:b:wh", opts, NULL)) != -1)
    if ((rc = take_option(c, argv, a)) >= 0)
      return rc;
  if (cli_take_name("submit", argc, argv, &a->name) != 0)
    return CLI_EXIT_USAGE;
  if (a->batch != NULL && (a->payload != NULL || a->payload_file != NULL || a->req.activation ||
                           a->key != NULL || (a->flags & SHMS_SUBMIT_SUPERSEDE)))
    return cli_usage("submit: --batch takes each job's payload and key from its line: not with "
                     "--%s",
                     a->req.activation != NULL ? "activation"
                     : a->payload != NULL      ? "payload"
                     : a->payload_file != NULL ? "payload-file"
                     : a->key != NULL          ? "key"
                                               : "supersede");
  if (a->cls == NULL || (a->req.tenant == NULL && a->batch == NULL))
    return cli_usage("submit: missing --%s (see 'shmsched submit --help')",
                     a->cls == NULL ? "class" : "tenant");
  if (!a->wait && (a->timeout_ns != 0 || a->print_ticket))
    return cli_usage("submit: --%s needs --wait (without it the ticket is printed on stdout)",
                     a->timeout_ns != 0 ? "timeout" : "print-ticket");
  if ((rc = check_key(a)) >= 0)
    return rc;
  return cli_parse_class("submit", a->cls, &a->req.cls) == 0 ? -1 : CLI_EXIT_USAGE;
}

/* The class is a worker class of this segment: its payload size into *limit. */
static int class_limit(shms_t *h, const struct submit_args *a, size_t *limit) {
  shms_config cfg;
  int rc = shms_get_config(h, &cfg);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  const shms_class_config *k = &cfg.classes[a->req.cls];
  if (!k->configured)
    return cli_usage("submit: segment '%s' has no class %s", a->name, a->cls);
  if (k->mode != SHMS_MODE_WORKER)
    return cli_usage("submit: class %s is a lease class (mode=lease): run commands on it with "
                     "'shmsched run'",
                     a->cls);
  *limit = k->payload;
  return 0;
}

/* Queue the job; print its ticket (stdout without --wait, stderr with --print-ticket). */
static int queue_job(shms_t *h, const struct submit_args *a, const struct payload *p,
                     shms_ticket *t) {
  int rc = a->key != NULL ? shms_submit_key(h, &a->req, a->key, p->bytes, p->len, a->flags, t, NULL)
                          : shms_submit(h, &a->req, p->bytes, p->len, a->flags, t);
  if (rc != SHMS_OK)
    return submit_fail(a, rc, NULL);
  char text[SHMS_TICKET_STRLEN];
  shms_ticket_format(t, text);
  if (!a->wait || a->print_ticket) {
    FILE *f = a->wait ? stderr : stdout;
    fprintf(f, "%s\n", text);
    fflush(f);
  }
  return 0;
}

/* --batch: read every line first (a bad one submits nothing), then submit them all or none. */
static int submit_batch(shms_t *h, const struct submit_args *a) {
  size_t limit = 0;
  struct batch_input in;
  int rc = class_limit(h, a, &limit);
  if (rc == 0)
    rc = batch_read(a, limit, &in);
  if (rc == 0) {
    struct run_signals sigs;
    run_signals_block(&sigs); /* before the jobs exist: no signal may leave them unattended */
    rc = batch_submit(h, a, &in, limit, &sigs);
    batch_free(&in);
  }
  shms_detach(h);
  return rc;
}

int cmd_submit(int argc, char **argv) {
  struct submit_args a = {.req.priority = 0};
  int rc = parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if (a.deadline_in_ns != 0)
    a.req.deadline_ns = run_monotonic_ns() + a.deadline_in_ns;
  shms_t *h;
  if ((rc = cli_attach_to_queue("submit", a.name, &h)) != 0)
    return rc;
  size_t limit = 0;
  if (a.batch != NULL)
    return submit_batch(h, &a);
  struct payload p = {0};
  if ((rc = class_limit(h, &a, &limit)) == 0)
    rc = submit_read_payload(&a, limit, &p);
  struct run_signals sigs;
  if (rc == 0)
    run_signals_block(&sigs); /* before the job exists: no signal may leave it unattended */
  shms_ticket t;
  if (rc == 0)
    rc = queue_job(h, &a, &p, &t);
  if (rc == 0)
    rc = submit_wait(h, &a, &t, limit, &sigs);
  free(p.owned);
  shms_detach(h);
  return rc;
}

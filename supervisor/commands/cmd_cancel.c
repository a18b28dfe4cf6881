/* shmsched cancel: cancel queued requests by their tickets, from any shell. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"

static const char help[] =
    "Usage: shmsched cancel NAME TICKET...\n"
    "       shmsched cancel NAME -\n"
    "\n"
    "Cancel the requests the TICKETs name (as printed by 'shmsched run\n"
    "--print-ticket' or 'shmsched submit'); '-' reads them from standard input,\n"
    "one per line (blank lines skipped), so the tickets 'submit --batch' prints\n"
    "can be piped in. Every ticket is checked before any is cancelled.\n"
    "A request still queued, or granted but not yet accepted, is cancelled: its\n"
    "waiter fails with 'cancelled' (a 'shmsched run' exits 75). A request that\n"
    "already holds its lease cannot be cancelled: cancel says where it is held,\n"
    "by which pid and since when; stop its command instead. A job a worker runs\n"
    "(worker classes) is flagged, and its worker decides: 'shmsched worker'\n"
    "sends its command SIGTERM. Anyone may cancel their own requests; another\n"
    "user's only the segment's owner, root and its admin-group.\n"
    "\n"
    "Options:\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 this call cancelled every one; otherwise the status of the\n"
    "first it did not: 1 nothing changed: it was already cancelled (cancelled),\n"
    "had already ended (its reason, e.g. deadline-exceeded), or the ticket names\n"
    "no live request (not-found: unknown, stale, retired, or of another segment);\n"
    "3 nothing changed: its lease is held (busy). 2 usage error, e.g. a malformed\n"
    "TICKET: then nothing is cancelled.\n"
    "\n"
    "Examples:\n"
    "  shmsched cancel jobs standard.17.1234.9f3a61c07e2d4b18\n"
    "  shmsched run jobs -c standard -t ci --print-ticket -- make 2>make.log &\n"
    "  shmsched cancel jobs \"$(head -n1 make.log)\"\n"
    "  shmsched submit jobs -c standard --batch jobs.jsonl >tickets\n"
    "  shmsched cancel jobs - <tickets\n";

/*
 * The request was accepted and its lease is held: a lease is never revoked
 * (its command may be half-way through its work). Say where it is held, by
 * whom and since when, and how to end it instead. Exit CLI_EXIT_HELD.
 */
static int held(const shms_explanation *x, const shms_ticket *t, const char *text) {
  char by[96], since[48];
  if (x->holder_pid > 0)
    snprintf(by, sizeof by, "pid %d%s", (int)x->holder_pid,
             x->holder_alive ? "" : ", dead: recovery disposes of it");
  else
    snprintf(by, sizeof by, "a process whose entry was reused");
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  time_t secs = now.tv_sec - (time_t)(x->held_ns / 1000000000u);
  struct tm tm;
  if (gmtime_r(&secs, &tm) == NULL || strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(since, sizeof since, "?");
  char how[64] = "";
  if (x->holder_pid > 0 && x->holder_alive)
    snprintf(how, sizeof how, " (signal the holder, e.g. kill %d)", (int)x->holder_pid);
  cli_fail(SHMS_EBUSY,
           "cancel: request %s holds its lease on class %s cell %u (%s, since %s, %.1fs): a held "
           "lease cannot be cancelled; stop its command instead%s; nothing changed",
           text, shms_class_name((shms_class_t)t->cls), x->cell, by, since,
           (double)x->held_ns / 1e9, how);
  return CLI_EXIT_HELD;
}

/*
 * shms_cancel said 0: the request had ended. Its outcome names the reason;
 * a request whose slot was freed meanwhile (accepted) no longer exists.
 */
static int not_cancelled(shms_t *h, const shms_ticket *t, const char *text) {
  char detail[256];
  snprintf(detail, sizeof detail, "%s", shms_last_error_detail());
  shms_explanation x;
  int reason = SHMS_ENOTFOUND;
  int explained = shms_explain(h, t, &x) == SHMS_OK;
  if (explained && x.state == SHMS_REQ_HELD)
    return held(&x, t, text);
  if (explained && x.state == SHMS_REQ_ENDED && x.outcome != 0)
    reason = x.outcome;
  return cli_fail(reason, "cancel: %s: %s; nothing changed", text,
                  detail[0] != '\0' ? detail : "the request had already ended");
}

/* Cancel one request; its line on stdout, or why not on stderr. Returns its exit status. */
static int cancel_one(shms_t *h, const shms_ticket *t, const char *text) {
  int rc = shms_cancel(h, t);
  shms_explanation x;
  if (rc == 1 && shms_explain(h, t, &x) == SHMS_OK && x.state == SHMS_REQ_RUNNING)
    printf("asked the worker running job %s to stop it (its worker decides)\n", text);
  else if (rc == 1)
    printf("cancelled request %s\n", text);
  else if (rc == 0)
    return not_cancelled(h, t, text);
  else { /* not-found and the like: nothing was cancelled, never a usage error here */
    const char *detail = shms_last_error_detail();
    cli_fail(rc, "cancel: %s: %s; nothing changed", text,
             detail[0] != '\0' ? detail : shms_strerror(rc));
    return rc == SHMS_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

struct tickets {
  shms_ticket *t;
  char **text;
  size_t n, cap;
};

static void tickets_free(struct tickets *ts) {
  for (size_t i = 0; i < ts->n; i++)
    free(ts->text[i]);
  free(ts->t);
  free(ts->text);
}

/* Parse s into ts (where: the line it came from, or ""). 0, or the exit code. */
static int tickets_add(struct tickets *ts, const char *s, const char *where) {
  shms_ticket t;
  if (shms_ticket_parse(s, &t) != SHMS_OK)
    return cli_usage("cancel: %s%s; nothing cancelled", where, shms_last_error_detail());
  if (ts->n == ts->cap) {
    size_t cap = ts->cap == 0 ? 16 : ts->cap * 2;
    shms_ticket *nt = realloc(ts->t, cap * sizeof *nt);
    if (nt != NULL)
      ts->t = nt;
    char **nx = nt == NULL ? NULL : realloc(ts->text, cap * sizeof *nx);
    if (nx == NULL)
      return cli_fail(SHMS_ENOMEM, "cancel: out of memory for %zu tickets", cap);
    ts->text = nx;
    ts->cap = cap;
  }
  if ((ts->text[ts->n] = strdup(s)) == NULL)
    return cli_fail(SHMS_ENOMEM, "cancel: out of memory");
  ts->t[ts->n++] = t;
  return 0;
}

/* The tickets of standard input, one a line (blank lines and surrounding blanks ignored). */
static int tickets_read(struct tickets *ts) {
  char *line = NULL, where[48];
  size_t cap = 0;
  ssize_t len;
  int rc = 0;
  for (size_t no = 1; rc == 0 && (len = getline(&line, &cap, stdin)) >= 0; no++) {
    char *s = line, *e = line + len;
    while (s < e && isspace((unsigned char)*s))
      s++;
    while (e > s && isspace((unsigned char)e[-1]))
      *--e = '\0';
    if (s == e)
      continue;
    snprintf(where, sizeof where, "standard input line %zu: ", no);
    rc = tickets_add(ts, s, where);
  }
  free(line);
  if (rc == 0 && ferror(stdin))
    rc = cli_fail(SHMS_ESYSTEM, "cancel: reading standard input: %s; nothing cancelled",
                  strerror(errno));
  if (rc == 0 && ts->n == 0)
    rc = cli_usage("cancel: no ticket on standard input; nothing cancelled");
  return rc;
}

int cmd_cancel(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    return cli_bad_option("cancel", c, argv);
  }
  char q[96];
  if (optind >= argc)
    return cli_usage("cancel: missing NAME (see 'shmsched cancel --help')");
  if (optind + 1 >= argc)
    return cli_usage("cancel: missing TICKET (see 'shmsched cancel --help')");
  const char *name = argv[optind];
  if (shms_name_check(name) != SHMS_OK)
    return cli_usage("cancel: %s", shms_last_error_detail());
  struct tickets ts = {0};
  int rc = 0;
  if (strcmp(argv[optind + 1], "-") == 0) {
    if (optind + 2 < argc)
      rc = cli_usage("cancel: unexpected argument '%s' after '-' (see 'shmsched cancel --help')",
                     cli_quote(q, sizeof q, argv[optind + 2]));
    else
      rc = tickets_read(&ts);
  } else {
    for (int i = optind + 1; rc == 0 && i < argc; i++)
      rc = tickets_add(&ts, argv[i], "");
  }
  shms_t *h = NULL;
  if (rc == 0)
    rc = cli_attach(name, 0, &h);
  int code = CLI_EXIT_OK;
  for (size_t i = 0; rc == 0 && i < ts.n; i++) {
    int one = cancel_one(h, &ts.t[i], ts.text[i]);
    if (code == CLI_EXIT_OK)
      code = one;
  }
  if (h != NULL)
    shms_detach(h);
  tickets_free(&ts);
  return rc != 0 ? rc : code;
}

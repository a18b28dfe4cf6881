/* shmsched cancel: cancel a queued request by its ticket, from any shell. */
#include <getopt.h>
#include <stdio.h>
#include <time.h>

#include "../cli/cli.h"
#include "../cli/cli_sched.h"

static const char help[] =
    "Usage: shmsched cancel NAME TICKET\n"
    "\n"
    "Cancel the request TICKET names (as printed by 'shmsched run --print-ticket').\n"
    "A request still queued, or granted but not yet accepted, is cancelled: its\n"
    "waiter fails with 'cancelled' (a 'shmsched run' exits 75). A request that\n"
    "already holds its lease cannot be cancelled: cancel says where it is held,\n"
    "by which pid and since when, and exits 3; stop its command instead. A job\n"
    "a worker runs (worker classes) is flagged, and its worker decides: 'shmsched\n"
    "worker' sends its command SIGTERM. Anyone may cancel their own requests;\n"
    "another user's only the segment's owner, root and its admin-group.\n"
    "\n"
    "Options:\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 this call cancelled it; 1 nothing changed: it was already\n"
    "cancelled (cancelled), had already ended (its reason, e.g. deadline-exceeded),\n"
    "or the ticket names no live request (not-found: unknown, stale, retired, or\n"
    "of another segment); 3 nothing changed: its lease is held (busy); 2 usage\n"
    "error, e.g. a malformed TICKET.\n"
    "\n"
    "Examples:\n"
    "  shmsched cancel jobs standard.17.1234.9f3a61c07e2d4b18\n"
    "  shmsched run jobs -c standard -t ci --print-ticket -- make 2>make.log &\n"
    "  shmsched cancel jobs \"$(head -n1 make.log)\"\n";

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
  return cli_fail(reason, "cancel: %s; nothing changed",
                  detail[0] != '\0' ? detail : "the request had already ended");
}

int cmd_cancel(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    return cli_bad_option("cancel", c, argv);
  }
  const char *name, *text;
  shms_ticket t;
  int rc = cli_take_name_ticket("cancel", argc, argv, &name, &t, &text);
  if (rc != 0)
    return rc;
  shms_t *h;
  if ((rc = cli_attach(name, 0, &h)) != 0)
    return rc;
  int code = CLI_EXIT_OK;
  rc = shms_cancel(h, &t);
  shms_explanation x;
  if (rc == 1 && shms_explain(h, &t, &x) == SHMS_OK && x.state == SHMS_REQ_RUNNING)
    printf("asked the worker running job %s to stop it (its worker decides)\n", text);
  else if (rc == 1)
    printf("cancelled request %s\n", text);
  else if (rc == 0)
    code = not_cancelled(h, &t, text);
  else /* not-found and the like: nothing was cancelled, never a usage error here */
    code = cli_sched_fail(rc) == CLI_EXIT_USAGE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  shms_detach(h);
  return code;
}

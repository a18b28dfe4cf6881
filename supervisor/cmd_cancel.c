/* shmsched cancel: cancel a queued request by its ticket, from any shell. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "cli_sched.h"

static const char help[] =
    "Usage: shmsched cancel NAME TICKET\n"
    "\n"
    "Cancel the request TICKET names (as printed by 'shmsched run --print-ticket').\n"
    "A request still queued, or granted but not yet accepted, is cancelled: its\n"
    "waiter fails with 'cancelled' (a 'shmsched run' exits 75). A request that\n"
    "already holds its lease cannot be cancelled: stop its command instead. A job\n"
    "a worker runs (worker classes) is flagged, and its worker decides: 'shmsched\n"
    "worker' sends its command SIGTERM.\n"
    "\n"
    "Options:\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 this call cancelled it; 1 nothing changed: it was already\n"
    "cancelled (cancelled), had already ended (its reason, e.g. deadline-exceeded),\n"
    "or the ticket names no live request (not-found: unknown, stale, retired, or\n"
    "of another segment); 2 usage error, e.g. a malformed TICKET.\n"
    "\n"
    "Examples:\n"
    "  shmsched cancel jobs standard.17.1234.9f3a61c07e2d4b18\n"
    "  shmsched run jobs -c standard -t ci --print-ticket -- make 2>make.log &\n"
    "  shmsched cancel jobs \"$(head -n1 make.log)\"\n";

/*
 * shms_cancel said 0: the request had ended. Its outcome names the reason;
 * a request whose slot was freed meanwhile (accepted) no longer exists.
 */
static int not_cancelled(shms_t *h, const shms_ticket *t) {
  char detail[256];
  snprintf(detail, sizeof detail, "%s", shms_last_error_detail());
  shms_explanation x;
  int reason = SHMS_ENOTFOUND;
  if (shms_explain(h, t, &x) == SHMS_OK && x.state == SHMS_REQ_ENDED && x.outcome != 0)
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
    code = not_cancelled(h, &t);
  else /* not-found and the like: nothing was cancelled, never a usage error here */
    code = cli_sched_fail(rc) == CLI_EXIT_USAGE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  shms_detach(h);
  return code;
}

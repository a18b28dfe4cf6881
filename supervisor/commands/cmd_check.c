/* shmsched check: audit a segment's invariants, and with --repair recover it first. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../cli/cli.h"
#include "../cli/cli_sched.h"
#include "../cli/event_fmt.h"

static const char check_help[] =
    "Usage: shmsched check NAME [--repair]\n"
    "\n"
    "Audit every invariant of the segment, holding each class still for the\n"
    "moment it is read (operations wait at their start, briefly): every cell in\n"
    "exactly one state and the counts of each state consistent; every request in\n"
    "exactly one state; the indexes (tenant ring, per-tenant orders, free-slot\n"
    "map) consistent with the state words; no lease, request or worker belonging\n"
    "to a dead process. Prints one line per violation.\n"
    "\n"
    "With --repair, first recover what dead processes left behind, exactly as the\n"
    "supervisor does at each death (and put dead workers' quarantined cells back\n"
    "offline), print what was done (one line per item: a dead holder's lease\n"
    "released or quarantined, a dead waiter's request ended owner-lost, ...; then\n"
    "the totals: counts_fixed counts only counts that were wrong), then audit.\n"
    "Recovery repairs every violation but a corrupt state word (a cell or slot in\n"
    "no valid state): those lines say 'cannot be repaired', and the error line\n"
    "says what to do instead (drain the segment, destroy it, create it again).\n"
    "--repair is for the segment's owner, root and the members of its admin-group.\n"
    "\n"
    "Options:\n"
    "      --repair   recover first (without a supervisor, this is the recovery)\n"
    "  -h, --help     show this help\n"
    "\n"
    "Exit status: 0 every invariant holds, 1 violations were found (or the check\n"
    "failed), 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched check jobs\n"
    "  shmsched check jobs --repair\n";

static void print_recovery(const shms_recovery *r, int repaired) {
  printf("recovered: dead_processes=%u requests_owner_lost=%u grants_returned=%u "
         "leases_released=%u leases_quarantined=%u jobs_requeued=%u jobs_lost=%u "
         "workers_unbound=%u slots_freed=%u batons_recovered=%u counts_fixed=%u "
         "worker_cells_repaired=%d\n",
         r->dead_processes, r->requests_owner_lost, r->grants_returned, r->leases_released,
         r->leases_quarantined, r->jobs_requeued, r->jobs_lost, r->workers_unbound, r->slots_freed,
         r->batons_recovered, r->counts_fixed, repaired);
}

/* One line per item recovered, as the supervisor logs it: what became of what the dead left. */
static void print_item(const shms_event *ev, void *ctx) {
  (void)ctx;
  char line[512];
  if (ev->kind != SHMS_EVENT_CLASS_RECOMPUTED) /* how recovery works, not what it found */
    printf("%s\n", event_line(line, sizeof line, ev, 0, NULL));
}

/* The report's lines that recovery cannot repair (shms_check marks them). */
static uint32_t count_unrepairable(const char *report) {
  uint32_t n = 0;
  for (const char *p = report; (p = strstr(p, SHMS_CHECK_UNREPAIRABLE)) != NULL; p++)
    n++;
  return n;
}

/*
 * The closing error line: what --repair would fix (never offered after it ran,
 * nor when it would fix nothing), what it cannot, and what to do about that.
 */
static int report_violations(const char *name, uint32_t n, uint32_t corrupt, int repaired) {
  const char *s = n == 1 ? "" : "s";
  if (corrupt == 0)
    return cli_fail(SHMS_EVIOLATION, "check: %u violation%s in segment '%s'%s", n, s, name,
                    repaired ? ""
                             : " (shmsched check --repair recovers what the dead left and "
                               "recomputes every count and index)");
  char fixable[160] = "";
  if (!repaired && corrupt < n)
    snprintf(fixable, sizeof fixable, "; --repair fixes %u of them, but", n - corrupt);
  else
    snprintf(fixable, sizeof fixable, "%s; recovery", repaired ? " left after recovery" : "");
  return cli_fail(SHMS_EVIOLATION,
                  "check: %u violation%s in segment '%s'%s cannot repair %u (the lines marked "
                  "'cannot be repaired': corrupt memory): stop using the segment, drain it "
                  "(shmsched drain %s), let its leases end, destroy it and create it again; "
                  "please report what check printed",
                  n, s, name, fixable, corrupt, name);
}

int cmd_check(int argc, char **argv) {
  static const struct option opts[] = {
      {"repair", no_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c, repair = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(check_help);
    if (c == 'r')
      repair = 1;
    else
      return cli_bad_option("check", c, argv);
  }
  const char *name;
  if (cli_take_name("check", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  shms_t *h;
  int rc = cli_attach(name, 0, &h);
  if (rc != 0)
    return rc;
  if (repair) {
    shms_recovery r;
    if ((rc = shms_recover_dead(h, SHMS_RECOVER_FULL, print_item, NULL, &r)) != SHMS_OK) {
      rc = cli_fail_lib(rc);
      shms_detach(h);
      return rc;
    }
    int n = shms_repair_lost_workers(h);
    print_recovery(&r, n > 0 ? n : 0);
  }
  static char report[65536];
  uint32_t violations = 0;
  rc = shms_check(h, report, sizeof report, &violations);
  shms_detach(h);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  if (violations == 0) {
    printf("ok: every invariant holds\n");
    return CLI_EXIT_OK;
  }
  fputs(report, stdout);
  return report_violations(name, violations, count_unrepairable(report), repair);
}

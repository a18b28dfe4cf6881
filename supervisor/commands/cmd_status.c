/* shmsched status: the segment's configuration and live figures, per class. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../cli/cli.h"
#include "../cli/status.h"
#include "shmsched.h"

static const char help[] =
    "Usage: shmsched status NAME [--json] [--tenants] [--leases]\n"
    "\n"
    "Show the segment (incarnation, creation time, size, layout version, state,\n"
    "live processes, settings) and, per configured class, its configuration and\n"
    "live figures: cells available/leased/granted (not yet accepted)/quarantined/\n"
    "offline, queue depth and capacity, queued tenants, granted/rejected/\n"
    "cancelled/expired counts, total and max wait, oldest lease and unaccepted\n"
    "grant ages (times in nanoseconds). The mode and group shown are the segment\n"
    "file's, as they are now.\n"
    "It attaches as an observer: read-only, unregistered, it changes nothing.\n"
    "With --tenants it also lists, per class, the tenants with queued work or\n"
    "counted leases: queued, active, in_ring, granted, total and max wait, read\n"
    "as an observer too (each row one tenant seen whole; rows are not one instant).\n"
    "With --leases it also lists, per class, every cell: its state, generation,\n"
    "holder pid and the holder's process state from /proc (running, stopped,\n"
    "dead), tenant, the lease's ticket and age, and for a quarantined cell the\n"
    "reason and when (each row one cell at one instant).\n"
    "\n"
    "Options:\n"
    "  -j, --json      print one JSON object instead of 'key: value' sections\n"
    "                  (default: sections)\n"
    "  -t, --tenants   add the per-tenant rows of each class (default: off)\n"
    "  -l, --leases    add the per-cell rows of each class: who holds what\n"
    "                  (default: off)\n"
    "  -h, --help      show this help\n"
    "\n"
    "Exit status: 0 shown, 1 not shown (not-found, permission-denied,\n"
    "incompatible-segment, ...), 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched status jobs\n"
    "  shmsched status jobs --json\n"
    "  shmsched status jobs --json | jq .classes.standard.cells_available\n"
    "  shmsched status jobs --tenants | grep '^tenant\\.'\n"
    "  shmsched status jobs --leases | grep 'holder=stopped'\n";

/* One class's tenants into v. */
static int gather_tenants(shms_t *h, int c, struct status_view *v) {
  int rc = cli_tenants(h, c, &v->tenants[c], &v->tenants_count[c]);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  v->tenants_shown[c] = v->tenants_count[c];
  return CLI_EXIT_OK;
}

/* One class's cells into v. */
static int gather_cells(shms_t *h, int c, struct status_view *v) {
  uint32_t n = v->cfg.classes[c].cells;
  v->cells[c] = calloc(n ? n : 1, sizeof *v->cells[c]);
  if (v->cells[c] == NULL)
    return cli_fail(SHMS_ENOMEM, "status: cannot allocate %u cell rows", n);
  int rc = shms_cells(h, (shms_class_t)c, v->cells[c], n, &v->cells_count[c]);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  if (v->cells_count[c] > n)
    v->cells_count[c] = n;
  return CLI_EXIT_OK;
}

/*
 * Read everything first, so a failure prints nothing but the error line. Returns an exit code.
 * One observer attach: read-only and unregistered, --tenants and --leases included.
 */
static int gather(const char *name, struct status_view *v) {
  shms_t *h;
  int rc = shms_attach(name, SHMS_ATTACH_OBSERVER, &h);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  rc = shms_segment_info_get(h, &v->info);
  if (rc == SHMS_OK)
    rc = shms_get_config(h, &v->cfg);
  for (int c = 0; rc == SHMS_OK && c < SHMS_CLASS_COUNT; c++)
    if (v->cfg.classes[c].configured)
      rc = shms_observe(h, (shms_class_t)c, &v->stats[c]);
  if (rc == SHMS_OK)
    rc = shms_quota_list(h, v->quotas, SHMS_QUOTAS_MAX, &v->nquotas);
  v->nquotas = v->nquotas < SHMS_QUOTAS_MAX ? v->nquotas : SHMS_QUOTAS_MAX;
  /* Report before detaching: detach replaces the library's error detail. */
  int code = rc == SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(rc);
  for (int c = 0; code == CLI_EXIT_OK && v->with_tenants && c < SHMS_CLASS_COUNT; c++)
    if (v->cfg.classes[c].configured)
      code = gather_tenants(h, c, v);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  v->now_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  for (int c = 0; code == CLI_EXIT_OK && v->with_leases && c < SHMS_CLASS_COUNT; c++)
    if (v->cfg.classes[c].configured)
      code = gather_cells(h, c, v);
  shms_detach(h); /* an observer holds no registration: nothing to report if this fails */
  return code;
}

void status_view_free(struct status_view *v) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    free(v->tenants[c]);
    free(v->cells[c]);
  }
}

int cmd_status(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"tenants", no_argument, NULL, 't'},
                                       {"leases", no_argument, NULL, 'l'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int json = 0, tenants = 0, leases = 0, c;
  while ((c = getopt_long(argc, argv, ":jtlh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    if (c == 'j')
      json = 1;
    else if (c == 't')
      tenants = 1;
    else if (c == 'l')
      leases = 1;
    else
      return cli_bad_option("status", c, argv);
  }
  const char *name;
  if (cli_take_name("status", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  struct status_view v = {.name = name, .with_tenants = tenants, .with_leases = leases};
  int rc = gather(name, &v);
  if (rc == CLI_EXIT_OK) {
    if (json)
      status_print_json(stdout, &v);
    else
      status_print_text(stdout, &v);
  }
  status_view_free(&v);
  return rc;
}

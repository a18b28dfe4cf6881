/* shmsched status: the segment's configuration and live figures, per class. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "shmsched.h"
#include "status.h"

static const char help[] =
    "Usage: shmsched status NAME [--json]\n"
    "\n"
    "Show the segment (incarnation, creation time, size, layout version, state,\n"
    "live processes, settings) and, per configured class, its configuration and\n"
    "live figures: cells available/leased/quarantined/offline, queue depth and\n"
    "capacity, queued tenants, granted/rejected/cancelled/expired counts, total\n"
    "and max wait, oldest lease age (times in nanoseconds).\n"
    "It attaches as an observer: read-only, unregistered, it changes nothing.\n"
    "\n"
    "Options:\n"
    "  -j, --json   print one JSON object instead of 'key: value' sections\n"
    "               (default: sections)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 shown, 1 not shown (not-found, permission-denied,\n"
    "incompatible-segment, ...), 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched status jobs\n"
    "  shmsched status jobs --json\n"
    "  shmsched status jobs --json | jq .classes.standard.cells_available\n";

/* Read everything first, so a failure prints nothing but the error line. Returns an exit code. */
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
  /* Report before detaching: detach replaces the library's error detail. */
  int code = rc == SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(rc);
  shms_detach(h); /* an observer holds no registration: nothing to report if this fails */
  return code;
}

int cmd_status(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int json = 0, c;
  while ((c = getopt_long(argc, argv, ":jh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    if (c != 'j')
      return cli_bad_option("status", c, argv);
    json = 1;
  }
  const char *name;
  if (cli_take_name("status", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  struct status_view v = {.name = name};
  int rc = gather(name, &v);
  if (rc != CLI_EXIT_OK)
    return rc;
  if (json)
    status_print_json(stdout, &v);
  else
    status_print_text(stdout, &v);
  return CLI_EXIT_OK;
}

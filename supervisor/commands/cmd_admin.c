/* shmsched drain (and resume) and shmsched repair: administration of a live segment. */
#include <getopt.h>
#include <stdio.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"

static const char drain_help[] =
    "Usage: shmsched drain NAME [--undo]\n"
    "       shmsched resume NAME\n"
    "\n"
    "Stop the segment taking work: new requests fail with 'shutdown', queued\n"
    "requests (and granted ones not yet accepted) are settled with 'shutdown'\n"
    "(a waiting 'shmsched run' exits 75), and accepted leases keep their cells\n"
    "until released, so running commands finish normally. Draining twice is not\n"
    "an error. With --undo (or as 'shmsched resume') lift the drain: the segment\n"
    "takes new requests again; what the drain settled stays settled, and workers\n"
    "it stopped must be started again. For the segment's owner, root and members\n"
    "of its admin-group; others get permission-denied.\n"
    "\n"
    "Options:\n"
    "  -u, --undo   lift the drain (the same as 'shmsched resume NAME')\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 draining (--undo: active), 1 failed (not-found,\n"
    "permission-denied, shutdown: the segment is being destroyed, ...), 2 usage\n"
    "error.\n"
    "\n"
    "Examples:\n"
    "  shmsched drain jobs\n"
    "  shmsched drain jobs --undo\n"
    "  shmsched drain jobs && shmsched status jobs | grep -E '^(state|cells_leased):'\n";

static const char repair_help[] =
    "Usage: shmsched repair NAME --class CLASS [--cell N]\n"
    "\n"
    "Return quarantined cells of CLASS to service and print how many were\n"
    "repaired. A cell is quarantined when a command run on it was killed by a\n"
    "signal, or its holder died: repair it once you know the cell is clean.\n"
    "For the segment's owner, root and members of its admin-group.\n"
    "\n"
    "Options:\n"
    "  -c, --class CLASS   the class (required)\n"
    "  -n, --cell N        only cell N, 0..cells-1; it must be quarantined\n"
    "                      (default: every quarantined cell of the class, maybe none)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 repaired (with --cell: that cell; without: however many were\n"
    "quarantined, maybe 0), 1 failed (the --cell is not quarantined, not-found,\n"
    "...), 2 usage error (unknown class, a class the segment lacks, no such cell).\n"
    "\n"
    "Examples:\n"
    "  shmsched repair jobs --class standard\n"
    "  shmsched repair jobs --class standard --cell 3\n";

/* Drain NAME, or (undo) lift its drain. */
static int drain(const char *name, int undo) {
  shms_t *h;
  int rc = cli_attach(name, 0, &h);
  if (rc != 0)
    return rc;
  rc = undo ? shms_resume(h) : shms_drain(h);
  int code = rc >= SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(rc);
  shms_detach(h);
  if (code == CLI_EXIT_OK && undo)
    printf("segment '%s' is active%s: new requests are taken again\n", name,
           rc == 0 ? " (it was not draining)" : "");
  else if (code == CLI_EXIT_OK)
    printf("segment '%s' is draining: new and queued requests fail with shutdown; "
           "leases held run to their end\n",
           name);
  return code;
}

static int drain_command(const char *cmd, int argc, char **argv, int undo) {
  static const struct option opts[] = {
      {"undo", no_argument, NULL, 'u'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, undo ? ":h" : ":uh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(drain_help);
    if (c == 'u' && !undo) {
      undo = 1;
      continue;
    }
    return cli_bad_option(cmd, c, argv);
  }
  const char *name;
  if (cli_take_name(cmd, argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  return drain(name, undo);
}

int cmd_drain(int argc, char **argv) { return drain_command("drain", argc, argv, 0); }

int cmd_resume(int argc, char **argv) { return drain_command("resume", argc, argv, 1); }

struct repair_args {
  const char *cls_name;
  shms_class_t cls;
  int cell; /* -1: every quarantined cell */
};

/* Returns -1 to go on, else an exit code. */
static int repair_options(int argc, char **argv, struct repair_args *a) {
  static const struct option opts[] = {{"class", required_argument, NULL, 'c'},
                                       {"cell", required_argument, NULL, 'n'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  char err[256];
  uint32_t cell = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":c:n:h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(repair_help);
    if (c == 'c') {
      a->cls_name = optarg;
    } else if (c == 'n') {
      if (cli_parse_u32(optarg, &cell, err, sizeof err) != 0)
        return cli_usage("repair: --cell: %s", err);
      if (cell >= SHMS_CELLS_MAX)
        return cli_usage("repair: --cell: must be 0..%d, got %u", SHMS_CELLS_MAX - 1, cell);
      a->cell = (int)cell;
    } else {
      return cli_bad_option("repair", c, argv);
    }
  }
  if (a->cls_name == NULL)
    return cli_usage("repair: missing --class (see 'shmsched repair --help')");
  int rc = cli_parse_class("repair", a->cls_name, &a->cls);
  return rc != 0 ? rc : -1;
}

/* The class and cell exist in this segment; else a usage error. */
static int repair_check(shms_t *h, const char *name, const struct repair_args *a) {
  shms_config cfg;
  int rc = shms_get_config(h, &cfg);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  const shms_class_config *k = &cfg.classes[a->cls];
  if (!k->configured)
    return cli_usage("repair: segment '%s' has no class %s", name, a->cls_name);
  if (a->cell >= 0 && (uint32_t)a->cell >= k->cells)
    return cli_usage("repair: class %s has no cell %d (cells 0..%u)", a->cls_name, a->cell,
                     k->cells - 1);
  return 0;
}

int cmd_repair(int argc, char **argv) {
  struct repair_args a = {.cell = -1};
  int rc = repair_options(argc, argv, &a);
  if (rc >= 0)
    return rc;
  const char *name;
  if (cli_take_name("repair", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  shms_t *h;
  if ((rc = cli_attach(name, 0, &h)) != 0)
    return rc;
  int code = repair_check(h, name, &a);
  if (code == 0 && (rc = shms_repair(h, a.cls, a.cell)) < 0) {
    /* Arguments were checked above: what is left (the cell is not quarantined) is a failure. */
    cli_fail(rc, "repair: %s",
             shms_last_error_detail()[0] ? shms_last_error_detail() : shms_strerror(rc));
    code = CLI_EXIT_FAIL;
  }
  shms_detach(h);
  if (code == 0)
    printf("repaired %d cell%s of class %s\n", rc, rc == 1 ? "" : "s", a.cls_name);
  return code;
}

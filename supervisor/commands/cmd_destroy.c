/* shmsched destroy: remove a segment. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../cli/cli.h"
#include "shmsched.h"

static const char help[] =
    "Usage: shmsched destroy NAME [--force]\n"
    "\n"
    "Remove the segment NAME (/dev/shm/NAME, $SHMSCHED_DIR/NAME, or the path NAME\n"
    "when it has a '/'). Refused (busy) while live processes are\n"
    "attached. Processes still attached keep their mappings; new attaches fail.\n"
    "For the segment's owner, root and the members of its admin-group.\n"
    "\n"
    "Options:\n"
    "  -f, --force   remove it even with live processes attached, or when it fails\n"
    "                validation (incompatible-segment) (default: off); a file\n"
    "                that is not a shmsched segment is never removed\n"
    "  -h, --help    show this help\n"
    "\n"
    "Exit status: 0 removed, 1 not removed (not-found, busy, permission-denied, ...),\n"
    "2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched destroy jobs\n"
    "  shmsched destroy jobs --force\n";

/* A refusal that forcing would overcome names the library's flag: this command's is --force. */
static int destroy_fail(int rc) {
  static const char flag[] = "SHMS_DESTROY_FORCE";
  const char *detail = shms_last_error_detail();
  const char *at = strstr(detail, flag);
  if (at == NULL)
    return cli_fail_lib(rc);
  return cli_fail(rc, "%.*s--force%s", (int)(at - detail), detail, at + strlen(flag));
}

int cmd_destroy(int argc, char **argv) {
  static const struct option opts[] = {
      {"force", no_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  unsigned flags = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":fh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    if (c != 'f')
      return cli_bad_option("destroy", c, argv);
    flags |= SHMS_DESTROY_FORCE;
  }
  const char *name;
  if (cli_take_name("destroy", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  int rc = shms_destroy(name, flags);
  if (rc != SHMS_OK)
    return destroy_fail(rc);
  printf("destroyed segment '%s'\n", name);
  return CLI_EXIT_OK;
}

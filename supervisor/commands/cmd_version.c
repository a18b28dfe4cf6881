/* shmsched version: print the version of the CLI and its library. */
#include <getopt.h>
#include <stdio.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "shmsched.h"

static const char help[] = "Usage: shmsched version\n"
                           "\n"
                           "Print the version of shmsched ('shmsched X.Y.Z') on stdout.\n"
                           "\n"
                           "Options:\n"
                           "  -h, --help   show this help\n"
                           "\n"
                           "Examples:\n"
                           "  shmsched version\n"
                           "  shmsched --version\n";

int cmd_version(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    return cli_bad_option("version", c, argv);
  }
  char q[96];
  if (optind < argc)
    return cli_usage("version: unexpected argument '%s' (see 'shmsched version --help')",
                     cli_quote(q, sizeof q, argv[optind]));
  printf("shmsched %s\n", SHMS_VERSION_STRING);
  return CLI_EXIT_OK;
}

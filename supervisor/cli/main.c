/*
 * shmsched: the supervisor CLI. main() only dispatches to a subcommand
 * (cmd_*.c); each subcommand parses its own options and prints its own help.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_config.h"
#include "secure.h"
#include "sigbus.h"

static const char top_help[] =
    "Usage: shmsched COMMAND [ARGS...]\n"
    "       shmsched COMMAND --help\n"
    "\n"
    "A fair, crash-safe scheduler for co-located processes over a POSIX\n"
    "shared-memory segment. NAME is /dev/shm/NAME ($SHMSCHED_DIR/NAME when that is\n"
    "set), or, when it has a '/', the path of the segment file (e.g. /run/jobs/seg).\n"
    "\n"
    "Commands:\n"
    "  create NAME ...        lay out a new segment from --class specs or --config FILE\n"
    "  destroy NAME           remove a segment\n"
    "  status NAME            show the segment's configuration and live figures\n"
    "  run NAME ... -- CMD    acquire a lease fairly, run CMD on it, release it\n"
    "  submit NAME ...        queue a job for a worker class; --wait for its result\n"
    "  worker NAME ... -- CMD serve a worker class: each job's payload through CMD\n"
    "  jobserver NAME ... -- CMD  run a build tool (make, cargo) as a jobserver client\n"
    "                         whose tokens are leases: builds share the cells fairly\n"
    "  cancel NAME TICKET     cancel a queued request\n"
    "  explain NAME TICKET    say why a request waits\n"
    "  events NAME            the segment's recent events (--follow: as they happen)\n"
    "  drain NAME             stop taking work; leases held run to their end\n"
    "  resume NAME            lift a drain (the same as drain --undo)\n"
    "  repair NAME ...        return quarantined cells to service\n"
    "  policy NAME ...        tenants' weights for fair share; alone: list them\n"
    "  supervise NAME         watch attached processes, recover what the dead leave\n"
    "  check NAME             audit every invariant; --repair recovers first\n"
    "  metrics NAME...        the Prometheus exposition: once, --textfile, --listen\n"
    "  top NAME               a live view: classes, rates, waits, tenants\n"
    "  version                print the version\n"
    "  help [COMMAND]         show this help, or COMMAND's\n"
    "\n"
    "Options:\n"
    "  -h, --help             show this help\n"
    "  -V, --version          print the version\n"
    "\n"
    "Exit status: 0 success, 1 the operation failed, 2 usage or configuration error;\n"
    "run, jobserver: CMD's status, or 75 when the scheduler did not grant a lease;\n"
    "submit --wait: the job's status, or 75 when the job did not complete;\n"
    "74 the segment was truncated under the command (SIGBUS on it).\n"
    "Errors are one line on stderr: 'shmsched: <reason>: <what, and where>'.\n"
    "\n"
    "Examples:\n"
    "  shmsched create jobs --class standard:cells=8,queue=64\n"
    "  shmsched run jobs --class standard --tenant ci -- make test\n"
    "  shmsched status jobs --json\n"
    "  shmsched destroy jobs\n";

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    {"create", cmd_create},
    {"destroy", cmd_destroy},
    {"status", cmd_status},
    {"run", cmd_run},
    {"cancel", cmd_cancel},
    {"explain", cmd_explain},
    {"drain", cmd_drain},
    {"repair", cmd_repair},
    {"policy", cmd_policy},
    {"version", cmd_version},
    {"submit", cmd_submit},
    {"worker", cmd_worker},
    {"supervise", cmd_supervise},
    {"check", cmd_check},
    {"jobserver", cmd_jobserver},
    {"metrics", cmd_metrics},
    {"top", cmd_top},
    {"resume", cmd_resume},
    {"events", cmd_events},
};

static const struct command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(name, commands[i].name) == 0)
      return &commands[i];
  return NULL;
}

/* "help [COMMAND]": the same text as "COMMAND --help". */
static int help(int argc, char **argv) {
  char q[96];
  if (argc < 2)
    return cli_help(top_help);
  const struct command *c = find_command(argv[1]);
  if (c == NULL || argc > 2)
    return cli_usage("help: %s '%s' (see 'shmsched --help')",
                     c == NULL ? "unknown command" : "unexpected argument",
                     cli_quote(q, sizeof q, argv[c == NULL ? 1 : 2]));
  char *sub[] = {argv[1], "--help", NULL};
  return c->run(2, sub);
}

int main(int argc, char **argv) {
  char q[96];
  cli_secure_init();
  if (argc < 2)
    return cli_usage("missing command (see 'shmsched --help')");
  const char *name = argv[1];
  if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0)
    return cli_help(top_help);
  if (strcmp(name, "-V") == 0 || strcmp(name, "--version") == 0)
    name = "version";
  else if (strcmp(name, "help") == 0)
    return help(argc - 1, argv + 1);
  else if (name[0] == '-')
    return cli_usage("unknown option '%s' (see 'shmsched --help')", cli_quote(q, sizeof q, name));
  const struct command *c = find_command(name);
  if (c == NULL)
    return cli_usage("unknown command '%s' (see 'shmsched --help')", cli_quote(q, sizeof q, name));
  cli_sigbus_install(c->name);
  return c->run(argc - 1, argv + 1);
}

/*
 * Helpers shared by the scheduling subcommands (run, cancel, explain, drain,
 * repair): positional arguments, attaching, and the exit code a library
 * failure maps to. docs/cli.md is the user's view.
 */
#ifndef SHMS_SUPERVISOR_CLI_SCHED_H
#define SHMS_SUPERVISOR_CLI_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "shmsched.h"

/*
 * 1 if rc is a scheduling outcome (the scheduler said no: queue-full,
 * class-denied, duplicate-activation, cancelled, deadline-exceeded,
 * all-cells-quarantined, shutdown, sequence-exhausted, owner-lost,
 * worker-lost), else 0. `run` and `submit` exit CLI_EXIT_SCHED (75) for these.
 */
int cli_sched_outcome(int rc);

/*
 * A library call returned rc: print "shmsched: <reason>: <detail>"
 * and return the exit code: CLI_EXIT_SCHED for a scheduling outcome,
 * CLI_EXIT_USAGE for invalid-argument, CLI_EXIT_FAIL otherwise.
 */
int cli_sched_fail(int rc);

/* --class CLASS: a known class name, or a usage error (returns CLI_EXIT_USAGE). */
int cli_parse_class(const char *cmd, const char *s, shms_class_t *out);
/* --class and --tenant were both given (else a usage line naming the missing one) and the class
 * is known: req->cls set. Returns 0, or the exit code. */
int cli_request_target(const char *cmd, const char *cls, shms_request *req);

/* A signed decimal int32 ("-3", "12"), strictly: no spaces, no overflow. Returns 0 or -1. */
int cli_parse_i32(const char *s, int32_t *out);

/*
 * The positionals NAME TICKET left at argv[optind..]: both present, nothing
 * else, a valid segment name and a well-formed ticket. Returns 0, or
 * CLI_EXIT_USAGE after printing why.
 */
int cli_take_name_ticket(const char *cmd, int argc, char *const argv[], const char **name,
                         shms_ticket *ticket, const char **text);

/* "SIGTERM", or "signal 40" for one without a name; written into buf (at least 16 bytes). */
const char *cli_signal_name(int sig, char *buf, size_t n);

/* getopt's value for --quota NAME (run and submit; no short form). */
#define CLI_OPT_QUOTA 512
/*
 * One of the request options run and submit share, into the fields given:
 * -c/--class, -t/--tenant, -p/--priority, -d/--deadline, -a/--activation, --quota (repeatable,
 * at most SHMS_REQUEST_QUOTAS_MAX).
 * Returns -1 when it took option c, 0 when c is none of them (the caller's
 * own), or CLI_EXIT_USAGE after printing why the value is bad.
 */
int cli_request_option(const char *cmd, int c, const char **cls, shms_request *req,
                       uint64_t *deadline_in_ns);

/* Attach to name (flags as for shms_attach); on failure print why and return the exit code. */
int cli_attach(const char *name, unsigned flags, shms_t **out);

/*
 * cli_attach for the commands that queue work or serve it (run, submit,
 * worker): a full process table is temporary, like a full queue, so it
 * returns CLI_EXIT_SCHED (75) after printing why, naming the command.
 */
int cli_attach_to_queue(const char *cmd, const char *name, shms_t **out);

#endif

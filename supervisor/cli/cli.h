/*
 * Shared by the CLI's subcommands: exit codes, the one-line error printer and
 * option-parsing helpers. docs/cli.md is the user's view of all of this.
 */
#ifndef SHMS_SUPERVISOR_CLI_H
#define SHMS_SUPERVISOR_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "shmsched.h"

/* Exit codes: part of the CLI's contract. */
enum {
  CLI_EXIT_OK = 0,    /* the operation succeeded */
  CLI_EXIT_FAIL = 1,  /* the operation failed (the library said why) */
  CLI_EXIT_USAGE = 2, /* usage or configuration error: nothing was attempted */
  /* run: the scheduler said no (queue-full, cancelled, shutdown, ...): sysexits' EX_TEMPFAIL */
  CLI_EXIT_SCHED = 75,
  /* the segment was truncated under the process (SIGBUS on it): sysexits' EX_IOERR */
  CLI_EXIT_SEGMENT_LOST = 74,
  /* cancel: the request was accepted and its lease is held; a lease is never revoked */
  CLI_EXIT_HELD = 3,
};

/*
 * Print "shmsched: <shms_err_name(code)>: <message>" as one line on stderr
 * (newlines in the message become spaces) and return CLI_EXIT_FAIL.
 */
int cli_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* CLOCK_MONOTONIC in nanoseconds, never 0. */
uint64_t cli_mono_ns(void);

/* The same with reason invalid-argument, returning CLI_EXIT_USAGE. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A library call returned rc: print its shms_last_error_detail(). Returns
 * CLI_EXIT_USAGE for SHMS_EINVAL (the library found the arguments bad),
 * CLI_EXIT_FAIL otherwise.
 */
int cli_fail_lib(int rc);

/* The tenants of class c as an observer reads them (shms_tenants_snapshot), all of them: into a
 * malloc'd *rows, *n of them. SHMS_ENOMEM or the library's error: nothing to free. */
int cli_tenants(shms_t *h, int c, shms_tenant_stats **rows, uint32_t *n);

/* getopt_long returned c ('?' or ':'): report the option and return CLI_EXIT_USAGE. */
int cli_bad_option(const char *cmd, int c, char *const argv[]);

/*
 * The one positional NAME left at argv[optind]: present, alone and a valid
 * segment name. Returns 0, or CLI_EXIT_USAGE after printing why.
 */
int cli_take_name(const char *cmd, int argc, char *const argv[], const char **name);

/*
 * Commands that run CMD (run, worker, jobserver): options and NAME before the first "--", CMD
 * after it. cli_dashes: the index of that "--" (argc if none), the argc to give getopt_long.
 * cli_take_name_before_cmd: cli_take_name over argv[0..dashes). cli_take_cmd: CMD, present.
 * Each returns 0, or CLI_EXIT_USAGE after printing why.
 */
int cli_dashes(int argc, char *const argv[]);
int cli_take_name_before_cmd(const char *cmd, int dashes, char *const argv[], const char **name);
int cli_take_cmd(const char *cmd, int argc, char **argv, int dashes, char ***cmdv);

/* The login name of uid into buf (n bytes), or its number when it has none (or one that is not
 * graphic ASCII without '"' and '\'); returns buf. Cached for a minute; thread-safe. */
const char *cli_user_name(uint32_t uid, char *buf, size_t n);

/* Print a help text on stdout and return CLI_EXIT_OK. */
int cli_help(const char *text);

int cmd_cancel(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_supervise(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_destroy(int argc, char **argv);
int cmd_drain(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_jobserver(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_worker(int argc, char **argv);

#endif

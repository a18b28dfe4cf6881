/*
 * The moving parts of `shmsched submit` (cmd_submit.c parses its options):
 * reading the payload, and waiting for the job to start or end so that
 * SIGINT/SIGTERM and --timeout cancel it.
 */
#ifndef SHMS_SUPERVISOR_SUBMIT_H
#define SHMS_SUPERVISOR_SUBMIT_H

#include <stddef.h>
#include <stdint.h>

#include "run.h"
#include "shmsched.h"

struct submit_args {
  const char *name;
  const char *cls;
  shms_request req;
  uint64_t deadline_in_ns;  /* 0: none */
  const char *payload;      /* --payload, or NULL */
  const char *payload_file; /* --payload-file ("-": stdin), or NULL */
  const char *batch;        /* --batch FILE ("-": stdin), or NULL */
  unsigned flags;           /* SHMS_SUBMIT_* */
  const char *key;          /* --key, or NULL */
  int wait, print_ticket;
  uint64_t timeout_ns;      /* --timeout, 0: none */
  const char *timeout_text; /* --timeout as given, for messages */
};

struct payload {
  const void *bytes; /* len bytes (NULL when empty) */
  size_t len;
  void *owned; /* what to free: the bytes read from a file */
};

/*
 * The payload a asks for (empty without --payload or --payload-file), at
 * most limit bytes. Returns 0, or an exit code after printing why: a payload
 * over the limit, or a file that cannot be read, is a usage error.
 */
int submit_read_payload(const struct submit_args *a, size_t limit, struct payload *p);

/*
 * The job did not complete: print "shmsched: <reason>: submit: <why> (class C,
 * tenant 'T')" (why NULL: the library's detail) and return CLI_EXIT_SCHED, or
 * for a failure that is not the scheduler's answer cli_sched_fail's code.
 */
int submit_fail(const struct submit_args *a, int rc, const char *why);

/*
 * With --wait, wait for the job t names to end, then write its result to
 * stdout. Without, wait until it has started: a job belongs to the process
 * that submitted it, and is withdrawn (owner-lost) if that process leaves
 * while it is still queued; once running, it runs to its end (its result is
 * dropped). Returns the exit code: with --wait the job's status (255 when
 * outside 0..255), without 0; CLI_EXIT_SCHED when the job did not complete
 * or start (cancelled by a stop signal or --timeout, worker-lost, ...);
 * CLI_EXIT_FAIL when the result could not be written. limit is the class's
 * payload size, the largest result.
 */
int submit_wait(shms_t *h, const struct submit_args *a, const shms_ticket *t, size_t limit,
                const struct run_signals *s);

#endif

/*
 * The moving parts of `shmsched worker` (cmd_worker.c parses its options and
 * runs the take/complete loop): running one job's command with the payload on
 * its stdin and its stdout collected as the result.
 */
#ifndef SHMS_SUPERVISOR_WORKER_H
#define SHMS_SUPERVISOR_WORKER_H

#include <stddef.h>

#include "run.h"

/* How often a running command's job is checked for a cancellation, in milliseconds. */
#define WORKER_CANCEL_POLL_MS 100

struct job_run {
  /* In. */
  char *const *cmd;            /* argv, PATH search */
  const struct run_signals *s; /* SIGINT, SIGTERM and SIGCHLD blocked */
  int sigfd;                   /* a signalfd reading s->taken */
  const void *payload;         /* written to the command's stdin, then EOF */
  size_t payload_len;
  char *out;                   /* the result: at most cap bytes ... */
  size_t cap;                  /* ... in a buffer of cap + 1 (one more shows an overflow) */
  char *const *env;            /* "KEY=VALUE" strings added to its environment, NULL-ended */
  int (*cancelled)(void *ctx); /* 1 once the job's client cancelled it */
  void *ctx;
  struct contain *c;   /* contains the command (contain.h) */
  uint64_t timeout_ns; /* --job-timeout: then it gets SIGTERM (0: no limit) */
  /* Out. */
  size_t out_len;  /* bytes of result in out */
  int overflow;    /* it wrote more than cap bytes: its stdout was closed on it */
  int cancel_sent; /* it was sent SIGTERM because the job was cancelled */
  int timed_out;   /* it was sent SIGTERM because it ran longer than timeout_ns */
  int stop_signo;  /* a stop signal sent to us while it ran (forwarded unless from the tty) */
  int status;      /* its wait status */
};

/*
 * Run j->cmd contained by j->c with its stdin and stdout on pipes, feed it the
 * payload and collect its stdout, interleaved with poll() (a command may
 * write before it has read all its input), until it and its whole tree have
 * ended. Meanwhile a stop signal is forwarded to it, and a cancelled job, or
 * one that ran past j->timeout_ns, gets it a SIGTERM (once), then SIGKILL
 * after the containment's kill_after. Output beyond cap closes its stdout (it
 * gets EPIPE or SIGPIPE). Returns 0, or -1 with errno when it could not be
 * started.
 */
int worker_run_job(struct job_run *j);

#endif

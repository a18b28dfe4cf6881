/*
 * `shmsched submit --batch FILE`: the JSON-lines reader (batch_read.c) and
 * the batch's submission, wait and report (batch_wait.c).
 */
#ifndef SHMS_SUPERVISOR_BATCH_H
#define SHMS_SUPERVISOR_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "submit.h"

/* One line's job, as read. */
struct batch_line {
  unsigned line;     /* its line number in the input, from 1 */
  char *tenant;      /* the line's, else --tenant's */
  int32_t priority;  /* the line's, else --priority's */
  uint64_t deadline; /* the line's, else --deadline's, relative (ns); 0: none */
  void *payload;     /* len bytes, owned (NULL when empty) */
  size_t len;
  char *key;                            /* "key": a single-flight key, or NULL */
  char *quota[SHMS_REQUEST_QUOTAS_MAX]; /* "quota": the quotas it holds a unit of, */
  uint32_t nquota;                      /* the first nquota (0: --quota's) */
};

struct batch_input {
  struct batch_line *v;
  size_t n;
};

/*
 * Read the JSON lines of a->batch ("-": stdin) into in, each job's payload
 * at most limit bytes. Returns 0, or CLI_EXIT_USAGE after printing why and
 * which line: nothing is submitted then.
 */
int batch_read(const struct submit_args *a, size_t limit, struct batch_input *in);
void batch_free(struct batch_input *in);

/*
 * Submit the batch all or none; then, as submit_wait does for one job, wait
 * for every job to start (without --wait, the tickets printed one a line in
 * input order) or to end (--wait, a JSON line of each result in input
 * order). A stop signal or --timeout cancels the jobs not yet started.
 * Returns the exit code: 0 when every job started (without --wait) or exited
 * 0 (with --wait); else the first failing job's status in input order (75
 * for a job that did not complete, 255 for a status outside 0..255).
 */
int batch_submit(shms_t *h, const struct submit_args *a, const struct batch_input *in, size_t limit,
                 const struct run_signals *s);

#endif

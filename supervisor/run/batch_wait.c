/*
 * `shmsched submit --batch`: submit the jobs read (batch_read.c) all or none,
 * then wait for them to start, or (--wait) to end, reporting each result in
 * input order (batch.h). A stop signal or --timeout cancels the jobs that have
 * not started; those running go on to their end.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "batch.h"

struct batch_wait {
  shms_t *h;
  const struct submit_args *a;
  const struct batch_input *in;
  shms_ticket *t;
  char *buf; /* a result, grown as needed */
  size_t cap;
  uint64_t until; /* --timeout's end (CLOCK_MONOTONIC), UINT64_MAX: none */
  int expired;    /* --timeout passed: the unstarted jobs were cancelled */
};

/* The watcher's answer to stop signals: the first cancels the jobs not started, the next stops
 * the waits (each then ends timed-out at once). */
static void on_signal(void *ctx, int signo, int nth) {
  (void)signo;
  const struct batch_wait *w = ctx;
  if (nth == 1)
    shms_cancel_batch(w->h, w->t, w->in->n, NULL);
  else if (nth == 2)
    shms_interrupt(w->h, 1);
}

/* What is left of --timeout; past it, the unstarted jobs are cancelled once and waits only look. */
static uint64_t remaining(struct batch_wait *w) {
  if (w->until == UINT64_MAX)
    return UINT64_MAX;
  uint64_t now = run_monotonic_ns();
  if (now < w->until)
    return w->until - now;
  if (!w->expired)
    shms_cancel_batch(w->h, w->t, w->in->n, NULL);
  w->expired = 1;
  return 0;
}

/* Submit every job, all or none; a refusal names the line that caused it. */
static int submit_all(struct batch_wait *w) {
  const struct batch_input *in = w->in;
  shms_batch_job *jobs = calloc(in->n, sizeof *jobs);
  if (jobs == NULL)
    return cli_fail(SHMS_ENOMEM, "submit: no memory for %zu jobs", in->n);
  uint64_t now = run_monotonic_ns();
  for (size_t i = 0; i < in->n; i++) {
    const struct batch_line *l = &in->v[i];
    jobs[i] = (shms_batch_job){.tenant = l->tenant,
                               .priority = l->priority,
                               .deadline_ns = l->deadline != 0 ? now + l->deadline : 0,
                               .payload = l->payload,
                               .len = l->len,
                               .quotas = l->nquota != 0 ? (const char *const *)l->quota
                                                        : w->a->req.quotas,
                               .nquotas = l->nquota != 0 ? l->nquota : w->a->req.nquotas,
                               .key = l->key};
  }
  size_t failed = in->n;
  int rc = shms_submit_batch(w->h, w->a->req.cls, jobs, in->n, w->a->flags, w->t, &failed);
  free(jobs);
  if (rc == SHMS_OK)
    return 0;
  const char *detail = shms_last_error_detail(), *colon = strstr(detail, ": ");
  if (failed < in->n && strncmp(detail, "job ", 4) == 0 && colon != NULL)
    detail = colon + 2; /* the line says which job */
  char where[32] = "";
  if (failed < in->n)
    snprintf(where, sizeof where, "line %u: ", in->v[failed].line);
  if (detail[0] == '\0')
    detail = shms_strerror(rc);
  cli_fail(rc, "submit: --batch: %s%s%s", where, detail,
           strstr(detail, "nothing was") != NULL ? "" : "; nothing was submitted");
  return cli_sched_outcome(rc) || rc == SHMS_EBUSY || rc == SHMS_ETIMEDOUT ? CLI_EXIT_SCHED
         : rc == SHMS_EINVAL                                               ? CLI_EXIT_USAGE
                                                                           : CLI_EXIT_FAIL;
}

/* The tickets, one a line in input order: stdout without --wait, stderr with --print-ticket. */
static void print_tickets(const struct batch_wait *w) {
  if (w->a->wait && !w->a->print_ticket)
    return;
  FILE *f = w->a->wait ? stderr : stdout;
  for (size_t i = 0; i < w->in->n; i++) {
    char text[SHMS_TICKET_STRLEN];
    shms_ticket_format(&w->t[i], text);
    fprintf(f, "%s\n", text);
  }
  fflush(f);
}

/* Job i's result into w->buf (grown when too small); the library's answer. */
static int wait_result(struct batch_wait *w, size_t i, shms_result *res) {
  for (;;) {
    res->result_len = 0;
    int rc = shms_wait_result(w->h, &w->t[i], remaining(w), w->buf, w->cap, res);
    if (rc != SHMS_EINVAL || res->result_len <= w->cap)
      return rc;
    char *bigger = realloc(w->buf, res->result_len);
    if (bigger == NULL)
      return SHMS_ENOMEM;
    w->buf = bigger;
    w->cap = res->result_len;
  }
}

/* One JSON line for job i: its status and result, or why it did not complete. */
static int report(const struct batch_wait *w, size_t i, int rc, const shms_result *res) {
  char text[SHMS_TICKET_STRLEN];
  shms_ticket_format(&w->t[i], text);
  json_t *o = json_pack("{s:I, s:s}", "line", (json_int_t)w->in->v[i].line, "ticket", text);
  if (o == NULL)
    return -1;
  if (rc == SHMS_OK) {
    json_object_set_new(o, "status", json_integer(res->status));
    json_t *r = json_stringn(w->buf, res->result_len);
    if (r != NULL) {
      json_object_set_new(o, "result", r);
    } else { /* not UTF-8 text: its bytes in base64 */
      static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      const unsigned char *p = (const unsigned char *)w->buf;
      size_t n = res->result_len, o64 = 0;
      char *enc = malloc((n + 2) / 3 * 4 + 1);
      if (enc == NULL) {
        json_decref(o);
        return -1;
      }
      for (size_t j = 0; j < n; j += 3) {
        uint32_t v = (uint32_t)p[j] << 16 | (j + 1 < n ? (uint32_t)p[j + 1] << 8 : 0) |
                     (j + 2 < n ? p[j + 2] : 0);
        enc[o64++] = b64[v >> 18 & 63];
        enc[o64++] = b64[v >> 12 & 63];
        enc[o64++] = j + 1 < n ? b64[v >> 6 & 63] : '=';
        enc[o64++] = j + 2 < n ? b64[v & 63] : '=';
      }
      enc[o64] = '\0';
      json_object_set_new(o, "result_b64", json_string(enc));
      free(enc);
    }
  } else {
    json_object_set_new(o, "error", json_string(shms_err_name(rc)));
    const char *detail = shms_last_error_detail();
    json_object_set_new(o, "detail", json_string(detail[0] ? detail : shms_strerror(rc)));
  }
  char *line = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (line == NULL)
    return -1;
  int ok = printf("%s\n", line) >= 0 && fflush(stdout) == 0;
  free(line);
  return ok ? 0 : -1;
}

/* The exit code a job adds: its status, or 75 for a job that did not complete. */
static int job_code(int rc, const shms_result *res) {
  if (rc != SHMS_OK)
    return CLI_EXIT_SCHED;
  return res->status >= 0 && res->status <= 255 ? res->status : 255;
}

/* Every job in input order: its result (--wait) or its start. */
static int wait_all(struct batch_wait *w) {
  int code = CLI_EXIT_OK;
  for (size_t i = 0; i < w->in->n; i++) {
    shms_result res = {0};
    int rc = w->a->wait ? wait_result(w, i, &res) : shms_wait_started(w->h, &w->t[i], remaining(w));
    if (!w->a->wait) {
      if (rc != SHMS_OK && code == CLI_EXIT_OK) {
        char q[96];
        cli_fail(rc, "submit: --batch: line %u: the job did not start: %s (tenant '%s')",
                 w->in->v[i].line, shms_last_error_detail(),
                 cli_quote(q, sizeof q, w->in->v[i].tenant));
        code = CLI_EXIT_SCHED;
      }
      continue;
    }
    if (report(w, i, rc, &res) != 0)
      return cli_fail(SHMS_ESYSTEM, "submit: cannot write the results to stdout: %s",
                      strerror(errno));
    if (code == CLI_EXIT_OK)
      code = job_code(rc, &res);
  }
  return code;
}

int batch_submit(shms_t *h, const struct submit_args *a, const struct batch_input *in, size_t limit,
                 const struct run_signals *s) {
  struct batch_wait w = {.h = h,
                         .a = a,
                         .in = in,
                         .t = calloc(in->n, sizeof *w.t),
                         .buf = malloc(limit > 0 ? limit : 1),
                         .cap = limit,
                         .until =
                             a->timeout_ns != 0 ? run_monotonic_ns() + a->timeout_ns : UINT64_MAX};
  int code;
  if (w.t == NULL || w.buf == NULL)
    code = cli_fail(SHMS_ENOMEM, "submit: no memory for %zu jobs", in->n);
  else if ((code = submit_all(&w)) == 0) {
    print_tickets(&w);
    struct run_watch watch;
    int watched = run_watch_start(&watch, s, on_signal, &w) == 0;
    code = wait_all(&w);
    if (watched)
      run_watch_stop(&watch);
    shms_interrupt(h, 0);
  }
  free(w.t);
  free(w.buf);
  return code;
}

/* shmsched submit's moving parts: the payload in, the result out (submit.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../cli/secure.h"
#include "submit.h"

/* ---- the payload ----------------------------------------------------------- */

/* Read fd to EOF, or until limit+1 bytes show it is too large. Returns 0 or an errno. */
static int read_bounded(int fd, char *buf, size_t limit, size_t *len) {
  *len = 0;
  while (*len <= limit) {
    ssize_t r = read(fd, buf + *len, limit + 1 - *len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return errno;
    if (r == 0)
      break;
    *len += (size_t)r;
  }
  return 0;
}

/* --payload-file F ("-": stdin) into p. */
static int read_file(const struct submit_args *a, size_t limit, struct payload *p) {
  char q[96], shown[128];
  const char *path = a->payload_file;
  int std = strcmp(path, "-") == 0;
  snprintf(shown, sizeof shown, std ? "%s (stdin)" : "'%s'", cli_quote(q, sizeof q, path));
  int fd = std ? STDIN_FILENO : cli_open_as_user(path, O_RDONLY); /* never with a setgid group */
  if (fd < 0)
    return cli_usage("submit: --payload-file %s: cannot open: %s", shown, strerror(errno));
  char *buf = malloc(limit + 1);
  size_t len = 0;
  int e = buf == NULL ? ENOMEM : read_bounded(fd, buf, limit, &len);
  if (fd != STDIN_FILENO)
    close(fd);
  if (e != 0 || len > limit) {
    free(buf);
    if (e != 0)
      return cli_usage("submit: --payload-file %s: cannot read: %s", shown, strerror(e));
    return cli_usage("submit: --payload-file %s: more than class %s's payload size of %zu bytes "
                     "(its payload= setting)",
                     shown, a->cls, limit);
  }
  p->bytes = p->owned = buf;
  p->len = len;
  return 0;
}

int submit_read_payload(const struct submit_args *a, size_t limit, struct payload *p) {
  if (a->payload_file != NULL)
    return read_file(a, limit, p);
  if (a->payload == NULL)
    return 0;
  p->bytes = a->payload;
  p->len = strlen(a->payload);
  if (p->len > limit)
    return cli_usage("submit: --payload: %zu bytes, more than class %s's payload size of %zu "
                     "bytes (its payload= setting)",
                     p->len, a->cls, limit);
  return 0;
}

/* ---- the result ------------------------------------------------------------ */

int submit_fail(const struct submit_args *a, int rc, const char *why) {
  char q[96];
  if (!cli_sched_outcome(rc) && rc != SHMS_ETIMEDOUT)
    return cli_sched_fail(rc);
  const char *detail = shms_last_error_detail();
  if (why == NULL)
    why = detail[0] != '\0' ? detail : shms_strerror(rc);
  cli_fail(rc, "submit: %s (class %s, tenant '%s')", why, a->cls,
           cli_quote(q, sizeof q, a->req.tenant));
  return CLI_EXIT_SCHED;
}

struct result_wait {
  shms_t *h;
  const shms_ticket *t;
  char *buf;
  size_t cap;
  shms_result res;
};

/* One shms_wait_result; a result larger than the buffer grows it (run_wait_sliced's wait). */
static int result_slice(void *ctx, uint64_t slice_ns) {
  struct result_wait *w = ctx;
  for (;;) {
    w->res.result_len = 0;
    int rc = shms_wait_result(w->h, w->t, slice_ns, w->buf, w->cap, &w->res);
    if (rc != SHMS_EINVAL || w->res.result_len <= w->cap)
      return rc;
    char *bigger = realloc(w->buf, w->res.result_len);
    if (bigger == NULL)
      return SHMS_ENOMEM;
    w->buf = bigger;
    w->cap = w->res.result_len;
  }
}

/* Without --wait: until the job has started (or even completed: its result is dropped); the
 * worker's take wakes us (shms_wait_started). */
static int started_slice(void *ctx, uint64_t slice_ns) {
  struct result_wait *w = ctx;
  return shms_wait_started(w->h, w->t, slice_ns);
}

/*
 * A stop signal (signo) or --timeout (signo 0) came while the job was queued
 * or running: cancel it. A queued job ends cancelled at once; a running one
 * ends as its worker ends it, which with --wait a stop signal waits for
 * (until --timeout or another stop signal) and a timeout does not. Returns
 * the outcome, with why (n bytes) saying what happened when it is not the
 * library's detail.
 */
static int stop_waiting(struct result_wait *w, const struct submit_args *a,
                        const struct run_signals *s, uint64_t until, int signo, char *why,
                        size_t n) {
  char sn[24];
  shms_cancel(w->h, w->t);
  int rc = result_slice(w, 0), again = 0;
  if (rc == SHMS_ETIMEDOUT && signo != 0 && a->wait)
    rc = run_wait_sliced(s, result_slice, w, until, &again);
  if (signo != 0)
    cli_signal_name(again != 0 ? again : signo, sn, sizeof sn);
  if (rc == SHMS_ECANCELLED && signo != 0)
    snprintf(why, n, "interrupted by %s while waiting: the job was cancelled", sn);
  else if (rc == SHMS_ECANCELLED)
    snprintf(why, n, "no result within %s: the job was cancelled before it started",
             a->timeout_text);
  else if (rc == SHMS_ETIMEDOUT && again != 0)
    snprintf(why, n,
             "interrupted by %s again: stopped waiting for the running job (its worker was asked "
             "to stop it)",
             sn);
  else if (rc == SHMS_ETIMEDOUT && signo != 0)
    snprintf(why, n, "interrupted by %s: the job had started; its worker was asked to stop it", sn);
  else if (rc == SHMS_ETIMEDOUT)
    snprintf(why, n, "no result within %s: the job is running; its worker was asked to stop it",
             a->timeout_text);
  if (rc == SHMS_ECANCELLED && signo == 0)
    return SHMS_ETIMEDOUT;
  return rc == SHMS_ETIMEDOUT && signo != 0 ? SHMS_ECANCELLED : rc;
}

/* The result's bytes, exactly, on stdout; the job's status as the exit code. */
static int print_result(const struct result_wait *w) {
  size_t len = w->res.result_len;
  if ((len > 0 && fwrite(w->buf, 1, len, stdout) != len) || fflush(stdout) != 0)
    return cli_fail(SHMS_ESYSTEM, "submit: cannot write the result to stdout: %s", strerror(errno));
  int st = w->res.status;
  return st >= 0 && st <= 255 ? st : 255;
}

/*
 * The watcher's answer to a stop signal while submit --wait waits: the first cancels the job (a
 * queued one ends at once, waking the wait; a running one's worker is asked to stop it, and the
 * wait goes on for its result); the next one stops the wait (shms_interrupt).
 */
static void stop_on_signal(void *ctx, int signo, int nth) {
  (void)signo;
  const struct result_wait *w = ctx;
  if (nth == 1)
    shms_cancel(w->h, w->t);
  else if (nth == 2)
    shms_interrupt(w->h, 1);
}

/*
 * With a thread taking the stop signals: one wait (for the result with --wait, for the start
 * without), until --timeout, that nothing wakes but what it waits for, a stop signal or the
 * library's safety poll. Returns the outcome as stop_waiting does, with why (n bytes) set when
 * the library's detail will not do.
 */
static int wait_watched(struct result_wait *w, const struct submit_args *a,
                        const struct run_signals *s, uint64_t until, char *why, size_t n) {
  int (*wait)(void *, uint64_t) = a->wait ? result_slice : started_slice;
  struct run_watch watch;
  if (run_watch_start(&watch, s, stop_on_signal, w) != 0) { /* no thread: slices */
    int signo, rc = run_wait_sliced(s, wait, w, until, &signo);
    return rc == SHMS_ETIMEDOUT ? stop_waiting(w, a, s, until, signo, why, n) : rc;
  }
  uint64_t now = run_monotonic_ns();
  int rc = wait(w, until == UINT64_MAX ? UINT64_MAX : until > now ? until - now : 0);
  run_watch_stop(&watch);
  shms_interrupt(w->h, 0);
  if (watch.count == 0)
    return rc == SHMS_ETIMEDOUT ? stop_waiting(w, a, s, until, 0, why, n) : rc;
  if (rc == SHMS_OK && !a->wait)
    rc = SHMS_ETIMEDOUT; /* it started as the signal came: its worker was asked to stop it */
  char sn[24];
  cli_signal_name(watch.last, sn, sizeof sn);
  if (rc == SHMS_ECANCELLED)
    snprintf(why, n, "interrupted by %s while waiting: the job was cancelled", sn);
  else if (rc == SHMS_ETIMEDOUT && watch.count > 1)
    snprintf(why, n,
             "interrupted by %s again: stopped waiting for the running job (its worker was asked "
             "to stop it)",
             sn);
  else if (rc == SHMS_ETIMEDOUT)
    snprintf(why, n, "interrupted by %s: the job had started; its worker was asked to stop it", sn);
  return rc == SHMS_ETIMEDOUT ? SHMS_ECANCELLED : rc;
}

int submit_wait(shms_t *h, const struct submit_args *a, const shms_ticket *t, size_t limit,
                const struct run_signals *s) {
  struct result_wait w = {.h = h, .t = t, .buf = malloc(limit > 0 ? limit : 1), .cap = limit};
  if (w.buf == NULL)
    return cli_fail(SHMS_ENOMEM, "submit: no memory for a %zu-byte result", limit);
  uint64_t until = a->timeout_ns != 0 ? run_monotonic_ns() + a->timeout_ns : UINT64_MAX;
  char why[256] = "";
  int rc = wait_watched(&w, a, s, until, why, sizeof why);
  int code = rc != SHMS_OK ? submit_fail(a, rc, why[0] ? why : NULL)
             : a->wait     ? print_result(&w)
                           : CLI_EXIT_OK;
  free(w.buf);
  return code;
}

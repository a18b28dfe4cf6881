/*
 * The jobserver's tokens, as the build tool sees them (GNU make's manual,
 * "POSIX Jobserver"; docs/jobserver.md):
 *
 * - fifo: a FIFO in a private directory (mkdtemp under $TMPDIR, else /tmp),
 *   named by --jobserver-auth=fifo:PATH (make 4.4). Clients open it by name,
 *   read a token from it and write it back to it.
 * - pipe: two descriptors, --jobserver-auth=R,W (make 4.2 and 4.3, and every
 *   other client). R is the read end of the token pipe; W is the write end of
 *   a second pipe, the returns pipe, which only we read: a token written back
 *   never reaches another client before we have seen it, so every return is
 *   counted and its lease released, and a client's next job always waits for
 *   a grant of its own (the fairness between builds is the scheduler's). The
 *   protocol lets R and W be any two descriptors; make, cargo and the
 *   jobserver crate read from R and write to W only.
 *
 * The kernel says nothing when a client reads a token: we see reads only as
 * a drop in the number of unread bytes (FIONREAD), on a descriptor of our own
 * (its own open file description, O_NONBLOCK) so that the clients' descriptors
 * stay blocking, as make 4.3 needs them.
 */
#ifndef SHMS_SUPERVISOR_JS_TOKENS_H
#define SHMS_SUPERVISOR_JS_TOKENS_H

#include <limits.h>
#include <stddef.h>

#include "js_flags.h"

struct js_tokens {
  enum js_style style;      /* JS_STYLE_FIFO or JS_STYLE_PIPE */
  int child_r, child_w;     /* pipe: what the command inherits (blocking); -1 once handed over */
  int wr;                   /* we write tokens here */
  int rd;                   /* our own non-blocking reader of the tokens (FIONREAD, read back) */
  int ret;                  /* pipe: our end of the returns pipe (non-blocking); fifo: -1 */
  int ret_eof;              /* pipe: every client's write end is closed */
  char dir[PATH_MAX];       /* fifo: the private directory; "" when none */
  char path[PATH_MAX + 16]; /* fifo: dir/fifo */
  char auth[PATH_MAX + 48]; /* "--jobserver-auth=..." */
};

/*
 * Make the tokens' pipes or FIFO; no token is in them yet. 0, or -1 with err
 * (n bytes) saying what failed.
 */
int js_tokens_open(struct js_tokens *t, enum js_style style, char *err, size_t n);

/* In the command's child, before exec: its descriptors survive the exec. Async-signal-safe. */
void js_tokens_child(const struct js_tokens *t);

/* The command has started: let go of its ends (a returns pipe with no writer left reads EOF). */
void js_tokens_started(struct js_tokens *t);

/* Tokens written and not yet read by anyone (FIONREAD). */
unsigned js_tokens_unread(const struct js_tokens *t);

/* Write k tokens; returns how many were written. */
unsigned js_tokens_put(struct js_tokens *t, unsigned k);

/* Read back up to k unread tokens without blocking; returns how many were read. */
unsigned js_tokens_take(struct js_tokens *t, unsigned k);

/* pipe: read every token written back since the last call; fifo: 0. Sets ret_eof at EOF. */
unsigned js_tokens_returns(struct js_tokens *t);

/* Close everything; remove the FIFO and its directory. */
void js_tokens_close(struct js_tokens *t);

#endif

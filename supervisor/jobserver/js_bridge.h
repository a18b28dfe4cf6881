/*
 * The jobserver bridge's bookkeeping: one lease behind every token written
 * (docs/jobserver.md has the whole story). The command's implicit slot has a
 * lease of its own, held by cmd_jobserver.c; this file keeps the leases behind
 * the tokens and decides, at every step, what to ask for and what to give back:
 *
 * - unread tokens are counted by FIONREAD; the bridge keeps `spare` of them
 *   ready, fresh from a grant, and when a client takes one it queues one
 *   request (one at a time: fairness is the ring's) for the next;
 * - a token written back is read back and its lease released at once (pipe
 *   style: every one, from the returns pipe; fifo style: whatever shows above
 *   the fresh tokens, which a poll on the FIFO catches when it was empty);
 * - a spare left unread for JS_SPARE_IDLE_NS while others queue in the class
 *   is read back and released, and asked for again (its cell goes to whose
 *   turn it is);
 * - tokens in clients' hands beyond what the tree below us has tasks to use
 *   (two samples JS_SAMPLE_NS apart) are lost with a dead client: reclaimed.
 *
 * Not thread-safe: the bridge's main thread only (js_grant.h has the other).
 */
#ifndef SHMS_SUPERVISOR_JS_BRIDGE_H
#define SHMS_SUPERVISOR_JS_BRIDGE_H

#include <stdint.h>

#include "js_grant.h"
#include "js_tokens.h"
#include "shmsched.h"

#define JS_POLL_NS       (10ull * 1000 * 1000)   /* --poll's default: unread spare watched */
#define JS_SPARE_IDLE_NS (1000ull * 1000 * 1000) /* an unread spare is rotated after this */
#define JS_SAMPLE_NS     (1000ull * 1000 * 1000) /* the reclaim heuristic's sampling period */
#define JS_RETRY_NS      (100ull * 1000 * 1000)  /* after queue-full, ask again this later */

struct js_bridge {
  shms_t *h;
  shms_request req;
  const char *cls_name;
  struct js_tokens *tk;
  struct js_grant g;
  uint32_t max;     /* leases at most, the implicit one included */
  uint32_t spare;   /* unread tokens to keep ready */
  uint64_t poll_ns; /* how often unread tokens are counted while some are unread */
  int verbose;
  shms_lease *held; /* the leases behind the tokens written and not read back */
  uint32_t n_held;
  uint32_t fresh;        /* tokens written that are still unread, as far as we know */
  uint32_t unread;       /* now, as far as we know */
  uint32_t seen;         /* unread at the end of the last step */
  uint64_t unread_since; /* when the unread count last changed */
  int refused;           /* a request was refused for good: the build goes on with what it has */
  uint64_t retry_at;     /* a request was refused for now: not before this */
  uint64_t next_sample;
  uint32_t deficit; /* tokens the last sample found held by no task */
  /* Figures (--verbose prints them at the end). */
  uint32_t peak; /* leases held at once, the implicit one included */
  uint64_t grants, returns, reclaimed, rotated, stray;
};

/* Set up for the leases behind tokens; the waiting thread is not started yet. -1 if no memory. */
int js_bridge_init(struct js_bridge *b, shms_t *h, const shms_request *req, const char *cls_name,
                   struct js_tokens *tk, uint32_t max, uint32_t spare, uint64_t poll_ns,
                   int verbose);

/* Start the waiting thread (after the command is forked). 0, or -1 with errno. */
int js_bridge_start(struct js_bridge *b);

/*
 * Look at the tokens and act: read back and release what came back, ask for
 * what the build will want, rotate an idle spare, reclaim lost tokens. now is
 * CLOCK_MONOTONIC ns. Returns the ns until the next step is due with nothing
 * else happening (UINT64_MAX: none), and *watch_fifo = 1 when a token written
 * into the empty FIFO must wake the loop (poll it for POLLIN).
 */
uint64_t js_bridge_step(struct js_bridge *b, uint64_t now, int *watch_fifo);

/* The waiting thread said an outcome is in: take it (a lease becomes a token). */
void js_bridge_granted(struct js_bridge *b);

/* The command and its tree are gone: stop asking, release every lease behind tokens. */
void js_bridge_end(struct js_bridge *b);

#endif

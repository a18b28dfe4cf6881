/* The leases behind the jobserver's tokens (js_bridge.h). */
#include "js_bridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../run/run.h"
#include "js_tree.h"

int js_bridge_init(struct js_bridge *b, shms_t *h, const shms_request *req, const char *cls_name,
                   struct js_tokens *tk, uint32_t max, uint32_t spare, uint64_t poll_ns,
                   int verbose) {
  memset(b, 0, sizeof *b);
  b->h = h;
  b->req = *req;
  b->req.deadline_ns = 0; /* the deadline is the implicit slot's: tokens wait as long as it takes */
  b->req.activation = NULL;
  b->cls_name = cls_name;
  b->tk = tk;
  b->max = max;
  b->spare = spare;
  b->poll_ns = poll_ns;
  b->verbose = verbose;
  b->peak = 1;
  b->g.efd = -1;
  b->held = calloc(max > 1 ? max - 1 : 1, sizeof *b->held);
  return b->held == NULL ? -1 : 0;
}

int js_bridge_start(struct js_bridge *b) { return js_grant_start(&b->g, b->h); }

/* Release k of the leases behind tokens (the tokens are gone: read back, or lost). */
static void release_n(struct js_bridge *b, uint32_t k) {
  for (; k > 0 && b->n_held > 0; k--) {
    int rc = shms_release(b->h, &b->held[--b->n_held]);
    if (rc != SHMS_OK) /* someone disposed of it (a recovery): the build goes on */
      cli_sched_fail(rc);
  }
}

/* A lease to stand behind a new token: write it. */
static void add_token(struct js_bridge *b, const shms_lease *l) {
  if (b->n_held + 1 >= b->max || js_tokens_put(b->tk, 1) != 1) {
    shms_release(b->h, l);
    return;
  }
  b->held[b->n_held++] = *l;
  b->fresh++;
  b->unread++;
  b->grants++;
  if (b->n_held + 1 > b->peak)
    b->peak = b->n_held + 1;
}

/* A request was refused: for now (ask again later) or for good (say so once). */
static void refused(struct js_bridge *b, int rc, uint64_t now) {
  if (rc == SHMS_EQUEUEFULL) {
    b->retry_at = now + JS_RETRY_NS;
    return;
  }
  b->refused = 1;
  const char *detail = shms_last_error_detail();
  fprintf(stderr,
          "shmsched: jobserver: no more leases for the build (%s: %s); it goes on with the %u it "
          "holds\n",
          shms_err_name(rc), detail[0] != '\0' ? detail : shms_strerror(rc), b->n_held + 1);
}

void js_bridge_granted(struct js_bridge *b) {
  int rc;
  shms_lease l;
  if (!js_grant_collect(&b->g, &rc, &l))
    return;
  if (rc == SHMS_OK)
    add_token(b, &l); /* the next step reads it back if the build no longer wants it */
  else if (rc != SHMS_ECANCELLED)
    refused(b, rc, run_monotonic_ns());
}

/* Read back up to k unread tokens and release their leases; the count read. */
static uint32_t take_back(struct js_bridge *b, uint32_t k) {
  uint32_t got = js_tokens_take(b->tk, k);
  uint32_t backed = got < b->n_held ? got : b->n_held;
  release_n(b, backed);
  b->stray += got - backed;
  b->unread -= got < b->unread ? got : b->unread;
  return got;
}

/* Tokens written back: pipe style from the returns pipe, fifo style what shows above the
 * fresh tokens. Their leases are released at once. */
static void take_returns(struct js_bridge *b) {
  uint32_t r = js_tokens_returns(b->tk);
  if (r > 0) {
    uint32_t backed = r < b->n_held ? r : b->n_held;
    release_n(b, backed);
    b->returns += backed;
    b->stray += r - backed;
  }
  b->unread = js_tokens_unread(b->tk);
  if (b->unread < b->fresh)
    b->fresh = b->unread; /* clients read some */
  if (b->unread > b->n_held)
    take_back(b, b->unread - b->n_held); /* bytes no lease stands behind: never a job's */
  if (b->unread > b->fresh)
    b->returns += take_back(b, b->unread - b->fresh);
}

/* Others wait in the class: our idle spare is theirs for the taking. */
static int others_queued(struct js_bridge *b) {
  shms_class_stats st;
  return shms_observe(b->h, b->req.cls, &st) == SHMS_OK && st.queue_depth > 0;
}

/* A spare unread for JS_SPARE_IDLE_NS while others queue: give it back and ask again. */
static void rotate_idle(struct js_bridge *b, uint64_t now) {
  if (b->unread == 0 || now - b->unread_since < JS_SPARE_IDLE_NS || js_grant_pending(&b->g))
    return;
  b->unread_since = now;
  if (!others_queued(b))
    return;
  uint32_t got = take_back(b, b->unread);
  b->fresh -= got < b->fresh ? got : b->fresh;
  b->rotated += got;
}

/* Two samples in a row find tokens in clients' hands that no task below us can be using. */
static void reclaim_lost(struct js_bridge *b, uint64_t now, uint32_t in_use) {
  if (in_use == 0) {
    b->deficit = 0;
    return;
  }
  if (now < b->next_sample)
    return;
  b->next_sample = now + JS_SAMPLE_NS;
  long tasks = js_tree_tasks(getpid());
  /* The command's implicit slot lets one task work without a token. */
  long lost = tasks < 0 ? 0 : (long)in_use - (tasks - 1);
  uint32_t deficit = lost > 0 ? (uint32_t)lost : 0;
  uint32_t k = deficit < b->deficit ? deficit : b->deficit;
  b->deficit = deficit;
  if (k == 0)
    return;
  release_n(b, k);
  b->reclaimed += k;
  b->deficit = 0;
  fprintf(stderr,
          "shmsched: jobserver: reclaimed %u token%s: %u in clients' hands, %ld task%s below to "
          "use them (a client died holding them)\n",
          k, k == 1 ? "" : "s", in_use, tasks, tasks == 1 ? "" : "s");
}

/* Ask for what the build wants: free cells at once while nobody queues, else one request. */
static void ask(struct js_bridge *b, uint64_t now, uint32_t target) {
  int pending = js_grant_pending(&b->g);
  if (b->n_held >= target) {
    if (pending)
      js_grant_cancel(&b->g); /* it came back: the build no longer wants it */
    return;
  }
  if (pending || b->refused || now < b->retry_at)
    return;
  while (b->n_held < target) {
    shms_lease l;
    int rc = shms_try_acquire(b->h, &b->req, &l);
    if (rc == SHMS_OK) {
      add_token(b, &l);
      continue;
    }
    if (rc == SHMS_EWOULDBLOCK)
      rc = js_grant_enqueue(&b->g, &b->req);
    if (rc != SHMS_OK)
      refused(b, rc, now);
    return;
  }
}

/* Unread tokens the build may have: one per token in clients' hands plus the spare, bounded. */
static uint32_t target_of(const struct js_bridge *b) {
  uint32_t target = b->n_held - b->unread + b->spare;
  return target > b->max - 1 ? b->max - 1 : target;
}

uint64_t js_bridge_step(struct js_bridge *b, uint64_t now, int *watch_fifo) {
  uint32_t before = b->seen;
  take_returns(b);
  uint32_t target = target_of(b);
  if (b->n_held > target) { /* more unread than the spare: --max reached, or none wanted */
    uint32_t got = take_back(b, b->n_held - target);
    b->fresh -= got < b->fresh ? got : b->fresh;
  }
  if (b->unread != before || b->unread == 0)
    b->unread_since = now;
  rotate_idle(b, now);
  reclaim_lost(b, now, b->n_held - b->unread);
  ask(b, now, target_of(b));
  b->seen = b->unread;
  /* The next step: soon while tokens wait unread (a client's read shows only as a drop in the
   * count), at the idle spare's rotation, at the next sample, after a refusal. */
  uint64_t next = UINT64_MAX;
  if (b->unread > 0) {
    next = b->poll_ns;
    uint64_t idle = b->unread_since + JS_SPARE_IDLE_NS;
    if (idle > now && idle - now < next)
      next = idle - now;
  }
  if (b->n_held > b->unread && b->next_sample > now && b->next_sample - now < next)
    next = b->next_sample - now;
  if (b->retry_at > now && b->retry_at - now < next)
    next = b->retry_at - now;
  *watch_fifo = b->tk->style == JS_STYLE_FIFO && b->unread == 0;
  return next;
}

void js_bridge_end(struct js_bridge *b) {
  js_grant_stop(&b->g);
  js_tokens_returns(b->tk);
  js_tokens_take(b->tk, UINT32_MAX);
  release_n(b, b->n_held);
  if (b->verbose)
    fprintf(stderr,
            "shmsched: jobserver: class %s: %llu grants, %llu returns, at most %u leases at once; "
            "%llu reclaimed, %llu rotated, %llu stray\n",
            b->cls_name, (unsigned long long)b->grants, (unsigned long long)b->returns, b->peak,
            (unsigned long long)b->reclaimed, (unsigned long long)b->rotated,
            (unsigned long long)b->stray);
  free(b->held);
  b->held = NULL;
}

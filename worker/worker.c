/*
 * Worker mode, the worker's side: bind a cell, take the jobs granted to it,
 * complete or quarantine them, unbind (docs/protocol.md, "Workers").
 */
#include <ck_pr.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../core/report.h"
#include "../shm/alloc.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/futex.h"

struct shms_worker {
  struct shms *h;
  const struct shms__cls *k;
  uint32_t cell;
  struct shms__spin spin; /* spinning for the next grant (client/spin.c) */
  /* The last client proven alive and when (monotonic ns): see client_gone. */
  uint32_t alive_owner;
  uint64_t alive_at;
};

/* Bind a free cell to this worker: counted free, so a queued job may be granted to it now. */
static int bind_op(struct shms *h, const struct shms__cls *k, uint32_t *cell) {
  int rc = shms__workcell_bind(k, h->owner, cell);
  if (rc == SHMS_OK)
    shms__kick(h, k);
  return rc;
}

int shms_worker_open(shms_t *h, shms_class_t c, shms_worker_t **out) {
  struct shms__cls *k = NULL;
  int rc = shms__check_class(h, c, &k);
  if (rc != SHMS_OK)
    return rc;
  if (out == NULL)
    return shms__fail(SHMS_EINVAL, "out is NULL");
  if (k->cfg->mode != SHMS_MODE_WORKER)
    return shms__fail(SHMS_EINVAL, "class %s is a lease class: workers bind to worker classes",
                      shms_class_name(c));
  struct shms_worker *w = shms__calloc(1, sizeof *w);
  if (w == NULL)
    return shms__fail(SHMS_ENOMEM, "cannot allocate a worker");
  *w = (struct shms_worker){.h = h, .k = k};
  if (SHMS__OP(h, k, bind_op(h, k, &w->cell)) != SHMS_OK) {
    free(w);
    return shms__fail(SHMS_EBUSY,
                      "class %s: all %u cells already have a worker (or are "
                      "quarantined)",
                      shms_class_name(c), k->ncells);
  }
  *out = w;
  return SHMS_OK;
}

uint32_t shms_worker_cell(const shms_worker_t *w) { return w->cell; }

static struct shms__cell *cell_of(const struct shms_worker *w) { return &w->k->cells[w->cell]; }

/* SHMS_OK while the cell is still this worker's to use; else why not. */
static int still_bound(const struct shms_worker *w, uint64_t cw) {
  uint32_t st = SHMS__CELL_STATE(cw);
  if (st == SHMS__CELL_QUARANTINED && shms__load_32(&cell_of(w)->worker) == w->h->owner)
    return shms__fail(SHMS_EQUARANTINED,
                      "class %s cell %u is quarantined: repair it, then open a "
                      "worker again",
                      shms_class_name(w->k->id), w->cell);
  if (shms__load_32(&cell_of(w)->worker) != w->h->owner || st == SHMS__CELL_OFFLINE ||
      st == SHMS__CELL_QUARANTINED)
    return shms__fail(SHMS_ENOTFOUND, "class %s cell %u is no longer bound to this worker",
                      shms_class_name(w->k->id), w->cell);
  return SHMS_OK;
}

/*
 * The cell reads GRANTED (word cw) but the slot its slot field named is not granted to it.
 * Normally a grant in progress (the dispatcher marks the cell first, names the slot after) or a
 * settler about to return the cell: wait for them. Only a grant that no slot holds and no live
 * dispatcher is making is ours to undo: a grant torn by a dead dispatcher, or one a settler is
 * returning anyway (the return is exact: one of us wins).
 *
 * The slot field is read again after the baton, never before: read while the grant was in
 * progress, it named the cell's previous job, whose slot the client may have reused for a new
 * request (QUEUED); once the grant completed and the baton came free, the cell word was still cw
 * and the worker undid a completed grant, leaving its job GRANTED to a free cell for ever (the
 * hang seen in bench_worker under load; tests/model/workgrant.pml, -DSTALE_SLOT). Every grant's
 * writes precede its baton's release, so read after a free baton the field is cw's grant's, and
 * a grant made after that look has a new word: returned grants move the generation on.
 */
static void not_yet_granted(struct shms_worker *w, uint64_t cw) {
  struct shms *h = w->h;
  const struct shms__cls *k = w->k;
  uint64_t baton = shms__load_64(&k->ctl->baton);
  if (baton != 0 && !shms__owner_dead(h, (uint32_t)baton)) {
    sched_yield();
    return;
  }
  ck_pr_fence_load(); /* the baton before the grant's fields it released */
  uint32_t ref = shms__load_32(&cell_of(w)->slot);
  if (ref >= 1 && ref <= k->nslots) {
    struct shms__slot *s = shms__slot_at(k, ref - 1);
    uint64_t sw = shms__load_64(&s->word);
    ck_pr_fence_load();
    if (SHMS__SLOT_STATE(sw) == SHMS__SLOT_GRANTED && shms__load_32(&s->cell) == w->cell &&
        shms__load_32(&s->generation) == SHMS__CELL_GEN(cw))
      return; /* a live grant: the caller looks again and starts it */
  }
  if (!shms__return_and_kick(h, k, w->cell, SHMS__CELL_GEN(cw)))
    sched_yield();
}

/*
 * Whether the client `owner` of a job about to start is gone, proving it alive at most once per
 * ALIVE_FOR_NS: proving it is a system call (F_OFD_GETLK). Death is one-way, so "alive at T" read
 * a little later only says what a check at T followed by the client's death would say, a race
 * start already takes: the job runs for nobody and finish, which always checks afresh, drops its
 * result (docs/protocol.md, "Workers"). Only "alive" is kept; finish never uses it.
 */
#define ALIVE_FOR_NS (1000ull * 1000u)
static int client_gone(struct shms_worker *w, uint32_t owner) {
  uint64_t now = shms__now_ns();
  if (owner != 0 && owner == w->alive_owner && now - w->alive_at < ALIVE_FOR_NS)
    return 0;
  int gone = shms__owner_dead(w->h, owner);
  if (!gone) {
    w->alive_owner = owner;
    w->alive_at = now;
  }
  return gone;
}

/*
 * The cell is GRANTED with job slot i: re-check the job (its client alive, its
 * deadline, the segment's state), then start it with one CAS that decides
 * against any canceller. 1 if started; 0 if it went away (look again).
 */
static int start(struct shms_worker *w, uint64_t cw, uint32_t i, shms_job *job) {
  struct shms *h = w->h;
  const struct shms__cls *k = w->k;
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t sw = shms__load_64(&s->word), seq = s->seq;
  if (SHMS__SLOT_STATE(sw) != SHMS__SLOT_GRANTED || shms__load_32(&s->cell) != w->cell) {
    not_yet_granted(w, cw);
    return 0;
  }
  int gone = client_gone(w, s->owner);
  if (s->options & SHMS__OPT_KEYED) /* its joiners wait on for it */
    gone = shms__keyed_unwaited(k, i, seq, gone);
  int reason = gone                                                 ? SHMS_EOWNERLOST
               : s->deadline_ns && shms__now_ns() >= s->deadline_ns ? SHMS_EDEADLINE
               : shms__segment_state(h) != SHMS_SEG_ACTIVE          ? SHMS_ESHUTDOWN
                                                                    : 0;
  if (reason != 0) {
    if (shms__settle_and_kick(h, k, i, seq, 1u << SHMS__SLOT_GRANTED, reason) &&
        reason == SHMS_EOWNERLOST)
      shms__slot_collect(k, i, seq); /* nobody is left to take the outcome */
    return 0;
  }
  if (!shms__slot_run(k, i, sw))
    return 0;
  SHMS__STEP();
  uint32_t gen = shms__cell_run(k, w->cell, h->owner);
  SHMS__STEP();
  shms__cell_count_lease(k, w->cell);
  *job = (shms_job){
      .ticket = {.cls = (uint32_t)k->id, .slot = i, .seq = seq, .incarnation = h->incarnation},
      .lease = {.cls = (uint32_t)k->id,
                .cell = w->cell,
                .generation = gen,
                .token = s->token,
                .incarnation = h->incarnation},
      .payload = shms__slot_payload(k, i),
      .payload_len = s->payload_len <= k->cfg->payload ? s->payload_len : k->cfg->payload,
      .priority = s->priority,
  };
  memcpy(job->tenant, s->tenant_name, sizeof job->tenant);
  job->tenant[SHMS_TENANT_MAX] = '\0';
  return 1;
}

/* Sleep on the cell's worker futex until a grant, until_real, or the next poll; first spin on
 * the cell's word (cw) a while, as a client does (client/spin.c). */
static void idle(struct shms_worker *w, uint64_t cw, uint64_t until_real) {
  struct shms__cell *cell = cell_of(w);
  uint32_t v = shms__load_32(&cell->worker_futex);
  /* Only before announcing: a worker that said it sleeps (back from a poll) sleeps again. The
   * class's idle workers (its free cells, ours among them) are the ones that may spin with us. */
  uint64_t fast = shms__load_64(&w->k->ctl->fast);
  uint32_t idle_workers =
      w->k->fast_map ? (uint32_t)__builtin_popcount(SHMS__FAST_LOW(fast)) : SHMS__FAST_LOW(fast);
  if (!(v & 1u) &&
      shms__spin(w->h, &w->spin, &cell->word, cw, until_real, idle_workers) != SHMS__SPUN_NOT)
    return; /* changed (a grant?), or interrupted: the caller looks again */
  /* Say we sleep, then look once more: a grant between the two has cleared the bit. */
  if (!(v & 1u) && !ck_pr_cas_32_value(&cell->worker_futex, v, v | 1u, &v))
    return;
  if (SHMS__CELL_STATE(shms__load_64(&cell->word)) == SHMS__CELL_GRANTED)
    return;
  uint64_t poll = shms__real_now_ns() + SHMS__POLL_NS;
  struct shms__sleeper me = {.word32 = &cell->worker_futex, .bit = 1u};
  if (shms__sleeper_add(w->h, &me))
    return; /* interrupted: the caller returns */
  shms__futex_wait(&cell->worker_futex, v | 1u,
                   until_real && until_real < poll ? until_real : poll);
  shms__sleeper_remove(w->h, &me);
}

int shms_worker_take(shms_worker_t *w, uint64_t timeout_ns, shms_job *job) {
  shms__clear_detail();
  if (w == NULL || job == NULL)
    return shms__fail(SHMS_EINVAL, "worker or job is NULL");
  int rc = shms__handle_check_member(w->h);
  if (rc != SHMS_OK)
    return rc;
  uint64_t until_real = shms__wait_end(timeout_ns);
  for (;;) {
    uint64_t cw = shms__load_64(&cell_of(w)->word);
    if ((rc = still_bound(w, cw)) != SHMS_OK)
      return rc;
    if (SHMS__CELL_STATE(cw) == SHMS__CELL_GRANTED) {
      uint32_t slot = shms__load_32(&cell_of(w)->slot);
      if (slot >= 1 && slot <= w->k->nslots) {
        if (SHMS__OP(w->h, w->k, start(w, cw, slot - 1, job)))
          return SHMS_OK;
      } else {
        /* No job named yet: a grant in progress, or one torn by a dead dispatcher (a fresh
         * cell's slot field is 0), which would else hold this loop for ever. */
        SHMS__OP_VOID(w->h, w->k, not_yet_granted(w, cw));
      }
      continue;
    }
    if (SHMS__CELL_STATE(cw) == SHMS__CELL_LEASED)
      return shms__fail(SHMS_EINVAL, "the worker still holds a job: complete it first");
    if (timeout_ns == 0 || (until_real != 0 && shms__real_now_ns() >= until_real))
      return shms__fail(SHMS_ETIMEDOUT, "no job was granted");
    if (shms__interrupted(w->h))
      return shms__fail(SHMS_ETIMEDOUT, "no job was granted (the wait was interrupted)");
    idle(w, cw, until_real);
    shms__baton_check_holder(w->h, w->k); /* an idle worker also keeps the class moving */
  }
}

/* The job's slot index, if job is the one this worker runs now; else a negative error. */
static int64_t running_job(const struct shms_worker *w, const shms_job *job, uint64_t *sw) {
  if (w == NULL || job == NULL)
    return shms__fail(SHMS_EINVAL, "worker or job is NULL");
  const struct shms__cls *k = w->k;
  struct shms__cell *cell = cell_of(w);
  uint64_t cw = shms__load_64(&cell->word);
  if (job->lease.cell != w->cell || job->lease.incarnation != w->h->incarnation ||
      SHMS__CELL_STATE(cw) != SHMS__CELL_LEASED || SHMS__CELL_GEN(cw) != job->lease.generation ||
      shms__load_64(&cell->token) != job->lease.token || job->ticket.slot >= k->nslots)
    return shms__fail(SHMS_ELEASE, "the job is not the one this worker runs");
  struct shms__slot *s = shms__slot_at(k, job->ticket.slot);
  *sw = shms__load_64(&s->word);
  if (SHMS__SLOT_STATE(*sw) != SHMS__SLOT_RUNNING || s->seq != job->ticket.seq)
    return shms__fail(SHMS_ELEASE, "the job is no longer running");
  return job->ticket.slot;
}

int shms_worker_cancelled(shms_worker_t *w, const shms_job *job) {
  uint64_t sw;
  int64_t i = running_job(w, job, &sw);
  return i < 0 ? (int)i : (sw & SHMS__SLOT_CANCEL) != 0;
}

/*
 * End running job i with status and (len bytes of) result: settle the slot
 * (waking the client), then free or quarantine the cell.
 */
static int finish(struct shms_worker *w, uint32_t i, int status, const void *result, size_t len,
                  int quarantine) {
  struct shms *h = w->h;
  const struct shms__cls *k = w->k;
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t sw = shms__load_64(&s->word), seq = s->seq;
  /* Mark the payload as being overwritten: a crash from here on must not run it again. The job
   * may also have been taken from us (our worker judged dead): then it is not ours to end. */
  if (!shms__slot_writing(k, i, seq, &sw))
    return SHMS_ELEASE;
  SHMS__STEP();
  if (len > 0)
    memmove(shms__slot_payload(k, i), result, len);
  SHMS__STEP();
  s->result_len = (uint32_t)len;
  s->result_status = status;
  ck_pr_fence_store(); /* the result is visible before the state says SETTLED */
  /* A client that left (COLLECTED, set at its detach) or died will never take the result: drop
   * it. Decided before the CAS that hands the slot over, never after: once SETTLED, a live
   * client may collect it and free it at once. */
  int gone = shms__owner_dead(h, s->owner);
  if (s->options & SHMS__OPT_KEYED) /* its joiners wait on for it */
    gone = shms__keyed_unwaited(k, i, seq, gone);
  int dropped = shms__slot_complete(k, i, seq, sw, gone);
  if (dropped < 0)
    return SHMS_ELEASE;
  SHMS__STEP();
  if (dropped)
    shms__slot_free(k, i);
  SHMS__STEP();
  struct shms__cell *cell = cell_of(w);
  uint64_t cw = shms__load_64(&cell->word);
  if (quarantine) {
    if (shms__quarantine_and_check(h, k, w->cell, cw, status))
      shms__note_cell(h, k, SHMS_EVENT_CELL_QUARANTINED, w->cell, h->owner, status);
    return SHMS_OK;
  }
  if (shms__cell_job_done(k, w->cell, cw, h->owner))
    shms__kick(h, k);
  return SHMS_OK;
}

int shms_worker_complete(shms_worker_t *w, const shms_job *job, int status, const void *result,
                         size_t len) {
  shms__clear_detail();
  uint64_t sw;
  int64_t i = running_job(w, job, &sw);
  if (i < 0)
    return (int)i;
  if (len > w->k->cfg->payload)
    return shms__fail(SHMS_EINVAL,
                      "class %s: the result is %zu bytes, more than its %u (refused, "
                      "not truncated)",
                      shms_class_name(w->k->id), len, w->k->cfg->payload);
  if (len > 0 && result == NULL)
    return shms__fail(SHMS_EINVAL, "result is NULL");
  int rc = SHMS__OP(w->h, w->k, finish(w, (uint32_t)i, status, result, len, 0));
  return rc == SHMS_OK ? rc : shms__fail(rc, "the job is no longer running here");
}

int shms_worker_quarantine(shms_worker_t *w, const shms_job *job, int reason) {
  shms__clear_detail();
  uint64_t sw;
  int64_t i = running_job(w, job, &sw);
  if (i < 0)
    return (int)i;
  int rc = SHMS__OP(w->h, w->k, finish(w, (uint32_t)i, reason, NULL, 0, 1));
  return rc == SHMS_OK ? rc : shms__fail(rc, "the job is no longer running here");
}

int shms_worker_close(shms_worker_t *w) {
  shms__clear_detail();
  if (w == NULL)
    return shms__fail(SHMS_EINVAL, "worker is NULL");
  int rc = shms__handle_check_member(w->h);
  if (rc == SHMS_OK)
    SHMS__OP_VOID(
        w->h, w->k,
        shms__follow(w->h, w->k, shms__workcell_gone(w->h, w->k, w->cell, w->h->owner, 1)));
  free(w);
  return rc;
}

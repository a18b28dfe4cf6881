/*
 * Worker mode, the client's side: submit a job with its payload, wait for its
 * result (docs/protocol.md, "Workers").
 */
#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "client.h"

int shms__check_job(struct shms *h, const shms_request *req, const void *payload, size_t len,
                    const shms_ticket *ticket, struct shms__cls **k, uint32_t *quotas) {
  *quotas = 0;
  int rc = shms__check_request(h, req, SHMS_MODE_WORKER, ticket, "ticket", k, NULL);
  if (rc != SHMS_OK)
    return rc;
  if (len > (*k)->cfg->payload)
    return shms__fail(SHMS_EINVAL, "class %s: the payload is %zu bytes, more than its %u",
                      shms_class_name((*k)->id), len, (*k)->cfg->payload);
  if (len > 0 && payload == NULL)
    return shms__fail(SHMS_EINVAL, "payload is NULL");
  return req->nquotas != 0 ? shms__check_quotas(*k, req, quotas) : SHMS_OK;
}

int shms_submit(shms_t *h, const shms_request *req, const void *payload, size_t len, unsigned flags,
                shms_ticket *ticket) {
  struct shms__cls *k = NULL;
  uint32_t quotas;
  int rc = shms__check_job(h, req, payload, len, ticket, &k, &quotas);
  if (rc != SHMS_OK)
    return rc;
  if (flags & ~(unsigned)SHMS_SUBMIT_RETRY_ONCE)
    return shms__fail(SHMS_EINVAL, "unknown submit flags 0x%x", flags);
  unsigned options = (flags & SHMS_SUBMIT_RETRY_ONCE) ? SHMS__OPT_RETRY_ONCE : 0;
  return shms__enqueue_slot(h, k, req, payload, len, options, NULL, quotas, ticket);
}

/* The job completed: hand over status and result (the one copy out), then retire the ticket. */
static int deliver(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq, void *buf,
                   size_t cap, shms_result *out) {
  const struct shms__slot *s = shms__slot_at(k, i);
  ck_pr_fence_load(); /* the result was written before the state said SETTLED */
  size_t len = s->result_len <= k->cfg->payload ? s->result_len : k->cfg->payload;
  out->status = s->result_status;
  out->result_len = len;
  if (len > cap)
    return shms__fail(SHMS_EINVAL,
                      "the result is %zu bytes, the buffer %zu: call again with a "
                      "larger one",
                      len, cap);
  if (len > 0)
    memcpy(buf, shms__slot_payload(k, i), len);
  shms__job_collect(h, k, i, seq);
  return SHMS_OK;
}

/* The job is queued, granted or running: help, expire, or sleep; poll checks at intervals. */
static int wait_pending(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                        uint64_t until_real, uint64_t timeout_ns) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t st = SHMS__SLOT_STATE(w);
  /* A deadline stops a job from starting, never a job that runs; a class held still (a
   * recovery or check, slow or stopped) is waited out asleep, until then or the wait's end. */
  uint64_t deadline = st == SHMS__SLOT_QUEUED ? s->deadline_ns : 0;
  if (shms__op_enter_until(h, k, shms__held_limit(deadline, until_real, timeout_ns)) != SHMS_OK)
    return shms__held_still(deadline, "the job ends when the class goes again, never started");
  int answered = 1;
  if (w & SHMS__SLOT_HELP)
    shms__help(h, k, i, w);
  else if (deadline != 0 && shms__now_ns() >= deadline)
    shms__settle_and_kick(h, k, i, s->seq, 1u << SHMS__SLOT_QUEUED, SHMS_EDEADLINE);
  else
    answered = 0;
  shms__op_leave(h, k);
  if (answered)
    return SHMS_OK;
  if (timeout_ns == 0 || (until_real != 0 && shms__real_now_ns() >= until_real) ||
      shms__interrupted(h))
    return shms__fail(SHMS_ETIMEDOUT, "the job is still %s%s",
                      st == SHMS__SLOT_RUNNING ? "running" : "queued",
                      shms__interrupted(h) ? " (the wait was interrupted)" : "");
  uint64_t limit = st == SHMS__SLOT_QUEUED ? shms__sleep_limit(s, until_real) : until_real;
  if (shms__spin_then_sleep(h, k, i, w, limit, 1) &&
      shms__op_enter_until(h, k, shms__held_limit(deadline, until_real, timeout_ns)) == SHMS_OK) {
    /* A poll interval passed: nobody dead may hold the job up, dispatcher or worker. */
    shms__poll_checks(h, k, i, s->seq);
    shms__op_leave(h, k);
    uint32_t c = shms__load_32(&s->cell);
    if (st != SHMS__SLOT_QUEUED && c < k->ncells)
      shms__follow(h, k, shms__workcell_check(h, k, c)); /* each enters its operation */
  }
  return SHMS_OK;
}

/* A job's ticket (and the caller's out, if any): its class, which must be a worker class. */
static int job_ticket(struct shms *h, const shms_ticket *ticket, const void *out,
                      const char *out_name, struct shms__cls **k, uint32_t *i) {
  int rc = shms__check_ticket(h, ticket, out, out_name, k, i);
  if (rc == SHMS_OK && (*k)->cfg->mode != SHMS_MODE_WORKER)
    return shms__fail(SHMS_EINVAL, "class %s is a lease class: wait for leases with shms_wait",
                      shms_class_name((*k)->id));
  return rc;
}

int shms_wait_started(shms_t *h, const shms_ticket *ticket, uint64_t timeout_ns) {
  struct shms__cls *k = NULL;
  uint32_t i = 0;
  int rc = job_ticket(h, ticket, NULL, NULL, &k, &i);
  if (rc != SHMS_OK)
    return rc;
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t until_real = shms__wait_end(timeout_ns), w;
  for (;;) {
    if ((rc = shms__ticket_live(h, s, ticket, "job", &w)) != SHMS_OK)
      return rc;
    uint32_t st = SHMS__SLOT_STATE(w);
    if (st == SHMS__SLOT_RUNNING)
      return SHMS_OK;
    if (st == SHMS__SLOT_SETTLED) { /* left for shms_wait_result to collect */
      int reason = SHMS__SLOT_REASON(w);
      return reason == SHMS_OK ? SHMS_OK
                               : shms__fail(reason, "the job ended: %s", shms_strerror(reason));
    }
    /* Ask the worker's take to wake us, then sleep as any waiter does (a change in between
     * makes the CAS fail and we look again). */
    if (!(w & SHMS__SLOT_STARTWAKE)) {
      if (!shms__slot_flag(k, i, &w, SHMS__SLOT_STARTWAKE))
        continue;
      w |= SHMS__SLOT_STARTWAKE;
    }
    if ((rc = wait_pending(h, k, i, w, until_real, timeout_ns)) != SHMS_OK)
      return rc;
  }
}

int shms_wait_result(shms_t *h, const shms_ticket *ticket, uint64_t timeout_ns, void *buf,
                     size_t cap, shms_result *out) {
  struct shms__cls *k = NULL;
  uint32_t i = 0;
  int rc = job_ticket(h, ticket, out, "out", &k, &i);
  if (rc != SHMS_OK)
    return rc;
  if (buf == NULL && cap > 0)
    return shms__fail(SHMS_EINVAL, "buf is NULL");
  memset(out, 0, sizeof *out);
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t until_real = shms__wait_end(timeout_ns), w;
  for (;;) {
    if ((rc = shms__ticket_live(h, s, ticket, "job", &w)) != SHMS_OK)
      return rc;
    uint32_t st = SHMS__SLOT_STATE(w);
    if ((shms__load_32(&s->options) & SHMS__OPT_KEYED) &&
        (rc = shms__keyed_share(h, k, i, ticket->seq)) != SHMS_OK)
      return rc;
    if (st == SHMS__SLOT_SETTLED) {
      int reason = SHMS__SLOT_REASON(w);
      if (reason == SHMS_OK)
        return SHMS__OP(h, k, deliver(h, k, i, ticket->seq, buf, cap, out));
      SHMS__OP_VOID(h, k, shms__job_collect(h, k, i, ticket->seq));
      return shms__fail(reason, "the job ended: %s", shms_strerror(reason));
    }
    if ((rc = wait_pending(h, k, i, w, until_real, timeout_ns)) != SHMS_OK)
      return rc;
  }
}

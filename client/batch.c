/*
 * Batches of jobs, all or none (docs/protocol.md, "Batches"). The slots are
 * reserved at once against the used count, claimed and filled; then, holding
 * the class's dispatcher baton, they are published and indexed by the caller
 * itself, so that no pass can grant one before all are queued, and a refusal
 * at the index (a full tenant table) takes the others back before anyone
 * could act on them. Letting the baton go runs the one pass that grants them.
 */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/report.h"
#include "../shm/alloc.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "client.h"

/* How long a batch waits for the class's dispatcher: a live holder's passes are bounded. */
#define BATON_WAIT_NS (1000ull * 1000 * 1000)

struct batch {
  struct shms__cls *k;
  const shms_batch_job *jobs;
  size_t n;
  unsigned options;
  uint32_t *slot; /* the slot each job took */
  uint64_t *seq;  /* and its sequence */
};

static shms_request job_request(shms_class_t c, const shms_batch_job *j) {
  return (shms_request){.cls = c,
                        .tenant = j->tenant,
                        .priority = j->priority,
                        .deadline_ns = j->deadline_ns,
                        .quotas = j->quotas,
                        .nquotas = j->nquotas};
}

/* Fail as rc, the detail prefixed with the job's index. */
static int job_fail(int rc, size_t j) {
  char why[200];
  snprintf(why, sizeof why, "%s", shms_last_error_detail());
  return shms__fail(rc, "job %zu: %s", j, why[0] != '\0' ? why : shms_strerror(rc));
}

/* Every job passes shms_submit's checks, or the first that does not names the refusal. */
static int check_jobs(struct shms *h, shms_class_t c, struct batch *b, shms_ticket *tickets,
                      size_t *bad) {
  for (size_t j = 0; j < b->n; j++) {
    const shms_batch_job *job = &b->jobs[j];
    shms_request req = job_request(c, job);
    uint32_t quotas;
    int rc = shms__check_job(h, &req, job->payload, job->len, tickets, &b->k, &quotas);
    if (rc != SHMS_OK) {
      *bad = j;
      return job_fail(rc, j);
    }
  }
  return SHMS_OK;
}

/* Give back jobs [0, got) claimed (and, if owned, on our record) and the reservations left. */
static void unclaim(struct shms *h, const struct batch *b, size_t got, int owned) {
  for (size_t j = 0; j < got; j++) {
    if (owned)
      shms__owned_remove(h, b->k, b->slot[j]); /* off our record before the slot is free */
    SHMS__STEP();
    shms__slot_free(b->k, b->slot[j]);
  }
}

/* Reserve and claim the batch's slots, all or none. */
static int claim(struct shms *h, const struct batch *b) {
  struct shms__cls *k = b->k;
  if (shms__slot_reserve(k, (uint32_t)b->n) != SHMS_OK) {
    for (size_t j = 0; j < b->n; j++)
      shms__count_rejected(k, SHMS_EQUEUEFULL);
    shms__note_refused(h, k, b->jobs[0].tenant, SHMS_EQUEUEFULL);
    uint32_t used = shms__load_32(&k->ctl->used);
    return shms__fail(SHMS_EQUEUEFULL,
                      "class %s: the batch's %zu jobs do not fit: %u of its %u request slots "
                      "are free; nothing was queued",
                      shms_class_name(k->id), b->n, used < k->nslots ? k->nslots - used : 0,
                      k->nslots);
  }
  for (size_t got = 0; got < b->n; got++) {
    if (shms__slot_take(k, &b->slot[got], &b->seq[got]) != SHMS_OK) {
      shms__slot_unreserve(k, (uint32_t)(b->n - got - 1)); /* the take gave its own back */
      unclaim(h, b, got, 0);
      return shms__fail(SHMS_EQUEUEFULL,
                        "class %s: no free request slot showed up for the "
                        "batch; nothing was queued",
                        shms_class_name(k->id));
    }
  }
  return SHMS_OK;
}

/* Fill each claimed slot and put it on our record: still CLAIMED, seen by nobody. */
static void fill_all(struct shms *h, const struct batch *b) {
  for (size_t j = 0; j < b->n; j++) {
    const shms_batch_job *job = &b->jobs[j];
    shms_request req = job_request((shms_class_t)b->k->id, job);
    /* Checked already: a live quota's name never changes, so the bits are the check's. */
    uint32_t quotas = 0;
    if (req.nquotas != 0)
      shms__check_quotas(b->k, &req, &quotas);
    SHMS__STEP();
    shms__slot_fill(h, shms__slot_at(b->k, b->slot[j]), &req, job->len, b->options, NULL, quotas,
                    b->seq[j]);
    if (job->len > 0)
      memcpy(shms__slot_payload(b->k, b->slot[j]), job->payload, job->len);
    shms__owned_add(h, b->k, b->slot[j]);
  }
}

/* The first job the index refused (its reason into *reason), or n. Baton held. */
static size_t refused_at(const struct batch *b, int *reason) {
  for (size_t j = 0; j < b->n; j++) {
    uint64_t w = shms__load_64(&shms__slot_at(b->k, b->slot[j])->word);
    if (SHMS__SLOT_STATE(w) == SHMS__SLOT_SETTLED) {
      *reason = SHMS__SLOT_REASON(w);
      return j;
    }
  }
  return b->n;
}

/* The index refused one job: end every other one the same way, unlinked, and collect them all;
 * no pass has run since they were published, so none was granted. Baton held. */
static void take_back(struct shms *h, const struct batch *b, int reason) {
  for (size_t j = 0; j < b->n; j++) {
    if (shms__slot_settle(h, b->k, b->slot[j], b->seq[j], 1u << SHMS__SLOT_QUEUED, reason) ==
        SHMS__SETTLED_UNLINK) {
      SHMS__STEP();
      shms__index_attend(h, b->k, b->slot[j]);
    }
  }
  for (size_t j = 0; j < b->n; j++)
    shms__owned_collect(h, b->k, b->slot[j]);
}

/* Publish and index the batch under the baton, then let the baton go: one pass, one kick. */
static int publish(struct shms *h, const struct batch *b, size_t *bad) {
  struct shms__cls *k = b->k;
  if (shms__baton_acquire(h, k, BATON_WAIT_NS) != SHMS_OK) {
    unclaim(h, b, b->n, 1);
    return shms__fail(SHMS_EBUSY, "class %s: its dispatcher stayed busy; nothing was queued",
                      shms_class_name(k->id));
  }
  SHMS__STEP();
  shms__fast_queue(k, (int32_t)b->n); /* counted queued before any can be granted */
  uint64_t now = shms__now_ns();      /* one arrival: every job waits from the same instant */
  for (size_t j = 0; j < b->n; j++)
    shms__slot_at(k, b->slot[j])->enqueue_ns = now;
  for (size_t j = 0; j < b->n; j++)
    shms__slot_publish(k, b->slot[j], b->seq[j]);
  for (size_t j = 0; j < b->n; j++) {
    SHMS__STEP();
    shms__index_attend(h, k, b->slot[j]);
  }
  int reason = SHMS_OK;
  size_t j = refused_at(b, &reason);
  if (j < b->n) {
    take_back(h, b, reason);
    SHMS__STEP();
    shms__baton_done(h, k);
    *bad = j;
    return shms__fail(reason,
                      reason == SHMS_EQUEUEFULL
                          ? "job %zu: class %s: the tenant table is full (max-tenants); nothing "
                            "was queued"
                          : "job %zu: class %s: refused (%s); nothing was queued",
                      j, shms_class_name(k->id), shms_strerror(reason));
  }
  shms__overtake_arrived(k, now);
  SHMS__STEP();
  shms__baton_done(h, k);
  for (j = 0; j < b->n; j++)
    shms__recheck_after_publish(h, k, b->slot[j], b->seq[j]);
  return SHMS_OK;
}

/* The earliest deadline of the batch (0: none): how long it may wait for a class held still. */
static uint64_t earliest_deadline(const struct batch *b) {
  uint64_t d = 0;
  for (size_t j = 0; j < b->n; j++)
    if (b->jobs[j].deadline_ns != 0 && (d == 0 || b->jobs[j].deadline_ns < d))
      d = b->jobs[j].deadline_ns;
  return d;
}

static int admit(struct shms *h, struct batch *b, size_t *bad) {
  uint64_t deadline = earliest_deadline(b);
  if (shms__op_enter_until(h, b->k, shms__deadline_real(deadline)) != SHMS_OK)
    return shms__held_still(deadline, "nothing was queued");
  int rc = claim(h, b);
  if (rc == SHMS_OK) {
    fill_all(h, b);
    rc = publish(h, b, bad);
  }
  shms__op_leave(h, b->k);
  return rc;
}

int shms_submit_batch(shms_t *h, shms_class_t c, const shms_batch_job *jobs, size_t n,
                      unsigned flags, shms_ticket *tickets, size_t *failed) {
  size_t bad = n;
  if (failed != NULL)
    *failed = n;
  shms__clear_detail();
  if (n == 0 || n > SHMS_BATCH_MAX)
    return shms__fail(SHMS_EINVAL, "a batch holds 1 to %u jobs, not %zu", SHMS_BATCH_MAX, n);
  if (jobs == NULL || tickets == NULL)
    return shms__fail(SHMS_EINVAL, "%s is NULL", jobs == NULL ? "jobs" : "tickets");
  if (flags & ~(unsigned)SHMS_SUBMIT_RETRY_ONCE)
    return shms__fail(SHMS_EINVAL, "unknown submit flags 0x%x", flags);
  struct batch b = {
      .jobs = jobs, .n = n, .options = (flags & SHMS_SUBMIT_RETRY_ONCE) ? SHMS__OPT_RETRY_ONCE : 0};
  int rc = check_jobs(h, c, &b, tickets, &bad);
  if (rc == SHMS_OK && n > b.k->nslots)
    rc = shms__fail(SHMS_EQUEUEFULL,
                    "class %s: the batch's %zu jobs are more than its queue of %u request slots",
                    shms_class_name(c), n, b.k->nslots);
  if (rc == SHMS_OK) {
    b.slot = shms__malloc(n * sizeof *b.slot);
    b.seq = shms__malloc(n * sizeof *b.seq);
    rc = b.slot == NULL || b.seq == NULL ? shms__fail(SHMS_ENOMEM, "no memory for the batch")
                                         : admit(h, &b, &bad);
  }
  for (size_t j = 0; rc == SHMS_OK && j < n; j++)
    tickets[j] = (shms_ticket){
        .cls = (uint32_t)c, .slot = b.slot[j], .seq = b.seq[j], .incarnation = h->incarnation};
  free(b.slot);
  free(b.seq);
  if (failed != NULL)
    *failed = bad;
  return rc;
}

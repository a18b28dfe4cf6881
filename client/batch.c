/*
 * Batches of jobs, all or none (docs/protocol.md, "Batches"). The slots are
 * reserved at once against the used count, claimed and filled; then, holding
 * the class's dispatcher baton, they are published and indexed by the caller
 * itself, so that no pass can grant one before all are queued, and a refusal
 * at the index (a full tenant table) takes the others back before anyone
 * could act on them. Letting the baton go runs the one pass that grants them.
 * A keyed job joins the live job of its key instead (docs/protocol.md, "Keyed
 * jobs"), and a later job of a key the batch already named joins that one: its
 * record in our process entry first, then its share on the job's word; a
 * refusal takes the shares back too.
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

/* Submits of a keyed batch lost to another job of one of its keys before giving up. */
#define KEYED_TRIES 100

/* What a job of the batch does: queue a job of its own, join a live job of its key, or join the
 * job an earlier job of the batch with its key queues. */
enum role { FRESH, JOIN_LIVE, JOIN_BATCH };

struct line {
  uint32_t slot;  /* the job it names: its own, or the one it joins */
  uint64_t seq;   /* and its sequence */
  size_t first;   /* the batch's first job with its key (itself, or with no key) */
  enum role role; /* this try's */
  int at;         /* a joiner's record in our process entry, -1: none */
  int counted;    /* a JOIN_LIVE share on the job's word */
  uint32_t count; /* the job's joiners once this one joined */
};

struct batch {
  struct shms__cls *k;
  const shms_batch_job *jobs;
  size_t n;
  unsigned options;
  struct line *l;
  size_t *fresh; /* the jobs queuing one of their own, in input order */
  size_t nfresh;
};

/* The line of the batch's f-th fresh job (its slot and sequence once claimed). */
#define FRESH_LINE(b, f) (&(b)->l[(b)->fresh[f]])

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
    if (rc == SHMS_OK && job->key != NULL)
      rc = shms__check_key(job->key);
    if (rc != SHMS_OK) {
      *bad = j;
      return job_fail(rc, j);
    }
  }
  return SHMS_OK;
}

/* Where each job's key first shows in the batch, sorted by key and input order. */
struct keyed {
  const char *key;
  size_t j;
};

static int by_key(const void *a, const void *b) {
  const struct keyed *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c != 0 ? c : (x->j > y->j) - (x->j < y->j);
}

/* Each job's first job of its key (l[j].first); how many jobs follow an earlier one of their key
 * into *dups. A batch whose later jobs alone would join more than a process may is refused. */
static int plan_keys(struct batch *b, size_t *dups, size_t *bad) {
  struct keyed *v = shms__malloc(b->n * sizeof *v);
  if (v == NULL)
    return shms__fail(SHMS_ENOMEM, "no memory for the batch");
  size_t m = 0;
  for (size_t j = 0; j < b->n; j++) {
    b->l[j] = (struct line){.first = j, .at = -1};
    if (b->jobs[j].key != NULL)
      v[m++] = (struct keyed){b->jobs[j].key, j};
  }
  qsort(v, m, sizeof *v, by_key);
  for (size_t x = 1; x < m; x++)
    if (strcmp(v[x].key, v[x - 1].key) == 0)
      b->l[v[x].j].first = b->l[v[x - 1].j].first;
  free(v);
  *dups = 0;
  for (size_t j = 0; j < b->n; j++)
    if (b->l[j].first != j && ++*dups > SHMS_KEY_JOINS_MAX) {
      *bad = j;
      return shms__fail(SHMS_EINVAL,
                        "job %zu: key '%s': the batch's jobs of a key after its first join its "
                        "job, and a process joins at most %d jobs at once (SHMS_KEY_JOINS_MAX); "
                        "nothing was queued",
                        j, b->jobs[j].key, SHMS_KEY_JOINS_MAX);
    }
  return SHMS_OK;
}

/* What each job does this try: the first of a key joins the key's live job if there is one. */
static void look(struct batch *b) {
  b->nfresh = 0;
  for (size_t j = 0; j < b->n; j++) {
    struct line *l = &b->l[j], *first = &b->l[l->first];
    *l = (struct line){.first = l->first, .role = FRESH, .at = -1};
    if (l->first != j) {
      l->role = first->role == JOIN_LIVE ? JOIN_LIVE : JOIN_BATCH;
      l->slot = first->slot; /* a batch's own job's slot comes with its claim */
      l->seq = first->seq;
    } else if (b->jobs[j].key != NULL &&
               shms__key_find_live(b->k, b->jobs[j].key, &l->slot, &l->seq)) {
      l->role = JOIN_LIVE;
    }
    if (l->role == FRESH)
      b->fresh[b->nfresh++] = j;
  }
}

/* Give back fresh jobs [0, got) claimed (and, if owned, on our record). */
static void unclaim(struct shms *h, const struct batch *b, size_t got, int owned) {
  for (size_t f = 0; f < got; f++) {
    if (owned)
      shms__owned_remove(h, b->k, FRESH_LINE(b, f)->slot); /* off our record before it is free */
    SHMS__STEP();
    shms__slot_free(b->k, FRESH_LINE(b, f)->slot);
  }
}

/* Reserve and claim the fresh jobs' slots, all or none; the joiners of them learn theirs. */
static int claim(struct shms *h, const struct batch *b) {
  struct shms__cls *k = b->k;
  size_t n = b->nfresh;
  if (shms__slot_reserve(k, (uint32_t)n) != SHMS_OK) {
    for (size_t f = 0; f < n; f++)
      shms__count_rejected(k, SHMS_EQUEUEFULL);
    shms__note_refused(h, k, b->jobs[b->fresh[0]].tenant, SHMS_EQUEUEFULL);
    uint32_t used = shms__load_32(&k->ctl->used);
    return shms__fail(SHMS_EQUEUEFULL,
                      "class %s: the batch's %zu jobs do not fit: %u of its %u request slots "
                      "are free; nothing was queued",
                      shms_class_name(k->id), n, used < k->nslots ? k->nslots - used : 0,
                      k->nslots);
  }
  for (size_t got = 0; got < n; got++) {
    struct line *l = FRESH_LINE(b, got);
    if (shms__slot_take(k, &l->slot, &l->seq) != SHMS_OK) {
      shms__slot_unreserve(k, (uint32_t)(n - got - 1)); /* the take gave its own back */
      unclaim(h, b, got, 0);
      return shms__fail(SHMS_EQUEUEFULL,
                        "class %s: no free request slot showed up for the "
                        "batch; nothing was queued",
                        shms_class_name(k->id));
    }
  }
  for (size_t j = 0; j < b->n; j++)
    if (b->l[j].role == JOIN_BATCH) {
      b->l[j].slot = b->l[b->l[j].first].slot;
      b->l[j].seq = b->l[b->l[j].first].seq;
    }
  return SHMS_OK;
}

/* Fill each claimed slot and put it on our record: still CLAIMED, seen by nobody. */
static void fill_all(struct shms *h, const struct batch *b) {
  for (size_t f = 0; f < b->nfresh; f++) {
    const shms_batch_job *job = &b->jobs[b->fresh[f]];
    const struct line *l = FRESH_LINE(b, f);
    shms_request req = job_request((shms_class_t)b->k->id, job);
    /* Checked already: a live quota's name never changes, so the bits are the check's. */
    uint32_t quotas = 0;
    if (req.nquotas != 0)
      shms__check_quotas(b->k, &req, &quotas);
    SHMS__STEP();
    shms__slot_fill(h, shms__slot_at(b->k, l->slot), &req, job->len,
                    b->options | (job->key != NULL ? SHMS__OPT_KEYED : 0), job->key, quotas,
                    l->seq);
    if (job->len > 0)
      memcpy(shms__slot_payload(b->k, l->slot), job->payload, job->len);
    shms__owned_add(h, b->k, l->slot);
  }
}

/* The joiners' records, all or none; then each fresh job's word counts the batch's joiners of
 * it (still CLAIMED: nobody else writes it), and each live job's the joiners of it, one CAS
 * each. SHMS_EWOULDBLOCK when a live job can no longer be joined (look again). */
static int join_all(struct shms *h, struct batch *b, size_t *bad) {
  /* More joins than a table holds are refused by the reserve, which then reads no entry. */
  uint64_t entries[SHMS_KEY_JOINS_MAX];
  int at[SHMS_KEY_JOINS_MAX];
  size_t n = 0, free_count = 0;
  for (size_t j = 0; j < b->n; j++)
    if (b->l[j].role != FRESH && n++ < SHMS_KEY_JOINS_MAX)
      entries[n - 1] = SHMS__JOIN_ENTRY(SHMS__OWNED_REF(b->k->id, b->l[j].slot), b->l[j].seq);
  if (n == 0)
    return SHMS_OK;
  if (shms__joins_reserve(h, entries, n, at, &free_count) != SHMS_OK) {
    for (size_t j = 0, x = 0; j < b->n; j++)
      if (b->l[j].role != FRESH && x++ == free_count)
        *bad = j;
    return shms__fail(SHMS_EBUSY,
                      "job %zu: key '%s': the batch joins %zu jobs, and this process may join %zu "
                      "more (SHMS_KEY_JOINS_MAX %d, less the jobs it waits on as a joiner); "
                      "nothing was queued",
                      *bad, b->jobs[*bad].key, n, free_count, SHMS_KEY_JOINS_MAX);
  }
  for (size_t j = 0, x = 0; j < b->n; j++)
    if (b->l[j].role != FRESH)
      b->l[j].at = at[x++];
  SHMS__STEP();
  /* A fresh job's line counts the batch's joiners of it (look() zeroed it; a fresh line's count
   * serves nothing else): two passes over the lines, not one over them for each fresh job. */
  for (size_t j = 0; j < b->n; j++)
    if (b->l[j].role == JOIN_BATCH)
      b->l[b->l[j].first].count++;
  for (size_t j = 0; j < b->n; j++)
    if (b->l[j].role == JOIN_BATCH)
      b->l[j].count = b->l[b->l[j].first].count;
  for (size_t f = 0; f < b->nfresh; f++) {
    struct line *l = FRESH_LINE(b, f);
    if (l->count > 0)
      shms__store_64(&shms__slot_at(b->k, l->slot)->waiters,
                     SHMS__WAITERS(l->seq, SHMS__WAIT_OWNER | l->count));
  }
  for (size_t j = 0; j < b->n; j++) {
    struct line *l = &b->l[j];
    if (l->role != JOIN_LIVE)
      continue;
    SHMS__STEP();
    if (shms__join_add(b->k, l->slot, l->seq, &l->count) != SHMS_OK)
      return SHMS_EWOULDBLOCK;
    l->counted = 1;
  }
  return SHMS_OK;
}

/* Take every join of this try back; a live job whose last share was ours ends, nobody waiting. */
static void unjoin(struct shms *h, const struct batch *b) {
  for (size_t j = 0; j < b->n; j++) {
    struct line *l = &b->l[j];
    if (l->at < 0)
      continue;
    SHMS__STEP();
    if (shms__join_undo(h, b->k, l->at, l->slot, l->seq, l->counted))
      shms__job_abandon(h, b->k, l->slot, l->seq, SHMS_ECANCELLED);
    l->at = -1;
    l->counted = 0;
  }
}

/* The first fresh job the index refused (its reason into *reason), or n. Baton held. */
static size_t refused_at(const struct batch *b, int *reason) {
  for (size_t f = 0; f < b->nfresh; f++) {
    uint64_t w = shms__load_64(&shms__slot_at(b->k, FRESH_LINE(b, f)->slot)->word);
    if (SHMS__SLOT_STATE(w) == SHMS__SLOT_SETTLED) {
      *reason = SHMS__SLOT_REASON(w);
      return b->fresh[f];
    }
  }
  return b->n;
}

/* The index refused one job: end every other one the same way, unlinked, and collect them all;
 * no pass has run since they were published, so none was granted. Baton held. */
static void take_back(struct shms *h, const struct batch *b, int reason) {
  for (size_t f = 0; f < b->nfresh; f++) {
    const struct line *l = FRESH_LINE(b, f);
    if (shms__slot_settle(h, b->k, l->slot, l->seq, 1u << SHMS__SLOT_QUEUED, reason) ==
        SHMS__SETTLED_UNLINK) {
      SHMS__STEP();
      shms__index_attend(h, b->k, l->slot);
    }
  }
  for (size_t f = 0; f < b->nfresh; f++)
    shms__owned_collect(h, b->k, FRESH_LINE(b, f)->slot);
}

/* Publish and index the fresh jobs under the baton, then let the baton go: one pass, one kick.
 * A refusal leaves none of them. */
static int publish(struct shms *h, const struct batch *b, size_t *bad) {
  struct shms__cls *k = b->k;
  if (shms__baton_acquire(h, k, BATON_WAIT_NS) != SHMS_OK) {
    unclaim(h, b, b->nfresh, 1);
    return shms__fail(SHMS_EBUSY, "class %s: its dispatcher stayed busy; nothing was queued",
                      shms_class_name(k->id));
  }
  SHMS__STEP();
  shms__fast_queue(k, (int32_t)b->nfresh); /* counted queued before any can be granted */
  uint64_t now = shms__now_ns();           /* one arrival: every job waits from the same instant */
  for (size_t f = 0; f < b->nfresh; f++)
    shms__slot_at(k, FRESH_LINE(b, f)->slot)->enqueue_ns = now;
  for (size_t f = 0; f < b->nfresh; f++)
    shms__slot_publish(k, FRESH_LINE(b, f)->slot, FRESH_LINE(b, f)->seq);
  for (size_t f = 0; f < b->nfresh; f++) {
    SHMS__STEP();
    shms__index_attend(h, k, FRESH_LINE(b, f)->slot);
  }
  int reason = SHMS_OK;
  size_t j = refused_at(b, &reason);
  if (j < b->n) {
    take_back(h, b, reason);
    SHMS__STEP();
    shms__baton_done(h, k);
    if (reason == SHMS_EWOULDBLOCK)
      return reason; /* another job of its key went first: the batch looks again */
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
  for (size_t f = 0; f < b->nfresh; f++)
    shms__recheck_after_publish(h, k, FRESH_LINE(b, f)->slot, FRESH_LINE(b, f)->seq);
  return SHMS_OK;
}

/* One try, inside one operation: every job queued or joined, or none (SHMS_EWOULDBLOCK: a key's
 * live job changed under us, look again). */
static int attempt(struct shms *h, struct batch *b, size_t *bad) {
  look(b);
  int rc = b->nfresh > 0 ? claim(h, b) : SHMS_OK;
  if (rc != SHMS_OK)
    return rc;
  fill_all(h, b);
  rc = join_all(h, b, bad);
  if (rc != SHMS_OK) {
    unjoin(h, b);
    unclaim(h, b, b->nfresh, 1);
    return rc;
  }
  if (b->nfresh > 0 && (rc = publish(h, b, bad)) != SHMS_OK) {
    unjoin(h, b); /* publish took its jobs back */
    return rc;
  }
  for (size_t j = 0; j < b->n; j++)
    if (b->l[j].role != FRESH)
      shms__join_noted(h, b->k, b->l[j].slot, b->l[j].seq, b->l[j].count);
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
  for (int tries = 0; tries < KEYED_TRIES; tries++) {
    if (shms__op_enter_until(h, b->k, shms__deadline_real(deadline)) != SHMS_OK)
      return shms__held_still(deadline, "nothing was queued");
    int rc = attempt(h, b, bad);
    shms__op_leave(h, b->k);
    if (rc != SHMS_EWOULDBLOCK)
      return rc;
  }
  return shms__fail(SHMS_EBUSY,
                    "class %s: another job of one of the batch's keys always went first; nothing "
                    "was queued",
                    shms_class_name(b->k->id));
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
  if (flags & (SHMS_SUBMIT_SUPERSEDE | SHMS_SUBMIT_SUPERSEDE_RUNNING))
    return shms__fail(SHMS_EINVAL, "a batch's keyed jobs join or queue, they supersede nothing "
                                   "(supersede a key with shms_submit_key)");
  if (flags & ~(unsigned)SHMS_SUBMIT_RETRY_ONCE)
    return shms__fail(SHMS_EINVAL, "unknown submit flags 0x%x", flags);
  struct batch b = {
      .jobs = jobs, .n = n, .options = (flags & SHMS_SUBMIT_RETRY_ONCE) ? SHMS__OPT_RETRY_ONCE : 0};
  int rc = check_jobs(h, c, &b, tickets, &bad);
  size_t dups = 0;
  if (rc == SHMS_OK) {
    b.l = shms__malloc(n * sizeof *b.l);
    b.fresh = shms__malloc(n * sizeof *b.fresh);
    rc = b.l == NULL || b.fresh == NULL ? shms__fail(SHMS_ENOMEM, "no memory for the batch")
                                        : plan_keys(&b, &dups, &bad);
  }
  if (rc == SHMS_OK && n - dups > b.k->nslots)
    rc = shms__fail(SHMS_EQUEUEFULL,
                    "class %s: the batch's %zu jobs are more than its queue of %u request slots",
                    shms_class_name(c), n - dups, b.k->nslots);
  if (rc == SHMS_OK)
    rc = admit(h, &b, &bad);
  for (size_t j = 0; rc == SHMS_OK && j < n; j++)
    tickets[j] = (shms_ticket){
        .cls = (uint32_t)c, .slot = b.l[j].slot, .seq = b.l[j].seq, .incarnation = h->incarnation};
  free(b.l);
  free(b.fresh);
  if (failed != NULL)
    *failed = bad;
  return rc;
}

/*
 * Single-flight by key, the client's side (docs/protocol.md, "Keyed jobs"):
 * a keyed submit joins the live job of its key, or supersedes the key's
 * queued jobs, or queues one; and each waiter's share of a keyed job, taken
 * back as it collects the outcome.
 */
#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/error.h"
#include "client.h"

/* Submits lost to another job of the key (each then looks for it again) before giving up. */
#define KEYED_TRIES 100

int shms__check_key(const char *key) {
  if (key == NULL)
    return shms__fail(SHMS_EINVAL, "key is NULL");
  size_t n = strnlen(key, SHMS_KEY_MAX + 1);
  if (n == 0)
    return shms__fail(SHMS_EINVAL, "key is empty: 1..%d graphic ASCII bytes", SHMS_KEY_MAX);
  if (n > SHMS_KEY_MAX)
    return shms__fail(SHMS_EINVAL, "key is longer than %d bytes", SHMS_KEY_MAX);
  for (size_t j = 0; j < n; j++)
    if ((unsigned char)key[j] <= 0x20 || (unsigned char)key[j] >= 0x7f)
      return shms__fail(SHMS_EINVAL, "key byte %zu (0x%02x) is not graphic ASCII", j + 1,
                        (unsigned char)key[j]);
  return SHMS_OK;
}

/* Whether slot s holds a keyed job of key whose word w is still the one read. */
static int has_key(const struct shms__slot *s, const char *key) {
  return (shms__load_32(&s->options) & SHMS__OPT_KEYED) && strncmp(s->key, key, sizeof s->key) == 0;
}

int shms__key_find_live(const struct shms__cls *k, const char *key, uint32_t *index,
                        uint64_t *seq) {
  int found = 0;
  for (uint32_t i = 0; i < k->nslots; i++) {
    const struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    int live = (st == SHMS__SLOT_QUEUED && (w & SHMS__SLOT_INDEXED)) || st == SHMS__SLOT_GRANTED ||
               (st == SHMS__SLOT_RUNNING && !(w & SHMS__SLOT_CANCEL));
    if (!live || !has_key(s, key))
      continue;
    uint64_t q = shms__load_64(&s->seq);
    if ((uint32_t)q != SHMS__SLOT_SEQ(w) || SHMS__SLOT_SEQ(shms__load_64(&s->word)) != (uint32_t)q)
      continue; /* reused while we looked */
    if (!found || q > *seq) {
      *index = i;
      *seq = q;
      found = 1;
    }
  }
  return found;
}

/* The key's jobs that have not started end superseded; running ones are asked to stop if
 * running says so. */
static void supersede(struct shms *h, const struct shms__cls *k, const char *key, int running) {
  for (uint32_t i = 0; i < k->nslots; i++) {
    const struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (st < SHMS__SLOT_QUEUED || st == SHMS__SLOT_SETTLED || !has_key(s, key))
      continue;
    uint64_t q = shms__load_64(&s->seq);
    if ((uint32_t)q != SHMS__SLOT_SEQ(w))
      continue;
    /* The settle checks the sequence against the word: a reused slot is left alone. */
    if (shms__settle_and_kick(h, k, i, q, 1u << SHMS__SLOT_QUEUED | 1u << SHMS__SLOT_GRANTED,
                              SHMS_ESUPERSEDED) ||
        !running)
      continue;
    w = shms__load_64(&s->word);
    while (SHMS__SLOT_STATE(w) == SHMS__SLOT_RUNNING && SHMS__SLOT_SEQ(w) == (uint32_t)q &&
           !(w & SHMS__SLOT_CANCEL) && !shms__slot_flag(k, i, &w, SHMS__SLOT_CANCEL))
      ;
  }
}

static int check_flags(const shms_request *req, unsigned flags) {
  unsigned known = SHMS_SUBMIT_RETRY_ONCE | SHMS_SUBMIT_SUPERSEDE | SHMS_SUBMIT_SUPERSEDE_RUNNING;
  if (flags & ~known)
    return shms__fail(SHMS_EINVAL, "unknown submit flags 0x%x", flags & ~known);
  if ((flags & SHMS_SUBMIT_SUPERSEDE_RUNNING) && !(flags & SHMS_SUBMIT_SUPERSEDE))
    return shms__fail(SHMS_EINVAL, "SHMS_SUBMIT_SUPERSEDE_RUNNING needs SHMS_SUBMIT_SUPERSEDE");
  if (req->activation != NULL)
    return shms__fail(SHMS_EINVAL,
                      "a keyed job has no activation id: its key already names it among the "
                      "class's live jobs");
  return SHMS_OK;
}

/* One look inside an operation: supersede, or join the key's live job (SHMS_OK, *joined 1).
 * SHMS_ENOTFOUND when a new job is to be queued. */
static int look(struct shms *h, struct shms__cls *k, const shms_request *req, const char *key,
                unsigned flags, shms_ticket *ticket, int *joined) {
  int rc = shms__op_enter_until(h, k, shms__deadline_real(req->deadline_ns));
  if (rc != SHMS_OK)
    return shms__held_still(req->deadline_ns, "nothing was queued or joined");
  uint32_t i = 0;
  uint64_t seq = 0;
  rc = SHMS_ENOTFOUND;
  if (flags & SHMS_SUBMIT_SUPERSEDE)
    supersede(h, k, key, (flags & SHMS_SUBMIT_SUPERSEDE_RUNNING) != 0);
  else if (shms__key_find_live(k, key, &i, &seq))
    rc = shms__join(h, k, i, seq);
  shms__op_leave(h, k);
  if (rc == SHMS_EBUSY)
    return shms__fail(rc, "this process already waits on %d joined jobs (SHMS_KEY_JOINS_MAX)",
                      SHMS_KEY_JOINS_MAX);
  if (rc == SHMS_OK) {
    *ticket =
        (shms_ticket){.cls = (uint32_t)k->id, .slot = i, .seq = seq, .incarnation = h->incarnation};
    *joined = 1;
  }
  return rc;
}

int shms_submit_key(shms_t *h, const shms_request *req, const char *key, const void *payload,
                    size_t len, unsigned flags, shms_ticket *ticket, int *joined) {
  struct shms__cls *k = NULL;
  uint32_t quotas; /* the job's: a joiner takes no units of its own */
  int rc = shms__check_job(h, req, payload, len, ticket, &k, &quotas);
  if (rc != SHMS_OK)
    return rc;
  if ((rc = shms__check_key(key)) != SHMS_OK || (rc = check_flags(req, flags)) != SHMS_OK)
    return rc;
  int dummy;
  if (joined == NULL)
    joined = &dummy;
  *joined = 0;
  unsigned options = SHMS__OPT_KEYED |
                     ((flags & SHMS_SUBMIT_RETRY_ONCE) ? SHMS__OPT_RETRY_ONCE : 0) |
                     ((flags & SHMS_SUBMIT_SUPERSEDE) ? SHMS__OPT_SUPERSEDE : 0);
  for (int tries = 0; tries < KEYED_TRIES; tries++) {
    if ((rc = look(h, k, req, key, flags, ticket, joined)) != SHMS_ENOTFOUND)
      return rc;
    rc = shms__enqueue_slot(h, k, req, payload, len, options, key, quotas, ticket);
    if (rc != SHMS_EWOULDBLOCK) /* another job of the key went first: look for it again */
      return rc;
  }
  return shms__fail(SHMS_EBUSY, "class %s: key '%s': another job of it always went first",
                    shms_class_name(k->id), key);
}

void shms__job_collect(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq) {
  if (!(shms__load_32(&shms__slot_at(k, i)->options) & SHMS__OPT_KEYED)) {
    shms__owned_collect(h, k, i);
    return;
  }
  enum shms__share share = shms__share_of(h, k, i, seq);
  int last = share == SHMS__SHARE_JOINED  ? shms__joiner_leave(h, k, i, seq, 0)
             : share == SHMS__SHARE_OWNER ? shms__owned_leave(h, k, i, seq, 0)
                                          : 0;
  if (last)
    shms__job_abandon(h, k, i, seq, SHMS_ECANCELLED); /* ended: this collects it */
}

int shms__keyed_share(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq) {
  /* Said once: a joiner's record of leaving goes (its submitter's mark stays on the job). */
  if (shms__share_left(h, k, i, seq, 0) && SHMS__OP(h, k, shms__share_left(h, k, i, seq, 1)))
    return shms__fail(SHMS_ECANCELLED,
                      "this process left the job (cancelled its share): the job goes on for its "
                      "other waiters");
  enum shms__share share = shms__share_of(h, k, i, seq);
  if (share == SHMS__SHARE_OWNER || share == SHMS__SHARE_JOINED)
    return SHMS_OK;
  if (share == SHMS__SHARE_LEFT)
    return shms__fail(SHMS_ECANCELLED,
                      "this process left the job (cancelled its share): the job goes on for its "
                      "other waiters");
  return shms__fail(SHMS_ENOTFOUND, "this process no longer waits for the job (its outcome was "
                                    "taken): the ticket is retired");
}

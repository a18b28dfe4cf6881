/* Cancellation by ticket, from any attached process. */
#include <ck_pr.h>
#include <unistd.h>

#include "../core/held.h"
#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/identity.h"
#include "client.h"

/*
 * The ticket's slot no longer holds it. An accepted lease-mode request gave
 * it back: if its lease is still held, the request ended (accepted), and a
 * lease is never revoked. Else the ticket is stale or retired.
 */
static int cancel_held(const struct shms__cls *k, const shms_ticket *ticket) {
  struct shms__held held;
  if (!shms__held_find(k, ticket->slot, ticket->seq, &held))
    return shms__fail(SHMS_ENOTFOUND, "no live request for this ticket (stale or retired)");
  shms__detail("the request holds its lease on class %s cell %u: a lease cannot be cancelled",
               shms_class_name(k->id), held.cell);
  return 0;
}

/* A keyed job the caller waits for: its share goes; the job ends only with the last share.
 * -1 when the caller's is the last: the job is cancelled as any job is, and its wait (the
 * share kept) tells the outcome. */
static int leave_keyed(struct shms *h, struct shms__cls *k, uint32_t i, const shms_ticket *ticket,
                       enum shms__share share) {
  if (share == SHMS__SHARE_LEFT) {
    shms__detail("this process already left the job");
    return 0;
  }
  if (shms__share_close(k, i, ticket->seq, share))
    return -1;
  int last = share == SHMS__SHARE_JOINED ? shms__joiner_leave(h, k, i, ticket->seq, 1)
                                         : shms__owned_leave(h, k, i, ticket->seq, 1);
  if (last)
    shms__job_abandon(h, k, i, ticket->seq, SHMS_ECANCELLED);
  else
    shms__detail("left the job: it goes on for its other waiters");
  return 1;
}

/* Cancel the request; a running job is flagged for its worker, unless unstarted_only. */
static int cancel_op(struct shms *h, struct shms__cls *k, uint32_t i, const shms_ticket *ticket,
                     int unstarted_only) {
  struct shms__slot *s = shms__slot_at(k, i);
  int judged = 0;
  for (;;) {
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (SHMS__SLOT_SEQ(w) != (uint32_t)ticket->seq || shms__load_64(&s->seq) != ticket->seq ||
        st < SHMS__SLOT_QUEUED)
      return cancel_held(k, ticket);
    /* Another uid's request is for the segment's admins (docs/security.md); checked once the
     * slot is known to hold it, and again only if it was reused meanwhile (the seq test). */
    if (!judged) {
      /* Queued and indexed: the unlink will want the tenant record and the neighbours. Their
       * misses now overlap the check below (a system call) instead of following each other. */
      if (st == SHMS__SLOT_QUEUED && (w & SHMS__SLOT_INDEXED))
        shms__index_prefetch_links(k, i);
      uint32_t uid = shms__load_32(&s->uid);
      /* A joiner of another user's keyed job takes its own share back. */
      int rc =
          uid == (uint32_t)geteuid() || ((shms__load_32(&s->options) & SHMS__OPT_KEYED) &&
                                         shms__share_of(h, k, i, ticket->seq) != SHMS__SHARE_NONE)
              ? SHMS_OK
              : shms__admin_check(h, "cancel another user's request (uid %u)", uid);
      if (rc != SHMS_OK)
        return rc;
      judged = 1;
      continue; /* read the word again: the check took time */
    }
    if (st != SHMS__SLOT_SETTLED && (shms__load_32(&s->options) & SHMS__OPT_KEYED)) {
      /* Another process that waits on it not: an operator's cancel, of the job itself. */
      enum shms__share share = shms__share_of(h, k, i, ticket->seq);
      int rc = share != SHMS__SHARE_NONE ? leave_keyed(h, k, i, ticket, share) : -1;
      if (rc >= 0)
        return rc;
    }
    if (st == SHMS__SLOT_SETTLED) {
      int reason = SHMS__SLOT_REASON(w);
      if (reason == SHMS_ECANCELLED)
        shms__detail("the request was already cancelled");
      else if (reason == SHMS_OK)
        shms__detail("the request was already accepted");
      else
        shms__detail("the request had already ended: %s", shms_err_name(reason));
      return 0;
    }
    if (st == SHMS__SLOT_RUNNING && unstarted_only) {
      shms__detail("the job had started");
      return 0;
    }
    if (st == SHMS__SLOT_RUNNING) { /* a running job: raise the flag; its worker decides */
      if (w & SHMS__SLOT_CANCEL) {
        shms__detail("the job was already asked to cancel");
        return 0;
      }
      if (shms__slot_flag(k, i, &w, SHMS__SLOT_CANCEL))
        return 1;
      continue;
    }
    /* Queued or granted-but-unaccepted: one CAS decides against the dispatcher and the waiter.
     * The tenant record has had time to arrive: start on the treap's root, the last miss. */
    if (st == SHMS__SLOT_QUEUED && (w & SHMS__SLOT_INDEXED))
      shms__index_prefetch_root(k, i);
    if (shms__settle_and_kick(h, k, i, ticket->seq,
                              1u << SHMS__SLOT_QUEUED | 1u << SHMS__SLOT_GRANTED, SHMS_ECANCELLED))
      return 1;
  }
}

int shms_cancel(shms_t *h, const shms_ticket *ticket) {
  struct shms__cls *k = NULL;
  uint32_t i = 0;
  int rc = shms__check_ticket(h, ticket, NULL, NULL, &k, &i);
  if (rc != SHMS_OK)
    return rc;
  shms__index_prefetch_slot(k, i); /* all its lines at once, not one after another */
  return SHMS__OP(h, k, cancel_op(h, k, i, ticket, 0));
}

int shms_cancel_batch(shms_t *h, const shms_ticket *tickets, size_t n, size_t *cancelled) {
  size_t done = 0;
  int first = SHMS_OK;
  if (tickets == NULL && n > 0)
    return shms__fail(SHMS_EINVAL, "tickets is NULL");
  for (size_t j = 0; j < n; j++) {
    struct shms__cls *k = NULL;
    uint32_t i = 0;
    int rc = shms__check_ticket(h, &tickets[j], NULL, NULL, &k, &i);
    if (rc == SHMS_OK)
      rc = SHMS__OP(h, k, cancel_op(h, k, i, &tickets[j], 1));
    if (rc > 0)
      done++;
    else if (rc < 0 && rc != SHMS_ENOTFOUND && first == SHMS_OK)
      first = rc; /* a retired ticket is a job that ended and was collected: nothing to do */
  }
  if (cancelled != NULL)
    *cancelled = done;
  return first;
}

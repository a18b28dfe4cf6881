/*
 * The class's index: tenant records, the tenant ring, each tenant's two
 * treaps and the activation-id chains. Everything here runs under the
 * dispatcher baton and is derivable from the slots' state words: after a
 * crash tears it, shms__index_rebuild builds it again.
 */
#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/hbm.h"
#include "fair.h"
#include "order.h"
#include "quota.h"
#include "sched.h"
#include "tenant.h"

SHMS__TLS int shms__index_corrupt;

static uint32_t act_hash(const char *id) {
  uint32_t h = 2166136261u;
  for (; *id; id++)
    h = (h ^ (uint8_t)*id) * 16777619u;
  return h;
}

static uint32_t *act_bucket(const struct shms__cls *k, const char *id) {
  return &k->abuckets[act_hash(id) & (k->nab - 1)];
}

/* Whether another indexed request of the class carries activation id. */
static int act_taken(const struct shms__cls *k, const char *id) {
  uint32_t ref = *act_bucket(k, id);
  for (uint32_t steps = 0; ref >= 1 && ref <= k->nslots && steps < k->nslots; steps++) {
    struct shms__slot *s = shms__slot_at(k, ref - 1);
    if (strncmp(s->activation, id, sizeof s->activation) == 0)
      return 1;
    ref = s->act_next;
  }
  return 0;
}

static void act_unlink(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  if (s->activation[0] == '\0')
    return;
  uint32_t *link = act_bucket(k, s->activation);
  for (uint32_t steps = 0; *link >= 1 && *link <= k->nslots && steps < k->nslots; steps++) {
    if (*link == i + 1) {
      *link = s->act_next;
      return;
    }
    link = &shms__slot_at(k, *link - 1)->act_next;
  }
}

int shms__key_conflict(const struct shms__cls *k, uint32_t i) {
  const struct shms__slot *s = shms__slot_at(k, i);
  uint64_t seq = s->seq;
  int supersede = (s->options & SHMS__OPT_SUPERSEDE) != 0;
  /* A scan, paid by keyed jobs alone: the jobs of a key that matter are queued and running
   * ones, and only queued ones are indexed. Only the baton holder links, so of two jobs of a
   * key at most one gets past here; an unindexed one goes before us only if older (a job put
   * back in the queue keeps its place). */
  for (uint32_t j = 0; j < k->nslots; j++) {
    const struct shms__slot *o = shms__slot_at(k, j);
    uint64_t w = shms__load_64(&o->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (j == i || st < SHMS__SLOT_QUEUED || st == SHMS__SLOT_SETTLED ||
        !(o->options & SHMS__OPT_KEYED) || strncmp(o->key, s->key, sizeof o->key) != 0)
      continue;
    uint64_t oseq = shms__load_64(&o->seq);
    if (SHMS__SLOT_SEQ(shms__load_64(&o->word)) != SHMS__SLOT_SEQ(w))
      continue; /* reused while we looked: a new arrival, judged at its own link */
    if ((st == SHMS__SLOT_QUEUED && ((w & SHMS__SLOT_INDEXED) || oseq < seq)) ||
        st == SHMS__SLOT_GRANTED ||
        (st == SHMS__SLOT_RUNNING && !supersede && !(w & SHMS__SLOT_CANCEL)))
      return 1;
  }
  return 0;
}

/*
 * QUEUED, not yet indexed: refuse request seq (the one whose word the caller read, never a later
 * occupant) with reason, without ever having linked it. What the settle asks next is a kick (it
 * was never INDEXED: nothing to unlink), and the kick is ours: we hold the baton, and the pass
 * we run in re-checks before it lets go.
 */
static void refuse(struct shms *h, const struct shms__cls *k, uint32_t i, uint32_t seq,
                   int reason) {
  (void)shms__slot_settle(h, k, i, seq, 1u << SHMS__SLOT_QUEUED, reason);
}

/* Request i into the order of tenant record ref, and counted among its queued requests. */
static void into_order(const struct shms__cls *k, uint32_t i, uint32_t ref) {
  struct shms__slot *s = shms__slot_at(k, i);
  s->tenant = ref;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  shms__index_corrupt |= shms__order_insert(k, t, i);
  if (k->overtake_ns != 0)
    shms__index_corrupt |= shms__order_class_insert(k, i);
  SHMS__STEP();
  /* The class's count is read by observers (shms_observe) as the baton's holder writes it. */
  if (t->queued++ == 0)
    shms__store_32(&k->ctl->tenants_queued, k->ctl->tenants_queued + 1);
}

/* Request i out of its tenant's order (and the class's), no longer counted among its queued
 * requests. Returns the tenant record, 0 if the slot's was torn. */
static uint32_t out_of_order(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t ref = s->tenant;
  if (ref == 0 || ref > k->ntenants) {
    shms__index_corrupt = 1;
    return 0;
  }
  struct shms__tenant *t = shms__tenant_at(k, ref);
  shms__index_corrupt |= shms__order_remove(k, t, i);
  if (k->overtake_ns != 0)
    shms__index_corrupt |= shms__order_class_remove(k, i);
  if (t->queued > 0 && --t->queued == 0)
    shms__store_32(&k->ctl->tenants_queued, k->ctl->tenants_queued - 1);
  return ref;
}

/*
 * Index the request whose word w the caller read. Until our CAS marks it INDEXED it may be
 * cancelled, collected and its slot reused: the fields read before the CAS are that request's
 * only if the CAS finds the same sequence, and a later occupant is left to its own arrival.
 * Returns SHMS_OK (linked, or moved on: nothing to do) or the reason to refuse it.
 */
static int link_request(const struct shms__cls *k, uint32_t i, uint64_t w) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t seq = SHMS__SLOT_SEQ(w);
  if (s->activation[0] != '\0' && act_taken(k, s->activation))
    return SHMS_EDUPACT;
  if ((s->options & SHMS__OPT_KEYED) && shms__key_conflict(k, i))
    return SHMS_EWOULDBLOCK; /* neither counted nor recorded: its submitter joins instead */
  uint32_t ref = shms__tenant_get(k, s->tenant_name);
  if (ref == 0)
    return SHMS_EQUEUEFULL;
  /* Mark it indexed first: a cancel racing us then knows to ask for an unlink. */
  while (SHMS__SLOT_STATE(w) == SHMS__SLOT_QUEUED && !(w & SHMS__SLOT_INDEXED) &&
         SHMS__SLOT_SEQ(w) == seq) {
    if (shms__slot_mark_indexed(k, i, &w))
      break;
  }
  if (SHMS__SLOT_STATE(w) != SHMS__SLOT_QUEUED || SHMS__SLOT_SEQ(w) != seq) {
    shms__index_corrupt |= shms__tenant_put_if_idle(k, ref);
    return SHMS_OK;
  }
  SHMS__STEP();
  /* Indexed afresh: a grant finds again whether it fits. */
  shms__store_32(&s->quotas, s->quotas & ~SHMS__QUOTAS_PARKED);
  into_order(k, i, ref);
  if (s->activation[0] != '\0') {
    uint32_t *b = act_bucket(k, s->activation);
    s->act_next = *b;
    *b = i + 1;
  }
  SHMS__STEP();
  shms__index_corrupt |= shms__ring_update(k, ref);
  return SHMS_OK;
}

static void insert(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w) {
  int rc = link_request(k, i, w);
  if (rc != SHMS_OK)
    refuse(h, k, i, SHMS__SLOT_SEQ(w), rc);
}

int shms__index_reinsert(const struct shms__cls *k, uint32_t i) {
  SHMS__ASSERT(shms__index_owned(k));
  uint64_t w = shms__load_64(&shms__slot_at(k, i)->word);
  if (SHMS__SLOT_STATE(w) != SHMS__SLOT_QUEUED || (w & SHMS__SLOT_INDEXED))
    return 1; /* moved on: a new occupant comes with its own attention bit */
  return link_request(k, i, w) == SHMS_OK;
}

void shms__index_unlink(const struct shms__cls *k, uint32_t i) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__slot *s = shms__slot_at(k, i);
  if (s->quotas & SHMS__QUOTAS_PARKED) { /* out of every order already: only its activation id */
    act_unlink(k, i);
    shms__store_32(&s->quotas, s->quotas & ~SHMS__QUOTAS_PARKED);
    return;
  }
  uint32_t ref = out_of_order(k, i);
  if (ref == 0)
    return;
  act_unlink(k, i);
  shms__index_corrupt |= shms__ring_update(k, ref);
  shms__index_corrupt |= shms__tenant_put_if_idle(k, ref);
}

void shms__index_park(const struct shms__cls *k, uint32_t i, uint32_t full) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t ref = out_of_order(k, i);
  if (ref == 0)
    return;
  SHMS__STEP();
  /* Still INDEXED (its activation id stays live, a cancel asks for an unlink), but no tenant
   * record holds it: its tenant may go idle, and takes no turn for it. */
  s->tenant = 0;
  shms__store_32(&s->quotas, s->quotas | SHMS__QUOTAS_PARKED);
  k->ctl->quota_parked |= 1u << full;
  shms__index_corrupt |= shms__ring_update(k, ref);
  shms__index_corrupt |= shms__tenant_put_if_idle(k, ref);
}

/* Parked request i, whose quotas all have room now, back into its tenant's order at its old
 * place (its sequence, priority and deadline are its own). 0 when its tenant has no record
 * and the table has no room for one: it stays parked. */
static int unpark(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t ref = shms__tenant_get(k, s->tenant_name);
  if (ref == 0)
    return 0;
  shms__store_32(&s->quotas, s->quotas & ~SHMS__QUOTAS_PARKED);
  into_order(k, i, ref);
  SHMS__STEP();
  /* Back in the class's list by time too: the pass's own update of the end of overtaking, at
   * its end, counts it from there. */
  shms__index_corrupt |= shms__ring_update(k, ref);
  return 1;
}

void shms__index_unpark_room(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  uint32_t parked = k->ctl->quota_parked, room = 0;
  for (uint32_t q = 0; q < SHMS_QUOTAS_MAX; q++)
    if (shms__quota_room(k, q))
      room |= 1u << q;
  if ((parked & room) == 0)
    return; /* every quota a request is parked for is still full */
  /* A scan of the queue, only when a unit came free for a quota someone waits for. */
  uint32_t still = 0;
  for (uint32_t i = 0; i < k->nslots; i++) {
    struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word);
    uint32_t m = SHMS__QUOTAS_NAMED(s->quotas);
    if (SHMS__SLOT_STATE(w) != SHMS__SLOT_QUEUED || !(w & SHMS__SLOT_INDEXED) ||
        !(s->quotas & SHMS__QUOTAS_PARKED))
      continue;
    if ((m & ~room) != 0 || !unpark(k, i))
      still |= m & ~room ? m & ~room : m;
  }
  k->ctl->quota_parked = still;
}

void shms__index_attend(struct shms *h, const struct shms__cls *k, uint32_t i) {
  SHMS__ASSERT(shms__index_owned(k));
  uint64_t w = shms__load_64(&shms__slot_at(k, i)->word);
  uint32_t st = SHMS__SLOT_STATE(w);
  if (st == SHMS__SLOT_QUEUED && !(w & (SHMS__SLOT_INDEXED | SHMS__SLOT_LATE)))
    insert(h, k, i, w); /* a LATE request waits for its waiter to unpark it */
  else if (st == SHMS__SLOT_SETTLED && (w & SHMS__SLOT_INDEXED)) {
    shms__index_unlink(k, i);
    shms__slot_unindexed(k, i);
  }
}

void shms__index_attend_tenant(const struct shms__cls *k, uint32_t ref) {
  SHMS__ASSERT(shms__index_owned(k));
  if (ref == 0 || ref > k->ntenants || !(shms__tenant_at(k, ref)->flags & SHMS__TENANT_INUSE))
    return;
  if (k->timed) /* before the record may go: what its ended leases owe it */
    shms__index_corrupt |= shms__fair_settle(k, ref);
  shms__index_corrupt |= shms__ring_update(k, ref);
  shms__index_corrupt |= shms__tenant_put_if_idle(k, ref);
}

uint32_t shms__index_select(const struct shms__cls *k, uint32_t ref, uint64_t now) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__tenant *t = shms__tenant_at(k, ref);
  /* Aging first: an old enough request precedes every newer one of its tenant. */
  uint32_t oldest = shms__order_oldest(t);
  if (oldest > k->nslots) {
    shms__index_corrupt = 1;
    return 0;
  }
  if (oldest != 0) {
    uint64_t since = shms__slot_at(k, oldest - 1)->enqueue_ns;
    if (now >= since && now - since >= k->starvation_ns)
      return oldest;
  }
  return shms__order_best(t);
}

void shms__index_rebuild(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  /* A gathering request gathers again from nothing: its holder may have died halfway. */
  shms__gather_drop(k);
  uint32_t turns = shms__tenant_reset(k);
  for (uint32_t b = 0; b < k->nab; b++)
    k->abuckets[b] = 0;
  /* What the index held is indexed again at once, so that the ring can be given back in its
   * order; settled requests are simply let go, and arrivals keep their attention bits. */
  for (uint32_t i = 0; i < k->nslots; i++) {
    struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (!(w & SHMS__SLOT_INDEXED))
      continue;
    s->tenant = 0;
    if (st == SHMS__SLOT_SETTLED) {
      shms__slot_unindexed(k, i);
      continue;
    }
    while ((w & SHMS__SLOT_INDEXED) &&
           !ck_pr_cas_64_value(&s->word, w, w & ~(uint64_t)SHMS__SLOT_INDEXED, &w))
      ;
    if (SHMS__SLOT_STATE(w) == SHMS__SLOT_SETTLED && (w & SHMS__SLOT_COLLECTED))
      shms__slot_free(k, i);
    else if (!shms__index_reinsert(k, i))
      shms__hbm_set(&k->sattn, i); /* to be refused by the next pass */
  }
  (void)shms__ring_restore(k, turns); /* a torn ring's order is lost, the rest rebuilt */
  k->ctl->quota_parked = 0;           /* every parked request was indexed again: none is now */
  shms__index_corrupt = 0;
}

/* A hint that the line holding p will be read and then written soon. */
#define WARM(p) __builtin_prefetch((p), 1, 3)

void shms__index_prefetch_slot(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  WARM(&s->word);     /* the state word, the tenant ref, the treap links */
  WARM(&s->age_next); /* the age list's links */
  WARM(&s->grp_prev); /* the group and class lists' links, the uid */
}

#if defined(__SANITIZE_THREAD__)
/* The racy reads below are hints, and a data race to TSan, which sees the baton holder's plain
 * stores to the same fields: its builds go without them. */
void shms__index_prefetch_links(const struct shms__cls *k, uint32_t i) {
  (void)k;
  (void)i;
}

void shms__index_prefetch_root(const struct shms__cls *k, uint32_t i) {
  (void)k;
  (void)i;
}
#else
/* Slot ref's line holding field f, if ref (slot index + 1) is in range. */
#define WARM_LINK(k, ref, f)                                                                       \
  do {                                                                                             \
    uint32_t r_ = (ref);                                                                           \
    if (r_ >= 1 && r_ <= (k)->nslots)                                                              \
      WARM(&shms__slot_at((k), r_ - 1)->f);                                                        \
  } while (0)

void shms__index_prefetch_links(const struct shms__cls *k, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t ref = shms__load_32(&s->tenant);
  if (ref >= 1 && ref <= k->ntenants) {
    struct shms__tenant *t = shms__tenant_at(k, ref);
    WARM(&t->prio_root); /* the root, the count, the ring links */
    WARM(&t->age_tail);  /* the age list's ends, the first group */
  }
  /* What order_remove writes: each neighbour's link back to i. */
  WARM_LINK(k, shms__load_32(&s->age_prev), age_next);
  WARM_LINK(k, shms__load_32(&s->age_next), age_prev);
  WARM_LINK(k, shms__load_32(&s->grp_prev), grp_next);
  WARM_LINK(k, shms__load_32(&s->grp_next), grp_prev);
  if (k->overtake_ns != 0) {
    WARM_LINK(k, shms__load_32(&s->all_prev), all_next);
    WARM_LINK(k, shms__load_32(&s->all_next), all_prev);
  }
}

void shms__index_prefetch_root(const struct shms__cls *k, uint32_t i) {
  uint32_t ref = shms__load_32(&shms__slot_at(k, i)->tenant);
  if (ref < 1 || ref > k->ntenants)
    return;
  /* The treap walk starts at the root (its key and links), and a group's last request updates
   * its head's grp_tail: with one key, the root is that head. */
  uint32_t root = shms__load_32(&shms__tenant_at(k, ref)->prio_root);
  WARM_LINK(k, root, prio_left);
  WARM_LINK(k, root, grp_tail);
}
#endif

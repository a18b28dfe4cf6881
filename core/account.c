/* The tenant table: lock-free lookup, locked add, fold and policy (account.h). */
#include "account.h"

#include <ck_pr.h>
#include <sched.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/proc.h"
#include "sched.h"

#define NAME_WORDS SHMS__NAME_WORDS

/* A name as the record holds it: NUL-padded words, each read and written whole (lookups race
 * with a record being folded and made again). */
static void pack(const char *name, uint64_t w[NAME_WORDS]) {
  char buf[NAME_WORDS * 8] = {0};
  memcpy(buf, name, strnlen(name, SHMS_TENANT_MAX));
  memcpy(w, buf, sizeof buf);
}

static int name_is(const struct shms__account *a, const uint64_t w[NAME_WORDS]) {
  const uint64_t *have = (const uint64_t *)(const void *)a->name;
  for (int i = 0; i < NAME_WORDS; i++)
    if (shms__load_64((uint64_t *)&have[i]) != w[i])
      return 0;
  return 1;
}

static void name_set(struct shms__account *a, const uint64_t w[NAME_WORDS]) {
  uint64_t *have = (uint64_t *)(void *)a->name;
  for (int i = 0; i < NAME_WORDS; i++)
    shms__store_64(&have[i], w[i]);
}

static uint32_t *bucket_of(const struct shms__cls *k, const uint64_t w[NAME_WORDS], uint32_t kind) {
  uint32_t h = 2166136261u ^ kind; /* FNV-1a over the name's words */
  const unsigned char *p = (const unsigned char *)w;
  for (size_t i = 0; i < sizeof(uint64_t) * NAME_WORDS && p[i] != 0; i++)
    h = (h ^ p[i]) * 16777619u;
  return &k->abkt[h & (k->nabkt - 1)];
}

static int valid_ref(const struct shms__cls *k, uint32_t ref) {
  return ref >= 1 && ref <= k->naccts;
}

static int is(const struct shms__account *a, const uint64_t w[NAME_WORDS], uint32_t kind) {
  return shms__load_32((uint32_t *)&a->state) == SHMS__ACCT_LIVE &&
         (shms__load_32((uint32_t *)&a->flags) & SHMS__ACCT_TEAM) == kind && name_is(a, w);
}

/* Bounded walk of one chain: a torn one (a holder died mid-change) cannot loop us. */
static uint32_t find(const struct shms__cls *k, const uint64_t w[NAME_WORDS], uint32_t kind) {
  uint32_t ref = shms__load_32(bucket_of(k, w, kind));
  for (uint32_t steps = 0; valid_ref(k, ref) && steps < k->naccts; steps++) {
    struct shms__account *a = shms__account_at(k, ref);
    if (is(a, w, kind))
      return ref;
    ref = shms__load_32(&a->hash_next);
  }
  return 0;
}

/* Process-local: searches of a full table for records to fold (core/account.h). */
uint64_t shms__account_searches;

/* Whether a record's references are counted for fold_some: one with a policy (or `_other`) is
 * never folded. A policy is only ever added, under the lock: a record that gets one while it has
 * no reference stays counted as one to fold, which costs one search that finds it is not. */
static int fold_counted(const struct shms__account *a) {
  return !(shms__load_32((uint32_t *)&a->flags) & (SHMS__ACCT_POLICY | SHMS__ACCT_OTHER));
}

/* A reference given back. A record left with none may be folded: counted, so that a search is
 * made for it (fold_some). */
static void unref(const struct shms__cls *k, struct shms__account *a) {
  bool none;
  ck_pr_dec_32_zero(&a->refs, &none);
  if (none && fold_counted(a))
    ck_pr_inc_32(&k->actl->unrefs);
}

/* A reference taken; the references before it. A record that had none is counted as one fewer to
 * fold (fold_some). */
static uint32_t ref_up(const struct shms__cls *k, struct shms__account *a) {
  uint32_t before = ck_pr_faa_32(&a->refs, 1);
  if (before == 0 && fold_counted(a))
    ck_pr_inc_32(&k->actl->rerefs);
  return before;
}

/* Take a reference on ref if it is still name's: a record being folded refuses it (the reference
 * given back, which counts it again as one to fold if it had none). */
static int try_ref(const struct shms__cls *k, uint32_t ref, const uint64_t w[NAME_WORDS]) {
  struct shms__account *a = shms__account_at(k, ref);
  uint32_t before = ref_up(k, a);
  if (!(before & SHMS__ACCT_FOLDING) && is(a, w, SHMS__KIND_TENANT))
    return 1;
  unref(k, a);
  return 0;
}

/* ---- the lock ---- */

static uint64_t lock_word(const struct shms__cls *k) { return (1ull << 32) | k->h->owner; }

/* Build the chains and the free list again from the records' states: what a holder that died
 * mid-change leaves is then a record linked twice or not at all, or one half made. */
static void rebuild(const struct shms__cls *k) {
  struct shms__accounts_ctl *ctl = k->actl;
  for (uint32_t b = 0; b < k->nabkt; b++)
    shms__store_32(&k->abkt[b], 0);
  ctl->free_head = 0;
  ctl->used = 0;
  /* The next search is made, whatever the counts say: the dead holder may have died between a
   * search and its idle_base. */
  ctl->idle_base = shms__load_32(&ctl->unrefs) - shms__load_32(&ctl->rerefs) - k->naccts;
  for (uint32_t i = k->naccts; i-- > 0;) {
    struct shms__account *a = &k->accts[i];
    uint64_t w[NAME_WORDS];
    memcpy(w, a->name, sizeof w);
    if (a->state == SHMS__ACCT_LIVE && a->name[0] != '\0' && a->name[SHMS_TENANT_MAX] == '\0') {
      uint32_t *b = bucket_of(k, w, a->flags & SHMS__ACCT_TEAM);
      shms__store_32(&a->hash_next, *b);
      shms__store_32(b, i + 1);
      ctl->used++;
    } else {
      shms__store_32(&a->state, SHMS__ACCT_FREE);
      shms__store_32(&a->hash_next, ctl->free_head);
      ctl->free_head = i + 1;
    }
  }
}

static int lock(const struct shms__cls *k, uint64_t timeout_ns) {
  uint64_t until = shms__real_now_ns() + timeout_ns, me = lock_word(k);
  for (;;) {
    uint64_t cur = shms__load_64(&k->actl->lock);
    if (cur == 0 && ck_pr_cas_64(&k->actl->lock, 0, me))
      return SHMS_OK;
    if (cur != 0 && cur != me && shms__owner_dead(k->h, (uint32_t)cur) &&
        ck_pr_cas_64(&k->actl->lock, cur, me)) {
      rebuild(k);
      /* A holder that died moving a tally left the sequence odd: one move's count lost. */
      if (k->actl->tally_seq & 1)
        shms__store_64(&k->actl->tally_seq, k->actl->tally_seq + 1);
      return SHMS_OK;
    }
    if (shms__real_now_ns() >= until)
      return shms__fail(SHMS_ETIMEDOUT, "the tenant table is locked by process entry %u",
                        SHMS__OWNER_INDEX((uint32_t)cur));
    sched_yield(); /* a live holder's change is a few stores */
  }
}

static void unlock(const struct shms__cls *k) { shms__fas_64(&k->actl->lock, 0); }

int shms__accounts_lock(const struct shms__cls *k, uint64_t timeout_ns) {
  return lock(k, timeout_ns);
}

void shms__accounts_unlock(const struct shms__cls *k) { unlock(k); }

/* ---- adding and folding, under the lock ---- */

static void unlink_record(const struct shms__cls *k, uint32_t ref) {
  struct shms__account *a = shms__account_at(k, ref);
  uint64_t w[NAME_WORDS];
  memcpy(w, a->name, sizeof w);
  uint32_t *link = bucket_of(k, w, a->flags & SHMS__ACCT_TEAM);
  for (uint32_t steps = 0; valid_ref(k, *link) && steps < k->naccts; steps++) {
    if (*link == ref) {
      shms__store_32(link, a->hash_next);
      return;
    }
    link = &shms__account_at(k, *link)->hash_next;
  }
}

static void link_record(const struct shms__cls *k, uint32_t ref, const uint64_t w[NAME_WORDS],
                        uint32_t kind) {
  struct shms__account *a = shms__account_at(k, ref);
  uint32_t *b = bucket_of(k, w, kind);
  shms__store_32(&a->hash_next, *b);
  ck_pr_fence_store(); /* a lookup that reaches it finds it whole */
  shms__store_32(b, ref);
}

/* The least recently active record that may be folded, marked FOLDING; 0 for none. */
static uint32_t fold_candidate(const struct shms__cls *k) {
  for (;;) {
    uint32_t best = 0;
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = 0; i < k->naccts; i++) {
      const struct shms__account *a = &k->accts[i];
      if (a->state != SHMS__ACCT_LIVE || (a->flags & (SHMS__ACCT_POLICY | SHMS__ACCT_OTHER)) ||
          shms__load_32((uint32_t *)&a->refs) != 0)
        continue;
      if (a->active_ns < oldest) {
        oldest = a->active_ns;
        best = i + 1;
      }
    }
    if (best == 0 || ck_pr_cas_32(&shms__account_at(k, best)->refs, 0, SHMS__ACCT_FOLDING))
      return best;
    /* A lookup took it meanwhile: look again. */
  }
}

/* The end of a fold: what a lookup added to the record's count meanwhile, it takes back. */
static void folded(const struct shms__cls *k, uint32_t ref) {
  k->actl->folded++;
  ck_pr_sub_32(&shms__account_at(k, ref)->refs, SHMS__ACCT_FOLDING);
}

/* Make `_other` out of the least recently active record (its usage the first kept there). */
static uint32_t make_other(const struct shms__cls *k) {
  uint32_t o = fold_candidate(k);
  if (o == 0)
    return 0;
  struct shms__account *a = shms__account_at(k, o);
  unlink_record(k, o);
  uint64_t w[NAME_WORDS];
  pack("_other", w);
  name_set(a, w);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    shms__store_64(&a->cls[c].vt, 0);
    shms__store_64(&a->cls[c].est_ns, 0);
  }
  shms__store_32(&a->flags, SHMS__ACCT_OTHER | SHMS__ACCT_POLICY);
  shms__store_32(&a->weight, 1);
  shms__store_32(&a->team, 0);
  link_record(k, o, w, SHMS__KIND_TENANT);
  k->actl->other = o;
  folded(k, o);
  return o;
}

static int foldable(const struct shms__account *a) {
  return a->state == SHMS__ACCT_LIVE && !(a->flags & (SHMS__ACCT_POLICY | SHMS__ACCT_OTHER)) &&
         shms__load_32((uint32_t *)&a->refs) == 0;
}

/* What a folded record kept of one class, added to `_other`'s: atomic adds, since `_other`'s
 * figures of a class also grow by its baton holder's (a tenant of that name) and tally moves. */
static void fold_class(struct shms__account_class *o, struct shms__account_class *a) {
  ck_pr_add_64(&o->cell_ns, a->cell_ns + shms__fas_64(&a->fast_ns, 0));
  ck_pr_add_64(&o->grants, a->grants);
  ck_pr_add_64(&o->wait_ns, a->wait_ns);
  ck_pr_add_64(&o->fast_grants, shms__fas_64(&a->fast_grants, 0));
  if (a->max_wait_ns > shms__load_64(&o->max_wait_ns))
    shms__store_64(&o->max_wait_ns, a->max_wait_ns);
}

/*
 * Fold the least recently active records with no policy and no reference into `_other` (their
 * cell-time added there), onto the free list: the oldest eighth of their span of activity at
 * once, so that a table kept full by new tenants walks its records once per many adds, not per
 * add. Returns how many were folded; *left, how many it found foldable and did not fold.
 */
static uint32_t fold_oldest(const struct shms__cls *k, uint32_t *left) {
  struct shms__accounts_ctl *ctl = k->actl;
  uint32_t other = ctl->other, found = 0;
  *left = 0;
  if ((!valid_ref(k, other) || !(shms__account_at(k, other)->flags & SHMS__ACCT_OTHER)) &&
      (other = make_other(k)) == 0)
    return 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (uint32_t i = 0; i < k->naccts; i++)
    if (foldable(&k->accts[i])) {
      found++;
      lo = k->accts[i].active_ns < lo ? k->accts[i].active_ns : lo;
      hi = k->accts[i].active_ns > hi ? k->accts[i].active_ns : hi;
    }
  if (lo == UINT64_MAX)
    return 0;
  uint64_t upto = lo + (hi - lo) / 8;
  uint32_t n = 0;
  struct shms__account *o = shms__account_at(k, other);
  for (uint32_t i = 0; i < k->naccts; i++) {
    struct shms__account *a = &k->accts[i];
    /* A lookup may take one meanwhile: the CAS leaves it to it. */
    if (!foldable(a) || a->active_ns > upto || !ck_pr_cas_32(&a->refs, 0, SHMS__ACCT_FOLDING))
      continue;
    for (int c = 0; c < SHMS_CLASS_COUNT; c++) /* a fast-path charge not yet taken too */
      fold_class(&o->cls[c], &a->cls[c]);
    unlink_record(k, i + 1);
    shms__store_32(&a->state, SHMS__ACCT_FREE);
    shms__store_32(&a->hash_next, ctl->free_head);
    ctl->free_head = i + 1;
    ctl->used--;
    folded(k, i + 1);
    n++;
  }
  *left = found > n ? found - n : 0;
  return n;
}

static void init_record(const struct shms__cls *k, uint32_t ref, const uint64_t w[NAME_WORDS],
                        uint32_t flags, uint32_t refs) {
  struct shms__account *a = shms__account_at(k, ref);
  memset(a->cls, 0, sizeof a->cls);
  name_set(a, w);
  shms__store_32(&a->flags, flags);
  shms__store_32(&a->weight, 1);
  shms__store_32(&a->team, 0);
  shms__store_32(&a->refs, refs);
  shms__store_64(&a->active_ns, shms__now_ns());
  ck_pr_fence_store(); /* a lookup that sees it LIVE sees it whole */
  shms__store_32(&a->state, SHMS__ACCT_LIVE);
  link_record(k, ref, w, flags & SHMS__ACCT_TEAM);
  k->actl->used++;
  if (refs == 0 && fold_counted(a)) /* made with no reference: one to fold */
    ck_pr_inc_32(&k->actl->unrefs);
}

/*
 * fold_oldest, unless the counts say that nothing is left to fold: records left without
 * references, less those referenced again, less what the last search left (idle_base). A table
 * full of records in use (more tenants with work than records) would otherwise be searched whole
 * for every tenant new to it, in vain, or after every tenant whose work ended and came back.
 *
 * The counts are read around the search so that a record that changes during it can only make
 * the next estimate too high (one search more, which counts again), never too low: unrefs before
 * it (a record left during it, which the search may have seen, counts again), rerefs after it (a
 * record referenced again during it, which the search may have missed, is taken off). A process
 * that dies between a reference's change and its count leaves the estimate one off until the
 * next search counts again: one search too many, or a record left unfolded until another record
 * is left without references.
 */
static uint32_t fold_some(const struct shms__cls *k) {
  struct shms__accounts_ctl *ctl = k->actl;
  uint32_t unrefs = shms__load_32(&ctl->unrefs);
  if ((int32_t)(unrefs - shms__load_32(&ctl->rerefs) - ctl->idle_base) <= 0)
    return 0;
  shms__account_searches++;
  uint32_t left, n = fold_oldest(k, &left);
  ctl->idle_base = unrefs - shms__load_32(&ctl->rerefs) - left;
  return n;
}

/* A free record (folding the least recently active one when none is), or 0. */
static uint32_t take_free(const struct shms__cls *k) {
  struct shms__accounts_ctl *ctl = k->actl;
  if (ctl->free_head == 0 && fold_some(k) == 0)
    return 0;
  uint32_t ref = ctl->free_head;
  if (!valid_ref(k, ref))
    return 0;
  ctl->free_head = shms__account_at(k, ref)->hash_next;
  return ref;
}

uint32_t shms__account_get(const struct shms__cls *k, const char *name, uint64_t timeout_ns) {
  uint64_t w[NAME_WORDS];
  pack(name, w);
  uint32_t ref = find(k, w, SHMS__KIND_TENANT);
  if (ref != 0 && try_ref(k, ref, w)) {
    shms__store_64(&shms__account_at(k, ref)->active_ns, shms__now_ns());
    return ref;
  }
  if (k->h == NULL || k->h->owner == 0 || lock(k, timeout_ns) != SHMS_OK)
    return 0;
  ref = find(k, w, SHMS__KIND_TENANT);
  if (ref != 0 && try_ref(k, ref, w)) {
    shms__store_64(&shms__account_at(k, ref)->active_ns, shms__now_ns());
  } else if ((ref = take_free(k)) != 0) {
    init_record(k, ref, w, SHMS__KIND_TENANT, 1);
  }
  unlock(k);
  return ref;
}

/* The record this thread last looked up: a loop of one tenant's leases finds it again without
 * hashing its name (checked as a chain walk checks it: live, and still the name's). */
static SHMS__TLS struct {
  const struct shms__account *table;
  uint32_t ref;
} last_lookup;

uint32_t shms__account_lookup(const struct shms__cls *k, const uint64_t *w, uint64_t timeout_ns) {
  uint32_t ref = last_lookup.ref;
  if (last_lookup.table == k->accts && valid_ref(k, ref) &&
      is(shms__account_at(k, ref), w, SHMS__KIND_TENANT))
    return ref;
  if ((ref = find(k, w, SHMS__KIND_TENANT)) == 0) {
    char name[NAME_WORDS * 8];
    memcpy(name, w, sizeof name);
    name[SHMS_TENANT_MAX] = '\0';
    ref = shms__account_get(k, name, timeout_ns);
    shms__account_put(k, ref);
  }
  last_lookup.table = k->accts;
  last_lookup.ref = ref;
  return ref;
}

int shms__account_take_tally(const struct shms__cls *k, struct shms__tally *t,
                             uint64_t timeout_ns) {
  const uint64_t *name = t->name;
  int rc = lock(k, timeout_ns);
  if (rc != SHMS_OK)
    return rc;
  uint32_t ref = find(k, name, SHMS__KIND_TENANT);
  if (ref == 0 && (ref = take_free(k)) != 0)
    init_record(k, ref, name, SHMS__KIND_TENANT, 0);
  if (ref == 0) {
    unlock(k);
    return SHMS_EQUEUEFULL;
  }
  struct shms__account *a = shms__account_at(k, ref);
  uint64_t *seq = &k->actl->tally_seq;
  shms__store_64(seq, *seq + 1);
  ck_pr_fence_store();
  SHMS__STEP(); /* a death here leaves the sequence odd: the lock's next taker makes it even */
  ck_pr_add_64(&a->cls[k->id].fast_grants, shms__fas_64(&t->grants, 0));
  uint64_t n = shms__fas_64(&t->pending_n, 0);
  shms__account_charge_fast(k, ref, n, shms__fas_64(&t->pending_ns, 0));
  shms__store_64(&a->active_ns, shms__now_ns());
  ck_pr_fence_store();
  shms__store_64(seq, *seq + 1);
  unlock(k);
  return SHMS_OK;
}

void shms__account_put(const struct shms__cls *k, uint32_t ref) {
  if (valid_ref(k, ref))
    unref(k, shms__account_at(k, ref));
}

uint32_t shms__account_weight(const struct shms__cls *k, uint32_t ref) {
  if (!valid_ref(k, ref))
    return 1;
  uint32_t w = shms__load_32(&shms__account_at(k, ref)->weight);
  return w >= 1 && w <= SHMS_WEIGHT_MAX ? w : 1;
}

/* name's record of kind, made (with a policy) if absent: 0 when there is no room. */
static uint32_t with_policy(const struct shms__cls *k, const char *name, uint32_t kind) {
  uint64_t w[NAME_WORDS];
  pack(name, w);
  uint32_t ref = find(k, w, kind);
  if (ref == 0 && (ref = take_free(k)) != 0)
    init_record(k, ref, w, kind | SHMS__ACCT_POLICY, 0);
  if (ref != 0) {
    struct shms__account *a = shms__account_at(k, ref);
    shms__store_32(&a->flags, a->flags | SHMS__ACCT_POLICY);
  }
  return ref;
}

uint32_t shms__account_team(const struct shms__cls *k, uint32_t ref) {
  if (!valid_ref(k, ref))
    return 0;
  uint32_t team = shms__load_32(&shms__account_at(k, ref)->team);
  if (!valid_ref(k, team))
    return 0;
  const struct shms__account *t = shms__account_at(k, team);
  return shms__load_32((uint32_t *)&t->state) == SHMS__ACCT_LIVE &&
                 (shms__load_32((uint32_t *)&t->flags) & SHMS__ACCT_TEAM)
             ? team
             : 0;
}

void shms__account_hold(const struct shms__cls *k, uint32_t ref) {
  if (valid_ref(k, ref))
    (void)ref_up(k, shms__account_at(k, ref));
}

int shms__account_set(const struct shms__cls *k, const struct shms__policy_change *p,
                      uint64_t timeout_ns) {
  int rc = lock(k, timeout_ns);
  if (rc != SHMS_OK)
    return rc;
  /* The team first: a tenant's record is not made for a team the table has no room for. */
  uint32_t team =
      p->team != NULL && p->team[0] != '\0' ? with_policy(k, p->team, SHMS__KIND_TEAM) : 0;
  uint32_t ref =
      team != 0 || p->team == NULL || p->team[0] == '\0' ? with_policy(k, p->name, p->kind) : 0;
  if (ref == 0) {
    rc = SHMS_EQUEUEFULL;
  } else {
    struct shms__account *a = shms__account_at(k, ref);
    if (p->weight != 0)
      shms__store_32(&a->weight, p->weight);
    if (p->team != NULL)
      shms__store_32(&a->team, team);
    ck_pr_inc_64(&k->actl->policy_gen);
  }
  unlock(k);
  if (rc == SHMS_EQUEUEFULL)
    return shms__fail(rc,
                      "the tenant table is full: its %u records all have a policy or are in use "
                      "(create the segment with a larger --tenant-table)",
                      k->naccts);
  return rc;
}

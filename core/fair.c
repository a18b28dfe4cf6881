/* Fairness by cell-time: the heap of tenants with a turn, charges and their corrections (fair.h).
 */
#include "fair.h"

#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/hbm.h"
#include "account.h"
#include "sched.h"
#include "tenant.h"

/* How long a releaser waits for the tenant table's lock to add a tenant it charges (a live
 * holder's change is a few stores). */
#define FAST_LOOKUP_NS (10ull * 1000 * 1000)

static int valid_ref(const struct shms__cls *k, uint32_t ref) {
  return ref >= 1 && ref <= k->ntenants;
}

/* ns of cell-time as a charge of a tenant of weight w. */
static uint64_t charge(uint64_t ns, uint32_t w) {
  unsigned __int128 c = (unsigned __int128)ns * SHMS__FAIR_SCALE / (w >= 1 ? w : 1);
  return c > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)c;
}

int shms__fair_before(const struct shms__tenant *a, const struct shms__tenant *b) {
  uint64_t qa = a->vt >> SHMS__FAIR_QUANTUM_SHIFT, qb = b->vt >> SHMS__FAIR_QUANTUM_SHIFT;
  return qa != qb ? qa < qb : a->turn < b->turn;
}

static void place(const struct shms__cls *k, uint32_t pos, uint32_t ref) {
  k->theap[pos] = ref;
  shms__tenant_at(k, ref)->heap_pos = pos + 1;
}

/* Move the member at pos up or down to its place. 1 if a link read is out of range. */
static int sift(const struct shms__cls *k, uint32_t pos) {
  uint32_t n = k->ctl->heap_len, ref = k->theap[pos];
  if (!valid_ref(k, ref))
    return 1;
  const struct shms__tenant *t = shms__tenant_at(k, ref);
  while (pos > 0) {
    uint32_t up = (pos - 1) / 2, pref = k->theap[up];
    if (!valid_ref(k, pref))
      return 1;
    if (!shms__fair_before(t, shms__tenant_at(k, pref)))
      break;
    place(k, pos, pref);
    pos = up;
  }
  for (;;) {
    uint32_t child = 2 * pos + 1;
    if (child >= n)
      break;
    uint32_t cref = k->theap[child];
    if (child + 1 < n) {
      uint32_t rref = k->theap[child + 1];
      if (!valid_ref(k, cref) || !valid_ref(k, rref))
        return 1;
      if (shms__fair_before(shms__tenant_at(k, rref), shms__tenant_at(k, cref))) {
        child++;
        cref = rref;
      }
    }
    if (!valid_ref(k, cref))
      return 1;
    if (!shms__fair_before(shms__tenant_at(k, cref), t))
      break;
    place(k, pos, cref);
    pos = child;
  }
  place(k, pos, ref);
  return 0;
}

/* ref's place in the heap, checked both ways; UINT32_MAX when it is not (or the heap is torn). */
static uint32_t pos_of(const struct shms__cls *k, uint32_t ref) {
  uint32_t pos = shms__tenant_at(k, ref)->heap_pos;
  if (pos == 0 || pos > k->ctl->heap_len || k->theap[pos - 1] != ref)
    return UINT32_MAX;
  return pos - 1;
}

uint32_t shms__fair_first(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  return k->ctl->heap_len != 0 ? k->theap[0] : 0;
}

int shms__fair_join(const struct shms__cls *k, uint32_t ref) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (t->heap_pos != 0)
    return pos_of(k, ref) == UINT32_MAX;
  uint32_t n = ctl->heap_len;
  if (n >= k->ntenants)
    return 1;
  if (t->vt < ctl->vtime)
    t->vt = ctl->vtime;
  t->turn = ++ctl->turns;
  ctl->heap_len = n + 1;
  place(k, n, ref);
  return sift(k, n);
}

int shms__fair_leave(const struct shms__cls *k, uint32_t ref) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (t->heap_pos == 0)
    return 0;
  uint32_t pos = pos_of(k, ref);
  t->heap_pos = 0;
  if (pos == UINT32_MAX)
    return 1;
  uint32_t last = k->theap[--k->ctl->heap_len];
  if (pos == k->ctl->heap_len)
    return 0;
  if (!valid_ref(k, last))
    return 1;
  place(k, pos, last);
  return sift(k, pos);
}

/* Every charge moved back alike, once the class's virtual time nears the top of its range; the
 * heap is then put in order again (a charge clamped at 0 may change places with another). */
static int rebase(const struct shms__cls *k) {
  struct shms__class_ctl *ctl = k->ctl;
  ctl->vtime -= SHMS__FAIR_REBASE;
  ctl->rebases++;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    struct shms__tenant *t = &k->tenants[i];
    t->vt = t->vt > SHMS__FAIR_REBASE ? t->vt - SHMS__FAIR_REBASE : 0;
  }
  int torn = 0;
  for (uint32_t pos = ctl->heap_len / 2; pos-- > 0;)
    torn |= sift(k, pos);
  return torn;
}

int shms__fair_granted(const struct shms__cls *k, uint32_t ref, uint32_t c) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (t->vt > ctl->vtime)
    ctl->vtime = t->vt;
  uint64_t est = t->est_ns != 0 ? t->est_ns : ctl->hold_est_ns;
  shms__store_64(&k->cells[c].charged_ns, est);
  t->vt += charge(est, t->weight);
  t->turn = ++ctl->turns;
  int torn = ctl->vtime >= SHMS__FAIR_REBASE_AT ? rebase(k) : 0;
  if (t->heap_pos == 0)
    return torn;
  uint32_t pos = pos_of(k, ref);
  return torn | (pos == UINT32_MAX ? 1 : sift(k, pos));
}

void shms__fair_ended(const struct shms__cls *k, uint32_t ref, int used, uint64_t held_ns,
                      uint64_t charged_ns) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  ck_pr_add_64(&t->corr_ns, held_ns - charged_ns); /* two's complement: may be negative */
  if (used) {
    ck_pr_add_64(&t->done_ns, held_ns);
    ck_pr_inc_32(&t->done_n);
  }
}

/* est_ns taken toward the average of n leases that held held_ns in all: an average over the last
 * few leases, so that a tenant whose leases change length is charged by the new length within a
 * few of them. The class's estimate (for a tenant with none) follows the latest. */
static void estimate(const struct shms__cls *k, uint64_t *est_ns, uint64_t held, uint32_t n) {
  if (n == 0)
    return;
  uint64_t avg = held / n;
  *est_ns = *est_ns != 0 ? (3 * *est_ns + avg) / 4 : avg;
  k->ctl->hold_est_ns = *est_ns;
}

int shms__fair_settle(const struct shms__cls *k, uint32_t ref) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__tenant *t = shms__tenant_at(k, ref);
  int64_t corr = (int64_t)ck_pr_fas_64(&t->corr_ns, 0);
  uint32_t n = ck_pr_fas_32(&t->done_n, 0);
  uint64_t held = ck_pr_fas_64(&t->done_ns, 0);
  t->cell_ns += held;
  estimate(k, &t->est_ns, held, n);
  if (corr == 0)
    return 0;
  if (corr > 0) {
    t->vt += charge((uint64_t)corr, t->weight);
  } else {
    uint64_t back = charge((uint64_t)-corr, t->weight);
    t->vt -= t->vt > back ? back : t->vt;
  }
  if (t->heap_pos == 0)
    return 0;
  uint32_t pos = pos_of(k, ref);
  return pos == UINT32_MAX ? 1 : sift(k, pos);
}

void shms__fair_fast_ended(const struct shms__cls *k, const uint64_t *name, uint64_t held_ns) {
  char buf[SHMS__NAME_WORDS * 8];
  memcpy(buf, name, sizeof buf);
  buf[SHMS_TENANT_MAX] = '\0';
  uint32_t ref = buf[0] != '\0' ? shms__account_lookup(k, buf, FAST_LOOKUP_NS) : 0;
  if (ref == 0 || k->id < 0)
    return; /* the table full of records with a policy, or its lock held too long */
  struct shms__account_class *a = &shms__account_at(k, ref)->cls[k->id];
  ck_pr_add_64(&a->fast_ns, held_ns);
  ck_pr_inc_32(&a->fast_n);
  /* A mark still set is not taken yet: its taker's exchange of the sums, after it takes the mark,
   * comes after our adds (atomic, and ordered before this look: free on x86). The look saves a
   * locked write to a line every contended release would share. */
  ck_pr_fence_atomic_load();
  if (!shms__hbm_test(k->aattn, k->naccts, ref - 1))
    shms__hbm_set(k->aattn, k->naccts, ref - 1);
}

/* The charge an account holds for k, moved back as every charge of the class was since it was
 * left there. */
static uint64_t stored_vt(const struct shms__cls *k, const struct shms__account_class *a) {
  uint64_t behind = k->ctl->rebases - shms__load_64((uint64_t *)&a->rebases);
  uint64_t vt = shms__load_64((uint64_t *)&a->vt);
  return behind >= 2 || vt < behind * SHMS__FAIR_REBASE ? 0 : vt - behind * SHMS__FAIR_REBASE;
}

/* vt charged held_ns more: from no less than the class's virtual time, as a lease granted now
 * would have been (what a tenant held while nobody else was charged earns it nothing back). */
static uint64_t charged_from_now(const struct shms__cls *k, uint64_t vt, uint64_t held_ns,
                                 uint32_t weight) {
  return (vt > k->ctl->vtime ? vt : k->ctl->vtime) + charge(held_ns, weight);
}

int shms__fair_charge_fast(const struct shms__cls *k, uint32_t aref,
                           uint32_t (*record_of)(const struct shms__cls *, uint32_t)) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__account *acct = shms__account_at(k, aref);
  struct shms__account_class *a = &acct->cls[k->id];
  uint64_t held = ck_pr_fas_64(&a->fast_ns, 0);
  uint32_t n = ck_pr_fas_32(&a->fast_n, 0);
  if (shms__load_32(&acct->state) != SHMS__ACCT_LIVE || (held == 0 && n == 0))
    return 0;
  shms__store_64(&acct->active_ns, shms__now_ns());
  n = held != 0 ? n : 0; /* unstamped leases tell nothing of how long leases hold */
  uint32_t ref = record_of(k, aref);
  if (ref != 0) {
    struct shms__tenant *t = shms__tenant_at(k, ref);
    t->vt = charged_from_now(k, t->vt, held, t->weight);
    t->cell_ns += held;
    estimate(k, &t->est_ns, held, n);
    if (t->heap_pos == 0)
      return 0;
    uint32_t pos = pos_of(k, ref);
    return pos == UINT32_MAX ? 1 : sift(k, pos);
  }
  uint64_t est = shms__load_64(&a->est_ns);
  estimate(k, &est, held, n);
  shms__store_64(&a->vt, charged_from_now(k, stored_vt(k, a), held, shms__account_weight(k, aref)));
  shms__store_64(&a->rebases, k->ctl->rebases);
  shms__store_64(&a->est_ns, est);
  shms__store_64(&a->cell_ns, a->cell_ns + held);
  return 0;
}

void shms__fair_reset(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  k->ctl->heap_len = 0;
  for (uint32_t i = 0; i < k->ntenants; i++)
    k->tenants[i].heap_pos = 0;
  /* A charge added by a process that died before it marked the record is found here. */
  for (uint32_t i = 0; k->id >= 0 && i < k->naccts; i++)
    if (shms__load_64(&k->accts[i].cls[k->id].fast_ns) != 0)
      shms__hbm_set(k->aattn, k->naccts, i);
}

void shms__fair_refresh(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  uint64_t gen = shms__load_64(&k->actl->policy_gen);
  if (gen == k->ctl->policy_gen)
    return;
  k->ctl->policy_gen = gen;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    struct shms__tenant *t = &k->tenants[i];
    if ((t->flags & SHMS__TENANT_INUSE) && t->acct != 0)
      t->weight = shms__account_weight(k, t->acct);
  }
}

void shms__fair_load(const struct shms__cls *k, struct shms__tenant *t) {
  t->weight = shms__account_weight(k, t->acct);
  if (t->acct == 0 || k->id < 0)
    return;
  const struct shms__account_class *a = &shms__account_at(k, t->acct)->cls[k->id];
  t->vt = stored_vt(k, a);
  t->est_ns = shms__load_64((uint64_t *)&a->est_ns);
}

void shms__fair_store(const struct shms__cls *k, struct shms__tenant *t) {
  if (t->acct == 0 || k->id < 0)
    return;
  struct shms__account_class *a = &shms__account_at(k, t->acct)->cls[k->id];
  shms__store_64(&a->vt, t->vt);
  shms__store_64(&a->est_ns, t->est_ns);
  shms__store_64(&a->rebases, k->ctl->rebases);
  shms__store_64(&a->cell_ns, a->cell_ns + t->cell_ns);
  t->cell_ns = 0;
}

/* Tenant records, name index and ring (tenant.h). */
#include "tenant.h"

#include "../shm/atomic.h"
#include "../shm/hbm.h"
#include "account.h"
#include "fair.h"
#include "sched.h"
#include <ck_pr.h>
#include <string.h>

/* How long making a tenant's record waits for the tenant table's lock (another process adding a
 * tenant, folding, or setting policy: a few stores): past it the record goes without. */
#define ACCOUNT_WAIT_NS (10ull * 1000 * 1000)

static uint32_t name_hash(const char *name) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *name; name++)
    h = (h ^ (uint8_t)*name) * 16777619u;
  return h;
}

static int valid_ref(const struct shms__cls *k, uint32_t ref) {
  return ref >= 1 && ref <= k->ntenants;
}

/* The record of name of kind (0: a tenant's, SHMS__TENANT_TEAM: a team's), or 0. */
static uint32_t find(const struct shms__cls *k, const char *name, uint32_t kind) {
  uint32_t ref = k->tbuckets[name_hash(name) & (k->ntb - 1)];
  /* Bounded walk: a torn chain (a crash mid-update) cannot loop us forever. */
  for (uint32_t steps = 0; valid_ref(k, ref) && steps < k->ntenants; steps++) {
    struct shms__tenant *t = shms__tenant_at(k, ref);
    if ((t->flags & SHMS__TENANT_TEAM) == kind && strncmp(t->name, name, sizeof t->name) == 0)
      return ref;
    ref = t->hash_next;
  }
  return 0;
}

uint32_t shms__tenant_find(const struct shms__cls *k, const char *name) { return find(k, name, 0); }

/* The class's record of account aref's tenant (or team), or 0. */
static uint32_t record_of(const struct shms__cls *k, uint32_t aref) {
  const struct shms__account *a = shms__account_at(k, aref);
  char name[SHMS_TENANT_MAX + 1];
  memcpy(name, a->name, sizeof name);
  name[SHMS_TENANT_MAX] = '\0';
  uint32_t ref = find(k, name, a->flags & SHMS__ACCT_TEAM ? SHMS__TENANT_TEAM : 0);
  return ref != 0 && shms__tenant_at(k, ref)->acct == aref ? ref : 0;
}

int shms__tenant_take_fast(const struct shms__cls *k, int budget, int *torn) {
  int taken = 0;
  for (int64_t i; taken < budget && (i = shms__hbm_take(&k->aattn)) >= 0; taken++)
    *torn |= shms__fair_charge_fast(k, (uint32_t)i + 1, record_of);
  return taken;
}

/* A record from the free list, named and hashed, of kind; 0 when the table is full. */
static uint32_t take_record(const struct shms__cls *k, const char *name, uint32_t kind) {
  struct shms__class_ctl *ctl = k->ctl;
  uint32_t ref = ctl->tenant_free;
  if (!valid_ref(k, ref))
    return 0;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  ctl->tenant_free = t->hash_next;
  memset(t, 0, sizeof *t);
  strncpy(t->name, name, SHMS_TENANT_MAX);
  t->flags = kind != 0 ? kind : SHMS__TENANT_INUSE;
  uint32_t *bucket = &k->tbuckets[name_hash(t->name) & (k->ntb - 1)];
  t->hash_next = *bucket;
  *bucket = ref;
  ctl->tenants_used++;
  return ref;
}

static void unhash(const struct shms__cls *k, uint32_t ref) {
  uint32_t *link = &k->tbuckets[name_hash(shms__tenant_at(k, ref)->name) & (k->ntb - 1)];
  for (uint32_t steps = 0; valid_ref(k, *link) && steps < k->ntenants; steps++) {
    if (*link == ref) {
      *link = shms__tenant_at(k, ref)->hash_next;
      return;
    }
    link = &shms__tenant_at(k, *link)->hash_next;
  }
}

/* The record goes: what the class charged it stays in the tenant table. */
static void leave_account(const struct shms__cls *k, struct shms__tenant *t) {
  if (t->acct == 0)
    return;
  shms__fair_store(k, t);
  shms__account_put(k, t->acct);
  t->acct = 0;
}

/* Back to the free list. */
static void free_record(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  unhash(k, ref);
  leave_account(k, t);
  t->flags = 0;
  t->name[0] = '\0';
  t->hash_next = k->ctl->tenant_free;
  k->ctl->tenant_free = ref;
  k->ctl->tenants_used--;
}

uint32_t shms__tenant_get(const struct shms__cls *k, const char *name) {
  uint32_t ref = shms__tenant_find(k, name);
  if (ref != 0 || (ref = take_record(k, name, 0)) == 0)
    return ref;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  /* What the segment kept of the tenant: its weight, and its charge here while it was away
   * (without the table, as a tenant new to the segment: weight 1, nothing kept). */
  t->acct = shms__account_get(k, name, ACCOUNT_WAIT_NS);
  shms__fair_load(k, t);
  return ref;
}

/* ---- teams (a class fair by time) ---- */

/* ref becomes a member of the team the tenant table gives its tenant, whose record is made if
 * absent (what the table kept of the team loaded into it). Its charge is then its team's: a
 * tenant that changes teams starts again from its new team's members. No room: no team. */
static void team_attach(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t aref = shms__account_team(k, t->acct);
  if (t->team != 0 || aref == 0)
    return;
  const struct shms__account *a = shms__account_at(k, aref);
  char name[SHMS_TENANT_MAX + 1];
  memcpy(name, a->name, sizeof name);
  name[SHMS_TENANT_MAX] = '\0';
  uint32_t team = find(k, name, SHMS__TENANT_TEAM);
  if (team == 0) {
    if ((team = take_record(k, name, SHMS__TENANT_TEAM)) == 0)
      return;
    struct shms__tenant *tm = shms__tenant_at(k, team);
    shms__account_hold(k, aref);
    tm->acct = aref;
    shms__fair_load(k, tm);
  }
  shms__tenant_at(k, team)->members++;
  t->team = team;
}

/* ref leaves its team (out of the heaps first); the team's record goes with its last member. */
static int team_detach(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t team = t->team;
  if (team == 0)
    return 0;
  int torn = shms__fair_leave(k, ref);
  t->team = 0;
  if (!valid_ref(k, team) || !(shms__tenant_at(k, team)->flags & SHMS__TENANT_TEAM))
    return 1;
  struct shms__tenant *tm = shms__tenant_at(k, team);
  if (--tm->members == 0) {
    if (tm->heap_pos != 0)
      return 1; /* a team without members in the heap: torn */
    free_record(k, team);
  }
  return torn;
}

int shms__tenant_refresh(const struct shms__cls *k) {
  if (!shms__fair_refresh(k))
    return 0;
  int torn = 0;
  for (uint32_t ref = 1; ref <= k->ntenants; ref++) {
    struct shms__tenant *t = shms__tenant_at(k, ref);
    if (!(t->flags & SHMS__TENANT_INUSE) || t->acct == 0)
      continue;
    uint32_t want = shms__account_team(k, t->acct);
    uint32_t have = valid_ref(k, t->team) ? shms__tenant_at(k, t->team)->acct : 0;
    if (want == have)
      continue;
    int in = (t->flags & SHMS__TENANT_INRING) != 0;
    torn |= team_detach(k, ref);
    t->vt = 0; /* its charge was its old team's (or the class's): it starts from the new one's */
    team_attach(k, ref);
    if (in)
      torn |= shms__fair_join(k, ref);
  }
  return torn;
}

int shms__tenant_put_if_idle(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (!(t->flags & SHMS__TENANT_INUSE) || (t->flags & SHMS__TENANT_PENDING) || t->queued != 0 ||
      shms__load_32(&t->active) != 0)
    return 0;
  int torn = shms__ring_remove(k, ref);
  torn |= team_detach(k, ref);
  free_record(k, ref);
  return torn;
}

int shms__tenant_at_limit(const struct shms__cls *k, uint32_t ref) {
  uint32_t limit = k->cfg->tenant_max_active;
  return limit != 0 && shms__load_32(&shms__tenant_at(k, ref)->active) >= limit;
}

/* A ring link read from the segment: 0 or a tenant; anything else means the index is torn. */
static int ring_link_ok(const struct shms__cls *k, uint32_t ref) {
  return ref == 0 || valid_ref(k, ref);
}

/* Returns 1 if the ring is torn (nothing done). */
static int ring_append(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (!ring_link_ok(k, ctl->ring_tail))
    return 1;
  t->ring_next = 0;
  t->ring_prev = ctl->ring_tail;
  if (ctl->ring_tail != 0)
    shms__tenant_at(k, ctl->ring_tail)->ring_next = ref;
  else
    ctl->ring_head = ref;
  ctl->ring_tail = ref;
  t->flags |= SHMS__TENANT_INRING;
  shms__store_32(&ctl->ring_len, ctl->ring_len + 1);
  if (!k->timed)
    return 0;
  team_attach(k, ref);
  return shms__fair_join(k, ref);
}

int shms__ring_remove(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (!(t->flags & SHMS__TENANT_INRING))
    return 0;
  if (!ring_link_ok(k, t->ring_prev) || !ring_link_ok(k, t->ring_next))
    return 1;
  if (t->ring_prev != 0)
    shms__tenant_at(k, t->ring_prev)->ring_next = t->ring_next;
  else
    ctl->ring_head = t->ring_next;
  if (t->ring_next != 0)
    shms__tenant_at(k, t->ring_next)->ring_prev = t->ring_prev;
  else
    ctl->ring_tail = t->ring_prev;
  t->ring_prev = t->ring_next = 0;
  t->flags &= ~SHMS__TENANT_INRING;
  shms__store_32(&ctl->ring_len, ctl->ring_len - 1);
  return k->timed ? shms__fair_leave(k, ref) : 0;
}

int shms__ring_update(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  int belongs = t->queued > 0 && !shms__tenant_at_limit(k, ref);
  int in = (t->flags & SHMS__TENANT_INRING) != 0;
  if (t->flags & SHMS__TENANT_PENDING)
    return 0; /* its turn is given back by shms__ring_restore, in the old ring's order */
  if (belongs && !in)
    return ring_append(k, ref);
  if (!belongs && in)
    return shms__ring_remove(k, ref);
  return 0;
}

int shms__ring_rotate(const struct shms__cls *k) {
  uint32_t head = k->ctl->ring_head;
  if (head == 0 || head == k->ctl->ring_tail)
    return 0;
  if (!ring_link_ok(k, head))
    return 1;
  int torn = shms__ring_remove(k, head);
  return ring_append(k, head) | torn;
}

/*
 * Walk the ring from its head, in bounded steps and trusting no link: mark each member PENDING
 * and leave them chained by ring_next in turn order. A torn ring (a bad link, a member whose
 * ring_prev does not point back, a member seen twice) ends the chain there: the rest rejoin the
 * ring after it, as newcomers do. Returns the chain's first record, 0 for none.
 */
static uint32_t ring_snapshot(const struct shms__cls *k) {
  for (uint32_t i = 0; i < k->ntenants; i++)
    k->tenants[i].flags &= ~SHMS__TENANT_PENDING;
  uint32_t first = 0, prev = 0, ref = k->ctl->ring_head;
  for (uint32_t steps = 0; steps < k->ntenants && valid_ref(k, ref); steps++) {
    struct shms__tenant *t = shms__tenant_at(k, ref);
    uint32_t want = SHMS__TENANT_INUSE | SHMS__TENANT_INRING;
    if ((t->flags & (want | SHMS__TENANT_PENDING)) != want || t->ring_prev != prev)
      break;
    t->flags |= SHMS__TENANT_PENDING;
    first = first ? first : ref;
    prev = ref;
    ref = t->ring_next;
  }
  if (prev != 0)
    shms__tenant_at(k, prev)->ring_next = 0;
  return first;
}

/* Reset record t, keeping what outlives the index: its name and figures, its counted leases,
 * and (PENDING) its place in the old ring's chain. */
static void reset_record(const struct shms__cls *k, struct shms__tenant *t) {
  uint32_t active = shms__load_32(&t->active), pending = t->flags & SHMS__TENANT_PENDING;
  if (t->flags & SHMS__TENANT_TEAM)
    active = pending = 0; /* made again as its members take turns again */
  if (active == 0 && !pending && (t->flags & (SHMS__TENANT_INUSE | SHMS__TENANT_TEAM)))
    leave_account(k, t); /* made again, if its requests are, by the re-indexing */
  struct shms__tenant keep = *t;
  memset(t, 0, sizeof *t);
  if (active == 0 && !pending)
    return;
  memcpy(t->name, keep.name, sizeof t->name);
  t->active = active;
  t->flags = SHMS__TENANT_INUSE | pending;
  t->ring_next = pending ? keep.ring_next : 0;
  t->granted = keep.granted;
  t->total_wait_ns = keep.total_wait_ns;
  t->max_wait_ns = keep.max_wait_ns;
  /* Its charge, and what its leases still under way will correct it by (fair.h). */
  t->vt = keep.vt;
  t->turn = keep.turn;
  t->est_ns = keep.est_ns;
  t->corr_ns = keep.corr_ns;
  t->done_ns = keep.done_ns;
  t->done_n = keep.done_n;
  t->acct = keep.acct;
  t->weight = keep.weight;
}

uint32_t shms__tenant_reset(const struct shms__cls *k) {
  struct shms__class_ctl *ctl = k->ctl;
  uint32_t first = ring_snapshot(k);
  if (k->timed)
    shms__fair_reset(k); /* the ring's members join the heap again as they rejoin the ring */
  for (uint32_t i = 0; i < k->ntb; i++)
    k->tbuckets[i] = 0;
  for (uint32_t i = 0; i < k->ntenants; i++)
    reset_record(k, &k->tenants[i]);
  ctl->ring_head = ctl->ring_tail = 0;
  ctl->all_head = ctl->all_tail = 0; /* the class's list by time: rebuilt with the rest */
  shms__store_32(&ctl->ring_len, 0);
  ctl->tenant_free = 0;
  ctl->tenants_used = 0;
  shms__store_32(&ctl->tenants_queued, 0);
  for (uint32_t i = k->ntenants; i-- > 0;) {
    struct shms__tenant *t = &k->tenants[i];
    if (t->flags & SHMS__TENANT_INUSE) {
      uint32_t *bucket = &k->tbuckets[name_hash(t->name) & (k->ntb - 1)];
      t->hash_next = *bucket;
      *bucket = i + 1;
      ctl->tenants_used++;
    } else {
      t->hash_next = ctl->tenant_free;
      ctl->tenant_free = i + 1;
    }
  }
  return first;
}

int shms__ring_restore(const struct shms__cls *k, uint32_t first) {
  int torn = 0;
  uint32_t newcomers = shms__load_32(&k->ctl->ring_len); /* joined without an old turn */
  uint32_t ref = first;
  for (uint32_t steps = 0; steps < k->ntenants && valid_ref(k, ref); steps++) {
    struct shms__tenant *t = shms__tenant_at(k, ref);
    if (!(t->flags & SHMS__TENANT_PENDING))
      break;
    uint32_t next = t->ring_next;
    t->flags &= ~SHMS__TENANT_PENDING;
    t->ring_next = t->ring_prev = 0;
    torn |= shms__ring_update(k, ref);
    torn |= shms__tenant_put_if_idle(k, ref);
    ref = next;
  }
  /* The newcomers joined first; those with a turn in the old ring go before them. */
  if (shms__load_32(&k->ctl->ring_len) > newcomers)
    for (uint32_t i = 0; i < newcomers; i++)
      torn |= shms__ring_rotate(k);
  return torn;
}

/* Tenant records, name index and ring (tenant.h). */
#include "tenant.h"

#include "../shm/atomic.h"
#include "sched.h"
#include <ck_pr.h>
#include <string.h>

static uint32_t name_hash(const char *name) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *name; name++)
    h = (h ^ (uint8_t)*name) * 16777619u;
  return h;
}

static int valid_ref(const struct shms__cls *k, uint32_t ref) {
  return ref >= 1 && ref <= k->ntenants;
}

uint32_t shms__tenant_find(const struct shms__cls *k, const char *name) {
  uint32_t ref = k->tbuckets[name_hash(name) & (k->ntb - 1)];
  /* Bounded walk: a torn chain (a crash mid-update) cannot loop us forever. */
  for (uint32_t steps = 0; valid_ref(k, ref) && steps < k->ntenants; steps++) {
    struct shms__tenant *t = shms__tenant_at(k, ref);
    if (strncmp(t->name, name, sizeof t->name) == 0)
      return ref;
    ref = t->hash_next;
  }
  return 0;
}

uint32_t shms__tenant_get(const struct shms__cls *k, const char *name) {
  uint32_t ref = shms__tenant_find(k, name);
  if (ref != 0)
    return ref;
  struct shms__class_ctl *ctl = k->ctl;
  ref = ctl->tenant_free;
  if (!valid_ref(k, ref))
    return 0;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  ctl->tenant_free = t->hash_next;
  memset(t, 0, sizeof *t);
  strncpy(t->name, name, SHMS_TENANT_MAX);
  t->flags = SHMS__TENANT_INUSE;
  uint32_t *bucket = &k->tbuckets[name_hash(name) & (k->ntb - 1)];
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

void shms__tenant_put_if_idle(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (!(t->flags & SHMS__TENANT_INUSE) || t->queued != 0 || shms__load_32(&t->active) != 0)
    return;
  shms__ring_remove(k, ref);
  unhash(k, ref);
  t->flags = 0;
  t->name[0] = '\0';
  t->hash_next = k->ctl->tenant_free;
  k->ctl->tenant_free = ref;
  k->ctl->tenants_used--;
}

int shms__tenant_at_limit(const struct shms__cls *k, uint32_t ref) {
  uint32_t limit = k->cfg->tenant_max_active;
  return limit != 0 && shms__load_32(&shms__tenant_at(k, ref)->active) >= limit;
}

/* A ring link read from the segment: 0 or a tenant; anything else marks the index torn. */
static int ring_link_ok(const struct shms__cls *k, uint32_t ref) {
  if (ref == 0 || valid_ref(k, ref))
    return 1;
  shms__index_corrupt = 1;
  return 0;
}

static void ring_append(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (!ring_link_ok(k, ctl->ring_tail))
    return;
  t->ring_next = 0;
  t->ring_prev = ctl->ring_tail;
  if (ctl->ring_tail != 0)
    shms__tenant_at(k, ctl->ring_tail)->ring_next = ref;
  else
    ctl->ring_head = ref;
  ctl->ring_tail = ref;
  t->flags |= SHMS__TENANT_INRING;
  shms__store_32(&ctl->ring_len, ctl->ring_len + 1);
}

void shms__ring_remove(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (!(t->flags & SHMS__TENANT_INRING))
    return;
  if (!ring_link_ok(k, t->ring_prev) || !ring_link_ok(k, t->ring_next))
    return;
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
}

void shms__ring_update(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  int belongs = t->queued > 0 && !shms__tenant_at_limit(k, ref);
  int in = (t->flags & SHMS__TENANT_INRING) != 0;
  if (belongs && !in)
    ring_append(k, ref);
  else if (!belongs && in)
    shms__ring_remove(k, ref);
}

void shms__ring_rotate(const struct shms__cls *k) {
  uint32_t head = k->ctl->ring_head;
  if (head == 0 || head == k->ctl->ring_tail || !ring_link_ok(k, head))
    return;
  shms__ring_remove(k, head);
  ring_append(k, head);
}

void shms__tenant_reset(const struct shms__cls *k) {
  struct shms__class_ctl *ctl = k->ctl;
  for (uint32_t i = 0; i < k->ntb; i++)
    k->tbuckets[i] = 0;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    struct shms__tenant *t = &k->tenants[i];
    uint32_t active = shms__load_32(&t->active);
    char name[SHMS_TENANT_MAX + 1];
    memcpy(name, t->name, sizeof name);
    memset(t, 0, sizeof *t);
    /* Leases still count against their tenant's limit: keep those records, under their names. */
    if (active != 0) {
      memcpy(t->name, name, sizeof name);
      t->active = active;
      t->flags = SHMS__TENANT_INUSE;
    }
  }
  ctl->ring_head = ctl->ring_tail = 0;
  shms__store_32(&ctl->ring_len, 0);
  ctl->tenant_free = 0;
  ctl->tenants_used = 0;
  ctl->tenants_queued = 0;
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
}

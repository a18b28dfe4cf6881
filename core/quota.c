/* Named quotas: taking and giving back units, and recounting them (quota.h). */
#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/crashpoint.h"
#include "quota.h"
#include "sched.h"

uint32_t shms__quota_used(const struct shms__quota *q) {
  uint64_t u = shms__load_64((uint64_t *)&q->used);
  uint32_t n = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    n += SHMS__QUOTA_FIELD(u, c);
  return n;
}

int shms__quota_room(const struct shms__cls *k, uint32_t q) {
  const struct shms__quota *e = &k->quotas[q];
  return shms__quota_used(e) < shms__load_32((uint32_t *)&e->max);
}

int shms__quota_find(const struct shms__quota *table, const char *name) {
  for (int q = 0; q < SHMS_QUOTAS_MAX; q++)
    if (shms__load_32((uint32_t *)&table[q].state) == SHMS__QUOTA_LIVE &&
        strncmp(table[q].name, name, SHMS_TENANT_MAX + 1) == 0)
      return q;
  return -1;
}

/* One unit of quota q for class k, if its total is below its maximum (one CAS: the total and the
 * class's field are one word, whoever else takes or gives back meanwhile). */
static int take_one(const struct shms__cls *k, uint32_t q) {
  struct shms__quota *e = &k->quotas[q];
  uint64_t u = shms__load_64(&e->used);
  for (;;) {
    uint32_t total = 0;
    for (int c = 0; c < SHMS_CLASS_COUNT; c++)
      total += SHMS__QUOTA_FIELD(u, c);
    if (total >= shms__load_32(&e->max) || SHMS__QUOTA_FIELD(u, k->id) == 0xfffu)
      return 0;
    if (ck_pr_cas_64_value(&e->used, u, u + SHMS__QUOTA_UNIT(k->id), &u))
      return 1;
  }
}

static void put_one(const struct shms__cls *k, uint32_t q) {
  struct shms__quota *e = &k->quotas[q];
  uint64_t u = shms__load_64(&e->used);
  /* Never below 0: a field already recounted without this unit (it cannot be, while the lease
   * that holds it is the class's) must not borrow from the next class's. */
  while (SHMS__QUOTA_FIELD(u, k->id) != 0 &&
         !ck_pr_cas_64_value(&e->used, u, u - SHMS__QUOTA_UNIT(k->id), &u))
    ;
}

int shms__quota_take(const struct shms__cls *k, uint32_t mask, uint32_t *full) {
  SHMS__ASSERT(shms__index_owned(k));
  for (uint32_t q = 0; q < SHMS_QUOTAS_MAX; q++) {
    if (!(mask & (1u << q)))
      continue;
    if (!take_one(k, q)) {
      *full = q;
      shms__quota_put(k, mask & ((1u << q) - 1)); /* those taken before it */
      return 0;
    }
    SHMS__STEP(); /* a death here leaves units taken for no lease: recovery recounts them */
  }
  return 1;
}

void shms__quota_put(const struct shms__cls *k, uint32_t mask) {
  for (uint32_t q = 0; q < SHMS_QUOTAS_MAX; q++)
    if (mask & (1u << q))
      put_one(k, q);
}

uint32_t shms__quota_held(const struct shms__cls *k, uint32_t c, uint64_t w) {
  uint64_t held = shms__load_64(&k->qheld[c]);
  uint32_t st = SHMS__CELL_STATE(w), gen = SHMS__CELL_GEN(w);
  if (((st == SHMS__CELL_GRANTED || st == SHMS__CELL_LEASED) && SHMS__QHELD_GEN(held) == gen) ||
      (st == SHMS__CELL_QUARANTINED && SHMS__QHELD_GEN(held) + 1 == gen))
    return SHMS__QHELD_MASK(held);
  return 0;
}

uint32_t shms__quota_count(const struct shms__cls *k, uint32_t q) {
  uint32_t n = 0;
  for (uint32_t c = 0; c < k->ncells; c++) {
    uint64_t w = shms__load_64(&k->cells[c].word);
    /* A lease's end gives its units back only when it is counted against a tenant record (the
     * releaser reads them then); a quarantined cell's repair always does. */
    if (SHMS__CELL_STATE(w) != SHMS__CELL_QUARANTINED && shms__load_32(&k->cells[c].tenant) == 0)
      continue;
    n += (shms__quota_held(k, c, w) >> q) & 1u;
  }
  return n;
}

uint32_t shms__quota_recount(const struct shms__cls *k) {
  uint32_t off = 0;
  for (uint32_t q = 0; q < SHMS_QUOTAS_MAX; q++) {
    struct shms__quota *e = &k->quotas[q];
    if (shms__load_32(&e->state) != SHMS__QUOTA_LIVE)
      continue;
    uint32_t n = shms__quota_count(k, q);
    uint64_t u = shms__load_64(&e->used);
    if (SHMS__QUOTA_FIELD(u, k->id) == n)
      continue;
    off++;
    /* Other classes' fields change meanwhile (their operations go on): only ours is set. */
    while (!ck_pr_cas_64_value(
        &e->used, u,
        (u & ~(0xfffull * SHMS__QUOTA_UNIT(k->id))) | (uint64_t)n * SHMS__QUOTA_UNIT(k->id), &u))
      ;
  }
  return off;
}

uint32_t shms__quota_waiters(const struct shms *h, uint32_t q) {
  uint32_t n = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    if (k->id < 0)
      continue;
    for (uint32_t i = 0; i < k->nslots; i++) {
      const struct shms__slot *s = shms__slot_at(k, i);
      uint32_t qw = shms__load_32((uint32_t *)&s->quotas);
      n += SHMS__SLOT_STATE(shms__load_64((uint64_t *)&s->word)) == SHMS__SLOT_QUEUED &&
           (qw & SHMS__QUOTAS_PARKED) && (qw & (1u << q));
    }
  }
  return n;
}

/*
 * A process-local view of one class in the segment: pointers computed once at
 * attach from the validated layout, so the hot paths do no offset arithmetic
 * and every count used for bounds checks comes from validation, not from
 * memory another process may scribble on.
 */
#ifndef SHMS_SHM_CLASS_H
#define SHMS_SHM_CLASS_H

#include <stdint.h>

#include "hbm.h"
#include "layout.h"

struct shms__cls {
  int id; /* shms_class_t; -1 when not configured */
  const shms_class_config *cfg;
  struct shms__class_ctl *ctl;
  struct shms__cell *cells;
  char *slots;
  struct shms__tenant *tenants;
  uint32_t *tbuckets, *abuckets;
  struct shms__hbm sfree, sattn, tattn, aattn;
  uint64_t *qheld;                /* per cell: the quotas its lease holds (SHMS__QHELD) */
  struct shms__quota *quotas;     /* the segment's quota table, SHMS_QUOTAS_MAX entries */
  struct shms__heap_place *theap; /* fair by time: its tenants with a turn, a heap (core/fair.c) */
  uint32_t ncells, nslots, slot_size, ntenants, ntb, nab;
  int fast_map;           /* the fast word holds a map of free cells, not a count (core/sched.h) */
  uint64_t starvation_ns; /* the segment's starvation-after */
  uint64_t
      grant_timeout_ns; /* lease classes: the class's grant-timeout (default applied); 0: none */
  /* How long a queued request may be overtaken by the fast path (default applied); 0: never
   * (strict hand-off: a worker class, tenant-max-active, or overtake=0). */
  uint64_t overtake_ns;
  int timed; /* fair by cell-time (shms_fairness_t TIME), not by grants */
  /* The segment's tenant table (core/account.c), shared by every class. */
  struct shms__accounts_ctl *actl;
  uint32_t *abkt;
  struct shms__account *accts;
  uint32_t naccts, nabkt;
  /* The handle this view is part of: whose owner id holds the tenant table's lock while this
   * view changes it (an observer's, 0, takes no lock), and asks whether a holder lives. */
  struct shms *h;
};

static inline struct shms__slot *shms__slot_at(const struct shms__cls *k, uint32_t i) {
  return (struct shms__slot *)(k->slots + (uint64_t)i * k->slot_size);
}

/* Payload bytes of a worker-mode slot. */
static inline char *shms__slot_payload(const struct shms__cls *k, uint32_t i) {
  return (char *)(shms__slot_at(k, i) + 1);
}

/* Fill view from the validated layout of the segment at base (config: the validated copy). */
void shms__cls_init(struct shms__cls *view, char *base, int id, const shms_config *config,
                    const struct shms__layout *l);

#endif

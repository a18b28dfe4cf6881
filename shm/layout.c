/*
 * Computing the layout from a configuration, laying a new segment out, and
 * validating a mapped segment against the layout its stored configuration
 * implies. The size formula is documented in docs/architecture.md; the tests
 * check this code against that formula.
 */
#include "layout.h"

#include <stddef.h>
#include <string.h>

#include "error.h"
#include "hbm.h"

uint32_t shms__pow2_at_least(uint32_t n) {
  uint32_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

static uint64_t line_up(uint64_t n) { return (n + SHMS__LINE - 1) & ~(uint64_t)(SHMS__LINE - 1); }

/* Bytes one request slot of class k takes: the slot header plus, in worker mode, the payload. */
static uint32_t slot_size(const shms_class_config *k) {
  uint64_t extra = k->mode == SHMS_MODE_WORKER ? line_up(k->payload) : 0;
  return (uint32_t)(sizeof(struct shms__slot) + extra);
}

uint64_t shms__layout_compute(const shms_config *cfg, struct shms__layout *out) {
  memset(out, 0, sizeof *out);
  uint64_t off = line_up(sizeof(struct shms__header));
  out->header_size = off;
  out->accounts_count = cfg->tenant_table != 0 ? cfg->tenant_table : SHMS_DEFAULT_TENANT_TABLE;
  out->accounts_buckets = shms__pow2_at_least(2 * out->accounts_count);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const shms_class_config *k = &cfg->classes[c];
    if (!k->configured)
      continue;
    struct shms__class_desc *d = &out->classes[c];
    out->class_mask |= 1u << c;
    d->cells_count = k->cells;
    d->slots_count = k->queue;
    d->slot_size = slot_size(k);
    d->tenants_count = cfg->max_tenants;
    d->tbuckets_count = shms__pow2_at_least(2 * cfg->max_tenants);
    d->abuckets_count = shms__pow2_at_least(k->queue ? k->queue : 1);
    /* 64-bit sums of 32-bit products: no overflow for any 32-bit input. */
    d->ctl_off = off;
    off += sizeof(struct shms__class_ctl);
    d->cells_off = off;
    off += (uint64_t)d->cells_count * sizeof(struct shms__cell);
    d->slots_off = off;
    off += (uint64_t)d->slots_count * d->slot_size;
    d->tenants_off = off;
    off += (uint64_t)d->tenants_count * sizeof(struct shms__tenant);
    d->tbuckets_off = off;
    off += line_up((uint64_t)d->tbuckets_count * sizeof(uint32_t));
    d->abuckets_off = off;
    off += line_up((uint64_t)d->abuckets_count * sizeof(uint32_t));
    d->sfree_off = off;
    off += line_up((uint64_t)shms__hbm_words(d->slots_count) * sizeof(uint64_t));
    d->sattn_off = off;
    off += line_up((uint64_t)shms__hbm_words(d->slots_count) * sizeof(uint64_t));
    d->tattn_off = off;
    off += line_up((uint64_t)shms__hbm_words(d->tenants_count) * sizeof(uint64_t));
    d->theap_off = off;
    off += line_up((uint64_t)d->tenants_count * sizeof(struct shms__heap_place));
    d->aattn_off = off;
    off += line_up((uint64_t)shms__hbm_words(out->accounts_count) * sizeof(uint64_t));
    d->qheld_off = off;
    off += line_up((uint64_t)d->cells_count * sizeof(uint64_t));
  }
  out->accounts_off = off;
  off += sizeof(struct shms__accounts_ctl) + line_up((uint64_t)out->accounts_buckets * 4) +
         (uint64_t)out->accounts_count * sizeof(struct shms__account);
  out->procs_off = off;
  out->procs_count = cfg->max_processes;
  off += (uint64_t)cfg->max_processes * sizeof(struct shms__proc);
  if (cfg->events != 0) { /* a head line, then the records */
    out->events_off = off;
    out->events_count = cfg->events;
    off += SHMS__LINE + (uint64_t)cfg->events * 2 * SHMS__LINE;
  }
  out->total_size = off;
  return off;
}

uint64_t shms__layout_size(const shms_config *cfg) {
  struct shms__layout l;
  return shms__layout_compute(cfg, &l);
}

uint64_t shms_segment_size(const shms_config *cfg) {
  if (cfg == NULL || shms_config_validate(cfg) != SHMS_OK)
    return 0;
  return shms__layout_size(cfg);
}

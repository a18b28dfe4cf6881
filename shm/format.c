/* Laying out a freshly created (zero-filled) segment, and validating a mapped one. */
#include "format.h"

#include <ck_pr.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "atomic.h"
#include "error.h"
#include "events.h"
#include "hbm.h"

static void format_class(char *base, const shms_class_config *k, const struct shms__class_desc *d) {
  struct shms__class_ctl *ctl = SHMS__AT(base, d->ctl_off, struct shms__class_ctl);
  int worker = k->mode == SHMS_MODE_WORKER;
  /* A worker class starts with every cell offline: no worker is bound yet. */
  ctl->fast = worker                               ? 0
              : shms__fast_maps(k->cells, k->mode) ? (uint64_t)(uint32_t)(~0u >> (32 - k->cells))
                                                   : k->cells;
  ctl->request_seq = 1;
  ctl->token_limit = UINT64_MAX;
  for (uint32_t i = 0; i < d->cells_count; i++) {
    struct shms__cell *cell =
        SHMS__AT(base, d->cells_off + (uint64_t)i * sizeof(struct shms__cell), struct shms__cell);
    cell->word = SHMS__CELL_WORD(1, 0, worker ? SHMS__CELL_OFFLINE : SHMS__CELL_AVAILABLE);
  }
  for (uint32_t i = 0; i < d->tenants_count; i++) {
    struct shms__tenant *t = SHMS__AT(
        base, d->tenants_off + (uint64_t)i * sizeof(struct shms__tenant), struct shms__tenant);
    t->hash_next = i + 1 < d->tenants_count ? i + 2 : 0;
  }
  ctl->tenant_free = d->tenants_count ? 1 : 0;
  struct shms__hbm sfree;
  shms__hbm_init(&sfree, SHMS__AT(base, d->sfree_off, uint64_t), d->slots_count);
  shms__hbm_fill(&sfree);
}

void shms__format(char *base, const shms_config *cfg, const struct shms__layout *l,
                  uint64_t incarnation, uint64_t created_unix_ns) {
  struct shms__header *h = (struct shms__header *)base;
  h->layout_version = SHMS__LAYOUT_VERSION;
  h->header_size = (uint32_t)sizeof(struct shms__header);
  h->total_size = l->total_size;
  h->incarnation = incarnation;
  h->created_unix_ns = created_unix_ns;
  h->state = SHMS_SEG_ACTIVE;
  h->class_mask = l->class_mask;
  h->procs_off = l->procs_off;
  h->procs_count = l->procs_count;
  h->events_off = l->events_off;
  h->events_count = l->events_count;
  h->accounts_off = l->accounts_off;
  h->accounts_count = l->accounts_count;
  h->accounts_buckets = l->accounts_buckets;
  struct shms__account *acct = shms__accounts_at(base, l);
  for (uint32_t i = 0; i < l->accounts_count; i++)
    acct[i].hash_next = i + 1 < l->accounts_count ? i + 2 : 0; /* the free list, in order */
  SHMS__AT(base, l->accounts_off, struct shms__accounts_ctl)->free_head =
      l->accounts_count != 0 ? 1 : 0;
  if (l->events_count != 0)
    SHMS__AT(base, l->events_off, struct shms__ev_head)->count = l->events_count;
  memcpy(h->classes, l->classes, sizeof h->classes);
  h->config = *cfg;
  for (uint32_t q = 0; q < cfg->quota_count && q < SHMS_QUOTAS_MAX; q++) {
    memcpy(h->quotas[q].name, cfg->quotas[q].name, sizeof h->quotas[q].name);
    h->quotas[q].max = cfg->quotas[q].max;
    h->quotas[q].state = SHMS__QUOTA_LIVE;
  }
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (cfg->classes[c].configured)
      format_class(base, &cfg->classes[c], &l->classes[c]);
  /* Everything above must be visible before any process can see the magic. */
  ck_pr_fence_store();
  shms__store_64(&h->magic, SHMS__MAGIC);
}

#define CHECK_FIELD(cls, field, got, want)                                                         \
  do {                                                                                             \
    if ((uint64_t)(got) != (uint64_t)(want))                                                       \
      return shms__fail(SHMS_EINCOMPAT, "%s%s%s is %" PRIu64 ", expected %" PRIu64, cls,           \
                        *(cls) ? ": " : "", field, (uint64_t)(got), (uint64_t)(want));             \
  } while (0)

static int check_classes(const struct shms__header *h, const struct shms__layout *l) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__class_desc *got = &h->classes[c], *want = &l->classes[c];
    char cls[32];
    snprintf(cls, sizeof cls, "class %s", shms_class_name((shms_class_t)c));
    CHECK_FIELD(cls, "ctl_off", got->ctl_off, want->ctl_off);
    CHECK_FIELD(cls, "cells_off", got->cells_off, want->cells_off);
    CHECK_FIELD(cls, "cells_count", got->cells_count, want->cells_count);
    CHECK_FIELD(cls, "slots_off", got->slots_off, want->slots_off);
    CHECK_FIELD(cls, "slots_count", got->slots_count, want->slots_count);
    CHECK_FIELD(cls, "slot_size", got->slot_size, want->slot_size);
    CHECK_FIELD(cls, "tenants_off", got->tenants_off, want->tenants_off);
    CHECK_FIELD(cls, "tenants_count", got->tenants_count, want->tenants_count);
    CHECK_FIELD(cls, "tbuckets_off", got->tbuckets_off, want->tbuckets_off);
    CHECK_FIELD(cls, "tbuckets_count", got->tbuckets_count, want->tbuckets_count);
    CHECK_FIELD(cls, "abuckets_off", got->abuckets_off, want->abuckets_off);
    CHECK_FIELD(cls, "abuckets_count", got->abuckets_count, want->abuckets_count);
    CHECK_FIELD(cls, "sfree_off", got->sfree_off, want->sfree_off);
    CHECK_FIELD(cls, "sattn_off", got->sattn_off, want->sattn_off);
    CHECK_FIELD(cls, "tattn_off", got->tattn_off, want->tattn_off);
    CHECK_FIELD(cls, "theap_off", got->theap_off, want->theap_off);
    CHECK_FIELD(cls, "aattn_off", got->aattn_off, want->aattn_off);
  }
  return SHMS_OK;
}

int shms__validate(const char *base, uint64_t file_size) {
  if (file_size < sizeof(struct shms__header))
    return shms__fail(SHMS_EINCOMPAT,
                      "truncated: the file has %" PRIu64 " bytes, less than the %zu-byte header",
                      file_size, sizeof(struct shms__header));
  /* Work on a private copy: the checks must all judge the same bytes. */
  struct shms__header h;
  memcpy(&h, base, sizeof h);
  if (h.magic == 0)
    return shms__fail(SHMS_EINCOMPAT,
                      "magic: not set (the segment is being created, or its creation failed)");
  if (h.magic != SHMS__MAGIC)
    return shms__fail(SHMS_EINCOMPAT, "magic: 0x%016" PRIx64 " is not a shmsched segment", h.magic);
  if (h.layout_version != SHMS__LAYOUT_VERSION)
    return shms__fail(SHMS_EINCOMPAT,
                      "layout_version: the segment has version %u, this build reads %u",
                      h.layout_version, SHMS__LAYOUT_VERSION);
  CHECK_FIELD("", "header_size", h.header_size, sizeof(struct shms__header));
  if (h.total_size != file_size)
    return shms__fail(SHMS_EINCOMPAT,
                      "total_size: the header says %" PRIu64 " bytes, the file has %" PRIu64,
                      h.total_size, file_size);
  if (shms_config_validate(&h.config) != SHMS_OK) {
    char why[200];
    strncpy(why, shms_last_error_detail(), sizeof why - 1);
    why[sizeof why - 1] = '\0';
    return shms__fail(SHMS_EINCOMPAT, "config: the stored configuration is invalid: %s", why);
  }
  if (h.state < SHMS_SEG_ACTIVE || h.state > SHMS_SEG_DESTROYING)
    return shms__fail(SHMS_EINCOMPAT, "state: %u is not a segment state", h.state);
  struct shms__layout l;
  uint64_t want = shms__layout_compute(&h.config, &l);
  CHECK_FIELD("", "total_size", h.total_size, want);
  CHECK_FIELD("", "class_mask", h.class_mask, l.class_mask);
  CHECK_FIELD("", "procs_off", h.procs_off, l.procs_off);
  CHECK_FIELD("", "procs_count", h.procs_count, l.procs_count);
  CHECK_FIELD("", "events_off", h.events_off, l.events_off);
  CHECK_FIELD("", "events_count", h.events_count, l.events_count);
  CHECK_FIELD("", "accounts_off", h.accounts_off, l.accounts_off);
  CHECK_FIELD("", "accounts_count", h.accounts_count, l.accounts_count);
  CHECK_FIELD("", "accounts_buckets", h.accounts_buckets, l.accounts_buckets);
  return check_classes(&h, &l);
}

int shms__validate_config_copy(const shms_config *cfg, uint64_t file_size) {
  if (shms_config_validate(cfg) != SHMS_OK)
    return SHMS_EINCOMPAT;
  return shms__layout_size(cfg) == file_size ? SHMS_OK : SHMS_EINCOMPAT;
}

int shms__format_recognise(const void *head, size_t len, uint64_t file_size) {
  struct shms__header h;
  memset(&h, 0, sizeof h);
  memcpy(&h, head, len < sizeof h ? len : sizeof h);
  if (len >= sizeof h.magic && h.magic == SHMS__MAGIC)
    return 1;
  /* shms__format writes these fields before anything else, and the magic last. */
  return len >= offsetof(struct shms__header, incarnation) && h.magic == 0 &&
         h.layout_version == SHMS__LAYOUT_VERSION && h.header_size == sizeof h &&
         h.total_size == file_size;
}

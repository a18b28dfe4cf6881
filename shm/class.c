/* Process-local class views (class.h). */
#include "class.h"

void shms__cls_init(struct shms__cls *k, char *base, int id, const shms_config *config,
                    const struct shms__layout *l) {
  const struct shms__class_desc *d = &l->classes[id];
  k->id = id;
  k->cfg = &config->classes[id];
  k->ctl = SHMS__AT(base, d->ctl_off, struct shms__class_ctl);
  k->cells = SHMS__AT(base, d->cells_off, struct shms__cell);
  k->slots = SHMS__AT(base, d->slots_off, char);
  k->tenants = SHMS__AT(base, d->tenants_off, struct shms__tenant);
  k->tbuckets = SHMS__AT(base, d->tbuckets_off, uint32_t);
  k->abuckets = SHMS__AT(base, d->abuckets_off, uint32_t);
  shms__hbm_init(&k->sfree, SHMS__AT(base, d->sfree_off, uint64_t), d->slots_count);
  shms__hbm_init(&k->sattn, SHMS__AT(base, d->sattn_off, uint64_t), d->slots_count);
  shms__hbm_init(&k->tattn, SHMS__AT(base, d->tattn_off, uint64_t), d->tenants_count);
  shms__hbm_init(&k->aattn, SHMS__AT(base, d->aattn_off, uint64_t), l->accounts_count);
  k->theap = SHMS__AT(base, d->theap_off, struct shms__heap_place);
  k->qheld = SHMS__AT(base, d->qheld_off, uint64_t);
  k->quotas = ((struct shms__header *)base)->quotas;
  k->actl = shms__accounts_ctl_at(base, l);
  k->abkt = shms__accounts_buckets_at(base, l);
  k->accts = shms__accounts_at(base, l);
  k->naccts = l->accounts_count;
  k->nabkt = l->accounts_buckets;
  k->h = NULL; /* set by the handle (shm/segment.c) */
  k->ncells = d->cells_count;
  k->nslots = d->slots_count;
  k->slot_size = d->slot_size;
  k->ntenants = d->tenants_count;
  k->ntb = d->tbuckets_count;
  k->nab = d->abuckets_count;
  k->starvation_ns = config->starvation_after_ns;
  k->fast_map = shms__fast_maps(k->ncells, k->cfg->mode);
  k->grant_timeout_ns = k->cfg->mode != SHMS_MODE_LEASE ? 0
                        : k->cfg->grant_timeout_ns != 0 ? k->cfg->grant_timeout_ns
                                                        : SHMS_DEFAULT_GRANT_TIMEOUT_NS;
  k->timed = shms_class_fairness(k->cfg) == SHMS_FAIRNESS_TIME;
  uint64_t x = k->cfg->overtake_ns;
  k->overtake_ns = k->cfg->mode != SHMS_MODE_LEASE || k->cfg->tenant_max_active != 0 ? 0
                   : x == SHMS_OVERTAKE_STRICT                                       ? 0
                   : x != 0                                                          ? x
                            : SHMS_DEFAULT_OVERTAKE_NS;
}

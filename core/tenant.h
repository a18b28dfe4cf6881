/*
 * Tenant records, their name index and the class's tenant ring. Called only
 * by the dispatcher baton's holder, except shms__tenant_active_* (atomic).
 *
 * A record exists while its tenant has indexed requests or leases counted
 * against tenant-max-active; then it returns to the free list, so nothing is
 * kept per departed tenant. The ring holds exactly the tenants with queued
 * work that are below their limit, in round-robin order.
 */
#ifndef SHMS_CORE_TENANT_H
#define SHMS_CORE_TENANT_H

#include <stdint.h>

#include "../shm/class.h"

static inline struct shms__tenant *shms__tenant_at(const struct shms__cls *k, uint32_t ref) {
  return &k->tenants[ref - 1];
}

/* The record of name (index + 1), or 0. Walks one hash chain. */
uint32_t shms__tenant_find(const struct shms__cls *k, const char *name);
/* The record of name, created if absent; 0 when the table is full. */
uint32_t shms__tenant_get(const struct shms__cls *k, const char *name);
/*
 * The ring functions below return 1 when they found the ring torn (a link out of range): the
 * caller marks the index for the baton holder to rebuild (shms__index_corrupt, core/index.c).
 */
/* Charge what leases taken on the fast path held to their tenants (core/fair.h), at most budget
 * records of the tenant table. Returns how many; 1 in *torn if the heap was found torn. */
int shms__tenant_take_fast(const struct shms__cls *k, int budget, int *torn);
/* After a change of policy (a class fair by time): weights read again, and each record whose
 * tenant changed teams moved to its new team's. 1: heap torn. */
int shms__tenant_refresh(const struct shms__cls *k);
/* Return ref to the free list if it has neither indexed requests nor counted leases. */
int shms__tenant_put_if_idle(const struct shms__cls *k, uint32_t ref);

/* Whether ref is at its tenant-max-active limit. */
int shms__tenant_at_limit(const struct shms__cls *k, uint32_t ref);
/* Join the ring's tail if it has queued work and is under its limit; leave it otherwise. */
int shms__ring_update(const struct shms__cls *k, uint32_t ref);
/* Move the ring's head to its tail (after a grant to a tenant with work left). */
int shms__ring_rotate(const struct shms__cls *k);
/* Take ref out of the ring (no-op if absent). */
int shms__ring_remove(const struct shms__cls *k, uint32_t ref);

/*
 * Before rebuilding the index: forget the ring and every record's index fields. A record stays
 * (same index, name and figures) while leases count against it or it had a turn in the ring:
 * those are left PENDING, chained in the old ring's order from the record returned (0: none).
 * A PENDING record neither joins the ring nor returns to the free list until
 * shms__ring_restore. Bounded: a torn ring loses only the order of its torn part.
 */
uint32_t shms__tenant_reset(const struct shms__cls *k);
/*
 * After re-indexing every request the old index held: give the PENDING records of the chain
 * from first their turns back in the old order, ahead of tenants that joined meanwhile, and
 * free those left with nothing.
 */
int shms__ring_restore(const struct shms__cls *k, uint32_t first);

#endif

/*
 * The tenant table (docs/protocol.md, "The tenant table"): one record per tenant with a weight
 * set or whose requests a class queued, shared by every class and kept while it is idle. A class's
 * record of a tenant with work (core/tenant.c) takes a reference on its account while it exists:
 * it reads the tenant's weight there, and leaves there what the class charged it when it goes.
 *
 * Looking up is lock-free; adding, folding and setting policy take the table's lock, whose dead
 * holder's is taken over (the chains then built again from the records).
 */
#ifndef SHMS_CORE_ACCOUNT_H
#define SHMS_CORE_ACCOUNT_H

#include <ck_pr.h>
#include <stdint.h>

#include "../shm/atomic.h"
#include "../shm/class.h"
#include "../shm/hbm.h"

enum { SHMS__KIND_TENANT = 0, SHMS__KIND_TEAM = SHMS__ACCT_TEAM };

static inline struct shms__account *shms__account_at(const struct shms__cls *k, uint32_t ref) {
  return &k->accts[ref - 1];
}

/*
 * The record of tenant name, with a reference taken (shms__account_put gives it back), made if
 * absent: 0 when the table is full of records with a policy or in use, or its lock could not be
 * had within timeout_ns (a live holder that does not let go). Never called without an owner id.
 */
uint32_t shms__account_get(const struct shms__cls *k, const char *name, uint64_t timeout_ns);
/*
 * The record of the tenant named by its NUL-padded words (shms__tenant_pack), made if absent,
 * without a reference held: for a charge added to it at once (a record folded meanwhile takes the
 * charge into `_other`). 0 as shms__account_get.
 */
uint32_t shms__account_lookup(const struct shms__cls *k, const uint64_t *name, uint64_t timeout_ns);
/*
 * Move a process's tally t of leases taken on the fast path in class k (its count and its pending
 * charge, each swapped to 0) into the record of the tenant its key names, made if absent, inside
 * the table's tally sequence (core/tally.h). SHMS_EQUEUEFULL (no room) or SHMS_ETIMEDOUT (the
 * lock held past timeout_ns): nothing moved.
 */
int shms__account_take_tally(const struct shms__cls *k, struct shms__tally *t, uint64_t timeout_ns);

/* Add n leases that held ns in all to the fast-path charge k's record ref holds (taken by the
 * class's dispatcher: core/fair.c), and mark it for the dispatcher if ns is not 0. The count is
 * capped, as one scribbled huge would otherwise wrap the 32-bit sum. */
static inline void shms__account_charge_fast(const struct shms__cls *k, uint32_t ref, uint64_t n,
                                             uint64_t ns) {
  struct shms__account_class *a = &shms__account_at(k, ref)->cls[k->id];
  if (ns != 0)
    ck_pr_add_64(&a->fast_ns, ns);
  if (n != 0)
    ck_pr_add_32(&a->fast_n, n < (1u << 24) ? (uint32_t)n : 1u << 24);
  /* A mark still set is not taken yet: its taker's exchange of the sums, after it takes the mark,
   * comes after our adds (atomic, and ordered before this look: free on x86). The look saves a
   * locked write to a line every contended release would share. */
  ck_pr_fence_atomic_load();
  if (ns != 0 && !shms__hbm_test(&k->aattn, ref - 1))
    shms__hbm_set(&k->aattn, ref - 1);
}
/* Searches of a full table for records to fold that this process made (what a test of a table
 * full of records in use counts). */
extern uint64_t shms__account_searches;
/* Give back a reference shms__account_get took. */
void shms__account_put(const struct shms__cls *k, uint32_t ref);
/* The weight a tenant's charges are divided by: its own, 1..SHMS_WEIGHT_MAX. */
uint32_t shms__account_weight(const struct shms__cls *k, uint32_t ref);

/* The team record tenant record ref belongs to, or 0. */
uint32_t shms__account_team(const struct shms__cls *k, uint32_t ref);
/* Take one more reference on ref, a record that is referenced or has a policy already. */
void shms__account_hold(const struct shms__cls *k, uint32_t ref);

/* A change of policy: a tenant's or a team's weight, and a tenant's team. */
struct shms__policy_change {
  const char *name;
  uint32_t kind;    /* SHMS__KIND_TENANT or SHMS__KIND_TEAM */
  uint32_t weight;  /* 1..SHMS_WEIGHT_MAX, or 0: unchanged */
  const char *team; /* a tenant's team: NULL unchanged, "" none, else the team (made if absent) */
};

/*
 * Apply p. The records it names are made if absent and kept from then on (never folded).
 * SHMS_EQUEUEFULL when the table has no room for them, SHMS_ETIMEDOUT when its lock is held
 * longer than timeout_ns; nothing changed then.
 */
int shms__account_set(const struct shms__cls *k, const struct shms__policy_change *p,
                      uint64_t timeout_ns);

/* Take the table's lock (as adding and policy do), for another table's change that must be
 * one at a time (a quota added: core/quota.c); SHMS_ETIMEDOUT past timeout_ns. */
int shms__accounts_lock(const struct shms__cls *k, uint64_t timeout_ns);
void shms__accounts_unlock(const struct shms__cls *k);

#endif

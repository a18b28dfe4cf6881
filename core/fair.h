/*
 * Fairness by cell-time (docs/protocol.md, "Fairness by time"): in a class fair by time, the
 * tenants with a turn (the ring's members) are kept in order of what they were charged (a
 * calendar of charge quanta, and a heap for those charged far ahead), and the dispatcher grants
 * to the least charged. A grant charges its tenant what its lease is
 * expected to hold (the tenant's recent average); the lease's end corrects the charge to what
 * it held. Called by the baton's holder, but shms__fair_ended (by whoever ends a lease).
 */
#ifndef SHMS_CORE_FAIR_H
#define SHMS_CORE_FAIR_H

#include <stdint.h>

#include "../shm/class.h"

/*
 * A charge is cell-time divided by the tenant's weight: SHMS__FAIR_SCALE units per ns of one
 * cell held at weight 1. Tenants charged within one quantum of each other (2^26 units: about a
 * millisecond at weight 1) are alike: they take turns, the one whose last turn is oldest first,
 * as tenants of a class fair by grants do.
 */
#define SHMS__FAIR_SCALE         64u
#define SHMS__FAIR_QUANTUM_SHIFT 26
/* Past this virtual time every charge is moved back by SHMS__FAIR_REBASE (a long-lived class). */
#define SHMS__FAIR_REBASE_AT (1ull << 62)
#define SHMS__FAIR_REBASE    (1ull << 61)

/* Whether a's turn comes before b's: less charged (by quanta), else the older turn. */
int shms__fair_before(const struct shms__tenant *a, const struct shms__tenant *b);
/* The tenant whose turn it is: the order's first, 0 when none has a turn. */
uint32_t shms__fair_first(const struct shms__cls *k);
/* How many tenants and teams come before ref (one with a turn) in the class's order. Reads
 * without the baton (the count of a moment, for explain). */
uint32_t shms__fair_ahead(const struct shms__cls *k, uint32_t ref);
/* ref takes turns from now: into the order, charged at least the class's virtual time (no
 * credit banked while it had no turn), after every tenant charged alike. 1: torn. */
int shms__fair_join(const struct shms__cls *k, uint32_t ref);
/* ref takes no more turns: out of the order. 1: torn. */
int shms__fair_leave(const struct shms__cls *k, uint32_t ref);
/*
 * ref was granted lead cell c of a lease of `cells` cells: charge it what the lease is expected
 * to hold (cells x one lease's hold), recorded in the cell for the lease's end to correct; its
 * next turn comes after every tenant charged alike. 1: torn.
 */
int shms__fair_granted(const struct shms__cls *k, uint32_t ref, uint32_t c, uint32_t cells);
/*
 * A lease of `cells` cells charged charged_ns to ref ended after holding held_ns (used 0: a
 * grant returned unused, held_ns 0): the difference between cells x held_ns and the charge is owed
 * to ref, taken by the baton's holder when it attends ref (the caller raises ref's attention bit).
 * Any process, inside an operation (atomic adds).
 */
void shms__fair_ended(const struct shms__cls *k, uint32_t ref, int used, uint64_t held_ns,
                      uint64_t charged_ns, uint32_t cells);
/* The charge a process keeps in its tally of a tenant before adding it to the tenant's record:
 * what the dispatcher may not know yet of a tenant's leases, per process releasing them. */
#define SHMS__FAST_PENDING_NS (100ull * 1000)
/*
 * A lease taken on the fast path (it has no tenant record) ended after holding held_ns while
 * requests were queued: added to its tenant's record in the tenant table (name: packed words),
 * for the baton's holder to charge (shms__fair_take_fast), once this process's tally of the
 * tenant holds SHMS__FAST_PENDING_NS. Any process, inside an operation.
 */
void shms__fair_fast_ended(const struct shms__cls *k, const uint64_t *name, uint64_t held_ns);
/*
 * Charge what leases taken on the fast path held (shms__fair_fast_ended) to the tenant of account
 * aref: to the class's record of it, if record_of finds one (the record holds the live charge),
 * else to what the account keeps for the class. From no less than the class's virtual time, as a
 * lease granted now would be. 1: torn.
 */
int shms__fair_charge_fast(const struct shms__cls *k, uint32_t aref,
                           uint32_t (*record_of)(const struct shms__cls *k, uint32_t aref));
/* Take what ended leases owe ref (shms__fair_ended) into its charge and estimate. 1: torn. */
int shms__fair_settle(const struct shms__cls *k, uint32_t ref);
/* Before the index is rebuilt: an empty order (the ring's members join it again), and every
 * fast-path charge in the tenant table marked again for shms__fair_take_fast. */
void shms__fair_reset(const struct shms__cls *k);
/* After a change of policy in the tenant table: every record's weight read again. 1 if the
 * policy had changed since the class last looked, else 0. */
int shms__fair_refresh(const struct shms__cls *k);
/* A new record of the class takes up what the tenant table kept of its tenant (charge,
 * estimate, weight); a record that goes leaves them there (core/tenant.c). */
void shms__fair_load(const struct shms__cls *k, struct shms__tenant *t);
void shms__fair_store(const struct shms__cls *k, struct shms__tenant *t);

#endif

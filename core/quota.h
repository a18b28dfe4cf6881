/*
 * Named quotas (docs/protocol.md, "Quotas"): a table of the segment's, each entry a name, a
 * maximum and the units in use, counted per class in fields of one word. A grant from the queue
 * takes a unit of each quota its request names, and the lease's end gives them back; a lease
 * quarantined keeps them until its cell is repaired. Only requests that name quotas come here:
 * the fast path never does.
 */
#ifndef SHMS_CORE_QUOTA_H
#define SHMS_CORE_QUOTA_H

#include <stdint.h>

#include "../shm/class.h"

/* Units of quota q in use, in every class. */
uint32_t shms__quota_used(const struct shms__quota *q);
/* Whether quota q (an index into the table) has a unit free now. */
int shms__quota_room(const struct shms__cls *k, uint32_t q);
/* The index of the quota named name, or -1. Lock-free: a LIVE entry's name never changes. */
int shms__quota_find(const struct shms__quota *table, const char *name);
/*
 * Take one unit of each quota in mask for class k, each only while its total is below its
 * maximum. All or none: returns 0 and takes nothing if one is full (*full: its index). Under
 * the baton (the dispatcher's grant).
 */
int shms__quota_take(const struct shms__cls *k, uint32_t mask, uint32_t *full);
/* Give back one unit of each quota in mask, taken in class k. */
void shms__quota_put(const struct shms__cls *k, uint32_t mask);
/* The quotas the lease or grant that cell c carries at word w holds (0 for none). */
uint32_t shms__quota_held(const struct shms__cls *k, uint32_t c, uint64_t w);
/* Units of quota q that class k's cells hold, as their releasers will give them back. */
uint32_t shms__quota_count(const struct shms__cls *k, uint32_t q);
/* Recovery, holding k still: set k's field of every quota to what its cells hold. Returns how
 * many fields were off. */
uint32_t shms__quota_recount(const struct shms__cls *k);

/* Observers: requests and jobs queued in h's classes that name quota q and are parked (waiting
 * for a quota). Read racily, one slot at a time. */
struct shms;
uint32_t shms__quota_waiters(const struct shms *h, uint32_t q);

#endif

/*
 * Every lease counted for its tenant (docs/protocol.md, "Tallies"): a lease the dispatcher grants
 * is counted in the tenant table by the baton holder; one taken on the fast path, in its process's
 * tally for the class and tenant (a line of the process's own entry: no line shared with other
 * processes on the fast path). A tally moves into the tenant table when its process needs it for
 * another class or tenant, and when a process takes over the entry; until then observers add it
 * up from every entry, live or not, so a process that exits or dies loses nothing.
 */
#ifndef SHMS_CORE_TALLY_H
#define SHMS_CORE_TALLY_H

#include <stdint.h>

#include "../shm/handle.h"

/* Count a lease taken on the fast path in class k for tenant (packed words), for this process.
 * A table with no room (records with a policy fill it) or locked past 10 ms leaves it uncounted. */
void shms__tally_lease(struct shms *h, const struct shms__cls *k, const uint64_t *tenant);

/* Move what this process's entry holds in its tallies (a previous owner's, or ours) into the
 * tenant table, keeping their keys. Registered handles only. */
void shms__tally_adopt(struct shms *h);

/* Each tally of class k in the process table (every entry, whatever its state) with a count:
 * fn(ctx, the tenant's name words, the count). Read-only. */
typedef void shms__tally_fn(void *ctx, const uint64_t *name, uint64_t grants);
void shms__tally_each(const struct shms__cls *k, shms__tally_fn *fn, void *ctx);

/* Reading tallies and the table's records as one instant: begin, read both, and read again while
 * retry says so (a tally moved meanwhile). A mover that died mid-move leaves the sequence odd:
 * after a bounded wait begin sets *torn, and the caller reads once without it. */
uint64_t shms__tally_read_begin(const struct shms__cls *k, int *torn);
int shms__tally_read_retry(const struct shms__cls *k, uint64_t v);

#endif

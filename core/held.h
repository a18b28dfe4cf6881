/*
 * The ticket of the lease a cell carries (docs/protocol.md, "Cells"). A
 * lease-mode request gives its slot back the moment it is accepted, so its
 * ticket then names a slot that no longer holds it; the accepting waiter
 * records the ticket in the cell, and explain and cancel look for it there.
 */
#ifndef SHMS_CORE_HELD_H
#define SHMS_CORE_HELD_H

#include <stdint.h>

#include "../shm/class.h"

/*
 * Record that cell c's lease of generation gen was granted to the request of
 * sequence seq. Called by the acceptor only, after its CAS made the cell
 * LEASED with generation gen, and before it frees the request's slot.
 */
void shms__held_record(const struct shms__cls *k, uint32_t c, uint32_t gen, uint64_t seq);

/* Where a ticket's lease is held. */
struct shms__held {
  uint32_t cell;
  uint32_t owner;    /* owner id of the holder (the cell word's) */
  uint64_t start_ns; /* the lease's start (its grant), on the coarse monotonic clock */
};

/*
 * Look over k's cells for a LEASED cell that carries the lease granted to
 * the request (slot, seq). 1 with *out, or 0. A reader: it writes nothing,
 * and a cell that changes while it is read is not reported.
 */
int shms__held_find(const struct shms__cls *k, uint32_t slot, uint64_t seq, struct shms__held *out);

#endif

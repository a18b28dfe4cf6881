/*
 * A tenant's queued requests in the two orders the scheduler needs, both
 * intrusive in the slots (docs/protocol.md, "The index"):
 *
 *  - by key: a treap of (priority, deadline) groups (core/tree.c), each group
 *    a list in sequence order. The best request is the first group's first
 *    request, cached on the tenant. With one key (plain FIFO) all is O(1).
 *  - by age: one list in sequence order; its head is the oldest request.
 *
 * Arrivals are indexed nearly in sequence order (a pass drains its attention
 * bits by slot index), so inserting walks back from a list's tail over at
 * most the few requests published out of order. Only the baton holder calls
 * these; a list or tree found torn sets shms__index_corrupt.
 */
#ifndef SHMS_CORE_ORDER_H
#define SHMS_CORE_ORDER_H

#include <stdint.h>

#include "../shm/class.h"

/* Link request i into (unlink it from) t's orders. 1 if a walk found the index torn: the caller
 * marks it for the baton holder to rebuild (shms__index_corrupt). */
int shms__order_insert(const struct shms__cls *k, struct shms__tenant *t, uint32_t i);
int shms__order_remove(const struct shms__cls *k, struct shms__tenant *t, uint32_t i);
/* The oldest request (slot index + 1), or 0. */
uint32_t shms__order_oldest(const struct shms__tenant *t);
/* The first request by key (slot index + 1), or 0. */
uint32_t shms__order_best(const struct shms__tenant *t);
/*
 * How many of t's requests the scheduler would pick before slot i at time now
 * (aged ones oldest first, then by key). O(k): for explain only.
 */
uint32_t shms__order_ahead(const struct shms__cls *k, const struct shms__tenant *t, uint32_t i,
                           uint64_t now);

/*
 * A class that overtakes also keeps every indexed request in one list by enqueue time
 * (ctl->all_head: the oldest), whose head bounds the overtaking (core/overtake.c). Link request
 * i into it (unlink it); 1 if the list was found torn.
 */
int shms__order_class_insert(const struct shms__cls *k, uint32_t i);
int shms__order_class_remove(const struct shms__cls *k, uint32_t i);

#endif

/*
 * A treap of request groups, linked by slot index + 1 (0 = none) through
 * the slots' prio_left/prio_right, so it lives in shared memory. One node per
 * distinct key (priority descending, then deadline ascending with "none"
 * last) among a tenant's queued requests; the node is the group's first
 * request, and the rest of the group hangs off it in a list (core/order.c).
 * Heap priorities are a hash of the key, so no input can unbalance the treap
 * on purpose. Insert, remove, find and replace are O(log g) in the tenant's g
 * distinct keys; with one key (plain FIFO) every operation is O(1).
 *
 * Only the dispatcher baton's holder calls these. Walks are bounded: a tree
 * torn by a crash sets corrupt, and the caller rebuilds the index.
 */
#ifndef SHMS_CORE_TREE_H
#define SHMS_CORE_TREE_H

#include <stdint.h>

#include "../shm/class.h"

struct shms__tree {
  const struct shms__cls *k;
  int corrupt;
};

/* Whether slot a's key sorts strictly before slot b's. */
int shms__key_before(const struct shms__slot *a, const struct shms__slot *b);
/* Whether slots a and b have the same key. */
int shms__key_equal(const struct shms__slot *a, const struct shms__slot *b);
/* Insert slot node (its key not yet present); returns the new root. */
uint32_t shms__tree_insert(struct shms__tree *t, uint32_t root, uint32_t node);
/* Remove group node slot node (in the tree); returns the new root. */
uint32_t shms__tree_remove(struct shms__tree *t, uint32_t root, uint32_t node);
/* Put slot repl (same key, not in the tree) in node's place; returns the new root. */
uint32_t shms__tree_replace(struct shms__tree *t, uint32_t root, uint32_t node, uint32_t repl);
/* The node (slot index + 1) with slot probe's key, or 0. */
uint32_t shms__tree_find(struct shms__tree *t, uint32_t root, uint32_t probe);
/* The first node in key order, or 0. */
uint32_t shms__tree_first(struct shms__tree *t, uint32_t root);
/* The node after ref in key order, or 0 (O(log g); for explain). */
uint32_t shms__tree_next(struct shms__tree *t, uint32_t root, uint32_t ref);

#endif

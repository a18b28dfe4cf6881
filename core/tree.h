/*
 * Intrusive treaps over request slots, linked by slot index + 1 (0 = none),
 * so they live in shared memory. Two orders exist, each with its own link
 * fields in the slot: PRIO (priority descending, deadline ascending with none
 * last, sequence ascending) picks a tenant's next request; AGE (sequence
 * ascending) finds its oldest for aging. Insert, remove and first are
 * O(log k) expected in the tenant's k queued requests; heap priorities are a
 * hash of the request sequence, so no input can unbalance them on purpose.
 *
 * Only the dispatcher baton's holder calls these. Recursion is bounded: a
 * tree deeper than SHMS__TREE_MAX_DEPTH (torn by a crash) sets *corrupt and
 * the caller rebuilds the index from the slots' state words.
 */
#ifndef SHMS_CORE_TREE_H
#define SHMS_CORE_TREE_H

#include <stdint.h>

#include "class.h"

enum shms__order { SHMS__ORDER_PRIO, SHMS__ORDER_AGE };

#define SHMS__TREE_MAX_DEPTH 256

struct shms__tree {
  const struct shms__cls *k;
  enum shms__order order;
  int corrupt;
};

/* Whether slot a sorts before slot b in the tree's order. */
int shms__tree_before(const struct shms__tree *t, uint32_t a, uint32_t b);
/* Insert slot index node (not index + 1); returns the new root. */
uint32_t shms__tree_insert(struct shms__tree *t, uint32_t root, uint32_t node);
/* Remove slot index node, which must be in the tree; returns the new root. */
uint32_t shms__tree_remove(struct shms__tree *t, uint32_t root, uint32_t node);
/* The first slot index + 1 in order, or 0 for an empty tree. */
uint32_t shms__tree_first(struct shms__tree *t, uint32_t root);
/* How many slots of the tree sort before node (for explain; O(k)). */
uint32_t shms__tree_count_before(struct shms__tree *t, uint32_t root, uint32_t node);

#endif

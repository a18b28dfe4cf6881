/* Intrusive treaps over request slots (tree.h). */
#include "tree.h"

static uint32_t *left_of(const struct shms__tree *t, uint32_t i) {
  struct shms__slot *s = shms__slot_at(t->k, i);
  return t->order == SHMS__ORDER_PRIO ? &s->prio_left : &s->age_left;
}

static uint32_t *right_of(const struct shms__tree *t, uint32_t i) {
  struct shms__slot *s = shms__slot_at(t->k, i);
  return t->order == SHMS__ORDER_PRIO ? &s->prio_right : &s->age_right;
}

/* The treap's heap priority: a mix of the sequence, different per order. */
static uint32_t heap_prio(const struct shms__tree *t, uint32_t i) {
  uint64_t x =
      shms__slot_at(t->k, i)->seq ^ (t->order == SHMS__ORDER_AGE ? 0x9e3779b97f4a7c15ull : 0);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return (uint32_t)(x ^ (x >> 33));
}

int shms__tree_before(const struct shms__tree *t, uint32_t a, uint32_t b) {
  const struct shms__slot *x = shms__slot_at(t->k, a), *y = shms__slot_at(t->k, b);
  if (t->order == SHMS__ORDER_PRIO) {
    if (x->priority != y->priority)
      return x->priority > y->priority;
    /* No deadline (0) sorts after every deadline. */
    uint64_t dx = x->deadline_ns ? x->deadline_ns : UINT64_MAX;
    uint64_t dy = y->deadline_ns ? y->deadline_ns : UINT64_MAX;
    if (dx != dy)
      return dx < dy;
  }
  return x->seq < y->seq;
}

/* A node is valid if it is a slot index + 1 within the class. */
static int valid(const struct shms__tree *t, uint32_t ref) { return ref <= t->k->nslots; }

static uint32_t insert_at(struct shms__tree *t, uint32_t root, uint32_t node, int depth) {
  if (root == 0)
    return node + 1;
  if (depth > SHMS__TREE_MAX_DEPTH || !valid(t, root)) {
    t->corrupt = 1;
    return root;
  }
  uint32_t r = root - 1;
  if (shms__tree_before(t, node, r)) {
    *left_of(t, r) = insert_at(t, *left_of(t, r), node, depth + 1);
    uint32_t l = *left_of(t, r);
    if (!t->corrupt && heap_prio(t, l - 1) > heap_prio(t, r)) { /* rotate right */
      *left_of(t, r) = *right_of(t, l - 1);
      *right_of(t, l - 1) = root;
      return l;
    }
  } else {
    *right_of(t, r) = insert_at(t, *right_of(t, r), node, depth + 1);
    uint32_t g = *right_of(t, r);
    if (!t->corrupt && heap_prio(t, g - 1) > heap_prio(t, r)) { /* rotate left */
      *right_of(t, r) = *left_of(t, g - 1);
      *left_of(t, g - 1) = root;
      return g;
    }
  }
  return root;
}

uint32_t shms__tree_insert(struct shms__tree *t, uint32_t root, uint32_t node) {
  *left_of(t, node) = 0;
  *right_of(t, node) = 0;
  return insert_at(t, root, node, 0);
}

/* Join two treaps where every node of a sorts before every node of b. */
static uint32_t merge(struct shms__tree *t, uint32_t a, uint32_t b, int depth) {
  if (a == 0 || b == 0)
    return a ? a : b;
  if (depth > SHMS__TREE_MAX_DEPTH || !valid(t, a) || !valid(t, b)) {
    t->corrupt = 1;
    return a;
  }
  if (heap_prio(t, a - 1) > heap_prio(t, b - 1)) {
    *right_of(t, a - 1) = merge(t, *right_of(t, a - 1), b, depth + 1);
    return a;
  }
  *left_of(t, b - 1) = merge(t, a, *left_of(t, b - 1), depth + 1);
  return b;
}

static uint32_t remove_at(struct shms__tree *t, uint32_t root, uint32_t node, int depth) {
  if (root == 0 || depth > SHMS__TREE_MAX_DEPTH || !valid(t, root)) {
    t->corrupt = 1; /* the node must be in the tree */
    return root;
  }
  uint32_t r = root - 1;
  if (r == node)
    return merge(t, *left_of(t, r), *right_of(t, r), depth);
  if (shms__tree_before(t, node, r))
    *left_of(t, r) = remove_at(t, *left_of(t, r), node, depth + 1);
  else
    *right_of(t, r) = remove_at(t, *right_of(t, r), node, depth + 1);
  return root;
}

uint32_t shms__tree_remove(struct shms__tree *t, uint32_t root, uint32_t node) {
  uint32_t out = remove_at(t, root, node, 0);
  *left_of(t, node) = 0;
  *right_of(t, node) = 0;
  return out;
}

uint32_t shms__tree_first(struct shms__tree *t, uint32_t root) {
  for (int depth = 0; root != 0; depth++) {
    if (depth > SHMS__TREE_MAX_DEPTH || !valid(t, root)) {
      t->corrupt = 1;
      return 0;
    }
    uint32_t l = *left_of(t, root - 1);
    if (l == 0)
      return root;
    root = l;
  }
  return 0;
}

static uint32_t count_at(struct shms__tree *t, uint32_t root, uint32_t node, int depth) {
  if (root == 0 || depth > SHMS__TREE_MAX_DEPTH || !valid(t, root))
    return 0;
  uint32_t r = root - 1;
  uint32_t n = count_at(t, *left_of(t, r), node, depth + 1);
  if (r != node && shms__tree_before(t, r, node))
    n += 1 + count_at(t, *right_of(t, r), node, depth + 1);
  return n;
}

uint32_t shms__tree_count_before(struct shms__tree *t, uint32_t root, uint32_t node) {
  return count_at(t, root, node, 0);
}

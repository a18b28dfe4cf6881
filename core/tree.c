/* The treap of request groups (tree.h). */
#include "tree.h"

#define MAX_DEPTH 256

static struct shms__slot *at(const struct shms__tree *t, uint32_t ref) {
  return shms__slot_at(t->k, ref - 1);
}

static int valid(const struct shms__tree *t, uint32_t ref) {
  return ref >= 1 && ref <= t->k->nslots;
}

int shms__key_before(const struct shms__slot *a, const struct shms__slot *b) {
  if (a->priority != b->priority)
    return a->priority > b->priority;
  /* No deadline (0) sorts after every deadline. */
  uint64_t da = a->deadline_ns ? a->deadline_ns : UINT64_MAX;
  uint64_t db = b->deadline_ns ? b->deadline_ns : UINT64_MAX;
  return da < db;
}

int shms__key_equal(const struct shms__slot *a, const struct shms__slot *b) {
  return a->priority == b->priority && a->deadline_ns == b->deadline_ns;
}

static uint32_t heap_prio(const struct shms__tree *t, uint32_t ref) {
  const struct shms__slot *s = at(t, ref);
  uint64_t x = s->deadline_ns ^ ((uint64_t)(uint32_t)s->priority * 0x9e3779b97f4a7c15ull);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return (uint32_t)(x ^ (x >> 33));
}

static uint32_t insert_at(struct shms__tree *t, uint32_t root, uint32_t node, int depth) {
  if (root == 0)
    return node;
  if (depth > MAX_DEPTH || !valid(t, root)) {
    t->corrupt = 1;
    return root;
  }
  struct shms__slot *r = at(t, root);
  if (shms__key_before(at(t, node), r)) {
    r->prio_left = insert_at(t, r->prio_left, node, depth + 1);
    uint32_t l = r->prio_left;
    if (!t->corrupt && heap_prio(t, l) > heap_prio(t, root)) { /* rotate right */
      r->prio_left = at(t, l)->prio_right;
      at(t, l)->prio_right = root;
      return l;
    }
  } else {
    r->prio_right = insert_at(t, r->prio_right, node, depth + 1);
    uint32_t g = r->prio_right;
    if (!t->corrupt && heap_prio(t, g) > heap_prio(t, root)) { /* rotate left */
      r->prio_right = at(t, g)->prio_left;
      at(t, g)->prio_left = root;
      return g;
    }
  }
  return root;
}

uint32_t shms__tree_insert(struct shms__tree *t, uint32_t root, uint32_t node) {
  uint32_t ref = node + 1;
  at(t, ref)->prio_left = at(t, ref)->prio_right = 0;
  return insert_at(t, root, ref, 0);
}

/* Join two treaps where every key of a sorts before every key of b. */
static uint32_t merge(struct shms__tree *t, uint32_t a, uint32_t b, int depth) {
  if (a == 0 || b == 0)
    return a ? a : b;
  if (depth > MAX_DEPTH || !valid(t, a) || !valid(t, b)) {
    t->corrupt = 1;
    return a;
  }
  if (heap_prio(t, a) > heap_prio(t, b)) {
    at(t, a)->prio_right = merge(t, at(t, a)->prio_right, b, depth + 1);
    return a;
  }
  at(t, b)->prio_left = merge(t, a, at(t, b)->prio_left, depth + 1);
  return b;
}

/* The link that points at the node with probe's key (the root, or a child field), or NULL. */
static uint32_t *link_to(struct shms__tree *t, uint32_t *root, uint32_t probe) {
  uint32_t *link = root;
  for (int depth = 0; *link != 0; depth++) {
    if (depth > MAX_DEPTH || !valid(t, *link)) {
      t->corrupt = 1;
      return NULL;
    }
    struct shms__slot *n = at(t, *link), *p = at(t, probe);
    if (shms__key_equal(p, n))
      return link;
    link = shms__key_before(p, n) ? &n->prio_left : &n->prio_right;
  }
  return NULL;
}

uint32_t shms__tree_remove(struct shms__tree *t, uint32_t root, uint32_t node) {
  uint32_t ref = node + 1, *link = link_to(t, &root, ref);
  if (link == NULL || *link != ref) {
    t->corrupt = 1;
    return root;
  }
  struct shms__slot *n = at(t, ref);
  *link = merge(t, n->prio_left, n->prio_right, 0);
  n->prio_left = n->prio_right = 0;
  return root;
}

uint32_t shms__tree_replace(struct shms__tree *t, uint32_t root, uint32_t node, uint32_t repl) {
  uint32_t ref = node + 1, *link = link_to(t, &root, ref);
  if (link == NULL || *link != ref) {
    t->corrupt = 1;
    return root;
  }
  struct shms__slot *n = at(t, ref), *r = at(t, repl + 1);
  r->prio_left = n->prio_left;
  r->prio_right = n->prio_right;
  n->prio_left = n->prio_right = 0;
  *link = repl + 1;
  return root;
}

uint32_t shms__tree_find(struct shms__tree *t, uint32_t root, uint32_t probe) {
  uint32_t *link = link_to(t, &root, probe + 1);
  return link != NULL ? *link : 0;
}

uint32_t shms__tree_first(struct shms__tree *t, uint32_t root) {
  for (int depth = 0; root != 0; depth++) {
    if (depth > MAX_DEPTH || !valid(t, root)) {
      t->corrupt = 1;
      return 0;
    }
    if (at(t, root)->prio_left == 0)
      return root;
    root = at(t, root)->prio_left;
  }
  return 0;
}

uint32_t shms__tree_next(struct shms__tree *t, uint32_t root, uint32_t ref) {
  uint32_t next = 0;
  for (int depth = 0; root != 0; depth++) {
    if (depth > MAX_DEPTH || !valid(t, root)) {
      t->corrupt = 1;
      return 0;
    }
    if (shms__key_before(at(t, ref), at(t, root))) {
      next = root;
      root = at(t, root)->prio_left;
    } else {
      root = at(t, root)->prio_right;
    }
  }
  return next;
}

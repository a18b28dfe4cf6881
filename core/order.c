/* A tenant's two orders: key groups and age (order.h). */
#include "order.h"

#include <stddef.h>

#include "sched.h"
#include "tree.h"

static struct shms__slot *at(const struct shms__cls *k, uint32_t ref) {
  return shms__slot_at(k, ref - 1);
}

static int valid(const struct shms__cls *k, uint32_t ref) { return ref >= 1 && ref <= k->nslots; }

/*
 * From tail, walk back along the links at prev_off (age_prev or grp_prev)
 * to the last request whose sequence is below seq: where seq goes after.
 * 0 if it goes first.
 */
static uint32_t walk_back(const struct shms__cls *k, uint32_t tail, uint64_t seq, size_t prev_off,
                          int *torn) {
  uint32_t p = tail;
  for (uint32_t steps = 0; p != 0 && valid(k, p) && at(k, p)->seq > seq; steps++) {
    if (steps >= k->nslots)
      break;
    p = *(const uint32_t *)((const char *)at(k, p) + prev_off);
  }
  if (p != 0 && !valid(k, p))
    *torn = 1;
  return p;
}

static int age_insert(const struct shms__cls *k, struct shms__tenant *t, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  int torn = 0;
  uint32_t p = walk_back(k, t->age_tail, s->seq, offsetof(struct shms__slot, age_prev), &torn);
  uint32_t n = p ? at(k, p)->age_next : t->age_head;
  s->age_prev = p;
  s->age_next = n;
  if (p)
    at(k, p)->age_next = i + 1;
  else
    t->age_head = i + 1;
  if (n)
    at(k, n)->age_prev = i + 1;
  else
    t->age_tail = i + 1;
  return torn;
}

static void age_remove(const struct shms__cls *k, struct shms__tenant *t, uint32_t i) {
  struct shms__slot *s = shms__slot_at(k, i);
  if (s->age_prev)
    at(k, s->age_prev)->age_next = s->age_next;
  else
    t->age_head = s->age_next;
  if (s->age_next)
    at(k, s->age_next)->age_prev = s->age_prev;
  else
    t->age_tail = s->age_prev;
  s->age_prev = s->age_next = 0;
}

static int refresh_first(const struct shms__cls *k, struct shms__tenant *t) {
  struct shms__tree tr = {.k = k};
  t->prio_first = shms__tree_first(&tr, t->prio_root);
  return tr.corrupt;
}

/* Make i (not in the tree) the first request of group g, which it precedes. */
static int become_head(const struct shms__cls *k, struct shms__tenant *t, uint32_t g, uint32_t i) {
  struct shms__tree tr = {.k = k};
  struct shms__slot *s = shms__slot_at(k, i), *head = at(k, g);
  s->grp_prev = 0;
  s->grp_next = g;
  s->grp_tail = head->grp_tail;
  head->grp_prev = i + 1;
  t->prio_root = shms__tree_replace(&tr, t->prio_root, g - 1, i);
  if (t->prio_first == g)
    t->prio_first = i + 1;
  return tr.corrupt;
}

static int group_insert(const struct shms__cls *k, struct shms__tenant *t, uint32_t i) {
  struct shms__tree tr = {.k = k};
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t g = shms__tree_find(&tr, t->prio_root, i);
  if (g == 0) { /* a new key: a new group */
    s->grp_prev = s->grp_next = 0;
    s->grp_tail = i + 1;
    t->prio_root = shms__tree_insert(&tr, t->prio_root, i);
    if (t->prio_first == 0 || shms__key_before(s, at(k, t->prio_first)))
      t->prio_first = i + 1;
  } else {
    uint32_t p = walk_back(k, at(k, g)->grp_tail, s->seq, offsetof(struct shms__slot, grp_prev),
                           &tr.corrupt);
    if (p == 0) {
      tr.corrupt |= become_head(k, t, g, i);
    } else {
      uint32_t n = at(k, p)->grp_next;
      s->grp_prev = p;
      s->grp_next = n;
      at(k, p)->grp_next = i + 1;
      if (n)
        at(k, n)->grp_prev = i + 1;
      else
        at(k, g)->grp_tail = i + 1;
    }
  }
  return tr.corrupt;
}

static int group_remove(const struct shms__cls *k, struct shms__tenant *t, uint32_t i) {
  struct shms__tree tr = {.k = k};
  struct shms__slot *s = shms__slot_at(k, i);
  if (s->grp_prev != 0) { /* inside its group: unlink from the list */
    at(k, s->grp_prev)->grp_next = s->grp_next;
    if (s->grp_next)
      at(k, s->grp_next)->grp_prev = s->grp_prev;
    else {
      uint32_t g = shms__tree_find(&tr, t->prio_root, i);
      if (g != 0)
        at(k, g)->grp_tail = s->grp_prev;
      else
        tr.corrupt = 1;
    }
  } else if (s->grp_next != 0) { /* the group's first: the next one takes its node */
    struct shms__slot *n = at(k, s->grp_next);
    n->grp_prev = 0;
    n->grp_tail = s->grp_tail;
    t->prio_root = shms__tree_replace(&tr, t->prio_root, i, s->grp_next - 1);
    if (t->prio_first == i + 1)
      t->prio_first = s->grp_next;
  } else { /* the group's only request: the key goes */
    t->prio_root = shms__tree_remove(&tr, t->prio_root, i);
    if (t->prio_first == i + 1)
      tr.corrupt |= refresh_first(k, t);
  }
  s->grp_prev = s->grp_next = s->grp_tail = 0;
  return tr.corrupt;
}

int shms__order_insert(const struct shms__cls *k, struct shms__tenant *t, uint32_t i) {
  int torn = group_insert(k, t, i);
  SHMS__STEP();
  return age_insert(k, t, i) | torn;
}

int shms__order_remove(const struct shms__cls *k, struct shms__tenant *t, uint32_t i) {
  int torn = group_remove(k, t, i);
  SHMS__STEP();
  age_remove(k, t, i);
  return torn;
}

uint32_t shms__order_oldest(const struct shms__tenant *t) { return t->age_head; }

uint32_t shms__order_best(const struct shms__tenant *t) { return t->prio_first; }

static int aged(const struct shms__cls *k, const struct shms__slot *s, uint64_t now) {
  return now >= s->enqueue_ns && now - s->enqueue_ns >= k->starvation_ns;
}

uint32_t shms__order_ahead(const struct shms__cls *k, const struct shms__tenant *t, uint32_t i,
                           uint64_t now) {
  const struct shms__slot *s = shms__slot_at(k, i);
  uint32_t n = 0, steps = 0;
  /* Aged requests older than i go first; if i is aged, nothing else does. */
  for (uint32_t r = t->age_head; valid(k, r) && r != i + 1 && steps++ < k->nslots;
       r = at(k, r)->age_next)
    n += aged(k, at(k, r), now);
  if (aged(k, s, now))
    return n;
  /* Then every request, not aged, that comes before i by key and sequence. */
  struct shms__tree tr = {.k = k};
  for (uint32_t g = shms__tree_first(&tr, t->prio_root); g != 0 && steps < 4 * k->nslots;
       g = shms__tree_next(&tr, t->prio_root, g)) {
    for (uint32_t r = g; valid(k, r) && steps++ < 4 * k->nslots; r = at(k, r)->grp_next) {
      if (r == i + 1)
        return n;
      n += !aged(k, at(k, r), now);
    }
  }
  return n;
}

/* Whether a was enqueued after b (by time, then sequence): the class list's order. */
static int later(const struct shms__slot *a, const struct shms__slot *b) {
  return a->enqueue_ns != b->enqueue_ns ? a->enqueue_ns > b->enqueue_ns : a->seq > b->seq;
}

int shms__order_class_insert(const struct shms__cls *k, uint32_t i) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__slot *s = shms__slot_at(k, i);
  int torn = 0;
  /* Arrivals are indexed nearly in time order: walk back from the tail. A request older than
   * the head (one unparked after a revocation) goes first at once. */
  uint32_t p = ctl->all_tail;
  if (valid(k, ctl->all_head) && later(at(k, ctl->all_head), s))
    p = 0;
  for (uint32_t steps = 0; p != 0 && valid(k, p) && later(at(k, p), s); steps++) {
    if (steps >= k->nslots)
      break;
    p = at(k, p)->all_prev;
  }
  if (p != 0 && !valid(k, p))
    return 1;
  uint32_t n = p ? at(k, p)->all_next : ctl->all_head;
  if (n != 0 && !valid(k, n))
    return 1;
  s->all_prev = p;
  s->all_next = n;
  if (p)
    at(k, p)->all_next = i + 1;
  else
    ctl->all_head = i + 1;
  if (n)
    at(k, n)->all_prev = i + 1;
  else
    ctl->all_tail = i + 1;
  return torn;
}

int shms__order_class_remove(const struct shms__cls *k, uint32_t i) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__slot *s = shms__slot_at(k, i);
  if ((s->all_prev != 0 && !valid(k, s->all_prev)) || (s->all_next != 0 && !valid(k, s->all_next)))
    return 1;
  if (s->all_prev)
    at(k, s->all_prev)->all_next = s->all_next;
  else if (ctl->all_head == i + 1)
    ctl->all_head = s->all_next;
  else
    return 1; /* first by its links, yet not the head: torn */
  if (s->all_next)
    at(k, s->all_next)->all_prev = s->all_prev;
  else
    ctl->all_tail = s->all_prev;
  s->all_prev = s->all_next = 0;
  return 0;
}

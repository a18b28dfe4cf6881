/*
 * The record of what each process owns (docs/protocol.md, "Owned requests"):
 * a doubly linked list through the slots of the requests a process has
 * queued, every class in one list, headed in its process entry. Detach and
 * the recovery of a dead process walk it, so what they cost is what the
 * process owned, not the size of the segment.
 *
 * Only the owner's own threads change the list, under a lock of the process,
 * and each change is bracketed by own_dirty: a process that dies in the middle
 * of one leaves it set, and its recovery then scans every slot instead. A
 * slot leaves its owner's list before it can come free (before its waiter
 * marks it COLLECTED, or, once accepted, before its waiter frees it), so
 * while the owner lives every slot on the list is its own. Once it is dead,
 * others may collect and free its slots (reaping an unaccepted grant, a
 * worker dropping a job nobody waits for): the walk checks each slot's owner
 * and sequence and falls back to the scan as soon as one is not the owner's.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <stdlib.h>

#include "../shm/alloc.h"
#include "../shm/atomic.h"
#include "../shm/proc.h"
#include "sched.h"

/* One lock per process: lists change at enqueue and collection, which are short, and several
 * handles of a process share one registration, hence one list. */
static pthread_mutex_t owned_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t owned_once = PTHREAD_ONCE_INIT;

/* Held across fork, so that no other thread holds it then: the child, whose one thread is the
 * one that forked, starts with it free. */
static void owned_prepare(void) { pthread_mutex_lock(&owned_lock); }
static void owned_release(void) { pthread_mutex_unlock(&owned_lock); }
static void owned_init(void) { pthread_atfork(owned_prepare, owned_release, owned_release); }

static void lock(void) {
  pthread_once(&owned_once, owned_init);
  pthread_mutex_lock(&owned_lock);
}
static void unlock(void) { pthread_mutex_unlock(&owned_lock); }

/* The slot ref names, or NULL if it names none (a class not configured, an index out of range). */
static struct shms__slot *node(const struct shms *h, uint32_t ref) {
  uint32_t c = SHMS__OWNED_CLASS(ref), i = SHMS__OWNED_INDEX(ref);
  if (ref == 0 || c >= SHMS_CLASS_COUNT || h->cls[c].id < 0 || i >= h->cls[c].nslots)
    return NULL;
  return shms__slot_at(&h->cls[c], i);
}

/* Open a change: a death from here on leaves the record marked for a scan. */
static void begin(struct shms__proc *p) {
  shms__store_32(&p->own_dirty, 1);
  ck_pr_fence_store(); /* marked before any link changes */
}

/* Close a change, unless it found the list broken: then the mark stays, and so does the scan. */
static void end(struct shms__proc *p, int broken) {
  if (broken)
    return;
  ck_pr_fence_store(); /* every link written before the mark goes */
  shms__store_32(&p->own_dirty, 0);
}

void shms__owned_add(struct shms *h, const struct shms__cls *k, uint32_t i) {
  struct shms__proc *p = h->proc;
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t ref = SHMS__OWNED_REF(k->id, i);
  lock();
  begin(p);
  SHMS__STEP();
  uint32_t head = shms__load_32(&p->own_head);
  struct shms__slot *first = head != 0 ? node(h, head) : NULL;
  shms__store_32(&s->own_prev, 0);
  shms__store_32(&s->own_next, head);
  if (first != NULL)
    shms__store_32(&first->own_prev, ref);
  SHMS__STEP();
  shms__store_32(&p->own_head, ref);
  SHMS__STEP();
  end(p, head != 0 && first == NULL);
  unlock();
}

/* Take slot i of k off our list, inside a change; 1 if the list was found broken. */
static int remove_locked(struct shms *h, const struct shms__cls *k, uint32_t i) {
  struct shms__proc *p = h->proc;
  struct shms__slot *s = shms__slot_at(k, i);
  uint32_t ref = SHMS__OWNED_REF(k->id, i);
  uint32_t prev = shms__load_32(&s->own_prev), next = shms__load_32(&s->own_next);
  struct shms__slot *before = prev != 0 ? node(h, prev) : NULL;
  struct shms__slot *after = next != 0 ? node(h, next) : NULL;
  /* Links that lead nowhere, or a list that does not lead here, are not ours to mend. */
  if ((prev != 0 && (before == NULL || shms__load_32(&before->own_next) != ref)) ||
      (prev == 0 && shms__load_32(&p->own_head) != ref) || (next != 0 && after == NULL))
    return 1;
  if (before != NULL)
    shms__store_32(&before->own_next, next);
  else
    shms__store_32(&p->own_head, next);
  SHMS__STEP();
  if (after != NULL)
    shms__store_32(&after->own_prev, prev);
  return 0;
}

void shms__owned_remove(struct shms *h, const struct shms__cls *k, uint32_t i) {
  lock();
  begin(h->proc);
  SHMS__STEP();
  int broken = remove_locked(h, k, i);
  SHMS__STEP();
  end(h->proc, broken);
  unlock();
}

void shms__owned_collect(struct shms *h, const struct shms__cls *k, uint32_t i) {
  lock();
  begin(h->proc);
  SHMS__STEP();
  int broken = remove_locked(h, k, i);
  /* Off the list before COLLECTED: from then on the dispatcher may free the slot and anyone
   * claim it. A death in between would leave a settled request that nobody collects and no
   * list finds, so the change spans the collection too. */
  SHMS__STEP();
  uint64_t w = shms__slot_set_collected(k, i);
  SHMS__STEP();
  end(h->proc, broken);
  unlock();
  if (!(w & SHMS__SLOT_INDEXED))
    shms__slot_free(k, i); /* whoever of waiter and index lets go second frees the slot */
}

int shms__owner_drop(const struct shms__cls *k, uint32_t i, uint64_t seq, int left) {
  uint64_t *wp = &shms__slot_at(k, i)->waiters, w = shms__load_64(wp);
  for (;;) {
    if (SHMS__WAIT_SEQ(w) != (uint32_t)seq)
      return 0;
    if (!(w & SHMS__WAIT_OWNER)) /* dropped before (a recovery run again): last if none wait */
      return SHMS__WAIT_COUNT(w) == 0;
    uint64_t next = (w & ~(uint64_t)SHMS__WAIT_OWNER) | (left ? SHMS__WAIT_LEFT : 0);
    if (ck_pr_cas_64_value(wp, w, next, &w))
      return SHMS__WAIT_COUNT(w) == 0;
  }
}

int shms__owned_leave(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                      int left) {
  lock();
  begin(h->proc);
  SHMS__STEP();
  int broken = remove_locked(h, k, i);
  /* Off the list with its share: a death in between leaves the record marked, and the scan
   * of its recovery drops the share (shms__owner_drop again is harmless). */
  SHMS__STEP();
  int last = shms__owner_drop(k, i, seq, left);
  SHMS__STEP();
  end(h->proc, broken);
  unlock();
  return last;
}

/* Add (ref, seq) to l, growing it; 0 when memory runs out. */
static int push(struct shms__owned *l, uint32_t ref, uint64_t seq) {
  if (l->n == l->cap) {
    uint32_t cap = l->cap != 0 ? 2 * l->cap : 16;
    struct shms__owned_slot *v = shms__realloc(l->v, cap * sizeof *v);
    if (v == NULL)
      return 0;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (struct shms__owned_slot){.ref = ref, .seq = seq};
  return 1;
}

/*
 * Copy owner's list from head into l: 1 if every slot on it was owner's, 0 if
 * the list cannot be trusted. A slot is read between two reads of its word: a
 * claim by someone else changes the word's sequence before anything else, so
 * an unchanged word means owner, sequence and link were the owner's.
 */
static int copy_list(const struct shms *h, uint32_t owner, uint32_t head, struct shms__owned *l) {
  uint64_t total = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    total += h->cls[c].id >= 0 ? h->cls[c].nslots : 0;
  uint64_t steps = 0;
  for (uint32_t ref = head; ref != 0; steps++) {
    struct shms__slot *s = node(h, ref);
    if (s == NULL || steps >= total)
      return 0; /* a link out of range, or a cycle */
    uint64_t w0 = shms__load_64(&s->word), seq = shms__load_64(&s->seq);
    ck_pr_fence_load();
    uint32_t who = shms__load_32(&s->owner), next = shms__load_32(&s->own_next);
    ck_pr_fence_load();
    uint64_t w1 = shms__load_64(&s->word);
    if (who != owner || SHMS__SLOT_SEQ(w0) != (uint32_t)seq || SHMS__SLOT_SEQ(w1) != (uint32_t)seq)
      return 0;
    if (!push(l, ref, seq))
      return 0;
    ref = next;
  }
  return 1;
}

int shms__owned_take(struct shms *h, uint32_t owner, struct shms__owned *l) {
  *l = (struct shms__owned){0};
  uint32_t index = SHMS__OWNER_INDEX(owner);
  if (owner == 0 || index >= h->layout.procs_count)
    return 0;
  struct shms__proc *p = shms__proc_at(h, index);
  if (owner == h->owner) {
    /* Our own detach: the list ends here. Marked until shms__owned_done, so that a death while
     * its requests are being settled leaves a scan for the supervisor. */
    lock();
    int listed = shms__load_32(&p->own_dirty) == 0;
    begin(p);
    listed = listed && copy_list(h, owner, shms__load_32(&p->own_head), l);
    shms__store_32(&p->own_head, 0);
    unlock();
    return listed;
  }
  /* A dead owner's entry may be claimed again at any moment: its head and mark count only if
   * the generation read before them is still the owner's after them (a claim marks the entry,
   * then moves the generation on, then empties the list). */
  uint32_t gen = shms__load_32(&p->gen);
  ck_pr_fence_load();
  uint32_t dirty = shms__load_32(&p->own_dirty), head = shms__load_32(&p->own_head);
  ck_pr_fence_load();
  if ((gen & 0xfffu) != (owner & 0xfffu) || shms__load_32(&p->gen) != gen || dirty != 0)
    return 0;
  return copy_list(h, owner, head, l);
}

void shms__owned_done(struct shms *h, uint32_t owner, struct shms__owned *l) {
  if (owner == h->owner && h->proc != NULL) {
    lock();
    end(h->proc, 0);
    unlock();
  }
  free(l->v);
  *l = (struct shms__owned){0};
}

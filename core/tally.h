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

#include <ck_pr.h>
#include <stdint.h>

#include "../shm/atomic.h"
#include "../shm/crashpoint.h"
#include "../shm/handle.h"

/* The tally this thread counted in last: a loop of one tenant's leases finds it at once. */
extern SHMS__TLS uint32_t shms__tally_hint;

static inline int shms__tally_key_is(const struct shms__tally *t, uint32_t cls,
                                     const uint64_t *name) {
  if (shms__load_32((uint32_t *)&t->cls) != cls)
    return 0;
  for (int w = 0; w < SHMS__NAME_WORDS; w++)
    if (shms__load_64((uint64_t *)&t->name[w]) != name[w])
      return 0;
  return 1;
}

/* The tally for (cls, name): found, unused, or the next in turn moved into the table and
 * rekeyed. NULL when the table cannot take the one in turn, or the process's rekey word stays
 * held past 100 ms. */
__attribute__((cold)) struct shms__tally *shms__tally_for(struct shms *h, uint32_t cls,
                                                          const uint64_t *name);

/* The tally of (k, tenant) in this process, made if need be; NULL for an observer's handle, or
 * as shms__tally_for. Inline: it is on the fast path of every acquire. */
static inline struct shms__tally *shms__tally_of(struct shms *h, const struct shms__cls *k,
                                                 const uint64_t *tenant) {
  struct shms__proc *p = h->proc;
  if (p == NULL || k->id < 0)
    return NULL;
  struct shms__tally *t = &p->tally[shms__tally_hint % SHMS__TALLIES];
  return shms__tally_key_is(t, (uint32_t)k->id, tenant)
             ? t
             : shms__tally_for(h, (uint32_t)k->id, tenant);
}

/* Add v to count c of a tally of h's process; returns the sum. The process's only thread with an
 * operation mark (ours: we are in one) adds with a plain store, the locked add costing a sixth of
 * the uncontended acquire; with two, they add atomically. A second thread's first add racing
 * the store can be lost, once. */
static inline uint64_t shms__tally_add(const struct shms *h, uint64_t *c, uint64_t v) {
  uint32_t marks = shms__load_32(&h->proc->marks_used) & SHMS__MARKS_CLAIMED;
  if ((marks & (marks - 1)) == 0) { /* one bit: not __builtin_popcount, a libgcc call on x86-64 */
    uint64_t sum = shms__load_64(c) + v;
    shms__store_64(c, sum);
    return sum;
  }
  return ck_pr_faa_64(c, v) + v;
}

/* Count a lease taken on the fast path in class k for tenant (packed words), for this process.
 * A table with no room (records with a policy fill it) or locked past 10 ms leaves it uncounted
 * (and the rekey word of the process's entry held past 100 ms: a hostile write into the entry). */
static inline void shms__tally_lease(struct shms *h, const struct shms__cls *k,
                                     const uint64_t *tenant) {
  struct shms__tally *t = shms__tally_of(h, k, tenant);
  if (t != NULL)
    shms__tally_add(h, &t->grants, 1);
}

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

/*
 * The tenants of a class for observers (status --tenants, metrics, top): read without the
 * dispatcher's baton and without registering, from a read-only mapping. The records change
 * under us at any moment (only the baton holder writes them), so each one is read between two
 * looks at its identity (in use, same name) and kept only if they agree; the grant figures,
 * which the dispatcher changes inside the class's observation seqlock (core/dispatch.c,
 * record_wait), are read inside it, so one row's granted and waits are one instant.
 */
#include <ck_pr.h>
#include <ck_sequence.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/error.h"
#include "sched.h"

/* Tries for one record before it is left out (it keeps changing) or read torn (see below). */
#define RECORD_TRIES 64

struct identity {
  uint64_t flags; /* 64 bits: no padding, so that two identities compare with memcmp */
  uint64_t name[SHMS__NAME_WORDS];
};

static void read_identity(const struct shms__tenant *t, struct identity *id) {
  id->flags = shms__load_32((uint32_t *)&t->flags);
  memcpy(id->name, t->name, sizeof id->name); /* may tear: the second look tells */
}

/*
 * The observation sequence, waited on briefly while odd. A writer that died inside its write
 * section leaves it odd until a recovery: the caller then reads the grant figures without it
 * (torn = 1), rather than hang.
 */
static unsigned seq_begin(const ck_sequence_t *seq, int *torn) {
  unsigned v = 0;
  for (int tries = 0; tries < 1000; tries++) {
    v = shms__load_32((uint32_t *)&seq->sequence);
    if ((v & 1) == 0) {
      ck_pr_fence_load();
      return v;
    }
    ck_pr_stall();
  }
  *torn = 1;
  return v;
}

/* One record into o: 1 if it is in use and was read whole, else 0. */
static int read_record(const struct shms__cls *k, const struct shms__tenant *t, int *torn,
                       shms_tenant_stats *o) {
  const ck_sequence_t *seq = (const ck_sequence_t *)&k->ctl->obs_seq;
  for (int tries = 0; tries < RECORD_TRIES; tries++) {
    struct identity before, after;
    read_identity(t, &before);
    if (!(before.flags & SHMS__TENANT_INUSE))
      return 0;
    ck_pr_fence_load();
    unsigned v = *torn ? 0 : seq_begin(seq, torn);
    o->granted = shms__load_64((uint64_t *)&t->granted);
    o->total_wait_ns = shms__load_64((uint64_t *)&t->total_wait_ns);
    o->max_wait_ns = shms__load_64((uint64_t *)&t->max_wait_ns);
    if (!*torn && ck_sequence_read_retry(seq, v))
      continue;
    o->queued = shms__load_32((uint32_t *)&t->queued);
    o->active = shms__load_32((uint32_t *)&t->active);
    ck_pr_fence_load();
    read_identity(t, &after);
    if (memcmp(&before, &after, sizeof before) != 0)
      continue; /* freed, taken by another tenant, or moved in or out of the ring meanwhile */
    o->in_ring = (after.flags & SHMS__TENANT_INRING) != 0;
    memcpy(o->name, after.name, SHMS_TENANT_MAX);
    o->name[SHMS_TENANT_MAX] = '\0';
    for (int i = 0; o->name[i] != '\0'; i++) /* shared memory: only what a name may hold */
      if (o->name[i] <= ' ' || o->name[i] > '~')
        o->name[i] = '?';
    return 1;
  }
  return 0;
}

int shms_tenants_snapshot(shms_t *h, shms_class_t c, shms_tenant_stats *out, uint32_t max,
                          uint32_t *count) {
  const struct shms__cls *k;
  int rc = shms__view_rows(h, c, out, max, count, &k);
  if (rc != SHMS_OK)
    return rc;
  uint32_t n = 0;
  int torn = 0;
  shms_tenant_stats row;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    if (!read_record(k, &k->tenants[i], &torn, n < max ? &out[n] : &row))
      continue;
    n++;
  }
  *count = n;
  return SHMS_OK;
}

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
#include "account.h"
#include "sched.h"
#include "tenant.h"

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
    shms__name_copy(o->name, (const char *)after.name);
    shms__tenant_fair_row(k, t, o);
    return 1;
  }
  return 0;
}

void shms__tenant_fair_row(const struct shms__cls *k, const struct shms__tenant *t,
                           shms_tenant_stats *o) {
  uint32_t acct = shms__load_32((uint32_t *)&t->acct);
  o->weight = shms__account_weight(k, acct);
  o->team_weight = 0;
  o->team[0] = '\0';
  o->cell_ns = 0;
  if (acct >= 1 && acct <= k->naccts && k->id >= 0)
    o->cell_ns = shms__load_64((uint64_t *)&shms__account_at(k, acct)->cls[k->id].cell_ns);
  uint32_t team = shms__load_32((uint32_t *)&t->team);
  if (team < 1 || team > k->ntenants)
    return;
  const struct shms__tenant *tm = shms__tenant_at(k, team);
  if (!(shms__load_32((uint32_t *)&tm->flags) & SHMS__TENANT_TEAM))
    return;
  shms__name_copy(o->team, tm->name);
  uint32_t w = shms__load_32((uint32_t *)&tm->weight);
  o->team_weight = w >= 1 && w <= SHMS_WEIGHT_MAX ? w : 1;
}

void shms__tenant_shares(const struct shms__cls *k, shms_tenant_stats *rows, uint32_t n) {
  double total = 0;
  for (uint32_t i = 0; i < n; i++) {
    const shms_tenant_stats *r = &rows[i];
    if (!r->in_ring)
      continue;
    int first = 1; /* a team counts once, at its first member with a turn */
    for (uint32_t j = 0; j < i && r->team[0] != '\0'; j++)
      first &= !(rows[j].in_ring && strcmp(rows[j].team, r->team) == 0);
    total += !k->timed ? 1 : r->team[0] == '\0' ? r->weight : first ? r->team_weight : 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    shms_tenant_stats *r = &rows[i];
    r->entitled_share = 0;
    if (!r->in_ring || total == 0)
      continue;
    if (!k->timed || r->team[0] == '\0') {
      r->entitled_share = (k->timed ? r->weight : 1) / total;
      continue;
    }
    double in_team = 0;
    for (uint32_t j = 0; j < n; j++)
      in_team += rows[j].in_ring && strcmp(rows[j].team, r->team) == 0 ? rows[j].weight : 0;
    r->entitled_share = r->team_weight / total * r->weight / in_team;
  }
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
  shms__tenant_shares(k, out, n < max ? n : max);
  *count = n;
  return SHMS_OK;
}

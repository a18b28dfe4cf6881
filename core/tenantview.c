/*
 * The tenants of a class for observers (status --tenants, metrics, top): read without the
 * dispatcher's baton and without registering, from a read-only mapping. The records change
 * under us at any moment (only the baton holder writes them), so each one is read between two
 * looks at its identity (in use, same name) and kept only if they agree; the grant figures,
 * which the dispatcher changes inside the class's observation seqlock (core/dispatch.c,
 * record_wait), are read inside it, so one row's granted and waits are one instant.
 *
 * A tenant's figures outlive its record: the tenant table keeps what the class granted it (and
 * the cell-time its leases held), and processes tally the leases they took on the fast path
 * (core/tally.c). A row is a tenant with a record, or with figures kept in the table or tallied
 * for the class; its grants are the table's (or, without an account, the record's) plus its
 * tallies, read inside the table's tally sequence so that no tally is counted twice or missed.
 */
#include <ck_pr.h>
#include <ck_sequence.h>
#include <stdlib.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/error.h"
#include "account.h"
#include "sched.h"
#include "tally.h"
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
                       shms_tenant_stats *o, uint32_t *acct) {
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
    *acct = shms__load_32((uint32_t *)&t->acct);
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

/* ---- rows past the records: the tenant table's, and tallies ---- */

/* A row being built: its figures, the account it reads its kept figures from (0: none), and its
 * record's own grant figures, for a row without one. */
struct row {
  shms_tenant_stats s;
  uint32_t acct;
  uint64_t rec_granted, rec_wait_ns, rec_max_wait_ns;
};

struct rows {
  const struct shms__cls *k;
  struct row *v;
  uint32_t n, cap;
  uint32_t *slot; /* open addressing by name: row index + 1, 0 empty */
  uint32_t mask;
};

static uint32_t name_hash(const char *name) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)name; *p != 0; p++)
    h = (h ^ *p) * 16777619u;
  return h;
}

/* The row of name, made (zero but its name) if absent; NULL when full. */
static struct row *row_of(struct rows *r, const char *name) {
  uint32_t i = name_hash(name) & r->mask;
  for (; r->slot[i] != 0; i = (i + 1) & r->mask)
    if (strcmp(r->v[r->slot[i] - 1].s.name, name) == 0)
      return &r->v[r->slot[i] - 1];
  if (r->n == r->cap)
    return NULL;
  struct row *w = &r->v[r->n];
  memset(w, 0, sizeof *w);
  memcpy(w->s.name, name, sizeof w->s.name);
  w->s.weight = 1;
  r->slot[i] = ++r->n;
  return w;
}

static void rows_reset(struct rows *r, uint32_t n) {
  r->n = n;
  memset(r->slot, 0, ((size_t)r->mask + 1) * sizeof *r->slot);
  for (uint32_t j = 0; j < n; j++) {
    uint32_t i = name_hash(r->v[j].s.name) & r->mask;
    while (r->slot[i] != 0)
      i = (i + 1) & r->mask;
    r->slot[i] = j + 1;
  }
}

/* An account's figures for the class, kept while it is idle, read inside the class's observation
 * sequence as a record's are. 0 if it is not live under name. */
static int kept(const struct shms__cls *k, uint32_t acct, const char *name, int *torn,
                struct row *w) {
  if (acct < 1 || acct > k->naccts || k->id < 0)
    return 0;
  const struct shms__account *a = shms__account_at(k, acct);
  const struct shms__account_class *ac = &a->cls[k->id];
  const ck_sequence_t *seq = (const ck_sequence_t *)&k->ctl->obs_seq;
  for (int tries = 0; tries < RECORD_TRIES; tries++) {
    if (shms__load_32((uint32_t *)&a->state) != SHMS__ACCT_LIVE ||
        (shms__load_32((uint32_t *)&a->flags) & SHMS__ACCT_TEAM))
      return 0;
    char have[SHMS_TENANT_MAX + 1];
    shms__name_copy(have, a->name);
    if (strcmp(have, name) != 0)
      return 0;
    unsigned v = *torn ? 0 : seq_begin(seq, torn);
    w->s.granted =
        shms__load_64((uint64_t *)&ac->grants) + shms__load_64((uint64_t *)&ac->fast_grants);
    w->s.total_wait_ns = shms__load_64((uint64_t *)&ac->wait_ns);
    w->s.max_wait_ns = shms__load_64((uint64_t *)&ac->max_wait_ns);
    if (*torn || !ck_sequence_read_retry(seq, v))
      return 1;
  }
  return 1;
}

/* A row for an account with no record in the class: its weight, team and cell-time as a
 * record's row has them. */
static void account_fair_row(const struct shms__cls *k, uint32_t acct, shms_tenant_stats *o) {
  o->weight = shms__account_weight(k, acct);
  o->cell_ns = shms__load_64((uint64_t *)&shms__account_at(k, acct)->cls[k->id].cell_ns);
  uint32_t team = shms__account_team(k, acct);
  if (team == 0)
    return;
  const struct shms__account *tm = shms__account_at(k, team);
  shms__name_copy(o->team, tm->name);
  uint32_t w = shms__load_32((uint32_t *)&tm->weight);
  o->team_weight = w >= 1 && w <= SHMS_WEIGHT_MAX ? w : 1;
}

/* Whether the table keeps anything of acct for the class. */
static int kept_any(const struct shms__cls *k, const struct shms__account *a) {
  const struct shms__account_class *ac = &a->cls[k->id];
  return shms__load_64((uint64_t *)&ac->grants) != 0 ||
         shms__load_64((uint64_t *)&ac->fast_grants) != 0 ||
         shms__load_64((uint64_t *)&ac->cell_ns) != 0;
}

static void add_tally(void *ctx, const uint64_t *name, uint64_t grants) {
  struct rows *r = ctx;
  char buf[SHMS_TENANT_MAX + 1];
  shms__name_copy(buf, (const char *)name);
  if (buf[0] == '\0')
    return;
  struct row *w = row_of(r, buf);
  if (w != NULL)
    w->s.granted += grants;
}

/* The records' rows (r->n of them) completed with the table's figures and tallies. */
static void complete(struct rows *r) {
  const struct shms__cls *k = r->k;
  uint32_t records = r->n;
  for (int tries = 0; tries < RECORD_TRIES; tries++) {
    rows_reset(r, records);
    int torn = 0, obs_torn = 0;
    uint64_t v = shms__tally_read_begin(k, &torn);
    for (uint32_t j = 0; j < records; j++) {
      struct row *w = &r->v[j];
      if (!kept(k, w->acct, w->s.name, &obs_torn, w)) {
        w->s.granted = w->rec_granted;
        w->s.total_wait_ns = w->rec_wait_ns;
        w->s.max_wait_ns = w->rec_max_wait_ns;
      }
    }
    for (uint32_t i = 0; k->id >= 0 && i < k->naccts; i++) {
      const struct shms__account *a = &k->accts[i];
      char name[SHMS_TENANT_MAX + 1];
      if (shms__load_32((uint32_t *)&a->state) != SHMS__ACCT_LIVE ||
          (shms__load_32((uint32_t *)&a->flags) & SHMS__ACCT_TEAM) || !kept_any(k, a))
        continue;
      shms__name_copy(name, a->name);
      if (name[0] == '\0')
        continue;
      struct row *w = row_of(r, name);
      if (w == NULL || w - r->v < (ptrdiff_t)records)
        continue; /* a record's row has its account's figures already */
      if (kept(k, i + 1, name, &obs_torn, w))
        account_fair_row(k, i + 1, &w->s);
    }
    shms__tally_each(k, add_tally, r);
    if (torn || !shms__tally_read_retry(k, v))
      return;
  }
}

/* The rows of class k: its tenant records' (under the baton, or read as an observer), then
 * completed. */
static int view(const struct shms__cls *k, shms_tenant_stats *out, uint32_t max, uint32_t *count) {
  struct rows r = {.k = k};
  r.cap = k->ntenants + k->naccts + k->h->layout.procs_count * SHMS__TALLIES;
  uint32_t size = 1;
  while (size < 2 * r.cap)
    size <<= 1;
  r.mask = size - 1;
  r.v = malloc((size_t)r.cap * sizeof *r.v);
  r.slot = malloc((size_t)size * sizeof *r.slot);
  if (r.v == NULL || r.slot == NULL) {
    free(r.v);
    free(r.slot);
    return shms__fail(SHMS_ENOMEM, "no memory for the rows of %u tenants", r.cap);
  }
  int torn = 0;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    struct row *w = &r.v[r.n];
    memset(w, 0, sizeof *w);
    if (!read_record(k, &k->tenants[i], &torn, &w->s, &w->acct))
      continue;
    w->rec_granted = w->s.granted;
    w->rec_wait_ns = w->s.total_wait_ns;
    w->rec_max_wait_ns = w->s.max_wait_ns;
    r.n++;
  }
  complete(&r);
  for (uint32_t j = 0; j < r.n && j < max; j++)
    out[j] = r.v[j].s;
  shms__tenant_shares(k, out, r.n < max ? r.n : max);
  *count = r.n;
  free(r.v);
  free(r.slot);
  return SHMS_OK;
}

int shms__tenant_view(const struct shms__cls *k, shms_tenant_stats *out, uint32_t max,
                      uint32_t *count) {
  return view(k, out, max, count);
}

int shms_tenants_snapshot(shms_t *h, shms_class_t c, shms_tenant_stats *out, uint32_t max,
                          uint32_t *count) {
  const struct shms__cls *k;
  int rc = shms__view_rows(h, c, out, max, count, &k);
  if (rc != SHMS_OK)
    return rc;
  return view(k, out, max, count);
}

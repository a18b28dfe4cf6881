/* Recovery's totals and events (report.h). */
#include "report.h"

#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "../shm/alloc.h"
#include "../shm/atomic.h"
#include "../shm/proc.h"

SHMS__TLS struct shms__report *shms__settle_report;
static SHMS__TLS uint32_t settle_owner;

static const char *const names[] = {
    [SHMS_EVENT_PROCESS_DIED] = "process-died",
    [SHMS_EVENT_REQUEST_OWNER_LOST] = "request-owner-lost",
    [SHMS_EVENT_GRANT_RETURNED] = "grant-returned",
    [SHMS_EVENT_LEASE_RELEASED] = "lease-released",
    [SHMS_EVENT_LEASE_QUARANTINED] = "lease-quarantined",
    [SHMS_EVENT_JOB_REQUEUED] = "job-requeued",
    [SHMS_EVENT_JOB_LOST] = "job-lost",
    [SHMS_EVENT_WORKER_OFFLINE] = "worker-offline",
    [SHMS_EVENT_SLOT_FREED] = "slot-freed",
    [SHMS_EVENT_BATON_RECOVERED] = "baton-recovered",
    [SHMS_EVENT_COUNT_FIXED] = "count-fixed",
    [SHMS_EVENT_CLASS_RECOMPUTED] = "class-recomputed",
    [SHMS_EVENT_CELL_REPAIRED] = "cell-repaired",
    [SHMS_EVENT_GRANTED] = "granted",
    [SHMS_EVENT_REJECTED] = "rejected",
    [SHMS_EVENT_CANCELLED] = "cancelled",
    [SHMS_EVENT_EXPIRED] = "expired",
    [SHMS_EVENT_REVOKED] = "revoked",
    [SHMS_EVENT_CELL_QUARANTINED] = "cell-quarantined",
    [SHMS_EVENT_DRAINED] = "drained",
    [SHMS_EVENT_MEMBARRIER_FAILED] = "membarrier-failed",
    [SHMS_EVENT_POLICY_CHANGED] = "policy-changed",
    [SHMS_EVENT_RESUMED] = "resumed",
    [SHMS_EVENT_LEASE_STARTED] = "lease-started",
    [SHMS_EVENT_LEASE_ENDED] = "lease-ended",
    [SHMS_EVENT_JOB_JOINED] = "job-joined",
    [SHMS_EVENT_SUPERSEDED] = "superseded",
};

const char *shms_event_name(uint32_t kind) {
  return kind < sizeof names / sizeof names[0] && names[kind] != NULL ? names[kind] : "unknown";
}

uint32_t shms_event_kind(const char *name) {
  for (uint32_t k = 1; name != NULL && k < sizeof names / sizeof names[0]; k++)
    if (names[k] != NULL && strcmp(names[k], name) == 0)
      return k;
  return 0;
}

static uint32_t *total(shms_recovery *r, uint32_t kind) {
  switch (kind) {
  case SHMS_EVENT_PROCESS_DIED:
    return &r->dead_processes;
  case SHMS_EVENT_REQUEST_OWNER_LOST:
    return &r->requests_owner_lost;
  case SHMS_EVENT_GRANT_RETURNED:
    return &r->grants_returned;
  case SHMS_EVENT_LEASE_RELEASED:
    return &r->leases_released;
  case SHMS_EVENT_LEASE_QUARANTINED:
    return &r->leases_quarantined;
  case SHMS_EVENT_JOB_REQUEUED:
    return &r->jobs_requeued;
  case SHMS_EVENT_JOB_LOST:
    return &r->jobs_lost;
  case SHMS_EVENT_WORKER_OFFLINE:
    return &r->workers_unbound;
  case SHMS_EVENT_SLOT_FREED:
    return &r->slots_freed;
  case SHMS_EVENT_BATON_RECOVERED:
    return &r->batons_recovered;
  case SHMS_EVENT_COUNT_FIXED:
    return &r->counts_fixed;
  default:
    return NULL; /* told, not counted */
  }
}

/*
 * The tenant an item names: the one given with it; else its request's; else, for a lease or a
 * grant, the one its cell recorded when it started (shms__cell_start). Never the name an idle
 * cell keeps from its last lease.
 */
static void tenant_of(uint32_t kind, const struct shms__item *it, char *out) {
  const struct shms__cls *k = it->k;
  out[0] = '\0';
  if (it->tenant != NULL)
    memcpy(out, it->tenant, SHMS_TENANT_MAX);
  else if (it->slot_ref >= 1 && it->slot_ref <= k->nslots)
    memcpy(out, shms__slot_at(k, it->slot_ref - 1)->tenant_name, SHMS_TENANT_MAX);
  else if (it->cell_ref >= 1 && it->cell_ref <= k->ncells &&
           (kind == SHMS_EVENT_LEASE_RELEASED || kind == SHMS_EVENT_LEASE_QUARANTINED ||
            kind == SHMS_EVENT_GRANT_RETURNED))
    shms__cell_tenant(k, it->cell_ref - 1, out);
  out[SHMS_TENANT_MAX] = '\0';
  shms__name_clean(out); /* shared memory: only what a tenant name may hold */
}

/* The uid + 1 of the owner of the request or lease an item names (0: none), read where
 * tenant_of reads its tenant. */
static uint32_t uid_of(uint32_t kind, const struct shms__item *it) {
  const struct shms__cls *k = it->k;
  if (it->tenant != NULL)
    return it->uid_ref;
  if (it->slot_ref >= 1 && it->slot_ref <= k->nslots)
    return shms__load_32(&shms__slot_at(k, it->slot_ref - 1)->uid) + 1;
  if (it->cell_ref >= 1 && it->cell_ref <= k->ncells &&
      (kind == SHMS_EVENT_LEASE_RELEASED || kind == SHMS_EVENT_LEASE_QUARANTINED ||
       kind == SHMS_EVENT_GRANT_RETURNED))
    return shms__load_32(&k->cells[it->cell_ref - 1].uid) + 1;
  return 0;
}

/* The ring's record of a report's event: what the report's function is told, timed now. */
static void note_event(struct shms *h, const shms_event *ev) {
  struct shms__ev e = {.kind = ev->kind,
                       .cls = ev->cls,
                       .cell = ev->cell,
                       .pid = ev->pid,
                       .pidns = (uint32_t)ev->pidns,
                       .reason = ev->reason,
                       .slot_ref = ev->ticket.seq != 0 ? ev->ticket.slot + 1 : 0,
                       .uid_ref = ev->uid + 1, /* SHMS_UID_NONE wraps to 0: none */
                       .ticket_seq = ev->ticket.seq};
  memcpy(e.tenant, ev->tenant, sizeof e.tenant);
  shms__ev_put(&h->events, &e);
}

void shms__report(struct shms__report *rep, uint32_t kind, struct shms__item it) {
  uint32_t *n = total(&rep->totals, kind);
  if (n != NULL)
    (*n)++;
  /* metrics' shmsched_recoveries_total: what was settled for the dead, not how (a recompute
   * is how every full recovery works, dead or not) nor the upkeep of slots and counts */
  if (it.k != NULL && kind != SHMS_EVENT_COUNT_FIXED && kind != SHMS_EVENT_SLOT_FREED &&
      kind != SHMS_EVENT_CLASS_RECOMPUTED)
    ck_pr_inc_64(&it.k->ctl->recovered);
  if (rep->fn == NULL && rep->h->events.count == 0)
    return;
  shms_event ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = kind;
  ev.cls = it.k != NULL ? it.k->id : -1;
  ev.cell = it.k != NULL && it.cell_ref >= 1 && it.cell_ref <= it.k->ncells
                ? (int32_t)it.cell_ref - 1
                : -1;
  /* 0 (memset) once the entry is another's. The ring keeps the number as recorded. */
  struct shms__pidref ref;
  shms__owner_ref(rep->h, it.owner, &ref);
  ev.pid = ref.pid;
  ev.reason = it.reason;
  ev.uid = SHMS_UID_NONE;
  if (it.k != NULL) {
    tenant_of(kind, &it, ev.tenant);
    ev.uid = uid_of(kind, &it) - 1; /* 0: none, which wraps to SHMS_UID_NONE */
    if (it.slot_ref >= 1 && it.slot_ref <= it.k->nslots) {
      uint64_t seq = it.seq ? it.seq : shms__load_64(&shms__slot_at(it.k, it.slot_ref - 1)->seq);
      ev.ticket = (shms_ticket){.cls = (uint32_t)it.k->id,
                                .slot = it.slot_ref - 1,
                                .seq = seq,
                                .incarnation = rep->h->incarnation};
    }
  }
  ev.pidns = ref.ns.ino; /* the ring keeps it with the number */
  note_event(rep->h, &ev);
  if (rep->fn == NULL)
    return;
  /* The report names it as this process sees it, from what an earlier look found while it
   * lived (a walk now could not find a dead process of a namespace below ours). */
  shms__pid_show_into(&ref, 0, &ev.pid, &ev.ns_pid, &ev.pid_foreign, &ev.pidns);
  if (rep->nkept == rep->cap) {
    size_t cap = rep->cap ? 2 * rep->cap : 16;
    shms_event *kept = shms__realloc(rep->kept, cap * sizeof *kept);
    if (kept == NULL) {
      rep->dropped++;
      return;
    }
    rep->kept = kept;
    rep->cap = cap;
  }
  rep->kept[rep->nkept++] = ev;
}

void shms__report_flush(struct shms__report *rep) {
  for (size_t i = 0; i < rep->nkept && rep->fn != NULL; i++)
    rep->fn(&rep->kept[i], rep->ctx);
  free(rep->kept);
  rep->kept = NULL;
  rep->nkept = rep->cap = 0;
}

void shms__report_settles(struct shms__report *rep, uint32_t owner) {
  settle_owner = owner;
  shms__settle_report = rep;
}

void shms__report_settled(const struct shms__cls *k, uint32_t i, uint64_t seq, uint32_t was,
                          uint32_t cell, int reason) {
  struct shms__report *rep = shms__settle_report;
  struct shms__slot *s = shms__slot_at(k, i);
  if (rep == NULL || reason != SHMS_EOWNERLOST || shms__load_32(&s->owner) != settle_owner)
    return;
  struct shms__item it = {
      .k = k, .slot_ref = i + 1, .seq = seq, .owner = settle_owner, .reason = reason};
  shms__report(rep, SHMS_EVENT_REQUEST_OWNER_LOST, it);
  if (was == SHMS__SLOT_GRANTED) {
    it.cell_ref = cell + 1;
    it.reason = 0;
    shms__report(rep, SHMS_EVENT_GRANT_RETURNED, it);
  }
}

/* Set e's pid and its namespace to what owner id's entry names, 0 once the entry is another's
 * (the ring keeps a number with the namespace it is of: readers elsewhere translate it). */
static void owner_pid(const struct shms *h, uint32_t owner, struct shms__ev *e) {
  struct shms__pidref ref;
  shms__owner_ref(h, owner, &ref);
  e->pid = ref.pid;
  e->pidns = (uint32_t)ref.ns.ino;
}

void shms__note(struct shms *h, const struct shms__ev *e) {
  if (e->kind != 0)
    shms__ev_put(&h->events, e);
}

void shms__note_job(struct shms *h, const struct shms__cls *k, uint32_t i, uint32_t c, int again,
                    struct shms__ev *out) {
  const struct shms__slot *s = shms__slot_at(k, i);
  *out = (struct shms__ev){.kind = 0};
  if (h->events.count == 0 || shms__settle_report != NULL)
    return;
  *out = (struct shms__ev){.kind = again ? SHMS_EVENT_JOB_REQUEUED : SHMS_EVENT_JOB_LOST,
                           .cls = k->id,
                           .cell = (int32_t)c,
                           .reason = again ? 0 : SHMS_EWORKERLOST,
                           .slot_ref = i + 1,
                           .uid_ref = shms__load_32((uint32_t *)&s->uid) + 1,
                           .ticket_seq = shms__load_64((uint64_t *)&s->seq)};
  owner_pid(h, shms__load_32((uint32_t *)&k->cells[c].worker), out);
  memcpy(out->tenant, s->tenant_name, sizeof out->tenant);
}

void shms__note_request(struct shms *h, const struct shms__cls *k, uint32_t kind, uint32_t i,
                        uint64_t seq, int32_t cell, int reason, uint64_t value) {
  if (h->events.count == 0)
    return;
  const struct shms__slot *s = shms__slot_at(k, i);
  struct shms__ev e = {.kind = kind,
                       .cls = k->id,
                       .cell = cell,
                       .reason = reason,
                       .slot_ref = i + 1,
                       .uid_ref = shms__load_32((uint32_t *)&s->uid) + 1,
                       .ticket_seq = seq,
                       .value = value};
  owner_pid(h, shms__load_32((uint32_t *)&s->owner), &e);
  /* The enqueuer wrote the name NUL-padded (strncpy) before it published the request. */
  memcpy(e.tenant, s->tenant_name, sizeof e.tenant);
  shms__ev_put(&h->events, &e);
}

void shms__note_cell(struct shms *h, const struct shms__cls *k, uint32_t kind, uint32_t c,
                     uint32_t holder, int reason) {
  shms__note_lease(h, k, kind, c, holder, reason, 0, 0, 0);
}

void shms__note_lease(struct shms *h, const struct shms__cls *k, uint32_t kind, uint32_t c,
                      uint32_t holder, int reason, uint64_t value, uint32_t slot_ref,
                      uint64_t ticket_seq) {
  if (h->events.count == 0)
    return;
  struct shms__ev e = {.kind = kind,
                       .cls = k->id,
                       .cell = (int32_t)c,
                       .reason = reason,
                       .slot_ref = 0,
                       .value = value,
                       /* written with the lease's start, kept by the quarantine (layout.h) */
                       .uid_ref = shms__load_32((uint32_t *)&k->cells[c].uid) + 1};
  owner_pid(h, holder, &e);
  char name[SHMS_TENANT_MAX + 1];
  shms__cell_tenant(k, c, name);
  strncpy((char *)e.tenant, name, sizeof e.tenant);
  /* The lease's ticket, while the cell still carries it (core/held.c's record, valid at the
   * lease's generation, which a quarantine moved on by one; a fast-path lease has none). */
  const struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64((uint64_t *)&cell->word);
  uint32_t ref = shms__load_32((uint32_t *)&cell->slot),
           gen = SHMS__CELL_GEN(w) - (SHMS__CELL_STATE(w) == SHMS__CELL_QUARANTINED);
  if (ticket_seq != 0) {
    e.slot_ref = slot_ref;
    e.ticket_seq = ticket_seq;
  } else if (ref >= 1 && ref <= k->nslots && shms__load_32((uint32_t *)&cell->ticket_gen) == gen &&
             shms__load_64((uint64_t *)&cell->ticket_seq) != 0) {
    e.slot_ref = ref;
    e.ticket_seq = shms__load_64((uint64_t *)&cell->ticket_seq);
  }
  shms__ev_put(&h->events, &e);
}

void shms__note_settled(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                        uint32_t was, uint32_t cell, int reason) {
  if (h->events.count == 0 || reason == SHMS_EWOULDBLOCK)
    return; /* try_acquire withdrawing its own probe is no event */
  if (reason == SHMS_EOWNERLOST && shms__settle_report != NULL)
    return; /* a recovery's report tells it (shms__report_settled) */
  uint32_t kind = reason == SHMS_ECANCELLED    ? SHMS_EVENT_CANCELLED
                  : reason == SHMS_EDEADLINE   ? SHMS_EVENT_EXPIRED
                  : reason == SHMS_EOWNERLOST  ? SHMS_EVENT_REQUEST_OWNER_LOST
                  : reason == SHMS_ESUPERSEDED ? SHMS_EVENT_SUPERSEDED
                                               : SHMS_EVENT_REJECTED;
  shms__note_request(h, k, kind, i, seq, was == SHMS__SLOT_GRANTED ? (int32_t)cell : -1, reason, 0);
}

void shms__note_granted(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                        uint32_t c, uint64_t waited) {
  if (h->events.count == 0)
    return;
  const struct shms__cell *cell = &k->cells[c];
  struct shms__ev e = {.kind = SHMS_EVENT_GRANTED,
                       .cls = k->id,
                       .cell = (int32_t)c,
                       .slot_ref = i + 1,
                       .uid_ref = shms__load_32((uint32_t *)&cell->uid) + 1, /* the grant's */
                       .ticket_seq = seq,
                       .value = waited};
  owner_pid(h, SHMS__CELL_OWNER(shms__load_64((uint64_t *)&cell->word)), &e);
  for (size_t w = 0; w < SHMS__NAME_WORDS; w++) /* the grant's, written by shms__cell_start */
    e.tenant[w] = shms__load_64((uint64_t *)&cell->tenant_name[w]);
  shms__ev_put(&h->events, &e);
}

void shms__note_refused(struct shms *h, const struct shms__cls *k, const char *tenant, int reason) {
  if (h->events.count == 0)
    return;
  struct shms__ev e = {
      .kind = SHMS_EVENT_REJECTED,
      .cls = k->id,
      .cell = -1,
      .pid = h->pid,
      .reason = reason,
      /* the caller's, who asked (an observer enqueues nothing, but never read its NULL entry) */
      .uid_ref = h->proc != NULL ? shms__load_32(&h->proc->uid) + 1 : 0};
  strncpy((char *)e.tenant, tenant, sizeof e.tenant - 1);
  shms__ev_put(&h->events, &e);
}

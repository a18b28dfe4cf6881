/*
 * What a recovery tells its caller: the totals (shms_recovery) and, when
 * asked, one event per item it dealt with (shms_event, docs/api.md). Filled
 * by the frozen recovery (core/repair.c) and by the recovery of one dead
 * process (core/recover_dead.c).
 */
#ifndef SHMS_CORE_REPORT_H
#define SHMS_CORE_REPORT_H

#include <stdint.h>

#include "sched.h"

/*
 * Events are kept until shms__report_flush rather than told at once: a recovery makes them
 * while it holds a class still or has an operation under way, and the caller's function may
 * block (a log on a full pipe) for as long as it likes only once the class runs again.
 */
struct shms__report {
  struct shms *h;
  shms_recovery totals;
  shms_event_fn fn; /* NULL: totals only */
  void *ctx;
  shms_event *kept; /* events not yet told */
  size_t nkept, cap;
  uint32_t dropped; /* events lost for want of memory (the totals still count them) */
};

/* The object an item concerns. References are index + 1, 0 for none. */
struct shms__item {
  const struct shms__cls *k; /* NULL: no class */
  uint32_t cell_ref;
  uint32_t slot_ref;
  uint64_t seq;   /* the request's sequence; 0: read it from the slot */
  uint32_t owner; /* the owner id the item belonged to, 0 if unknown */
  int reason;     /* the outcome the item was given, or 0 */
  /* The tenant it concerns, noted before the item was settled (a cell given back may already
   * serve another tenant by the time it is told); NULL: read it from the slot or cell. */
  const char *tenant;
  uint32_t uid_ref; /* its owner's uid + 1, noted with tenant; 0: read it as tenant is read */
};

/* Count one item of kind (shms_event_kind_t) and keep its event for the report's function. */
void shms__report(struct shms__report *rep, uint32_t kind, struct shms__item it);
/* Tell the kept events to the report's function, in order, and forget them. */
void shms__report_flush(struct shms__report *rep);

/*
 * While a recovery of dead owner `owner` runs on this thread through the
 * ordinary transitions, every request of that owner those transitions settle
 * is reported (shms__slot_settle calls shms__report_settled). NULL to stop.
 */
void shms__report_settles(struct shms__report *rep, uint32_t owner);
/* From shms__slot_settle: request seq in slot i, which was in state `was` (GRANTED: to cell),
 * settled with reason. */
void shms__report_settled(const struct shms__cls *k, uint32_t i, uint64_t seq, uint32_t was,
                          uint32_t cell, int reason);
/*
 * Recover process entry index if its owner died attached (core/recover_dead.c): the classes it
 * left mid-operation frozen (core/repair.c), everything else it owned by the ordinary
 * transitions; then free the entry. 1 if it did, 0 if the entry is free or its owner alive,
 * SHMS_ENOMEM.
 */
int shms__recover_dead(struct shms *h, uint32_t index, struct shms__report *rep);
/*
 * ---- The event ring's records (shm/events.h; docs/protocol.md, "The event ring") ----
 *
 * What the scheduler tells the flight recorder, made here so every event names its objects the
 * same way: a request by its ticket, tenant and owner's pid; a cell by the tenant and holder of
 * the lease it carries. Each never waits; a no-op on a segment without a ring.
 */
/* Request seq in slot i of k: kind, with cell (-1: none), reason and value. */
void shms__note_request(struct shms *h, const struct shms__cls *k, uint32_t kind, uint32_t i,
                        uint64_t seq, int32_t cell, int reason, uint64_t value);
/* Cell c of k (the lease it carries: its tenant, its holder owner id): kind, with reason. */
void shms__note_cell(struct shms *h, const struct shms__cls *k, uint32_t kind, uint32_t c,
                     uint32_t holder, int reason);
/* The same with value, and the ticket the cell carries only while ticket_seq is 0 (else slot
 * slot_ref - 1 and ticket_seq as given): a command run under the lease, started or ended. */
void shms__note_lease(struct shms *h, const struct shms__cls *k, uint32_t kind, uint32_t c,
                      uint32_t holder, int reason, uint64_t value, uint32_t slot_ref,
                      uint64_t ticket_seq);
/* A request settled with reason (shms__slot_settle): cancelled, expired, rejected or owner-lost. */
void shms__note_settled(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                        uint32_t was, uint32_t cell, int reason);
/* Request seq in slot i of k was granted cell c after waiting waited ns: named by what the cell
 * records of its grant (its tenant and grantee), since the slot may be reused at once. */
void shms__note_granted(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                        uint32_t c, uint64_t waited);
/* A request of tenant by this process refused at enqueue, before it had a slot, with reason. */
void shms__note_refused(struct shms *h, const struct shms__cls *k, const char *tenant, int reason);
/*
 * A dead worker's job on slot i of k (cell c) about to be queued again (again) or lost, found by
 * a client or a worker rather than by a recovery: the record, taken now (once the job's state
 * moves, its client may free the slot at once), for shms__note to write once it has. Its kind
 * is 0 (nothing to write) while a recovery's report on this thread tells it instead.
 */
void shms__note_job(struct shms *h, const struct shms__cls *k, uint32_t i, uint32_t c, int again,
                    struct shms__ev *out);
/* Anything else: e as given, timed now; nothing for kind 0. */
void shms__note(struct shms *h, const struct shms__ev *e);

/* Whether some thread-local settle report is on: one load, for the settle path. */
extern SHMS__TLS struct shms__report *shms__settle_report;

#endif

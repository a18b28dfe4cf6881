/*
 * The scheduler's internal interface between core/ and client/: the fast
 * word, cells, request slots, the index and the dispatcher. Every function
 * here follows the state machines of docs/protocol.md; each names which
 * transition it performs.
 */
#ifndef SHMS_CORE_SCHED_H
#define SHMS_CORE_SCHED_H

#include <stdint.h>

#include "../shm/atomic.h"
#include "../shm/class.h"
#include "../shm/clock.h"
#include "../shm/crashpoint.h"
#include "../shm/debug.h"
#include "../shm/handle.h"
#include "../shm/proc.h"

/* Test only: whether this thread is inside an operation, and every class it is inside one on
 * sees it marked in the segment (what a freezer looks at); or it holds a class frozen (its
 * steps are then a recovery's, which the next freezer finishes if it dies). */
int shms__test_op_marked(void);

/*
 * ---- The fast word: free cells (low 32) | queued requests (30) | STRICT | FROZEN ----
 *
 * A lease class of at most 32 cells keeps the set of its free cells in the low half (bit c:
 * cell c is AVAILABLE and nobody has taken it): one CAS then both checks that nobody is queued
 * and takes a named cell, whose word its taker alone may write. Any other class keeps a count
 * there, and a taker then claims some AVAILABLE cell with a CAS of its own.
 */
#define SHMS__FAST_LOW(w)    ((uint32_t)(w))
#define SHMS__FAST_QUEUED(w) ((uint32_t)((w) >> 32) & SHMS__FAST_QMASK)
#define SHMS__FAST_QMASK     0x1fffffffu
/*
 * Set by a release within the overtake bound that asks a queued waiter to kick (a nudge: the
 * cell stays free for whoever comes first); cleared by the next pass. One nudge in flight at a
 * time, so a busy class makes a system call per wake-up, not per release.
 */
#define SHMS__FAST_WOKEN (1ull << 61)
/*
 * Set while the queue's oldest request has waited the class's overtake bound: the fast path
 * then takes no cell while requests are queued, and every release hands its cell to the queue
 * (kicks). Set by a release that finds the bound passed, in the CAS that frees its cell;
 * cleared by the baton holder once the oldest indexed request is younger than the bound, and
 * with the last queued request (docs/protocol.md, "Bounded overtaking").
 */
#define SHMS__FAST_STRICT (1ull << 62)
/* Set while a recovery holds the class still: operations wait at their start (core/quiesce.c). */
#define SHMS__FAST_FROZEN (1ull << 63)

/* ---- Operations and quiescence (core/quiesce.c) ---- */

/*
 * Bracket every operation that changes a class: between enter and leave the
 * process counts as "under way" in its process entry, which recovery waits
 * out after freezing the class. enter waits while the class is frozen.
 * Nested brackets on one thread are free. Never sleep inside a bracket.
 */
void shms__op_enter(struct shms *h, const struct shms__cls *k);
/*
 * shms__op_enter for a caller with a deadline: while k is frozen it waits until until_real (the
 * real clock; 0: no limit) at most. SHMS_OK once entered, else SHMS_ETIMEDOUT (not entered).
 */
int shms__op_enter_until(struct shms *h, const struct shms__cls *k, uint64_t until_real);
/* The same, waiting patience_ns at most from when k is found frozen: as cheap as shms__op_enter
 * when it is not (no clock read), for the release path. */
int shms__op_enter_within(struct shms *h, const struct shms__cls *k, uint64_t patience_ns);
/*
 * For an operation whose first step is a locked CAS on the fast word that
 * fails when FROZEN is set (the fast path): mark it without a fence, the CAS
 * is one. Returns 1 if this is the outermost bracket (the CAS must then check
 * FROZEN; on finding it, leave and enter again the ordinary way).
 */
int shms__op_enter_fast(struct shms *h, const struct shms__cls *k);
void shms__op_leave(struct shms *h, const struct shms__cls *k);
/*
 * Freeze class k (waiting out a live freezer, taking over a dead one) and
 * wait until no live process, nor another thread of ours, has an operation
 * under way on it: from then on the caller alone changes the class, until
 * shms__unfreeze. Never called from inside an operation on k. Each wait on
 * another process is bounded (about 1 s): a process stopped inside an
 * operation, or holding k frozen, fails it with SHMS_EBUSY; a word that says
 * an operation is under way for longer, with SHMS_EVIOLATION naming it. The
 * class is then as it was (a dead freezer's half-done recovery stays frozen).
 */
int shms__freeze(struct shms *h, const struct shms__cls *k);
/*
 * How long a freezer, or a recovery, waits for what only another process can end (an
 * operation under way on the class, another freezer's work) before it gives up and says who
 * holds it up: far longer than a live process's step takes, and short enough that a recovery,
 * a check, and the supervisor that runs them go on answering (a signal, their other classes)
 * within about a second.
 */
#define SHMS__PATIENCE_NS (1000ull * 1000 * 1000)
/* Store the recomputed fast word (without FROZEN): operations resume. */
void shms__unfreeze(const struct shms__cls *k, uint64_t fast);
/* shms__unfreeze, then complete the releases recorded while k was held still (core/pending.c):
 * what a freezer that changed nothing, or recomputed the class, calls to let it go. */
void shms__thaw(struct shms *h, const struct shms__cls *k, uint64_t fast);

/* Releases asked for while their class was held still (core/pending.c). */
/* Record, in this process's entry, the release of the lease (k, cell, gen, token): 0 if the entry
 * holds a record already (the caller waits and releases itself). */
int shms__pending_record(struct shms *h, const struct shms__cls *k, uint32_t cell, uint32_t gen,
                         uint64_t token);
/* Inside an operation on k (or holding it frozen): complete entry index's record if it is k's,
 * and clear it. 1 if a lease was released. */
int shms__pending_complete(struct shms *h, const struct shms__cls *k, uint32_t index);
/* Entry index's record (SHMS__PENDING_WORD), 0 if none. */
uint64_t shms__pending_of(const struct shms *h, uint32_t index);
/* Whether the holder of the lease at cell c (word w) recorded its release. */
int shms__pending_asks(const struct shms *h, const struct shms__cls *k, uint32_t c, uint64_t w);
/*
 * Preconditions (SHMS__ASSERT, shm/debug.h): whether this thread is inside an operation on k or
 * holds k frozen (its steps are then a recovery's); whether k's index may be read and changed
 * here: its baton is held, or this thread holds k frozen.
 */
int shms__in_op(const struct shms__cls *k);
int shms__index_owned(const struct shms__cls *k);

/* Whether process entry p counts or marks an operation under way on class c (a dead owner's
 * marks stay as it left them: it died inside that operation). */
int shms__proc_busy(const struct shms__proc *p, int c);

/* Add dqueued to the queued count atomically; returns the new word. */
uint64_t shms__fast_queue(const struct shms__cls *k, int32_t dqueued);
/* Cell c has just become AVAILABLE: count it free (its bit, or one more); returns the new word. */
uint64_t shms__fast_put(const struct shms__cls *k, uint32_t c);

/* Bounded overtaking (core/overtake.c). An enqueuer, once its request is published with its
 * attention bit: bring the class's end of overtaking forward to its own (enqueue_ns + bound) if
 * that is earlier, so that its bound holds before any pass has indexed it. */
void shms__overtake_arrived(const struct shms__cls *k, uint64_t enqueue_ns);
/* The baton holder, before a pass takes the arrivals' attention bits: the end of overtaking and
 * the count of arrivals as it finds them (both 0 in a class that does not overtake). */
void shms__overtake_seen(const struct shms__cls *k, uint64_t seen[2]);
/* The baton holder, after that pass (seen: as it found the pair; drained: whether it took every
 * attention bit): publish the oldest indexed request's end of overtaking, never later than that
 * of a request published and not yet indexed, and clear STRICT if that request is younger than
 * the bound (or none is left). */
void shms__overtake_update(const struct shms__cls *k, const uint64_t seen[2], int drained);
/* After a release that set WOKEN: ask the oldest indexed request's waiter, asleep, to kick
 * (HELP, waking it). 1 if it did; 0 if none sleeps there (the caller kicks instead). */
int shms__overtake_nudge(const struct shms__cls *k);
/* Whether a fast-path taker may take a free cell with the fast word w: nobody queued, or the
 * class overtakes and STRICT is clear. */
static inline int shms__fast_may_take(const struct shms__cls *k, uint64_t w) {
  return SHMS__FAST_QUEUED(w) == 0 || (k->overtake_ns != 0 && !(w & SHMS__FAST_STRICT));
}
/* The free field the fast word should hold for cells in these states: recovery and audit. */
uint32_t shms__fast_free_field(const struct shms__cls *k);
/* Cells leased or granted, by fast word f and the quarantined count: each has a holder that
 * needs a CPU to give it back (a waiter deciding whether to spin counts them). */
uint32_t shms__cells_held(const struct shms__cls *k, uint64_t f);
/*
 * Which free cells a taker may take: the fast path overtakes queued work only as
 * shms__fast_may_take allows (UNQUEUED); the
 * dispatcher granting queued work takes regardless (ANY); the fast path's first step, after
 * shms__op_enter_fast, also stops at FROZEN (ENTERING: the caller must then not go on).
 */
enum shms__take_mode { SHMS__TAKE_ANY, SHMS__TAKE_UNQUEUED, SHMS__TAKE_ENTERING };
/* What shms__fast_reserve did. */
enum shms__reserve { SHMS__RESERVE_FROZEN = -1, SHMS__RESERVE_NONE = 0, SHMS__RESERVE_TAKEN = 1 };
/*
 * Count-mode classes only: reserve one free cell under mode. RESERVE_FROZEN only with
 * SHMS__TAKE_ENTERING; the caller claims a cell, or puts it back.
 */
enum shms__reserve shms__fast_reserve(const struct shms__cls *k, enum shms__take_mode mode);

/*
 * What a primitive asks its caller to do next. The primitives (cells, slots, revocation, worker
 * cells) lie below the dispatcher and never call up into it (docs/architecture.md, "Layers"):
 * they say what the change they made needs, and their caller does it, through shms__follow
 * when it lies above core/dispatch.c. A set of bits, done in the order listed.
 */
enum shms__next {
  SHMS__NEXT_NONE = 0,
  SHMS__NEXT_KICK = 1,              /* something may be granted now: shms__kick */
  SHMS__NEXT_CHECK_QUARANTINED = 2, /* a cell was quarantined: shms__check_all_quarantined */
};

/* ---- Cells ---- */

/* What shms__cell_take returns when it takes no cell (a cell's index is >= 0). */
enum shms__take_none { SHMS__TAKE_NONE = -1, SHMS__TAKE_FROZEN = -2 };
/*
 * Take a free cell for owner in state (GRANTED or LEASED) under mode (enum shms__take_mode).
 * Returns the cell, SHMS__TAKE_NONE if there is none to take, or SHMS__TAKE_FROZEN (only with
 * SHMS__TAKE_ENTERING) if the class is frozen.
 */
int64_t shms__cell_take(const struct shms__cls *k, enum shms__take_mode mode, uint32_t owner,
                        uint32_t state);
/*
 * Start a lease on claimed cell c: take its next token and record the
 * tenant (the record whose limit it counts in, and the name of the tenant it
 * serves: SHMS__NAME_WORDS words, shms__tenant_pack), slot and start time
 * (shms__fast_stamp for the fast path, or 0: not stamped yet, shms__stamp_leases).
 * SHMS_ESEQEXHAUSTED if its token sequence is used up: the caller settles
 * what it was granting, then shms__cell_exhausted.
 */
int shms__cell_start(const struct shms__cls *k, uint32_t c, uint32_t tenant, const uint64_t *name,
                     uint32_t slot, uint64_t start_ns, uint32_t *gen, uint64_t *token);
/* The fast word as this thread's last shms__cell_take found it (the value its CAS replaced). */
extern SHMS__TLS uint64_t shms__take_seen;
/*
 * The start of a lease this thread has just taken on the fast path of k. In a class fair by time
 * with requests queued at the take, its end is charged to its tenant: the monotonic clock, stored
 * odd, so that its end reads the same clock and the charge is what it held. Otherwise the coarse
 * clock, stored even (docs/protocol.md, "Lease start times"). The queue is judged by the word the
 * take's CAS replaced, not read again: under contention the line has often moved on.
 */
static inline uint64_t shms__fast_stamp(const struct shms__cls *k) {
  if (k->timed && SHMS__FAST_QUEUED(shms__take_seen) != 0)
    return shms__now_ns() | 1;
  return shms__coarse_now_ns() & ~1ull;
}
/* Stamp now as the start of every lease of k taken without one (a prepared acquire's fast path:
 * docs/protocol.md, "Lease start times"); returns how many it stamped. Any member, any time. */
uint32_t shms__stamp_leases(const struct shms__cls *k);
/* The tenant name cell c records (shms__cell_start) into out, SHMS_TENANT_MAX + 1 bytes. Only
 * meaningful while the lease or grant it was recorded for is the cell's. */
void shms__cell_tenant(const struct shms__cls *k, uint32_t c, char *out);
/* A lease on c was handed to its holder (accepted, or taken on the fast path): count it. */
void shms__cell_count_lease(const struct shms__cls *k, uint32_t c);
/* Quarantine claimed cell c whose tokens ran out (fail closed): as shms__cell_quarantine. */
int shms__cell_exhausted(const struct shms__cls *k, uint32_t c);
/*
 * GRANTED -> AVAILABLE (generation + 1): the grant of cell c made at generation gen, which nobody
 * accepted and nobody will (its slot was settled, revoked, or never granted), returns its cell:
 * not quarantined, counted free. Returns 1 if this call returned it (the caller then kicks:
 * shms__return_and_kick); 0 if the cell is no longer that grant's (someone else returned it
 * first: exactly one returner wins).
 */
int shms__cell_return(const struct shms__cls *k, uint32_t c, uint32_t gen);
/* Move cell c from the exact word expect to QUARANTINED (reason recorded). 1 if done: the caller
 * then checks whether every cell is (shms__quarantine_and_check). */
int shms__cell_quarantine(const struct shms__cls *k, uint32_t c, uint64_t expect, int reason);
/*
 * GRANTED -> LEASED (accept): the grant at generation gen becomes owner's lease, once the waiter
 * won its slot (shms__slot_accept). 1 if the cell was still GRANTED and is now owner's.
 */
int shms__cell_accept(const struct shms__cls *k, uint32_t c, uint32_t gen, uint32_t owner);
/* GRANTED -> LEASED (a worker starts the job granted to its cell c): returns the generation. */
uint32_t shms__cell_run(const struct shms__cls *k, uint32_t c, uint32_t owner);
/*
 * Multi-cell leases (docs/protocol.md, "Multi-cell requests"). A lease of several cells is its
 * lead cell (GRANTED, then LEASED, with `ncells` recorded) and companions (BOUND to the lead at
 * its generation); every end of the lead (return, release, reclaim, quarantine) ends its
 * companions as it ended. RESERVED cells are held for the class's gathering request.
 *
 * Return every RESERVED cell and every companion whose lead has ended (an orphan: its ender
 * died in between) to AVAILABLE, or to QUARANTINED with a lead that ended so; returns how many.
 * Only the baton holder (with gather_slot cleared) or recovery, the class frozen.
 */
uint32_t shms__cells_settle_reserved(const struct shms__cls *k);
/* How many cells the lease that lead cell c carries at generation gen holds (1 for a lease of
 * one). Any member. */
uint32_t shms__lead_cells(const struct shms__cls *k, uint32_t c, uint32_t gen);
/* Whether companion cell c (read BOUND) belongs to no lease any more. Any member. */
int shms__companion_orphaned(const struct shms__cls *k, uint32_t c);
/* The cells of the lease whose lead is c at generation gen, ascending: up to max into out;
 * returns how many (the lead itself counts). Any member; a snapshot. */
uint32_t shms__lease_cells_of(const struct shms__cls *k, uint32_t c, uint32_t gen, uint32_t *out,
                              uint32_t max);
/*
 * Gathering the cells of a multi-cell request (core/gather.c), under the baton. shms__gather:
 * reserve free cells for request i until it holds want; then its lead cell, GRANTED to the
 * request's owner, for the caller to start as any grant (-1: not all there yet; the pass stops).
 * shms__gather_bind: after the lead's start at generation gen, bind the other reserved cells to
 * it and end the gathering. shms__gather_next: the slot (index + 1) still gathering, or 0 once
 * it ended (its cells returned). shms__gather_drop: return the reserved cells, end the gathering.
 */
int64_t shms__gather(const struct shms__cls *k, uint32_t i, uint32_t want);
void shms__gather_bind(const struct shms__cls *k, uint32_t lead, uint32_t gen, uint32_t cells);
uint32_t shms__gather_next(const struct shms__cls *k);
void shms__gather_drop(const struct shms__cls *k);
/* The class's RESERVED cells (the gathering request's): how many, and the lowest (-1: none).
 * Any member; a snapshot. */
uint32_t shms__gather_reserved(const struct shms__cls *k, int64_t *lowest);
/* What shms__cell_release did, and what its caller must do next. */
enum shms__release {
  SHMS__RELEASE_RACED,
  SHMS__RELEASE_DONE,
  SHMS__RELEASE_KICK,
  SHMS__RELEASE_NUDGE
};
/*
 * LEASED -> AVAILABLE (generation + 1): the holder releases the lease whose cell word is expect.
 * RACED if the lease was returned concurrently; KICK if the cell is the queue's (the caller
 * kicks); NUDGE if requests wait within the overtake bound and no nudge is in flight (the caller
 * calls shms__overtake_nudge). *now: the monotonic time the release read to charge the lease, or
 * 0; the pass a kick runs reuses it.
 */
enum shms__release shms__cell_release(const struct shms__cls *k, uint32_t c, uint64_t expect,
                                      uint64_t *now);
/* LEASED -> AVAILABLE (generation + 1) for a departed owner's lease (core/recover.c): 1 if done;
 * the caller kicks. */
int shms__cell_reclaim(const struct shms__cls *k, uint32_t c, uint64_t expect);
/* LEASED -> AVAILABLE (generation + 1, still worker's) once its job completed, the job's count and
 * quotas ended: 1 if someone is queued or the job was counted (the caller kicks). */
int shms__cell_job_done(const struct shms__cls *k, uint32_t c, uint64_t expect, uint32_t worker);
/* OFFLINE -> AVAILABLE (generation + 1), bound to worker and counted free: 1 if done; the caller
 * kicks. */
int shms__cell_bind(const struct shms__cls *k, uint32_t c, uint64_t expect, uint32_t worker);
/* A worker cell from word expect to state (OFFLINE, or QUARANTINED's worker-lost), generation + 1,
 * no owner; a grant's count and quotas end with it. 1 if done. */
int shms__cell_offline(const struct shms__cls *k, uint32_t c, uint64_t expect, uint32_t state);
/* QUARANTINED -> state (AVAILABLE, or a worker class's OFFLINE), generation + 1, reason and
 * worker cleared: 1 if done. The caller counts an AVAILABLE cell free and kicks. */
int shms__cell_unquarantine(const struct shms__cls *k, uint32_t c, uint64_t expect, uint32_t state);
/* A counted lease of tenant ref ended: uncount it and ask the dispatcher to look at it. */
void shms__tenant_lease_ended(const struct shms__cls *k, uint32_t ref);

/* Test only: the next lease on every cell of k takes token next (to reach exhaustion). */
void shms__test_set_tokens(const struct shms__cls *k, uint64_t next);

/* ---- Worker cells ---- */

/* OFFLINE -> AVAILABLE, bound to worker owner; SHMS_EBUSY if no cell is offline. On SHMS_OK the
 * cell counts free: the caller kicks. */
int shms__workcell_bind(const struct shms__cls *k, uint32_t owner, uint32_t *cell);
/* A job was granted to cell c: wake its worker if it sleeps. */
void shms__workcell_wake(const struct shms__cls *k, uint32_t c);
/*
 * The worker bound to c is gone: an idle cell goes offline, a job granted but
 * not taken is queued again (it never ran), a running job ends worker-lost
 * (or is queued again once, if contained: its command is proven gone) and the
 * cell is quarantined. Returns what the caller must do next: KICK for a job
 * queued again, CHECK_QUARANTINED for the cell quarantined.
 */
enum shms__next shms__workcell_gone(struct shms *h, const struct shms__cls *k, uint32_t c,
                                    uint32_t worker, int contained);
/* If the worker bound to c is dead: kill its command (shms__proc_kill_command), then
 * shms__workcell_gone. Call it outside any operation: it enters one itself. Returns what
 * shms__workcell_gone asked for (the caller follows it: shms__follow). */
enum shms__next shms__workcell_check(struct shms *h, const struct shms__cls *k, uint32_t c);

/* ---- Request slots ---- */

static inline uint32_t *shms__slot_futex(struct shms__slot *s) {
  return (uint32_t *)&s->word; /* the low half: x86-64 is little-endian */
}

/* FREE -> CLAIMED: take a free slot; SHMS_EQUEUEFULL when all are in use. */
int shms__slot_claim(const struct shms__cls *k, uint32_t *index, uint64_t *seq);
/* Reserve n slots at once against the used count, or none: SHMS_EQUEUEFULL when they do not
 * all fit. Each reservation is then taken (shms__slot_take) or given back (unreserve). */
int shms__slot_reserve(const struct shms__cls *k, uint32_t n);
void shms__slot_unreserve(const struct shms__cls *k, uint32_t n);
/* FREE -> CLAIMED for one reservation already counted in used; SHMS_EQUEUEFULL (the
 * reservation given back) only if no free slot shows up in a bounded wait. */
int shms__slot_take(const struct shms__cls *k, uint32_t *index, uint64_t *seq);
/* CLAIMED/SETTLED -> FREE, when neither the waiter nor the index needs it any more. */
void shms__slot_free(const struct shms__cls *k, uint32_t i);
/*
 * CAS the slot word from *expect to desired; on failure *expect is the
 * current word. A change made for someone else wakes the waiter if it
 * announced that it sleeps (SLEEPING in the old word, not in the new).
 */
int shms__slot_cas(const struct shms__cls *k, uint32_t i, uint64_t *expect, uint64_t desired);
/* Set flags (SLEEPING, CANCEL) on slot i if its word is still *w: 1 if done; on failure *w is the
 * current word. */
int shms__slot_flag(const struct shms__cls *k, uint32_t i, uint64_t *w, uint64_t flags);
/* CLAIMED -> QUEUED: publish filled request i (sequence seq); its fields are visible first. */
void shms__slot_publish(const struct shms__cls *k, uint32_t i, uint64_t seq);
/* GRANTED -> SETTLED+COLLECTED (accept): the waiter wins request i (word expect) against any
 * canceller. 1 if it did; the slot is then the waiter's alone to free. */
int shms__slot_accept(const struct shms__cls *k, uint32_t i, uint64_t expect, uint64_t seq);
/* GRANTED -> RUNNING (a worker starts job i, word expect), against any canceller: 1 if done. */
int shms__slot_run(const struct shms__cls *k, uint32_t i, uint64_t expect);
/* RUNNING job i (sequence seq, word *w): set WRITING (its payload is being overwritten, never to
 * be run again). 0 if the job is no longer running as seq; *w is the new word. */
int shms__slot_writing(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w);
/*
 * RUNNING -> SETTLED (the job completed; its result is written): -1 if the job is no longer
 * running as seq, else 1 if it settled COLLECTED (dropped: its client is gone; the caller frees
 * the slot), 0 if its client collects it.
 */
int shms__slot_complete(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t w,
                        int dropped);
/* Set COLLECTED on slot i; returns the word before. */
uint64_t shms__slot_set_collected(const struct shms__cls *k, uint32_t i);
/* What shms__slot_settle did: nonzero if this call settled the request, and then what its
 * caller must do next (shms__settle_and_kick does it). */
enum shms__settled {
  SHMS__SETTLED_NOT = 0,    /* no longer request seq, or not in a state of from_mask */
  SHMS__SETTLED_KICK = 1,   /* a shorter queue, or a returned cell: the caller kicks */
  SHMS__SETTLED_UNLINK = 2, /* still in the index: the caller unlinks it (shms__unlink_settled) */
};
/* Count a request refused or ended with reason (neither cancelled nor expired) in `rejected`
 * and its reason's counter. */
void shms__count_rejected(const struct shms__cls *k, int reason);
/*
 * Settle request i (sequence seq) with reason if its state is in from_mask
 * (1 << SHMS__SLOT_QUEUED and/or 1 << SHMS__SLOT_GRANTED): QUEUED leaves the
 * queue count, GRANTED returns its cell.
 */
enum shms__settled shms__slot_settle(struct shms *h, const struct shms__cls *k, uint32_t i,
                                     uint64_t seq, unsigned from_mask, int reason);
/* The outcome of settled request i (sequence seq) is taken on its waiter's behalf: COLLECTED
 * set by one CAS only while the word still shows it settled and uncollected, and the slot freed
 * (unless indexed) by whoever set it. Two hands that end the same request for a waiter that is
 * gone (its worker, its recovery, its last joiner) collect it once. */
void shms__slot_collect(const struct shms__cls *k, uint32_t i, uint64_t seq);
/* The index no longer references settled slot i; frees it if collected. */
void shms__slot_unindexed(const struct shms__cls *k, uint32_t i);
/*
 * Waiters call this after sleeping a whole poll interval: if request seq in
 * slot i is queued but neither indexed nor awaiting the dispatcher, raise its
 * attention bit again. No protocol step leaves a request so (docs/protocol.md,
 * "Guards"); should one all the same, this bounds what it costs to one poll
 * interval instead of a request stranded for ever. Spurious calls are
 * harmless: the dispatcher ignores a bit on an indexed request.
 */
void shms__slot_reattend(const struct shms__cls *k, uint32_t i, uint64_t seq);
/*
 * The transitions other core/ steps drive, each one CAS from the word *w the caller read and
 * checked (its loop re-checks on failure): 1 if done, else 0 with *w the word now. A change
 * that clears SLEEPING wakes the waiter (shms__slot_cas).
 */
/* QUEUED -> QUEUED+INDEXED (the index links it; SLEEPING cleared). */
int shms__slot_mark_indexed(const struct shms__cls *k, uint32_t i, uint64_t *w);
/* QUEUED(+INDEXED) -> GRANTED to request seq (INDEXED, SLEEPING, HELP cleared; the epoch kept):
 * the cell, generation and token written before are visible first. */
int shms__slot_grant(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w);
/* QUEUED -> QUEUED+HELP: ask its waiter to carry on dispatching (hand-off). */
int shms__slot_ask_help(const struct shms__cls *k, uint32_t i, uint64_t *w);
/* HELP off: the waiter answers the hand-off (it kicks next). */
int shms__slot_help_taken(const struct shms__cls *k, uint32_t i, uint64_t *w);
/* GRANTED -> QUEUED+LATE: revoke a grant not accepted in time (the epoch moves on, so the
 * grant's word never recurs). */
int shms__slot_revoke(const struct shms__cls *k, uint32_t i, uint64_t *w);
/* QUEUED+LATE -> QUEUED: the waiter is back (unparked; it raises the attention bit next). */
int shms__slot_unpark(const struct shms__cls *k, uint32_t i, uint64_t *w);
/* GRANTED or RUNNING -> QUEUED: a gone worker's job queued again (request seq). */
int shms__slot_requeue(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w);
/* RUNNING -> SETTLED(worker-lost): a gone worker's job ended (request seq). */
int shms__slot_job_lost(const struct shms__cls *k, uint32_t i, uint64_t seq, uint64_t *w);

/* ---- What a process owns (core/owned.c) ---- */

/*
 * The owner's threads keep the record: slot i of k joins it when the owner
 * has filled the request and before it publishes it, and leaves it before the
 * slot can come free. Each change takes a lock of the process; none blocks.
 */
/* Claimed and filled (owner written) slot i of k: onto our list. */
void shms__owned_add(struct shms *h, const struct shms__cls *k, uint32_t i);
/* Our accepted request in slot i (SETTLED+COLLECTED, not indexed): off our list; we free it. */
void shms__owned_remove(struct shms *h, const struct shms__cls *k, uint32_t i);
/* Our waiter takes the outcome of settled slot i: off our list, COLLECTED, freed unless indexed. */
void shms__owned_collect(struct shms *h, const struct shms__cls *k, uint32_t i);

/* A copy of an owner's list: its slots and their sequences when it was read. */
struct shms__owned {
  struct shms__owned_slot {
    uint32_t ref; /* SHMS__OWNED_REF */
    uint64_t seq;
  } * v;
  uint32_t n, cap;
};
/*
 * Copy owner's list into l (ours at detach, or a dead process's): 1 if it can
 * be trusted, 0 if the caller must scan every slot instead (the owner died in
 * the middle of a change, its entry was claimed again, or a slot on the list
 * is no longer its own). Ours is emptied and stays marked as being changed
 * until shms__owned_done. O(what owner owns); reads nothing else.
 */
int shms__owned_take(struct shms *h, uint32_t owner, struct shms__owned *l);
/* Done with l (and, at our own detach, with our list). */
void shms__owned_done(struct shms *h, uint32_t owner, struct shms__owned *l);

/* ---- Dispatch ---- */

/*
 * Something changed that may allow a grant or needs the index: try to take
 * the class's baton and do the work; if another process holds it, that
 * holder re-checks before letting go, so leaving is safe. Non-blocking.
 */
void shms__kick(struct shms *h, const struct shms__cls *k);
/* A kick whose first pass runs at now, a monotonic time just read (0: it reads its own). */
void shms__kick_at(struct shms *h, const struct shms__cls *k, uint64_t now);
/*
 * Inside an operation on k: release the lease at cell c whose word is w, as its holder would
 * (kicking or nudging who waits); 0 if it was returned concurrently. Inline: it is the release's
 * fast path (design/fast-path.md).
 */
static inline int shms__release_lease(struct shms *h, const struct shms__cls *k, uint32_t c,
                                      uint64_t w) {
  uint64_t now;
  enum shms__release r = shms__cell_release(k, c, w, &now);
  /* A nudge that finds nobody asleep falls back to a kick: the queue's pass grants the cell. */
  if (r == SHMS__RELEASE_KICK || (r == SHMS__RELEASE_NUDGE && !shms__overtake_nudge(k)))
    shms__kick_at(h, k, now);
  return r != SHMS__RELEASE_RACED;
}
/*
 * Settled request i is still in the index: unlink it at once if the baton is
 * free (then dispatch as a kick would), else leave its attention bit for the
 * holder. Non-blocking, like a kick.
 */
void shms__unlink_settled(struct shms *h, const struct shms__cls *k, uint32_t i);
/* Take the baton, waiting for a live holder; recover it from a dead one. */
int shms__baton_acquire(struct shms *h, const struct shms__cls *k, uint64_t timeout_ns);
/* Let the baton go after shms__baton_acquire, doing the re-check protocol. */
void shms__baton_done(struct shms *h, const struct shms__cls *k);
/* If the baton's holder is dead, take it over and rebuild the index. */
void shms__baton_check_holder(struct shms *h, const struct shms__cls *k);
/*
 * Settle every queued (and granted, unaccepted) request of the class with
 * reason: drain and all-cells-quarantined. O(queue), administrative only.
 */
void shms__fail_all(struct shms *h, const struct shms__cls *k, int reason);
/* If every cell is quarantined, fail all queued work with SHMS_EQUARANTINED. */
void shms__check_all_quarantined(struct shms *h, const struct shms__cls *k);
/* Do what a primitive asked (enum shms__next), in order. Enters an operation on k itself. */
void shms__follow(struct shms *h, const struct shms__cls *k, enum shms__next next);
/* What the primitives ask of their caller, done: shms__slot_settle then an unlink or a kick if
 * it settled the request; shms__cell_return then a kick if it returned the cell;
 * shms__cell_quarantine (or _exhausted) then shms__check_all_quarantined if it quarantined it.
 * Each returns whether the primitive did its change (1) or not (0). */
int shms__settle_and_kick(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                          unsigned from_mask, int reason);
int shms__return_and_kick(struct shms *h, const struct shms__cls *k, uint32_t c, uint32_t gen);
int shms__quarantine_and_check(struct shms *h, const struct shms__cls *k, uint32_t c,
                               uint64_t expect, int reason);
int shms__exhaust_and_check(struct shms *h, const struct shms__cls *k, uint32_t c);

/*
 * Everything owner held: requests end owner-lost (unaccepted grants return
 * their cells), leases follow the class's on-holder-death policy. contained:
 * the command the owner recorded is proven gone (shms__proc_kill_command or
 * shms__proc_end_command said so); if not, its leases are quarantined
 * whatever the policy and a job it ran is never run again. A class held still
 * past until_real (the real clock; 0: no limit) is left as it is: 0 then (the
 * detail says by whom), and the owner's record of its requests stays marked as
 * being changed, for the recovery that settles the rest; 1 when all is settled.
 */
int shms__recover_owner(struct shms *h, uint32_t owner, int contained, uint64_t until_real);

/*
 * ---- Keyed jobs (core/joined.c; docs/protocol.md, "Keyed jobs") ----
 */
/* The waiters word a job with options starts with, as sequence seq: its submitter waits. */
uint64_t shms__waiters_first(uint64_t seq, unsigned options);
/* Join keyed job i of k (sequence seq) as one more waiter, recorded in our process entry;
 * inside an operation. SHMS_OK, SHMS_ENOTFOUND (nobody waits for it any more: not joinable) or
 * SHMS_EBUSY (our table of joins is full). */
int shms__join(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq);
/* The steps of a join, for a batch making several as one: records for n joins (entries, each
 * SHMS__JOIN_ENTRY) taken in our process entry all or none, their places into at[] (SHMS_EBUSY
 * with none taken when fewer are free, how many into *free_count, which may be NULL); */
int shms__joins_reserve(struct shms *h, const uint64_t *entries, size_t n, int *at,
                        size_t *free_count);
/* then the joiner counted on job i (seq), the waiters after into *count (SHMS_ENOTFOUND: not
 * joinable any more); inside an operation; */
int shms__join_add(const struct shms__cls *k, uint32_t i, uint64_t seq, uint32_t *count);
/* once the join stands, its event and count. */
void shms__join_noted(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                      uint32_t count);
/* A join taken back before it stood: its record (at) cleared, then, if it was counted, its
 * share off the job's word; 1 if that was the job's last share (the caller ends the job:
 * shms__job_abandon). Inside an operation. */
int shms__join_undo(struct shms *h, const struct shms__cls *k, int at, uint32_t i, uint64_t seq,
                    int counted);
/* What share of keyed job i (seq) the calling process holds. */
enum shms__share {
  SHMS__SHARE_NONE = 0, /* none: never held, or its outcome taken */
  SHMS__SHARE_OWNER,    /* it submitted the job and waits */
  SHMS__SHARE_JOINED,   /* it joined the job and waits */
  SHMS__SHARE_LEFT,     /* it left the job (shms_cancel) */
};
enum shms__share shms__share_of(const struct shms *h, const struct shms__cls *k, uint32_t i,
                                uint64_t seq);
/* Whether the calling process holds a record of a joiner's share of job i (seq) it left, and
 * (clear) the record then goes: its wait said so. A process holding several shares of a job
 * (it joined it more than once) hears of the one it left before it waits with another. */
int shms__share_left(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                     int clear);
/* Whether the caller's share (OWNER or JOINED) is the last of job i (seq): then nobody may
 * join it any more (CLOSED), and the caller cancels the job itself. */
int shms__share_close(const struct shms__cls *k, uint32_t i, uint64_t seq, enum shms__share share);
/* Take our joiner's share of job i (seq) back, left (a cancel: the record stays, marked) or
 * not (its outcome taken); inside an operation. 1 if it was the last share: the caller then
 * ends the job (shms__job_abandon). */
int shms__joiner_leave(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                       int left);
/* Take the submitter's share of job i (seq) back (left: by a cancel); 1 if none is left. */
int shms__owner_drop(const struct shms__cls *k, uint32_t i, uint64_t seq, int left);
/* The same by the submitter itself, taking the job off its record of requests as it does. */
int shms__owned_leave(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                      int left);
/* Whether nobody waits for keyed job i (seq) any more: no joiner, and its submitter left or is
 * dead (owner_dead: the caller found it so); if so its waiters word is CLOSED by the same CAS,
 * so that no join counts on it after. Who decides whether a job's result is dropped asks this
 * of a keyed job instead of the submitter's liveness alone. */
int shms__keyed_unwaited(const struct shms__cls *k, uint32_t i, uint64_t seq, int owner_dead);
/* Nobody waits for job i (seq) any more: a queued or granted one ends with reason, a running
 * one's result is dropped (and its worker asked to stop it if reason is SHMS_ECANCELLED), an
 * ended one is collected. Idempotent; inside an operation. */
void shms__job_abandon(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq,
                       int reason);
/* Release the shares recorded in process entry index for class k (its process detached or
 * died, or the entry was taken over); inside an operation. */
void shms__joins_release(struct shms *h, const struct shms__cls *k, uint32_t index);
/* At attach, an entry taken over: release the shares its dead owner recorded, class by class. */
void shms__joins_adopt(struct shms *h);
/* Frozen recovery: every keyed job's joiners counted again from the records of the live
 * processes (dead(ctx, owner) says which are not; their records of k go, and a dead submitter's
 * share), and a job nobody waits for any more ended as its last leaver would have. */
void shms__joins_recount(const struct shms *h, const struct shms__cls *k,
                         int (*dead)(void *ctx, uint32_t owner), void *ctx);
/* Under the baton: whether another live job of slot i's key goes before it (its link then
 * refuses it with SHMS_EWOULDBLOCK, and its submitter joins that job instead). */
int shms__key_conflict(const struct shms__cls *k, uint32_t i);
/*
 * Return the cells of grants whose waiter died before accepting them (run by
 * polling waiters, so a dead waiter never wedges a class, supervisor or not).
 */
void shms__reap_unaccepted(struct shms *h, const struct shms__cls *k);

/* Settle what dead owner held (its entry was taken over by h's registration): as a recovery of
 * it would, told in the event ring. Outside any operation. */
void shms__settle_dead_owner(struct shms *h, uint32_t owner);

/* Cells of lease class k whose holders a polling waiter looks at, at most, per poll. */
#define SHMS__HOLDER_LOOKS 64u
/* A polling waiter's look for dead holders, recovering the first found (core/recover_dead.c):
 * capacity comes back without a supervisor. 1 if it recovered one. Outside any operation. */
int shms__reap_dead_holders(struct shms *h, const struct shms__cls *k);

/* Recover class k: freeze, settle what the dead left, recompute, unfreeze (core/repair.c);
 * what it did goes into r (core/report.h). */
struct shms__report;
int shms__recover_class_into(struct shms *h, const struct shms__cls *k, struct shms__report *r);
void shms__recover_class(struct shms *h, const struct shms__cls *k);

/* ---- Grant revocation (core/revoke.c; lease classes with a grant-timeout) ---- */

/* Under the baton, after granting cell c: note when the grant falls due if none is pending. */
void shms__revoke_note(const struct shms__cls *k, uint32_t c);
/* Whether some grant may have fallen due by now (a cheap look at the class's due time). */
int shms__revoke_wanted(const struct shms__cls *k, uint64_t now);
/*
 * Under the baton: every grant not accepted within the class's grant-timeout is revoked (its
 * slot GRANTED -> QUEUED+LATE, then its cell returned); a due grant no slot holds returns its
 * cell. Recomputes the class's due time. Returns the cells freed, which the pass that called it
 * grants (it holds the baton: no kick is needed).
 */
uint32_t shms__revoke_due(struct shms *h, const struct shms__cls *k, uint64_t now);
/*
 * A queued waiter about to sleep, while no cell is free: if a grant is due, return KICK (the
 * caller kicks: a pass revokes it); else set *wake_real to when (real clock) the next one falls
 * due, 0 for none, and return NONE.
 */
enum shms__next shms__revoke_poll(const struct shms__cls *k, uint64_t *wake_real);
/* The waiter of late request i (word w, QUEUED+LATE) is back: unpark it into the index. KICK if
 * it did (the caller kicks); NONE if the word changed (the caller looks again). */
enum shms__next shms__revoke_unpark(const struct shms__cls *k, uint32_t i, uint64_t w);

/* ---- Observers' views (core/cellview.c, core/tenantview.c) ---- */

/* The prologue of a call that reads rows of class c for observers (shms_cells,
 * shms_tenants_snapshot): the handle (an observer's will do), count and out (NULL only with max
 * 0), a configured class into *k. SHMS_EINVAL with a detail otherwise. */
int shms__view_rows(const shms_t *h, shms_class_t c, const void *out, uint32_t max,
                    const uint32_t *count, const struct shms__cls **k);
/* A tenant record's fair-share figures into o: weight, team and its weight, cell-time held
 * (read as they are: an observer's). */
void shms__tenant_fair_row(const struct shms__cls *k, const struct shms__tenant *t,
                           shms_tenant_stats *o);
/* The tenants of class k with their figures into out (up to max; *count all of them): those with
 * a record, and those the tenant table keeps figures of or processes tallied for the class
 * (core/tenantview.c). SHMS_ENOMEM, nothing written, when it cannot allocate its rows. */
int shms__tenant_view(const struct shms__cls *k, shms_tenant_stats *out, uint32_t max,
                      uint32_t *count);
/* Each row's entitled_share, from the rows' weights, teams and turns. */
void shms__tenant_shares(const struct shms__cls *k, shms_tenant_stats *rows, uint32_t n);

/* ---- The index (under the baton) ---- */

/* Process slot i's attention bit: index an arrival, or unlink a settled request. */
void shms__index_attend(struct shms *h, const struct shms__cls *k, uint32_t i);
/* Process tenant ref's attention bit: ring membership after a limit change, free if idle. */
void shms__index_attend_tenant(const struct shms__cls *k, uint32_t ref);
/* The request tenant ref should be granted next (slot index + 1), by aging or by order. */
uint32_t shms__index_select(const struct shms__cls *k, uint32_t ref, uint64_t now);
/* Unlink indexed slot i from its tenant's structures (the INDEXED flag is the caller's). */
void shms__index_unlink(const struct shms__cls *k, uint32_t i);
/*
 * Park indexed request i, whose quota full (an index into the quota table) has no unit free:
 * out of its tenant's order, so that it holds back neither its tenant's other requests nor
 * other tenants, until shms__index_unpark_room (docs/protocol.md, "Quotas").
 */
void shms__index_park(const struct shms__cls *k, uint32_t i, uint32_t full);
/* Parked requests whose quotas all have a unit free now back into their tenants' order. */
void shms__index_unpark_room(const struct shms__cls *k);
/*
 * Rebuild the index from the slots' state words (after a crash tore it): every request it held
 * is indexed again at once, and the tenant ring comes back in its previous order (tenant.h).
 */
void shms__index_rebuild(const struct shms__cls *k);
/*
 * During a rebuild (the tenant records reset): index queued request i again now. 1 if done, or
 * if the slot moved on; 0 if it must be refused (duplicate activation, tenant table full): the
 * caller raises its attention bit, and the next pass refuses it.
 */
int shms__index_reinsert(const struct shms__cls *k, uint32_t i);
/*
 * Warm the cache for unlinking indexed request i, before the baton is ours (a cancel): a cold
 * cancel's misses are dependent (the slot names its tenant record and neighbours, the record
 * names its treap's root), and a prefetch issued as soon as an address is known lets them
 * overlap with each other and with the cancel's own work (design/scaling.md, "The cold
 * cancel"). Hints only, never a change: every link is read racily (the baton's holder may be
 * changing it), range-checked, and used for nothing but a prefetch, which cannot fault; the
 * unlink reads them again under the baton. In three steps, each once the last one's lines can
 * have arrived: slot i's own lines (no read); the tenant record and neighbours it links to;
 * the root of its tenant's treap. Without any of them the unlink is the same, only slower.
 */
void shms__index_prefetch_slot(const struct shms__cls *k, uint32_t i);
void shms__index_prefetch_links(const struct shms__cls *k, uint32_t i);
void shms__index_prefetch_root(const struct shms__cls *k, uint32_t i);
/* Set when a tree walk found the index torn: the baton holder rebuilds it. */
extern SHMS__TLS int shms__index_corrupt;

#endif

/* Shared checks of the client API: turning a public request or ticket into a class and slot. */
#ifndef SHMS_CLIENT_CLIENT_H
#define SHMS_CLIENT_CLIENT_H

#include "../core/sched.h"

/*
 * The prologue of a call taking a request: forget the last detail, then
 * validate h (a member handle), req (class, tenant, allow list, bounds,
 * segment state) and the caller's output pointer out (named out_name). The tenant's name
 * packed as the cells record it into tenant_words (SHMS__NAME_WORDS), unless NULL.
 */
int shms__check_request(struct shms *h, const shms_request *req, unsigned mode, const void *out,
                        const char *out_name, struct shms__cls **k, uint64_t *tenant_words);
/*
 * The fast path of an acquire: a free cell taken now for the tenant packed in tenant
 * (SHMS__NAME_WORDS words) if the queue lets us, as one operation; SHMS_EWOULDBLOCK (no detail)
 * if not. shms__try_now: the same, its would-block with try_acquire's detail. stamp: whether the
 * lease's start time is read now (a prepared acquire leaves it to shms__stamp_leases, saving the
 * clock: docs/protocol.md, "Lease start times"). A class held still is waited out, until
 * until_real (the real clock, 0: no limit) at most: SHMS_ETIMEDOUT then, the detail saying by
 * whom. shms__try_now waits 20 ms at most, then says would-block.
 */
int shms__take_now(struct shms *h, const struct shms__cls *k, const uint64_t *tenant, int stamp,
                   shms_lease *lease, uint64_t until_real);
int shms__try_now(struct shms *h, const struct shms__cls *k, const uint64_t *tenant, int stamp,
                  shms_lease *lease);
/* shms__take_now once more after shms__yield_before_queueing, or SHMS_EWOULDBLOCK if that says
 * not to yield. */
__attribute__((cold)) int shms__take_after_yield(struct shms *h, const struct shms__cls *k,
                                                 const uint64_t *tenant, int stamp,
                                                 shms_lease *lease, uint64_t until_real);
/* The blocking acquire's fast path: shms__take_now, and if it would block, shms__take_after_yield
 * (out of line: the uncontended acquire pays one comparison). */
static inline int shms__take_blocking(struct shms *h, const struct shms__cls *k,
                                      const uint64_t *tenant, int stamp, shms_lease *lease,
                                      uint64_t until_real) {
  int rc = shms__take_now(h, k, tenant, stamp, lease, until_real);
  return rc == SHMS_EWOULDBLOCK ? shms__take_after_yield(h, k, tenant, stamp, lease, until_real)
                                : rc;
}
/* try_acquire in a class with tenant-max-active: queue req, look once, withdraw it. */
int shms__try_limited(struct shms *h, const struct shms__cls *k, const shms_request *req,
                      shms_lease *lease);
/* A new handle's number and prepared-request key (client/prepared.c); attach calls it. */
void shms__prepared_setup(struct shms *h);
/* acquire once the fast path has said would-block: enqueue req and wait without limit (an
 * interrupted wait withdraws the request). */
int shms__acquire_queued(struct shms *h, const shms_request *req, shms_lease *lease);
/*
 * Claim a slot of k, fill it from req (and payload, for a job), publish it and
 * return once the dispatcher has indexed it or refused it.
 */
int shms__enqueue_slot(struct shms *h, struct shms__cls *k, const shms_request *req,
                       const void *payload, size_t len, unsigned options, const char *key,
                       uint32_t quotas, shms_ticket *ticket);
/* A job's key: 1..SHMS_KEY_MAX graphic ASCII bytes, else SHMS_EINVAL with the detail. */
int shms__check_key(const char *key);
/* The newest job of key that a submit may join: indexed in the queue, granted, or running and
 * not asked to stop. 1 with its slot and sequence, 0 if there is none. Inside an operation. */
int shms__key_find_live(const struct shms__cls *k, const char *key, uint32_t *index, uint64_t *seq);
/* The caller took the outcome of its request i (seq): collect it, or for a keyed job take its
 * share back (the last share collects it). Inside an operation. */
void shms__job_collect(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq);
/* SHMS_OK if the calling process still waits for keyed job i (seq); else why it may not (it
 * left the job: SHMS_ECANCELLED, its record of leaving then gone; its outcome taken). */
int shms__keyed_share(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq);
/*
 * What every job is checked for before it is queued (shms_submit, shms_submit_key, a batch's):
 * the request for a worker class (shms__check_request), its payload within the class's size, and
 * the quotas it names (shms__check_quotas). The class into *k, the quotas' bits into *quotas.
 */
int shms__check_job(struct shms *h, const shms_request *req, const void *payload, size_t len,
                    const shms_ticket *ticket, struct shms__cls **k, uint32_t *quotas);
/* Fill claimed slot s (its sequence seq) from req for a payload of len bytes (copied in by the
 * caller), with its single-flight key (NULL: none) and its quotas (shms__check_quotas). */
void shms__slot_fill(struct shms *h, struct shms__slot *s, const shms_request *req, size_t len,
                     unsigned options, const char *key, uint32_t quotas, uint64_t seq);
/* Settle our own fresh request i if a drain or total quarantine raced its publication. */
void shms__recheck_after_publish(struct shms *h, const struct shms__cls *k, uint32_t i,
                                 uint64_t seq);
/*
 * The quotas req names, as bits of the quota table, into *mask: SHMS_EINVAL, with the detail
 * naming the one at fault, for an unknown name, a name given twice, more than
 * SHMS_REQUEST_QUOTAS_MAX, or a request of several cells.
 */
int shms__check_quotas(const struct shms__cls *k, const shms_request *req, uint32_t *mask);
/*
 * Sleep on slot i's word w (announcing it first) until woken, until the real
 * clock reaches until_real (0: no limit), or until this process's next check on
 * the class falls due; returns 1 when the check is due.
 */
int shms__sleep_on(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                   uint64_t until_real);
/* The same, spinning first (shms__spin, with the record of kind: 0 indexing, 1 the outcome). */
int shms__spin_then_sleep(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                          uint64_t until_real, int kind);
/*
 * Spinning before sleeping (client/spin.c). shms__spin_setup reads SHMSCHED_SPIN_US (the window;
 * SHMS_EINVAL with a detail if it is not 0..1000) and the online CPUs; attach calls it.
 */
int shms__spin_setup(void);
/* The window for every handle of the process, in ns, and the online CPUs it counts with (tests
 * set a long window, and CPUs to spin on a machine of one). */
void shms__spin_set_window_ns(uint64_t ns);
void shms__spin_set_cpus(uint32_t cpus);
uint64_t shms__spin_window_ns(void);
/* A blocking acquire found no cell it may take, with queued requests in its class (the fast
 * word's count): yield the CPU and return 1 (look again before queueing) if they are no more than
 * the online CPUs, else 0. */
int shms__yield_before_queueing(uint32_t queued);
/* Test only: call hook where an acquire yields its CPU, instead of yielding (NULL: yield). */
void shms__test_on_yield(void (*hook)(void));
enum shms__spun {
  SHMS__SPUN_NOT,        /* did not spin, or the window ran out: go on and sleep */
  SHMS__SPUN_CHANGED,    /* the word changed: look again */
  SHMS__SPUN_INTERRUPTED /* shms_interrupt: the caller's loop returns */
};
/*
 * Watch *word while it reads w, for up to the window (and not past the real clock's until_real,
 * 0: no limit), if st's record and the machine's load say a spin may win; waiters: how many
 * threads may be spinning for the same thing, us included (a lease class's queued count). Only
 * reads *word.
 */
enum shms__spun shms__spin(struct shms *h, struct shms__spin *st, const uint64_t *word, uint64_t w,
                           uint64_t until_real, uint32_t waiters);
/* The dispatcher asked the waiter of slot i (word w) to carry on its work. */
void shms__help(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w);
/* A waiter slept a whole poll interval on request i (sequence seq): make sure nothing dead holds
 * it up (docs/protocol.md, "Guards"): its attention bit again if stranded, the baton's holder;
 * and stamp the start of leases taken without one. */
void shms__poll_checks(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t seq);
/* Until when (real clock) a wait with timeout_ns and slot s's deadline may sleep; 0: no limit. */
uint64_t shms__sleep_limit(const struct shms__slot *s, uint64_t until_real);
/* A request's deadline (CLOCK_MONOTONIC, 0: none) on the real clock, which bounds waits. */
uint64_t shms__deadline_real(uint64_t deadline_ns);
/* How long a wait may wait for a class held still (shms__op_enter_until): to the request's
 * deadline (one already past: not at all) or the wait's end (until_real; a wait with timeout 0:
 * not at all), whichever comes first; 0: no limit. */
uint64_t shms__held_limit(uint64_t deadline_ns, uint64_t until_real, uint64_t timeout_ns);
/* A wait that ends while its class is held still (shms__op_enter_until's detail says by whom):
 * deadline-exceeded once deadline_ns passed, saying where the request is (where), else the
 * wait's timeout. */
int shms__held_still(uint64_t deadline_ns, const char *where);
/*
 * The prologue of a call taking a ticket: the class and slot it names, or
 * SHMS_ENOTFOUND / SHMS_EINVAL with a detail; out may be NULL if unused.
 */
int shms__check_ticket(struct shms *h, const shms_ticket *t, const void *out, const char *out_name,
                       struct shms__cls **k, uint32_t *slot);
/*
 * SHMS_EINVAL with its detail: a process may wait only for the requests it queued (the
 * outcome is taken off its owner's record, core/owned.c); cancel and explain work from anywhere.
 */
int shms__not_ours(void);
/*
 * Each turn of a wait for a ticket: read the slot word of s into *w, and whether it still holds
 * the ticket's live request (what: "request", "job") and the request is ours to wait for:
 * SHMS_OK, or SHMS_ENOTFOUND / SHMS_EINVAL with a detail.
 */
int shms__ticket_live(const struct shms *h, const struct shms__slot *s, const shms_ticket *t,
                      const char *what, uint64_t *w);
/* When (real clock) a wait of timeout_ns ends: 0 for UINT64_MAX, no end. */
uint64_t shms__wait_end(uint64_t timeout_ns);
/* A view of the segment's tenant table: it is the segment's, so any configured class's view
 * reaches it; NULL with no class. */
const struct shms__cls *shms__table_view(const struct shms *h);
/* The prologue of a call naming a class: the handle attached as a member, class c configured. */
int shms__check_class(struct shms *h, shms_class_t c, struct shms__cls **k);
/* The segment's state (shms_segment_state_t). */
uint32_t shms__segment_state(const struct shms *h);
/* An internal step's result beside the SHMS_* codes: the state it acted on changed under it, the
 * caller looks again (never returned to users: positive, unlike every error). */
enum { SHMS__LOOK_AGAIN = 1 };

/*
 * Evaluate expr as one operation on class k (core/quiesce.c): counted as under
 * way, and started only while the class is not frozen. expr must not sleep.
 */
/*
 * How long a release or a detach waits for a class held still (a recovery or check, slow or
 * stopped) before it records the release for whoever lets the class go (core/pending.c), or
 * leaves what it holds to recovery, as a process that died would: a recovery's freeze lasts
 * milliseconds, and a process on its way out (a `run` past its deadline) must not wait on one
 * that is stopped.
 */
#define SHMS__HELD_PATIENCE_NS (250ull * 1000 * 1000)

#define SHMS__OP(h, k, expr)                                                                       \
  ({                                                                                               \
    shms__op_enter((h), (k));                                                                      \
    __typeof__(expr) op_result_ = (expr);                                                          \
    shms__op_leave((h), (k));                                                                      \
    op_result_;                                                                                    \
  })
#define SHMS__OP_VOID(h, k, stmt)                                                                  \
  do {                                                                                             \
    shms__op_enter((h), (k));                                                                      \
    stmt;                                                                                          \
    shms__op_leave((h), (k));                                                                      \
  } while (0)

/*
 * How long a waiter (and an idle worker) sleeps before it checks on the baton's holder, on
 * grants to dead waiters and on its own request: the one wake-up an idle waiter has. Only a
 * dead process's leftovers wait for it (docs/protocol.md, "Waiting and waking"), and with a
 * supervisor running not even those. Once a second costs 100 idle waiters about 0.2% of a
 * CPU (design/waking.md, "Idle waiters and the safety poll").
 */
#define SHMS__POLL_NS (1000ull * 1000 * 1000)

/* Whether shms_interrupt(h, 1) is in force: a wait returns SHMS_ETIMEDOUT instead of sleeping. */
int shms__interrupted(struct shms *h);
/* List s (its word and bit set, the bit already set in the word) before sleeping on it; 1 if h
 * is interrupted (then s is not listed: do not sleep). */
int shms__sleeper_add(struct shms *h, struct shms__sleeper *s);
/* Take s off the list once awake. */
void shms__sleeper_remove(struct shms *h, struct shms__sleeper *s);

#endif

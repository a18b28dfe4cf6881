/*
 * The fast word and the cells: reservation, claim, lease start, return and
 * quarantine (docs/protocol.md, "Cells").
 */
#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/hbm.h"
#include "fair.h"
#include "quota.h"
#include "sched.h"
#include "tenant.h"

/* Replace the fast word w by expr (computed from w) with one CAS, retrying until it lands; the
 * new word is left in w. FROZEN is never changed by an operation. */
#define FAST_UPDATE(k, w, expr)                                                                    \
  do {                                                                                             \
    (w) = shms__load_64(&(k)->ctl->fast);                                                          \
    uint64_t n_;                                                                                   \
    do                                                                                             \
      n_ = ((expr) & ~SHMS__FAST_FROZEN) | ((w)&SHMS__FAST_FROZEN);                                \
    while (!ck_pr_cas_64_value(&(k)->ctl->fast, (w), n_, &(w)));                                   \
    (w) = n_;                                                                                      \
  } while (0)

/* The queued count q (masked to its 29 bits: even a count torn below zero never spills into
 * the flags above it) with w's free field; STRICT and WOKEN kept while requests are queued, and
 * gone with the last of them (they speak of the queue). */
static uint64_t with_queued(uint64_t w, uint32_t q) {
  q &= SHMS__FAST_QMASK;
  return ((uint64_t)q << 32) | SHMS__FAST_LOW(w) |
         (q != 0 ? w & (SHMS__FAST_STRICT | SHMS__FAST_WOKEN) : 0);
}

uint64_t shms__fast_queue(const struct shms__cls *k, int32_t dqueued) {
  uint64_t w;
  FAST_UPDATE(k, w, with_queued(w, SHMS__FAST_QUEUED(w) + (uint32_t)dqueued));
  return w;
}

/* w with cell c counted free (its bit, or one more in the count). */
static uint64_t with_free(const struct shms__cls *k, uint64_t w, uint32_t c) {
  if (k->fast_map)
    return w | (1ull << (c & 31));
  return (w & ~0xffffffffull) | (uint32_t)(SHMS__FAST_LOW(w) + 1);
}

uint64_t shms__fast_put(const struct shms__cls *k, uint32_t c) {
  uint64_t w;
  FAST_UPDATE(k, w, with_free(k, w, c));
  return w;
}

/* Whether the queue's oldest indexed request has waited k's overtake bound (the baton holder
 * publishes when it will have: core/overtake.c), at now (the monotonic clock; 0: read it). */
static int overtake_passed(const struct shms__cls *k, uint64_t now) {
  uint64_t end = shms__load_64(&k->ctl->overtake_end_ns);
  return end != 0 && (now != 0 ? now : shms__now_ns()) >= end;
}

/*
 * A release's put in a class that overtakes: with requests queued, the same CAS that frees the
 * cell sets STRICT if strict (the bound has passed: the cell is the queue's), else WOKEN if no
 * nudge is in flight. Returns the new word; *nudge says whether this call set WOKEN.
 */
static uint64_t put_released(const struct shms__cls *k, uint32_t c, int strict, int *nudge) {
  uint64_t w = shms__load_64(&k->ctl->fast), n;
  do {
    n = with_free(k, w, c);
    if (SHMS__FAST_QUEUED(w) != 0) {
      if (strict)
        n |= SHMS__FAST_STRICT;
      if (!(n & SHMS__FAST_STRICT))
        n |= SHMS__FAST_WOKEN;
    }
  } while (!ck_pr_cas_64_value(&k->ctl->fast, w, n, &w));
  *nudge = (n & SHMS__FAST_WOKEN) && !(w & SHMS__FAST_WOKEN);
  return n;
}

uint32_t shms__fast_free_field(const struct shms__cls *k) {
  uint32_t field = 0;
  for (uint32_t c = 0; c < k->ncells; c++)
    if (SHMS__CELL_STATE(shms__load_64(&k->cells[c].word)) == SHMS__CELL_AVAILABLE)
      field += k->fast_map ? 1u << c : 1u;
  return field;
}

uint32_t shms__cells_held(const struct shms__cls *k, uint64_t f) {
  uint32_t valid = k->ncells >= 32 ? 0xffffffffu : (1u << k->ncells) - 1;
  uint32_t free =
      k->fast_map ? (uint32_t)__builtin_popcount(SHMS__FAST_LOW(f) & valid) : SHMS__FAST_LOW(f);
  uint32_t gone = free + shms__load_32(&k->ctl->quarantined);
  return gone < k->ncells ? k->ncells - gone : 0;
}

enum shms__reserve shms__fast_reserve(const struct shms__cls *k, enum shms__take_mode mode) {
  shms__rfo(&k->ctl->fast); /* the CAS below writes it: one transfer, not two */
  uint64_t w = shms__load_64(&k->ctl->fast);
  for (;;) {
    if (mode == SHMS__TAKE_ENTERING && (w & SHMS__FAST_FROZEN))
      return SHMS__RESERVE_FROZEN;
    if (SHMS__FAST_LOW(w) == 0 || (mode != SHMS__TAKE_ANY && !shms__fast_may_take(k, w)))
      return SHMS__RESERVE_NONE;
    /* One CAS both checks that the queue lets us (nobody queued, or overtaking allowed) and
     * takes the cell count. */
    if (ck_pr_cas_64_value(&k->ctl->fast, w, w - 1, &w)) {
      shms__take_seen = w;
      return SHMS__RESERVE_TAKEN;
    }
  }
}

/* Laps of the cells a count-mode claim makes before it gives its reservation up. */
#define CLAIM_LAPS 1000

/*
 * After a count-mode reservation: claim some AVAILABLE cell for owner in state, or
 * SHMS__TAKE_NONE if the count was over the cells (corrupt).
 */
static int64_t cell_claim(const struct shms__cls *k, uint32_t owner, uint32_t state) {
  uint32_t start = shms__load_32(&k->ctl->cell_hint);
  if (start >= k->ncells)
    start = 0;
  /* The reservation guarantees an AVAILABLE cell without a claimant: on a healthy segment the
   * scan ends within a lap or a few, each lap more being another claimant's win. A count the
   * cells do not back (corrupt) would keep it scanning for ever inside an operation, which
   * recovery waits for: after CLAIM_LAPS laps the reservation is dropped, as take_mapped drops a
   * bit over a cell that is not free, and recovery recounts. */
  for (uint64_t n = 0, c = start; n < (uint64_t)CLAIM_LAPS * k->ncells;
       n++, c = c + 1 < k->ncells ? c + 1 : 0) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_AVAILABLE)
      continue;
    if (ck_pr_cas_64(&cell->word, w, SHMS__CELL_WORD(SHMS__CELL_GEN(w), owner, state)))
      return (int64_t)c;
    if (n >= k->ncells)
      ck_pr_stall();
  }
  return SHMS__TAKE_NONE;
}

/* The cell each class's map-mode take last gave this thread: taken again when it is free, since
 * its lines are likely still in this CPU's cache where another cell's come from another CPU's
 * (two processes on two CPUs would otherwise trade cells). A hint: any free cell is as valid. */
static SHMS__TLS uint8_t last_cell[SHMS_CLASS_COUNT];

SHMS__TLS uint64_t shms__take_seen;

/* Map mode: one CAS takes a free cell's bit (this thread's last, else the lowest), and with it
 * the cell. */
static int64_t take_mapped(const struct shms__cls *k, enum shms__take_mode mode, uint32_t owner,
                           uint32_t state) {
  uint32_t valid = k->ncells >= 32 ? 0xffffffffu : (1u << k->ncells) - 1;
  shms__rfo(&k->ctl->fast); /* the CAS below writes it: one transfer, not two */
  uint64_t w = shms__load_64(&k->ctl->fast);
  for (;;) {
    if (mode == SHMS__TAKE_ENTERING && (w & SHMS__FAST_FROZEN))
      return SHMS__TAKE_FROZEN;
    uint32_t map = SHMS__FAST_LOW(w) & valid;
    if (map == 0 || (mode != SHMS__TAKE_ANY && !shms__fast_may_take(k, w)))
      return SHMS__TAKE_NONE;
    uint32_t last = last_cell[k->id];
    uint32_t c = (map >> last) & 1u ? last : (uint32_t)__builtin_ctz(map);
    if (!ck_pr_cas_64_value(&k->ctl->fast, w, w & ~(1ull << c), &w))
      continue;
    shms__take_seen = w;
    struct shms__cell *cell = &k->cells[c];
    uint64_t cw = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(cw) != SHMS__CELL_AVAILABLE) {
      w = shms__load_64(&k->ctl->fast);
      continue; /* a bit over a cell that is not free (corrupt): dropped, recovery recounts */
    }
    /* Its bit was the right to it: nobody else writes an AVAILABLE cell's word (recovery waits
     * for us), so a plain store does, with the owner in it for recovery to judge. */
    shms__store_64(&cell->word, SHMS__CELL_WORD(SHMS__CELL_GEN(cw), owner, state));
    last_cell[k->id] = (uint8_t)c;
    return c;
  }
}

int64_t shms__cell_take(const struct shms__cls *k, enum shms__take_mode mode, uint32_t owner,
                        uint32_t state) {
  if (k->fast_map)
    return take_mapped(k, mode, owner, state);
  enum shms__reserve r = shms__fast_reserve(k, mode);
  if (r != SHMS__RESERVE_TAKEN)
    return r == SHMS__RESERVE_FROZEN ? SHMS__TAKE_FROZEN : SHMS__TAKE_NONE;
  SHMS__STEP();
  return cell_claim(k, owner, state);
}

void shms__cell_tenant(const struct shms__cls *k, uint32_t c, char *out) {
  struct shms__cell *cell = &k->cells[c];
  uint64_t words[SHMS__NAME_WORDS];
  for (size_t i = 0; i < SHMS__NAME_WORDS; i++)
    words[i] = shms__load_64(&cell->tenant_name[i]);
  memcpy(out, words, SHMS_TENANT_MAX);
  out[SHMS_TENANT_MAX] = '\0';
}

int shms__cell_start(const struct shms__cls *k, uint32_t c, uint32_t tenant, const uint64_t *name,
                     uint32_t slot, uint64_t start_ns, uint32_t *gen, uint64_t *token) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64(&cell->word);
  uint64_t next = cell->token + 1;
  /* Tokens never wrap: past the last one the cell fails closed (the caller quarantines it). */
  if (next >= shms__load_64(&k->ctl->token_limit) || next == 0)
    return SHMS_ESEQEXHAUSTED;
  /* Read by others without our ownership (lease checks, recovery, observers): atomic stores. */
  shms__store_64(&cell->token, next);
  shms__store_32(&cell->tenant, tenant);
  /* Plain stores, each word whole for a concurrent reader (no locked instruction here: this is
   * the fast path). A reader racing a new lease's start reads a name never valid for the lease
   * it looked at, which it must not use anyway. */
  for (size_t i = 0; i < SHMS__NAME_WORDS; i++)
    shms__store_64(&cell->tenant_name[i], name[i]);
  shms__store_32(&cell->slot, slot);
  shms__store_64(&cell->lease_start_ns, start_ns);
  *gen = SHMS__CELL_GEN(w);
  *token = next;
  return SHMS_OK;
}

uint32_t shms__stamp_leases(const struct shms__cls *k) {
  uint32_t stamped = 0;
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    if (SHMS__CELL_STATE(shms__load_64(&cell->word)) != SHMS__CELL_LEASED ||
        shms__load_64(&cell->lease_start_ns) != 0)
      continue;
    /* The lease may end, and another begin unstamped, between the look and the CAS: the stamp
     * then goes to the newer one, early by that window at most (the clock is read just before).
     * A stamp on a cell freed meanwhile is harmless: every lease start writes its own. */
    if (ck_pr_cas_64(&cell->lease_start_ns, 0, shms__coarse_now_ns() & ~1ull)) /* coarse: even */
      stamped++;
  }
  return stamped;
}

void shms__tenant_lease_ended(const struct shms__cls *k, uint32_t ref) {
  if (ref == 0 || ref > k->ntenants)
    return;
  ck_pr_dec_32(&shms__tenant_at(k, ref)->active);
  shms__hbm_set(&k->tattn, ref - 1);
}

/* What the end of a counted lease (or grant) needs of its cell, read before the CAS that ends it:
 * after it, the cell may carry the next lease. */
struct ending {
  uint32_t tenant;
  uint32_t ncells; /* the cells of the lease: its companions end with it */
  uint32_t quotas; /* the quotas it holds a unit of (core/quota.c) */
  int fast;        /* a lease taken on the fast path, charged by its tenant's name */
  uint64_t start_ns, charged_ns;
  uint64_t name[SHMS__NAME_WORDS];
};

uint32_t shms__lead_cells(const struct shms__cls *k, uint32_t c, uint32_t gen) {
  const struct shms__cell *cell = &k->cells[c];
  /* Valid for the lease the lead carries at gen only: a lease of one never writes the fields
   * (the fast path stays as it was), so they may be a past lease's, or a companion's. */
  if (shms__load_32((uint32_t *)&cell->lead) != c + 1 ||
      shms__load_32((uint32_t *)&cell->lead_gen) != gen)
    return 1;
  uint32_t n = shms__load_32((uint32_t *)&cell->ncells);
  return n > 1 ? n : 1;
}

/* Filled in place, the name only when it is used: the uncontended release of a lease taken on
 * the fast path writes three words of it. */
static inline __attribute__((always_inline)) void ending_of(const struct shms__cls *k,
                                                            const struct shms__cell *cell,
                                                            uint32_t gen, struct ending *e) {
  e->tenant = cell->tenant;
  e->ncells = 1;
  e->fast = 0;
  e->quotas = 0;
  e->start_ns = e->charged_ns = 0;
  /* A lease of several cells is always counted against its tenant (core/dispatch.c): the
   * uncontended release of a lease taken on the fast path reads nothing more. */
  if (e->tenant != 0) {
    uint32_t c = (uint32_t)(cell - k->cells);
    e->ncells = shms__lead_cells(k, c, gen);
    /* As granted at gen (a quarantined lease's are kept: its word's generation is not gen). */
    e->quotas = shms__quota_held(k, c, SHMS__CELL_WORD(gen, 0, SHMS__CELL_LEASED));
  }
  if (!k->timed)
    return;
  if (e->tenant == 0) {
    /* A lease taken on the fast path is charged if it ends while requests are queued: with none,
     * nobody was owed what it held. The uncontended release reads only the fast word's line,
     * which it writes next anyway. */
    if (SHMS__FAST_QUEUED(shms__load_64(&k->ctl->fast)) == 0)
      return;
    e->fast = 1;
    for (size_t i = 0; i < SHMS__NAME_WORDS; i++)
      e->name[i] = shms__load_64((uint64_t *)&cell->tenant_name[i]);
  }
  e->start_ns = shms__load_64((uint64_t *)&cell->lease_start_ns);
  e->charged_ns = shms__load_64((uint64_t *)&cell->charged_ns);
}

/* The tenant's count of leases goes down; in a class fair by time, its charge is corrected to
 * what the lease held (used: 0 for a grant returned unused), before the count (fair.h), and a
 * lease taken on the fast path is charged what it held. Returns the time of the end when it read
 * the monotonic clock (0 if not): the pass its release kicks runs on it. */
static uint64_t ended(const struct shms__cls *k, const struct ending *e, int used) {
  if (e->tenant > k->ntenants || (e->tenant == 0 && !e->fast))
    return 0;
  /* Each end on its start's clock. A lease granted from the queue starts at its pass's time, on
   * the monotonic clock: leases far shorter than the coarse clock's tick are then charged what
   * they held, not a whole tick or nothing (design/fairness-cost.md). So does one taken on the
   * fast path while requests were queued (its start odd: shms__fast_stamp); another starts on
   * the coarse clock, which is all the uncontended path can afford. */
  uint64_t now = !used || !k->timed                    ? 0
                 : e->tenant != 0 || (e->start_ns & 1) ? shms__now_ns()
                                                       : shms__coarse_now_ns();
  /* A prepared acquire's lease is stamped lazily (shms__stamp_leases): one unstamped yet held
   * for less than the stamping period, and is charged nothing. */
  uint64_t held = e->start_ns != 0 && now > e->start_ns ? now - e->start_ns : 0;
  if (e->tenant == 0) {
    if (used)
      shms__fair_fast_ended(k, e->name, held);
    return e->start_ns & 1 ? now : 0; /* the monotonic clock's reading, or none */
  }
  if (k->timed)
    shms__fair_ended(k, e->tenant, used, held, e->charged_ns, e->ncells > 1 ? e->ncells : 1);
  shms__tenant_lease_ended(k, e->tenant);
  return now;
}

/* A lease's quotas go back once its cell's word has moved on, before the cell is free for the
 * next (a death in between leaves them held: recovery recounts them). A quarantine keeps them
 * until repair. */
static void quotas_back(const struct shms__cls *k, uint32_t quotas) {
  if (quotas == 0)
    return;
  SHMS__STEP();
  shms__quota_put(k, quotas);
}

/*
 * A companion cell (BOUND) follows its lead (docs/protocol.md, "Multi-cell requests"): it belongs
 * to the lease while the lead is RESERVED, GRANTED or LEASED at the generation it was bound at.
 * Returns the state an orphan goes to (AVAILABLE, or QUARANTINED when its lead ended so), or 0
 * while it still belongs to a lease. lead_gen moves on only when the companion's word does.
 */
static uint32_t companion_fate(const struct shms__cls *k, const struct shms__cell *cell,
                               uint32_t *lead_out) {
  uint32_t lead = shms__load_32((uint32_t *)&cell->lead), gen;
  gen = shms__load_32((uint32_t *)&cell->lead_gen);
  *lead_out = lead;
  if (lead == 0 || lead > k->ncells)
    return SHMS__CELL_AVAILABLE; /* torn: nothing holds it */
  uint64_t lw = shms__load_64(&k->cells[lead - 1].word);
  uint32_t st = SHMS__CELL_STATE(lw);
  if (SHMS__CELL_GEN(lw) == gen &&
      (st == SHMS__CELL_RESERVED || st == SHMS__CELL_GRANTED || st == SHMS__CELL_LEASED))
    return 0;
  return st == SHMS__CELL_QUARANTINED && SHMS__CELL_GEN(lw) == gen + 1 ? SHMS__CELL_QUARANTINED
                                                                       : SHMS__CELL_AVAILABLE;
}

/* End companion cell d, read as BOUND word w, into state (AVAILABLE or QUARANTINED, with the
 * lead's reason): one exact CAS, so of several enders one wins. */
static int companion_end(const struct shms__cls *k, uint32_t d, uint64_t w, uint32_t state,
                         uint32_t reason) {
  struct shms__cell *cell = &k->cells[d];
  uint32_t owner = state == SHMS__CELL_QUARANTINED ? SHMS__CELL_OWNER(w) : 0;
  if (!ck_pr_cas_64(&cell->word, w, SHMS__CELL_WORD(SHMS__CELL_GEN(w) + 1, owner, state)))
    return 0;
  SHMS__STEP();
  if (state == SHMS__CELL_QUARANTINED) {
    shms__store_32(&cell->reason, reason);
    shms__store_64(&cell->quarantined_unix_ns, shms__wall_now_ns());
    ck_pr_inc_32(&k->ctl->quarantined);
    ck_pr_inc_64(&k->ctl->quarantines);
  } else {
    shms__fast_put(k, d);
  }
  return 1;
}

/* The lease whose lead c ended at generation gen held its companions: they end as it did. */
static void companions_end(const struct shms__cls *k, uint32_t c, uint32_t gen, uint32_t state,
                           uint32_t reason) {
  for (uint32_t d = 0; d < k->ncells; d++) {
    struct shms__cell *cell = &k->cells[d];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_BOUND)
      continue;
    ck_pr_fence_load(); /* the lead fields were written before the word said BOUND */
    if (shms__load_32(&cell->lead) == c + 1 && shms__load_32(&cell->lead_gen) == gen)
      companion_end(k, d, w, state, reason);
  }
}

uint32_t shms__cells_settle_reserved(const struct shms__cls *k) {
  uint32_t freed = 0;
  for (uint32_t d = 0; d < k->ncells; d++) {
    struct shms__cell *cell = &k->cells[d];
    uint64_t w = shms__load_64(&cell->word);
    uint32_t st = SHMS__CELL_STATE(w), fate = SHMS__CELL_AVAILABLE, lead = 0, reason = 0;
    if (st == SHMS__CELL_BOUND) {
      ck_pr_fence_load(); /* the lead fields were written before the word said BOUND */
      fate = companion_fate(k, cell, &lead);
    } else if (st != SHMS__CELL_RESERVED) {
      continue;
    }
    if (fate == 0)
      continue;
    if (fate == SHMS__CELL_QUARANTINED)
      reason = shms__load_32(&k->cells[lead - 1].reason);
    freed += (uint32_t)companion_end(k, d, w, fate, reason);
  }
  return freed;
}

int shms__companion_orphaned(const struct shms__cls *k, uint32_t c) {
  uint32_t lead;
  ck_pr_fence_load();
  return companion_fate(k, &k->cells[c], &lead) != 0;
}

uint32_t shms__lease_cells_of(const struct shms__cls *k, uint32_t c, uint32_t gen, uint32_t *out,
                              uint32_t max) {
  uint32_t n = 0;
  for (uint32_t d = 0; d < k->ncells; d++) {
    struct shms__cell *cell = &k->cells[d];
    uint64_t w = shms__load_64(&cell->word);
    int mine = d == c;
    if (!mine && SHMS__CELL_STATE(w) == SHMS__CELL_BOUND) {
      ck_pr_fence_load();
      mine = shms__load_32(&cell->lead) == c + 1 && shms__load_32(&cell->lead_gen) == gen &&
             shms__load_64(&cell->word) == w;
    }
    if (mine && n < max)
      out[n] = d;
    n += (uint32_t)mine;
  }
  return n;
}

int shms__cell_return(const struct shms__cls *k, uint32_t c, uint32_t gen) {
  SHMS__ASSERT(shms__in_op(k));
  if (c >= k->ncells)
    return 0; /* a torn grant's cell: recovery recounts */
  struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64(&cell->word);
  struct ending e;
  ending_of(k, cell, gen, &e);
  /* Only the grant made at gen, and from any owner: the word's owner is the grantee's, and
   * a worker cell's grants all name clients. Never exposed, yet the generation moves on: a
   * grant returned and the cell granted again must never read as the same word (a worker
   * that read the first would take the second for it: docs/protocol.md, "Workers"). */
  while (SHMS__CELL_STATE(w) == SHMS__CELL_GRANTED && SHMS__CELL_GEN(w) == gen) {
    uint32_t owner = k->cfg->mode == SHMS_MODE_WORKER ? shms__load_32(&cell->worker) : 0;
    if (ck_pr_cas_64_value(&cell->word, w, SHMS__CELL_WORD(gen + 1, owner, SHMS__CELL_AVAILABLE),
                           &w)) {
      SHMS__STEP();
      ended(k, &e, 0);
      quotas_back(k, e.quotas);
      shms__fast_put(k, c);
      SHMS__STEP();
      if (e.ncells > 1)
        companions_end(k, c, gen, SHMS__CELL_AVAILABLE, 0);
      return 1;
    }
  }
  return 0;
}

int shms__cell_quarantine(const struct shms__cls *k, uint32_t c, uint64_t expect, int reason) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__cell *cell = &k->cells[c];
  struct ending e;
  ending_of(k, cell, SHMS__CELL_GEN(expect), &e);
  uint64_t q =
      SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, SHMS__CELL_OWNER(expect), SHMS__CELL_QUARANTINED);
  if (!ck_pr_cas_64(&cell->word, expect, q))
    return 0;
  shms__store_32(&cell->reason, (uint32_t)reason);
  shms__store_64(&cell->quarantined_unix_ns, shms__wall_now_ns());
  ck_pr_inc_32(&k->ctl->quarantined);
  ck_pr_inc_64(&k->ctl->quarantines);
  ended(k, &e, 1);
  SHMS__STEP();
  if (e.ncells > 1) /* its cleanup could not be proven: nor can its companions' */
    companions_end(k, c, SHMS__CELL_GEN(expect), SHMS__CELL_QUARANTINED, (uint32_t)reason);
  return 1;
}

void shms__test_set_tokens(const struct shms__cls *k, uint64_t next) {
  for (uint32_t c = 0; c < k->ncells; c++)
    shms__store_64(&k->cells[c].token, next - 1);
}

int shms__cell_exhausted(const struct shms__cls *k, uint32_t c) {
  return shms__cell_quarantine(k, c, shms__load_64(&k->cells[c].word), SHMS_ESEQEXHAUSTED);
}

void shms__cell_count_lease(const struct shms__cls *k, uint32_t c) {
  struct shms__cell *cell = &k->cells[c];
  shms__store_64(&cell->leases, cell->leases + 1); /* only the cell's holder writes it */
}

int shms__cell_accept(const struct shms__cls *k, uint32_t c, uint32_t gen, uint32_t owner) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__cell *cell = &k->cells[c];
  uint64_t cw = shms__load_64(&cell->word);
  while (SHMS__CELL_STATE(cw) == SHMS__CELL_GRANTED &&
         !ck_pr_cas_64_value(&cell->word, cw, SHMS__CELL_WORD(gen, owner, SHMS__CELL_LEASED), &cw))
    ;
  return SHMS__CELL_STATE(cw) == SHMS__CELL_GRANTED;
}

uint32_t shms__cell_run(const struct shms__cls *k, uint32_t c, uint32_t owner) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__cell *cell = &k->cells[c];
  uint64_t lw = shms__load_64(&cell->word);
  while (!ck_pr_cas_64_value(&cell->word, lw,
                             SHMS__CELL_WORD(SHMS__CELL_GEN(lw), owner, SHMS__CELL_LEASED), &lw))
    ;
  return SHMS__CELL_GEN(lw);
}

/* What a release owes once its cell's word has moved on: the cell back in the fast word, and
 * whether the queue needs a kick or a nudge. counted: the lease was granted from the queue and
 * counted against its tenant, whose record the baton's holder settles. now: the monotonic clock
 * as the release's charge read it just before, or 0. */
static inline __attribute__((always_inline)) enum shms__release
freed(const struct shms__cls *k, uint32_t c, int counted, uint64_t now) {
  if (k->overtake_ns == 0) {
    uint64_t fast = shms__fast_put(k, c);
    SHMS__STEP();
    /* Wake the dispatcher only when someone waits: the uncontended release makes no system
     * call. */
    return SHMS__FAST_QUEUED(fast) != 0 || counted ? SHMS__RELEASE_KICK : SHMS__RELEASE_DONE;
  }
  /* Requests queued in a class that overtakes: judge the bound before the cell goes free, so
   * that the CAS freeing it already says whether it is the queue's (docs/protocol.md, "Bounded
   * overtaking"). The clock is read only here (or by the charge just before, whose reading
   * serves), never on the uncontended path. */
  int nudge = 0;
  int strict = SHMS__FAST_QUEUED(shms__load_64(&k->ctl->fast)) != 0 && overtake_passed(k, now);
  uint64_t fast = put_released(k, c, strict, &nudge);
  SHMS__STEP();
  /* Within the bound the cell is not handed over: a grant would hold it idle for the wake-up of
   * its waiter while the next acquire could use it at once. The nudged waiter kicks when it
   * runs, and the pass it runs grants the cell if it is still free. */
  if (fast & SHMS__FAST_STRICT)
    return SHMS__RELEASE_KICK;
  if (nudge)
    return SHMS__RELEASE_NUDGE;
  /* A counted lease's ended() raised its tenant's attention bit. A nudge in flight (WOKEN, set
   * by another release) owes a pass already, which takes the bit, or whose holder's re-check
   * after clearing WOKEN finds it: a kick of our own would only add a pass (docs/protocol.md,
   * "Bounded overtaking"). */
  return counted && !(fast & SHMS__FAST_WOKEN) ? SHMS__RELEASE_KICK : SHMS__RELEASE_DONE;
}

/* The release of a lease with something to settle: counted against its tenant, of several
 * cells, holding quotas, or taken on the fast path and charged in a class fair by time. */
__attribute__((noinline)) static enum shms__release
release_ended(const struct shms__cls *k, uint32_t c, uint64_t expect, uint64_t *now) {
  struct shms__cell *cell = &k->cells[c];
  struct ending e;
  ending_of(k, cell, SHMS__CELL_GEN(expect), &e);
  /* The generation moves on: this lease (and any copy of it) can never return the cell again. */
  uint64_t free_word = SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, 0, SHMS__CELL_AVAILABLE);
  if (!ck_pr_cas_64(&cell->word, expect, free_word))
    return SHMS__RELEASE_RACED;
  SHMS__STEP();
  *now = ended(k, &e, 1);
  quotas_back(k, e.quotas);
  if (!k->fast_map)
    shms__store_32(&k->ctl->cell_hint, c); /* where a counting taker looks first */
  SHMS__STEP();
  /* The companions first: the lead's cell going free then kicks for all of them (a lease of
   * several cells is counted: its release kicks). */
  if (e.ncells > 1)
    companions_end(k, c, SHMS__CELL_GEN(expect), SHMS__CELL_AVAILABLE, 0);
  return freed(k, c, e.tenant != 0, *now);
}

enum shms__release shms__cell_release(const struct shms__cls *k, uint32_t c, uint64_t expect,
                                      uint64_t *now) {
  SHMS__ASSERT(shms__in_op(k));
  *now = 0;
  struct shms__cell *cell = &k->cells[c];
  /* A lease taken on the fast path has nothing to settle (its tally counted it; it holds one
   * cell and no quota), unless a class fair by time charges it: only while requests are queued
   * (ending_of). This is the uncontended release, kept to the CAS and the put. */
  if (cell->tenant != 0 || (k->timed && SHMS__FAST_QUEUED(shms__load_64(&k->ctl->fast)) != 0))
    return release_ended(k, c, expect, now);
  if (!ck_pr_cas_64(&cell->word, expect,
                    SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, 0, SHMS__CELL_AVAILABLE)))
    return SHMS__RELEASE_RACED;
  SHMS__STEP();
  if (!k->fast_map)
    shms__store_32(&k->ctl->cell_hint, c); /* where a counting taker looks first */
  SHMS__STEP();
  return freed(k, c, 0, 0);
}

int shms__cell_reclaim(const struct shms__cls *k, uint32_t c, uint64_t expect) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__cell *cell = &k->cells[c];
  struct ending e;
  ending_of(k, cell, SHMS__CELL_GEN(expect), &e);
  if (!ck_pr_cas_64(&cell->word, expect,
                    SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, 0, SHMS__CELL_AVAILABLE)))
    return 0;
  ended(k, &e, 1);
  quotas_back(k, e.quotas);
  shms__fast_put(k, c);
  if (e.ncells > 1)
    companions_end(k, c, SHMS__CELL_GEN(expect), SHMS__CELL_AVAILABLE, 0);
  return 1;
}

int shms__cell_job_done(const struct shms__cls *k, uint32_t c, uint64_t expect, uint32_t worker) {
  SHMS__ASSERT(shms__in_op(k));
  struct ending e;
  ending_of(k, &k->cells[c], SHMS__CELL_GEN(expect), &e);
  /* Only the CAS's winner ends the job's count and gives its quotas back: the generation moves
   * on, so no copy of this word can end them again. */
  int done =
      ck_pr_cas_64(&k->cells[c].word, expect,
                   SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, worker, SHMS__CELL_AVAILABLE));
  SHMS__STEP();
  if (done) {
    ended(k, &e, 1);
    quotas_back(k, e.quotas);
  }
  uint64_t fast = shms__fast_put(k, c);
  /* A counted job's end kicks as a counted lease's release does: its tenant record is settled,
   * and requests parked for its quotas are looked at. */
  return SHMS__FAST_QUEUED(fast) != 0 || (done && e.tenant != 0);
}

int shms__cell_bind(const struct shms__cls *k, uint32_t c, uint64_t expect, uint32_t worker) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__cell *cell = &k->cells[c];
  /* While AVAILABLE, a worker cell's word names its worker. The CAS decides between binders;
   * an offline cell's worker field is 0, so nobody judges the cell before we name it. */
  uint64_t idle = SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, worker, SHMS__CELL_AVAILABLE);
  if (!ck_pr_cas_64(&cell->word, expect, idle))
    return 0;
  shms__store_32(&cell->worker_futex, 0);
  shms__store_32(&cell->worker, worker);
  ck_pr_fence_store(); /* named before the free count lets the dispatcher grant to it */
  shms__fast_put(k, c);
  return 1;
}

int shms__cell_offline(const struct shms__cls *k, uint32_t c, uint64_t expect, uint32_t state) {
  /* A grant never taken (its job queued again) ends its count and gives its quotas back, as a
   * returned grant does: the job takes them again at its next grant. */
  struct ending e = {0};
  if (SHMS__CELL_STATE(expect) == SHMS__CELL_GRANTED)
    ending_of(k, &k->cells[c], SHMS__CELL_GEN(expect), &e);
  if (!ck_pr_cas_64(&k->cells[c].word, expect,
                    SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, 0, state)))
    return 0;
  if (SHMS__CELL_STATE(expect) == SHMS__CELL_GRANTED) {
    SHMS__STEP();
    ended(k, &e, 0);
    quotas_back(k, e.quotas);
  }
  return 1;
}

int shms__cell_unquarantine(const struct shms__cls *k, uint32_t c, uint64_t expect,
                            uint32_t state) {
  SHMS__ASSERT(shms__in_op(k));
  struct shms__cell *cell = &k->cells[c];
  /* What the quarantined lease held stays held until now (docs/contract.md, "Quotas"). */
  uint32_t quotas = shms__quota_held(k, c, expect);
  if (!ck_pr_cas_64(&cell->word, expect, SHMS__CELL_WORD(SHMS__CELL_GEN(expect) + 1, 0, state)))
    return 0;
  quotas_back(k, quotas);
  shms__store_32(&cell->reason, 0);
  shms__store_32(&cell->worker, 0);
  ck_pr_dec_32(&k->ctl->quarantined);
  return 1;
}

/*
 * Recovery of a class (docs/protocol.md, "Recovery"): with the class frozen
 * and quiescent (core/quiesce.c), settle whatever dead processes left half
 * done in the state words, then recompute every index and count from those
 * words. Idempotent: running it twice, or finishing a dead recoverer's run,
 * changes nothing more.
 */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "../shm/alloc.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/futex.h"
#include "../shm/hbm.h"
#include "../shm/proc.h"
#include "quota.h"
#include "report.h"
#include "sched.h"
#include "tenant.h"

#define FLAGS(w) ((uint32_t)(w)&0xff0u)

/* Liveness of owner ids, asked of the kernel once per process entry. The answer is kept with
 * the id it was for: an entry claimed again during the run names another owner. */
struct alive_cache {
  struct shms *h;
  struct {
    uint32_t owner; /* the id whose answer is kept, 0 if none yet */
    int alive;
    int killed; /* for that id: its command killed before the freeze (1), not provably (-1) */
  } * entry;    /* one per process entry */
};

static int dead(struct alive_cache *a, uint32_t owner) {
  uint32_t i = SHMS__OWNER_INDEX(owner);
  if (owner == 0 || i >= a->h->layout.procs_count)
    return 1;
  if (a->entry[i].owner != owner) {
    a->entry[i].alive = !shms__owner_dead(a->h, owner);
    a->entry[i].owner = owner;
    a->entry[i].killed = 0;
  }
  return !a->entry[i].alive;
}

static int owner_dead(void *ctx, uint32_t owner) { return dead(ctx, owner); }

/*
 * Kill dead holder's command: 1 if it is proven gone. Normally done before the class is
 * frozen (kill_dead_commands), so that here, in the frozen pass, it is found gone at once;
 * one that could not be proven gone then is not tried again while the class stands still.
 */
static int command_gone(struct alive_cache *a, uint32_t holder) {
  uint32_t i = SHMS__OWNER_INDEX(holder);
  if (i < a->h->layout.procs_count && a->entry[i].owner == holder && a->entry[i].killed != 0)
    return a->entry[i].killed > 0;
  return shms__proc_kill_command(a->h, a->h->fd, holder) == SHMS_OK;
}

/*
 * Before the freeze, outside any operation: kill the command of every dead holder of a cell of
 * k (a lease's holder, a worker with a job granted or running). Killing waits until the tree is
 * gone, up to 2 s per holder (a process stuck in the kernel): time every operation on the class
 * would otherwise spend waiting for the freeze to end. The frozen pass still checks each.
 */
static void kill_dead_commands(const struct shms__cls *k, struct alive_cache *a) {
  for (uint32_t c = 0; c < k->ncells; c++) {
    const struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64((uint64_t *)&cell->word);
    uint32_t st = SHMS__CELL_STATE(w), holder;
    if (k->cfg->mode == SHMS_MODE_WORKER)
      holder = st == SHMS__CELL_LEASED || st == SHMS__CELL_GRANTED
                   ? shms__load_32((uint32_t *)&cell->worker)
                   : 0;
    else
      holder = st == SHMS__CELL_LEASED ? SHMS__CELL_OWNER(w) : 0;
    uint32_t i = SHMS__OWNER_INDEX(holder);
    if (holder == 0 || i >= a->h->layout.procs_count || !dead(a, holder) || a->entry[i].killed)
      continue;
    a->entry[i].killed = shms__proc_kill_command(a->h, a->h->fd, holder) == SHMS_OK ? 1 : -1;
  }
}

/* Set slot i's state word (same occupant), waking a waiter that sleeps on it. */
static void set_slot(const struct shms__cls *k, uint32_t i, uint32_t state, int reason,
                     uint32_t add, uint32_t clear) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word), n;
  do {
    uint32_t flags = (FLAGS(w) | add) & ~(clear | SHMS__SLOT_SLEEPING);
    n = SHMS__SLOT_WORD(SHMS__SLOT_SEQ(w), reason, flags, state);
  } while (!shms__slot_cas(k, i, &w, n));
}

static void set_cell(const struct shms__cls *k, uint32_t c, uint32_t gen, uint32_t owner,
                     uint32_t state) {
  shms__store_64(&k->cells[c].word, SHMS__CELL_WORD(gen, owner, state));
}

static uint32_t idle_owner(const struct shms__cls *k, uint32_t c) {
  return k->cfg->mode == SHMS_MODE_WORKER ? shms__load_32(&k->cells[c].worker) : 0;
}

/* A job that was running on a worker that is gone: once more if asked (and its command is
 * proven gone: contained), else worker-lost. */
static void lose_job(const struct shms__cls *k, uint32_t i, int contained, struct shms__report *r) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  uint32_t c = shms__load_32(&s->cell);
  struct shms__item job = {.k = k, .slot_ref = i + 1};
  if (c < k->ncells) {
    job.cell_ref = c + 1;
    job.owner = shms__load_32(&k->cells[c].worker);
  }
  if (contained && (s->options & SHMS__OPT_RETRY_ONCE) && !(s->options & SHMS__OPT_RETRIED) &&
      !(w & (SHMS__SLOT_WRITING | SHMS__SLOT_COLLECTED))) {
    s->options |= SHMS__OPT_RETRIED;
    set_slot(k, i, SHMS__SLOT_QUEUED, 0, 0, SHMS__SLOT_WRITING);
    shms__report(r, SHMS_EVENT_JOB_REQUEUED, job);
  } else {
    set_slot(k, i, SHMS__SLOT_SETTLED, SHMS_EWORKERLOST, 0, SHMS__SLOT_WRITING);
    job.reason = SHMS_EWORKERLOST;
    shms__report(r, SHMS_EVENT_JOB_LOST, job);
  }
}

/* A lease whose holder is gone: released or quarantined by the class's policy; quarantined
 * whatever it says unless the holder's command is proven gone (contained). Released whatever
 * the policy if its holder asked for that while the class was held still (core/pending.c). */
static void dispose(const struct shms__cls *k, uint32_t c, uint64_t w, int contained, int asked,
                    struct shms__report *r) {
  struct shms__item lease = {.k = k, .cell_ref = c + 1, .owner = SHMS__CELL_OWNER(w)};
  if (asked || (contained && k->cfg->on_holder_death == SHMS_ON_DEATH_RELEASE)) {
    set_cell(k, c, SHMS__CELL_GEN(w) + 1, 0, SHMS__CELL_AVAILABLE);
    shms__report(r, SHMS_EVENT_LEASE_RELEASED, lease);
  } else {
    set_cell(k, c, SHMS__CELL_GEN(w) + 1, SHMS__CELL_OWNER(w), SHMS__CELL_QUARANTINED);
    shms__store_32(&k->cells[c].reason, (uint32_t)SHMS_EOWNERLOST);
    shms__store_64(&k->cells[c].quarantined_unix_ns, shms__wall_now_ns());
    ck_pr_inc_64(&k->ctl->quarantines);
    lease.reason = SHMS_EOWNERLOST;
    shms__report(r, SHMS_EVENT_LEASE_QUARANTINED, lease);
  }
}

static void repair_granted(const struct shms__cls *k, uint32_t c, uint64_t w, struct alive_cache *a,
                           struct shms__report *r) {
  uint32_t ref = shms__load_32(&k->cells[c].slot);
  struct shms__slot *s = ref >= 1 && ref <= k->nslots ? shms__slot_at(k, ref - 1) : NULL;
  uint64_t sw = s ? shms__load_64(&s->word) : 0;
  int bound = s != NULL && s->cell == c;
  if (bound && SHMS__SLOT_STATE(sw) == SHMS__SLOT_RUNNING) {
    /* Its worker started the job, then died before taking the cell: as good as leased. */
    set_cell(k, c, SHMS__CELL_GEN(w), shms__load_32(&k->cells[c].worker), SHMS__CELL_LEASED);
    return;
  }
  if (bound && SHMS__SLOT_STATE(sw) == SHMS__SLOT_SETTLED && SHMS__SLOT_REASON(sw) == SHMS_OK) {
    /* Accepted, then its acceptor died before taking the cell: the lease was exposed. */
    dispose(k, c, SHMS__CELL_WORD(SHMS__CELL_GEN(w), s->owner, SHMS__CELL_LEASED), 1, 0, r);
    return;
  }
  if (bound && SHMS__SLOT_STATE(sw) == SHMS__SLOT_GRANTED) {
    if (k->cfg->mode == SHMS_MODE_WORKER && dead(a, shms__load_32(&k->cells[c].worker))) {
      struct shms__item cell = {
          .k = k, .cell_ref = c + 1, .slot_ref = ref, .owner = shms__load_32(&k->cells[c].worker)};
      set_slot(k, ref - 1, SHMS__SLOT_QUEUED, 0, 0, 0); /* never ran: back to the queue */
      set_cell(k, c, SHMS__CELL_GEN(w) + 1, 0, SHMS__CELL_OFFLINE);
      shms__report(r, SHMS_EVENT_WORKER_OFFLINE, cell);
      shms__store_32(&k->cells[c].worker, 0);
      return;
    }
    if (!dead(a, s->owner) ||
        ((s->options & SHMS__OPT_KEYED) && !shms__keyed_unwaited(k, ref - 1, s->seq, 1)))
      return; /* a grant waiting for a live waiter: nothing to do */
    set_slot(k, ref - 1, SHMS__SLOT_SETTLED, SHMS_EOWNERLOST, SHMS__SLOT_COLLECTED, 0);
    shms__report(
        r, SHMS_EVENT_REQUEST_OWNER_LOST,
        (struct shms__item){.k = k, .slot_ref = ref, .owner = s->owner, .reason = SHMS_EOWNERLOST});
  }
  /* Not (or no longer) bound to a live grant: never exposed, so simply free again, at the next
   * generation like every returned grant (core/cell.c, shms__cell_return). */
  set_cell(k, c, SHMS__CELL_GEN(w) + 1, idle_owner(k, c), SHMS__CELL_AVAILABLE);
  shms__report(r, SHMS_EVENT_GRANT_RETURNED,
               (struct shms__item){.k = k, .cell_ref = c + 1, .owner = bound ? s->owner : 0});
}

static void repair_cell(const struct shms__cls *k, uint32_t c, struct alive_cache *a,
                        struct shms__report *r) {
  struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64(&cell->word);
  int worker = k->cfg->mode == SHMS_MODE_WORKER;
  switch (SHMS__CELL_STATE(w)) {
  case SHMS__CELL_GRANTED:
    repair_granted(k, c, w, a, r);
    return;
  case SHMS__CELL_LEASED: {
    uint32_t holder = worker ? shms__load_32(&cell->worker) : SHMS__CELL_OWNER(w);
    if (!dead(a, holder))
      return;
    /* First its command: a cell is never handed on while its holder's command runs. */
    int contained = command_gone(a, holder);
    if (!worker) {
      dispose(k, c, w, contained, shms__pending_asks(a->h, k, c, w), r);
      return;
    }
    uint32_t ref = shms__load_32(&cell->slot);
    if (ref >= 1 && ref <= k->nslots &&
        SHMS__SLOT_STATE(shms__load_64(&shms__slot_at(k, ref - 1)->word)) == SHMS__SLOT_RUNNING &&
        shms__load_32(&shms__slot_at(k, ref - 1)->cell) == c)
      lose_job(k, ref - 1, contained, r);
    set_cell(k, c, SHMS__CELL_GEN(w) + 1, SHMS__CELL_OWNER(w), SHMS__CELL_QUARANTINED);
    shms__store_32(&cell->reason, (uint32_t)SHMS_EWORKERLOST);
    shms__store_64(&cell->quarantined_unix_ns, shms__wall_now_ns());
    ck_pr_inc_64(&k->ctl->quarantines);
    return;
  }
  case SHMS__CELL_AVAILABLE:
    if (worker && dead(a, shms__load_32(&cell->worker))) {
      set_cell(k, c, SHMS__CELL_GEN(w) + 1, 0, SHMS__CELL_OFFLINE);
      shms__report(
          r, SHMS_EVENT_WORKER_OFFLINE,
          (struct shms__item){.k = k, .cell_ref = c + 1, .owner = shms__load_32(&cell->worker)});
      shms__store_32(&cell->worker, 0);
    }
    return;
  default:
    return;
  }
}

/* Is running job i still on a leased cell bound to it? */
static int running_on_cell(const struct shms__cls *k, const struct shms__slot *s, uint32_t i) {
  if (s->cell >= k->ncells)
    return 0;
  const struct shms__cell *cell = &k->cells[s->cell];
  return SHMS__CELL_STATE(shms__load_64((uint64_t *)&cell->word)) == SHMS__CELL_LEASED &&
         shms__load_32((uint32_t *)&cell->slot) == i + 1;
}

static void repair_slot(const struct shms__cls *k, uint32_t i, struct alive_cache *a,
                        struct shms__report *r) {
  struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64(&s->word);
  /* A keyed job may have other waiters: the recount (shms__joins_recount) counted them, and
   * a job it left granted to a dead worker is queued again above, unwaited all the same. */
  int gone = dead(a, s->owner) &&
             (!(s->options & SHMS__OPT_KEYED) || shms__keyed_unwaited(k, i, s->seq, 1));
  struct shms__item it = {.k = k, .slot_ref = i + 1, .owner = s->owner};
  switch (SHMS__SLOT_STATE(w)) {
  case SHMS__SLOT_CLAIMED: /* torn enqueue: after quiescence its owner must be dead */
    set_slot(k, i, SHMS__SLOT_SETTLED, SHMS_EOWNERLOST, SHMS__SLOT_COLLECTED, 0);
    shms__report(r, SHMS_EVENT_SLOT_FREED, it);
    return;
  case SHMS__SLOT_QUEUED:
    if (gone) {
      set_slot(k, i, SHMS__SLOT_SETTLED, SHMS_EOWNERLOST, SHMS__SLOT_COLLECTED, 0);
      it.reason = SHMS_EOWNERLOST;
      shms__report(r, SHMS_EVENT_REQUEST_OWNER_LOST, it);
    }
    return;
  case SHMS__SLOT_GRANTED: { /* cells came first: a grant still bound is a live one */
    const struct shms__cell *cell = s->cell < k->ncells ? &k->cells[s->cell] : NULL;
    if (cell == NULL ||
        SHMS__CELL_STATE(shms__load_64((uint64_t *)&cell->word)) != SHMS__CELL_GRANTED ||
        shms__load_32((uint32_t *)&cell->slot) != i + 1)
      set_slot(k, i, SHMS__SLOT_QUEUED, 0, 0, 0);
    return;
  }
  case SHMS__SLOT_RUNNING:
    if (!running_on_cell(k, s, i))
      lose_job(k, i, 1, r); /* its cell was disposed of, and the command with it */
    else if (gone && !(w & SHMS__SLOT_COLLECTED))
      set_slot(k, i, SHMS__SLOT_RUNNING, 0, SHMS__SLOT_COLLECTED, 0); /* drop its result */
    return;
  case SHMS__SLOT_SETTLED:
    if (gone && !(w & SHMS__SLOT_COLLECTED)) {
      set_slot(k, i, SHMS__SLOT_SETTLED, SHMS__SLOT_REASON(w), SHMS__SLOT_COLLECTED, 0);
      shms__report(r, SHMS_EVENT_SLOT_FREED, it);
    }
    return;
  default:
    return;
  }
}

static void clear_words(const struct shms__hbm *b) {
  memset(b->w, 0, (size_t)shms__hbm_words(b->n) * sizeof(uint64_t));
}

/* Tenant records: keep those counted by live leases (same index: cells refer to it), with the
 * count recomputed from the cells, and those with a turn in the ring; reset every other index
 * structure. Returns the chain of old turns (shms__tenant_reset). */
static uint32_t rebuild_tenants(const struct shms__cls *k) {
  for (uint32_t t = 0; t < k->ntenants; t++)
    k->tenants[t].active = 0;
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    uint32_t st = SHMS__CELL_STATE(shms__load_64(&cell->word)), ref = cell->tenant;
    if ((st == SHMS__CELL_LEASED || st == SHMS__CELL_GRANTED) && ref >= 1 && ref <= k->ntenants &&
        (k->tenants[ref - 1].flags & SHMS__TENANT_INUSE))
      k->tenants[ref - 1].active++;
    else
      cell->tenant = 0;
  }
  uint32_t turns = shms__tenant_reset(k);
  for (uint32_t b = 0; b < k->nab; b++)
    k->abuckets[b] = 0;
  return turns;
}

/* Every slot's flags and bitmaps from its state; returns (queued, used). */
static void rebuild_slots(const struct shms__cls *k, uint32_t *queued, uint32_t *used) {
  clear_words(&k->sfree);
  clear_words(&k->sattn);
  clear_words(&k->tattn);
  *queued = *used = 0;
  for (uint32_t i = 0; i < k->nslots; i++) {
    struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64(&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    if (st == SHMS__SLOT_SETTLED && (w & SHMS__SLOT_COLLECTED))
      st = SHMS__SLOT_FREE; /* nobody needs it any more */
    if (st == SHMS__SLOT_FREE) {
      shms__store_64(&s->word, SHMS__SLOT_WORD(SHMS__SLOT_SEQ(w), 0, 0, SHMS__SLOT_FREE));
      shms__hbm_set(&k->sfree, i);
      continue;
    }
    (*used)++;
    s->tenant = 0;
    /* LATE belongs to a parked QUEUED request, which the index does not hold: on any other
     * slot it is stray (the audit's "late in state") and goes. */
    uint32_t stray = st != SHMS__SLOT_QUEUED || (w & SHMS__SLOT_INDEXED) ? SHMS__SLOT_LATE : 0;
    set_slot(k, i, st, SHMS__SLOT_REASON(w), 0, SHMS__SLOT_INDEXED | SHMS__SLOT_HELP | stray);
    if (st != SHMS__SLOT_QUEUED)
      continue;
    (*queued)++;
    /* What the index held goes back at once, so that the ring keeps its order; arrivals, and
     * requests to be refused, are left to the next pass. */
    if (!(w & SHMS__SLOT_INDEXED) || !shms__index_reinsert(k, i))
      shms__hbm_set(&k->sattn, i);
  }
}

static uint32_t count_quarantined(const struct shms__cls *k) {
  uint32_t n = 0;
  for (uint32_t c = 0; c < k->ncells; c++)
    n += SHMS__CELL_STATE(shms__load_64(&k->cells[c].word)) == SHMS__CELL_QUARANTINED;
  return n;
}

/* Each count of k as its state words give it now, before recovery settles anything. */
struct counts {
  uint32_t field, queued, used, quarantined;
};

static struct counts count_words(const struct shms__cls *k) {
  struct counts n = {.field = shms__fast_free_field(k), .quarantined = count_quarantined(k)};
  for (uint32_t i = 0; i < k->nslots; i++) {
    uint32_t st = SHMS__SLOT_STATE(shms__load_64(&shms__slot_at(k, i)->word));
    n.used += st != SHMS__SLOT_FREE;
    n.queued += st == SHMS__SLOT_QUEUED;
  }
  return n;
}

/*
 * Whether a dead process was inside an operation on k (its marks stay as it left them), or held
 * its baton: the counts may then be off by the operation it never finished, which the recompute
 * finishes for it; that is the death's consequence, not a count that was wrong.
 */
static int left_mid_operation(const struct shms__cls *k, struct alive_cache *a) {
  if (shms__load_64(&k->ctl->baton) != 0)
    return 1; /* quiescent: only a dead holder can still hold it */
  struct shms *h = a->h;
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    const struct shms__proc *p = shms__proc_at(h, i);
    if (i == h->self || shms__load_32((uint32_t *)&p->state) == SHMS__PROC_FREE ||
        !shms__proc_busy(p, k->id))
      continue;
    if (dead(a, SHMS__OWNER(i, shms__load_32((uint32_t *)&p->gen))))
      return 1;
  }
  return 0;
}

static void recover_frozen(const struct shms__cls *k, struct alive_cache *a,
                           struct shms__report *r) {
  /* A count is fixed only if it disagreed with the state words before anything was settled:
   * what settling the dead's leases and requests changes, the recompute follows, as their own
   * release or withdrawal would have. */
  uint64_t old = shms__load_64(&k->ctl->fast);
  struct counts was = count_words(k);
  int torn = left_mid_operation(k, a);
  int fixed = torn ? 0
                   : (SHMS__FAST_LOW(old) != was.field) + (SHMS__FAST_QUEUED(old) != was.queued) +
                         (shms__load_32(&k->ctl->used) != was.used) +
                         (shms__load_32(&k->ctl->quarantined) != was.quarantined);
  /* Who waits for each keyed job, from the live processes' records: the dead's shares go
   * (before the cells: a grant to a dead submitter stands while a joiner waits). */
  shms__joins_recount(a->h, k, owner_dead, a);
  /* Twice: a cell settled by the first look (a grant returned, a start completed) can need a
   * second (its worker dead too); every repair is idempotent. */
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t c = 0; c < k->ncells; c++)
      repair_cell(k, c, a, r);
  for (uint32_t i = 0; i < k->nslots; i++)
    repair_slot(k, i, a, r);
  /* Cells reserved for a gathering request go back (it gathers again), and the companions of
   * leases whose lead was settled above follow it (core/gather.c). */
  shms__cells_settle_reserved(k);
  shms__store_32(&k->ctl->gather_slot, 0);
  /* A dispatcher that died inside its observation write section left the sequence odd. */
  uint32_t seq = shms__load_32(&k->ctl->obs_seq);
  if (seq & 1)
    shms__store_32(&k->ctl->obs_seq, seq + 1);
  uint64_t baton = shms__load_64(&k->ctl->baton);
  if (baton != 0) { /* quiescent: only a dead holder can still hold it */
    shms__store_64(&k->ctl->baton, 0);
    shms__report(r, SHMS_EVENT_BATON_RECOVERED,
                 (struct shms__item){.k = k, .owner = (uint32_t)baton});
  }
  uint32_t turns = rebuild_tenants(k);
  /* Units of quotas that leases hold, from the cells as their enders will give them back: a
   * death between a unit's taking or giving back and its cell's change is settled here, once. */
  uint32_t quotas_off = shms__quota_recount(k);
  if (!torn)
    fixed += (int)quotas_off;
  k->ctl->quota_parked = 0; /* the rebuild below indexes every parked request again */
  uint32_t queued, used, quarantined = count_quarantined(k);
  rebuild_slots(k, &queued, &used);
  shms__index_corrupt |= shms__ring_restore(k, turns);
  uint32_t field = shms__fast_free_field(k); /* from the AVAILABLE cells */
  for (int i = 0; i < fixed; i++)
    shms__report(r, SHMS_EVENT_COUNT_FIXED, (struct shms__item){.k = k});
  shms__store_32(&k->ctl->used, used);
  shms__store_32(&k->ctl->quarantined, quarantined);
  shms__thaw(a->h, k, ((uint64_t)queued << 32) | field);
}

int shms__recover_class_into(struct shms *h, const struct shms__cls *k, struct shms__report *r) {
  struct alive_cache a = {.h = h};
  if ((a.entry = shms__calloc(h->layout.procs_count, sizeof *a.entry)) == NULL)
    return SHMS_ENOMEM;
  kill_dead_commands(k, &a);
  int rc = shms__freeze(h, k);
  if (rc != SHMS_OK) {
    free(a.entry);
    return rc; /* held up by a live process: said in the detail, tried again by the next */
  }
  recover_frozen(k, &a, r);
  free(a.entry);
  shms__report(r, SHMS_EVENT_CLASS_RECOMPUTED, (struct shms__item){.k = k});
  /* Queued work may be grantable now: dispatch once, as anyone would after a change. */
  shms__op_enter(h, k);
  shms__kick(h, k);
  shms__op_leave(h, k);
  if (shms__load_32(&k->ctl->quarantined) >= k->ncells) {
    shms__op_enter(h, k);
    shms__check_all_quarantined(h, k);
    shms__op_leave(h, k);
  }
  return SHMS_OK;
}

void shms__recover_class(struct shms *h, const struct shms__cls *k) {
  struct shms__report r = {.h = h};
  shms__recover_class_into(h, k, &r);
}

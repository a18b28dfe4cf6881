/*
 * Recovery of one dead process (docs/protocol.md, "Recovery of a dead
 * process"): a process that died outside every operation left only what it
 * owned, each object in a state some transition leads on from. That is
 * settled with the ordinary transitions, as its own detach would have done
 * it, while everyone else goes on: no class is held still and no index is
 * rebuilt, so the tenant ring and every queue stay as they are. Only a class
 * it left mid-operation (or whose dispatcher baton or freeze it held) needs
 * the frozen recovery of core/repair.c.
 */
#include <stdlib.h>

#include "../shm/alloc.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/proc.h"
#include "report.h"
#include "sched.h"

/* The classes the dead owner of entry p was inside an operation on, or held the baton or
 * the freeze of. */
static uint32_t classes_left_torn(struct shms *h, const struct shms__proc *p, uint32_t owner) {
  uint32_t mask = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    if (k->id < 0)
      continue;
    uint64_t baton = shms__load_64(&k->ctl->baton);
    if (shms__proc_busy(p, c) || (baton != 0 && (uint32_t)baton == owner) ||
        shms__load_32(&k->ctl->freezer) == owner)
      mask |= 1u << c;
  }
  return mask;
}

/* A cell the owner held before its recovery: to tell afterwards what became of it. */
struct held {
  const struct shms__cls *k;
  uint32_t cell;
  uint64_t word;
  uint32_t slot_ref;                /* a worker's job, slot index + 1 */
  uint32_t job_options;             /* that job's options then */
  char tenant[SHMS_TENANT_MAX + 1]; /* the tenant its lease served then */
  uint32_t uid_ref;                 /* and whose it was (uid + 1), 0 with no lease */
};

static int holds(const struct shms__cls *k, uint32_t c, uint32_t owner) {
  uint64_t w = shms__load_64(&k->cells[c].word);
  if (k->cfg->mode == SHMS_MODE_WORKER)
    return shms__load_32(&k->cells[c].worker) == owner;
  return SHMS__CELL_STATE(w) == SHMS__CELL_LEASED && SHMS__CELL_OWNER(w) == owner;
}

static struct held note(const struct shms__cls *k, uint32_t c) {
  struct held e = {k,  c, shms__load_64(&k->cells[c].word), shms__load_32(&k->cells[c].slot), 0,
                   "", 0};
  if (e.slot_ref >= 1 && e.slot_ref <= k->nslots)
    e.job_options = shms__load_32(&shms__slot_at(k, e.slot_ref - 1)->options);
  if (SHMS__CELL_STATE(e.word) == SHMS__CELL_LEASED && k->cfg->mode == SHMS_MODE_LEASE) {
    shms__cell_tenant(k, c, e.tenant);
    e.uid_ref = shms__load_32(&k->cells[c].uid) + 1;
  }
  return e;
}

/* The cells owner holds (its leases; a worker's cell), or NULL with *n = 0 if there are none.
 * SHMS_ENOMEM if they cannot be noted. */
static int note_held(struct shms *h, uint32_t owner, struct held **out, uint32_t *n) {
  uint32_t cells = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    cells += h->cls[c].id >= 0 ? h->cls[c].ncells : 0;
  *out = NULL;
  *n = 0;
  struct held *v = NULL;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    for (uint32_t i = 0; k->id >= 0 && i < k->ncells; i++) {
      if (!holds(k, i, owner))
        continue;
      if (v == NULL && (v = shms__malloc(cells * sizeof *v)) == NULL)
        return SHMS_ENOMEM;
      v[(*n)++] = note(k, i);
    }
  }
  *out = v;
  return SHMS_OK;
}

/*
 * What became of held cell e, told as the frozen recovery tells it. Its word moved on (the
 * generation with it) if a transition took it; what it became is read from the policy and the
 * state it left, not from its state now: the cell may already serve someone else.
 */
static void tell_held(struct shms__report *rep, const struct held *e, uint32_t owner, int contained,
                      uint64_t asked) {
  const struct shms__cls *k = e->k;
  uint64_t now = shms__load_64(&k->cells[e->cell].word);
  if (now == e->word)
    return;
  struct shms__item it = {.k = k, .cell_ref = e->cell + 1, .owner = owner};
  if (k->cfg->mode == SHMS_MODE_LEASE) {
    it.tenant = e->tenant;
    it.uid_ref = e->uid_ref;
    /* A release its holder asked for while the class was held still is done as asked. */
    int released = asked == SHMS__PENDING_WORD(k->id, e->cell, SHMS__CELL_GEN(e->word));
    int quarantined =
        !released && (!contained || k->cfg->on_holder_death == SHMS_ON_DEATH_QUARANTINE);
    it.reason = quarantined ? SHMS_EOWNERLOST : 0;
    shms__report(rep, quarantined ? SHMS_EVENT_LEASE_QUARANTINED : SHMS_EVENT_LEASE_RELEASED, it);
    return;
  }
  uint32_t was = SHMS__CELL_STATE(e->word);
  if (was != SHMS__CELL_AVAILABLE && e->slot_ref >= 1 && e->slot_ref <= k->nslots)
    it.slot_ref = e->slot_ref;
  if (was != SHMS__CELL_LEASED || it.slot_ref == 0) {
    shms__report(rep, SHMS_EVENT_WORKER_OFFLINE, it); /* idle, or its job never started */
    return;
  }
  /* Mid-job: the job was queued once more (its RETRIED flag is new) or ended worker-lost. */
  uint32_t options = shms__load_32(&shms__slot_at(k, e->slot_ref - 1)->options);
  int again = (options & SHMS__OPT_RETRIED) && !(e->job_options & SHMS__OPT_RETRIED);
  it.reason = again ? 0 : SHMS_EWORKERLOST;
  shms__report(rep, again ? SHMS_EVENT_JOB_REQUEUED : SHMS_EVENT_JOB_LOST, it);
}

/* What owner held, settled by the ordinary transitions; each item told to rep. */
static int settle_owned(struct shms *h, uint32_t owner, struct shms__report *rep) {
  struct held *held;
  uint32_t n;
  int rc = note_held(h, owner, &held, &n);
  if (rc != SHMS_OK)
    return rc;
  /* First its command's tree: no cell it held goes to someone else while that runs
   * (docs/operations.md, "Containment"). One not proven gone keeps its cells quarantined. */
  int contained = shms__proc_kill_command(h, h->fd, owner) == SHMS_OK;
  uint64_t asked = shms__pending_of(h, SHMS__OWNER_INDEX(owner));
  shms__report_settles(rep, owner);
  int done = shms__recover_owner(h, owner, contained, shms__real_now_ns() + SHMS__PATIENCE_NS);
  shms__report_settles(NULL, 0);
  for (uint32_t i = 0; i < n; i++)
    tell_held(rep, &held[i], owner, contained, asked);
  free(held);
  return done ? SHMS_OK : SHMS_EBUSY; /* held still: its entry stays, for the next recovery */
}

int shms__recover_dead(struct shms *h, uint32_t index, struct shms__report *rep) {
  struct shms__proc *p = shms__proc_at(h, index);
  uint32_t state = shms__load_32(&p->state);
  if (state == SHMS__PROC_FREE || index == shms__self_index(h) ||
      shms__proc_alive(h, h->fd, index, shms__self_index(h)) != 0)
    return 0;
  uint32_t gen = shms__load_32(&p->gen), owner = SHMS__OWNER(index, gen);
  shms__report(rep, SHMS_EVENT_PROCESS_DIED, (struct shms__item){.owner = owner});
  uint32_t torn = classes_left_torn(h, p, owner);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    int rc = (torn & (1u << c)) ? shms__recover_class_into(h, &h->cls[c], rep) : SHMS_OK;
    if (rc != SHMS_OK)
      return rc;
  }
  /* A process that died claiming its entry owned nothing yet. */
  int rc = state == SHMS__PROC_LIVE ? settle_owned(h, owner, rep) : SHMS_OK;
  if (rc != SHMS_OK)
    return rc;
  shms__proc_reap_gen(h, h->fd, index, gen);
  return 1;
}

/*
 * Capacity back without a supervisor (docs/protocol.md, "Dead holders, found by waiters"): a
 * waiter that slept a whole poll interval looks at the holders of up to SHMS__HOLDER_LOOKS
 * cells of lease class k, from where this handle's last look stopped, and recovers the first
 * it finds dead as the supervisor would: its whole process while its entry is still its own,
 * else what it held (its entry was taken over since). Its command is ended first, or its cells
 * stay quarantined. Returns 1 if it recovered one.
 */
int shms__reap_dead_holders(struct shms *h, const struct shms__cls *k) {
  if (k->cfg->mode != SHMS_MODE_LEASE || k->ncells == 0)
    return 0;
  uint32_t n = k->ncells, looks = n < SHMS__HOLDER_LOOKS ? n : SHMS__HOLDER_LOOKS;
  /* Shared by the process's threads that poll: racy by design (any of them may look), so
   * atomic. */
  uint32_t start = shms__load_32(&h->holder_look[k->id]) % n, dead = 0;
  for (uint32_t j = 0; j < looks && dead == 0; j++) {
    uint64_t w = shms__load_64(&k->cells[(start + j) % n].word);
    uint32_t owner = SHMS__CELL_OWNER(w);
    if (SHMS__CELL_STATE(w) == SHMS__CELL_LEASED && owner != h->owner && shms__owner_dead(h, owner))
      dead = owner;
  }
  shms__store_32(&h->holder_look[k->id], start + looks);
  if (dead == 0)
    return 0;
  struct shms__report rep = {.h = h};
  uint32_t index = SHMS__OWNER_INDEX(dead);
  const struct shms__proc *p = shms__proc_at(h, index);
  int rc;
  /* An entry taken over names its new owner, not the dead one: no process-died to tell then,
   * only what is settled of what it held. */
  if (SHMS__OWNER(index, shms__load_32(&p->gen)) == dead)
    rc = shms__recover_dead(h, index, &rep);
  else
    rc = settle_owned(h, dead, &rep);
  shms__report_flush(&rep);
  return rc >= 0 && rep.totals.leases_released + rep.totals.leases_quarantined > 0;
}

void shms__settle_dead_owner(struct shms *h, uint32_t owner) {
  struct shms__report rep = {.h = h};
  settle_owned(h, owner, &rep);
  shms__report_flush(&rep);
}

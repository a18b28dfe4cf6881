/* Recovery and audit for operators and the supervisor. */
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "../core/report.h"
#include "../core/sched.h"
#include "../shm/alloc.h"
#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/identity.h"
#include "../shm/proc.h"

/* Whether entry i holds a process that died attached (not ours, not free): its generation into
 * *gen. */
static int dead_entry(struct shms *h, uint32_t i, uint32_t *gen) {
  if (i == h->self || shms__proc_alive(h, h->fd, i, shms__self_index(h)) != 0)
    return 0;
  struct shms__proc *p = shms__proc_at(h, i);
  *gen = shms__load_32(&p->gen);
  return shms__load_32(&p->state) != SHMS__PROC_FREE;
}

/* Hold every class still, settle what the dead left, recompute; then free the dead's entries. */
static int recover_full(struct shms *h, struct shms__report *rep) {
  uint32_t *told = shms__calloc(h->layout.procs_count, sizeof *told);
  if (told == NULL)
    return shms__fail(SHMS_ENOMEM, "out of memory while recovering");
  /* Cause before consequences: every death told before what recovering the classes does. */
  for (uint32_t i = 0, gen; i < h->layout.procs_count; i++)
    if (dead_entry(h, i, &gen)) {
      shms__report(rep, SHMS_EVENT_PROCESS_DIED, (struct shms__item){.owner = SHMS__OWNER(i, gen)});
      told[i] = gen + 1;
    }
  /* A class a live process holds up (stopped, or a corrupt word: its detail says) is left for
   * the next recovery; the others are recovered now. */
  int held_up = SHMS_OK;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    int rc = h->cls[c].id >= 0 ? shms__recover_class_into(h, &h->cls[c], rep) : SHMS_OK;
    if (rc == SHMS_ENOMEM) {
      free(told);
      return shms__fail(rc, "out of memory while recovering class %s", shms_class_name(c));
    }
    if (held_up == SHMS_OK)
      held_up = rc;
  }
  if (held_up != SHMS_OK) {
    free(told);
    return held_up;
  }
  /* Only once every class is clean may the dead's entries be reused. */
  for (uint32_t i = 0, gen; i < h->layout.procs_count; i++) {
    if (!dead_entry(h, i, &gen))
      continue;
    if (told[i] != gen + 1) /* died while the classes were recovered: told now */
      shms__report(rep, SHMS_EVENT_PROCESS_DIED, (struct shms__item){.owner = SHMS__OWNER(i, gen)});
    if (!shms__proc_reap_gen(h, h->fd, i, gen))
      rep->totals.dead_processes--; /* claimed again meanwhile: not ours to free */
  }
  free(told);
  return SHMS_OK;
}

/* Each dead process on its own, touching only what it left. */
static int recover_each_dead(struct shms *h, struct shms__report *rep) {
  int held_up = SHMS_OK;
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    int rc = shms__recover_dead(h, i, rep);
    if (rc == SHMS_ENOMEM)
      return shms__fail(rc, "out of memory while recovering process entry %u", i);
    if (rc < 0 && held_up == SHMS_OK)
      held_up = rc; /* held up by a live process (the detail says): the next recovery's */
  }
  return held_up;
}

static int repair_lost_worker(struct shms *h, const struct shms__cls *k, uint32_t c);

/* Every worker cell lost with its worker -> OFFLINE, each reported into rep (unless NULL).
 * Returns how many. */
static int repair_lost_workers(struct shms *h, struct shms__report *rep) {
  int repaired = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    if (k->id < 0 || k->cfg->mode != SHMS_MODE_WORKER)
      continue;
    shms__op_enter(h, k);
    for (uint32_t i = 0; i < k->ncells; i++)
      if (repair_lost_worker(h, k, i)) {
        repaired++;
        if (rep != NULL) /* the report records it in the event ring too */
          shms__report(rep, SHMS_EVENT_CELL_REPAIRED,
                       (struct shms__item){.k = k, .cell_ref = i + 1});
        else
          shms__note(h, &(struct shms__ev){.kind = SHMS_EVENT_CELL_REPAIRED,
                                           .cls = k->id,
                                           .cell = (int32_t)i,
                                           .pid = h->pid,
                                           .value = 2});
      }
    shms__op_leave(h, k);
  }
  return repaired;
}

int shms_recover_dead(shms_t *h, unsigned flags, shms_event_fn on_event, void *ctx,
                      shms_recovery *out) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (flags & ~(unsigned)(SHMS_RECOVER_FULL | SHMS_RECOVER_REPAIR_LOST_WORKERS))
    return shms__fail(SHMS_EINVAL, "unknown recovery flags %#x", flags);
  /* Recovering only what the dead left is every member's duty; holding classes still to recompute
   * them, and handing cells back, are the admins' (docs/security.md). */
  if (flags != 0 && (rc = shms__admin_check(
                         h, "recover the whole segment (check --repair, supervise)")) != SHMS_OK)
    return rc;
  struct shms__report rep = {.h = h, .fn = on_event, .ctx = ctx};
  rc = (flags & SHMS_RECOVER_FULL) ? recover_full(h, &rep) : recover_each_dead(h, &rep);
  if (rc == SHMS_OK && (flags & SHMS_RECOVER_REPAIR_LOST_WORKERS))
    repair_lost_workers(h, &rep);
  shms__report_flush(&rep);
  if (rc == SHMS_OK && out != NULL)
    *out = rep.totals;
  return rc;
}

int shms_upkeep(shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  uint32_t stamped = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (h->cls[c].id >= 0)
      stamped += shms__stamp_leases(&h->cls[c]);
  return (int)stamped;
}

int shms_recover(shms_t *h, shms_recovery *out) {
  return shms_recover_dead(h, SHMS_RECOVER_FULL, NULL, NULL, out);
}

int shms_processes(shms_t *h, shms_process_info *out, uint32_t max, uint32_t *count) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (count == NULL || (out == NULL && max > 0))
    return shms__fail(SHMS_EINVAL, "out or count is NULL");
  uint32_t n = 0;
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    const struct shms__proc *p = shms__proc_at(h, i);
    if (shms__load_32((uint32_t *)&p->state) == SHMS__PROC_FREE)
      continue;
    if (n < max)
      out[n] = (shms_process_info){
          .index = i,
          .start_time = shms__load_64((uint64_t *)&p->start_time),
          .attached_unix_ns = shms__load_64((uint64_t *)&p->attached_unix_ns),
          .alive = shms__proc_alive(h, h->fd, i, shms__self_index(h)) == 1,
          .uid = shms__load_32((uint32_t *)&p->uid),
          .gid = shms__load_32((uint32_t *)&p->gid),
      };
    if (n < max)
      shms__proc_show(p, &out[n]); /* its pid as this process sees it */
    n++;
  }
  *count = n;
  return SHMS_OK;
}

int shms_supervisor_claim(shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if ((rc = shms__admin_check(h, "supervise the segment")) != SHMS_OK)
    return rc;
  struct flock fl = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHMS__LOCK_SUPERVISOR, .l_len = 1};
  if (fcntl(h->fd, F_SETLK, &fl) == 0) {
    /* Named in our entry, so that destroy does not count us as keeping the segment in use. */
    shms__store_32(&h->proc->role, SHMS__ROLE_SUPERVISOR);
    return SHMS_OK;
  }
  if (errno != EAGAIN && errno != EACCES)
    return shms__fail(SHMS_ESYSTEM, "cannot take the supervisor lock: %s", strerror(errno));
  fl.l_type = F_WRLCK;
  fcntl(h->fd, F_GETLK, &fl);
  return shms__fail(SHMS_EBUSY, "another supervisor (pid %d) already watches this segment",
                    (int)fl.l_pid);
}

/* QUARANTINED with reason worker-lost and a dead worker -> OFFLINE. 1 if done. */
static int repair_lost_worker(struct shms *h, const struct shms__cls *k, uint32_t c) {
  struct shms__cell *cell = &k->cells[c];
  uint64_t w = shms__load_64(&cell->word);
  uint32_t worker = shms__load_32(&cell->worker);
  if (SHMS__CELL_STATE(w) != SHMS__CELL_QUARANTINED ||
      shms__load_32(&cell->reason) != (uint32_t)SHMS_EWORKERLOST ||
      (worker != 0 && !shms__owner_dead(h, worker)))
    return 0;
  return shms__cell_unquarantine(k, c, w, SHMS__CELL_OFFLINE);
}

int shms_repair_lost_workers(shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if ((rc = shms__admin_check(h, "repair cells")) != SHMS_OK)
    return rc;
  return repair_lost_workers(h, NULL);
}

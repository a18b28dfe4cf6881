/* Recovery and audit for operators and the supervisor. */
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "../core/sched.h"
#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/proc.h"

int shms_recover(shms_t *h, shms_recovery *out) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  shms_recovery r;
  memset(&r, 0, sizeof r);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (h->cls[c].id >= 0 && (rc = shms__recover_class_into(h, &h->cls[c], &r)) != SHMS_OK)
      return shms__fail(rc, "out of memory while recovering class %s", shms_class_name(c));
  /* Only once every class is clean may the dead's entries be reused. */
  for (uint32_t i = 0; i < h->layout.procs_count; i++)
    if (i != h->self && shms__proc_alive(h, h->fd, i, shms__self_index(h)) == 0)
      r.dead_processes += (uint32_t)shms__proc_reap(h, h->fd, i);
  if (out != NULL)
    *out = r;
  return SHMS_OK;
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
          .pid = (int32_t)shms__load_32((uint32_t *)&p->pid),
          .start_time = shms__load_64((uint64_t *)&p->start_time),
          .attached_unix_ns = shms__load_64((uint64_t *)&p->attached_unix_ns),
          .alive = shms__proc_alive(h, h->fd, i, shms__self_index(h)) == 1,
      };
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
  struct flock fl = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHMS__LOCK_SUPERVISOR, .l_len = 1};
  if (fcntl(h->fd, F_SETLK, &fl) == 0)
    return SHMS_OK;
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
  if (!ck_pr_cas_64(&cell->word, w, SHMS__CELL_WORD(SHMS__CELL_GEN(w) + 1, 0, SHMS__CELL_OFFLINE)))
    return 0;
  shms__store_32(&cell->reason, 0);
  shms__store_32(&cell->worker, 0);
  ck_pr_dec_32(&k->ctl->quarantined);
  return 1;
}

int shms_repair_lost_workers(shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  int repaired = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct shms__cls *k = &h->cls[c];
    if (k->id < 0 || k->cfg->mode != SHMS_MODE_WORKER)
      continue;
    shms__op_enter(h, k);
    for (uint32_t i = 0; i < k->ncells; i++)
      repaired += repair_lost_worker(h, k, i);
    shms__op_leave(h, k);
  }
  return repaired;
}

/* Recovery and audit for operators and the supervisor. */
#include <string.h>

#include "../core/sched.h"
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
  for (uint32_t i = 0; i < h->hdr->procs_count; i++)
    if (i != h->self && shms__proc_alive(h->base, h->fd, i, shms__self_index(h)) == 0)
      r.dead_processes += (uint32_t)shms__proc_reap(h->base, h->fd, i);
  if (out != NULL)
    *out = r;
  return SHMS_OK;
}

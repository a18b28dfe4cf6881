/* shms_detach: the segment layer's detach, with the scheduler's recovery of what we held. */
#include "../shm/clock.h"
#include "../shm/error.h"
#include "client.h"

/* A class held still past SHMS__HELD_PATIENCE_NS: what we hold there is left to recovery, as
 * a process that died would leave it. */
static int leave(struct shms *h, uint32_t owner, int contained) {
  return shms__recover_owner(h, owner, contained, shms__real_now_ns() + SHMS__HELD_PATIENCE_NS);
}

int shms_detach(shms_t *h) {
  shms__clear_detail();
  if (h == NULL)
    return shms__fail(SHMS_EINVAL, "handle is NULL");
  return shms__segment_detach(h, leave);
}

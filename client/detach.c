/* shms_detach: the segment layer's detach, with the scheduler's recovery of what we held. */
#include "../shm/clock.h"
#include "../shm/error.h"
#include "client.h"

/*
 * How long a detach waits for a class held still (a recovery or check, slow or stopped) before
 * it leaves what it holds there to recovery, as a process that died would: a recovery's freeze
 * lasts milliseconds, and a process on its way out (a `run` past its deadline) must not wait on
 * one that is stopped.
 */
#define DETACH_PATIENCE_NS (250ull * 1000 * 1000)

static int leave(struct shms *h, uint32_t owner, int contained) {
  return shms__recover_owner(h, owner, contained, shms__real_now_ns() + DETACH_PATIENCE_NS);
}

int shms_detach(shms_t *h) {
  shms__clear_detail();
  if (h == NULL)
    return shms__fail(SHMS_EINVAL, "handle is NULL");
  return shms__segment_detach(h, leave);
}

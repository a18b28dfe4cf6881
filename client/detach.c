/* shms_detach: the segment layer's detach, with the scheduler's recovery of what we held. */
#include "../shm/error.h"
#include "client.h"

int shms_detach(shms_t *h) {
  shms__clear_detail();
  if (h == NULL)
    return shms__fail(SHMS_EINVAL, "handle is NULL");
  return shms__segment_detach(h, shms__recover_owner);
}

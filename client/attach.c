/* shms_attach: the segment layer's attach, with the scheduler's recovery of a class whose
 * freezer died, which this handle's operations run when they find one (core/quiesce.c). */
#include "../core/tally.h"
#include "../shm/membarrier.h"
#include "client.h"

int shms_attach(const char *name, unsigned flags, shms_t **out) {
  int rc = shms__spin_setup();
  if (rc != SHMS_OK)
    return rc;
  /* Whether our operations mark with plain stores (once per process; a bad
   * SHMSCHED_MEMBARRIER is refused here, before anything is attached). */
  if ((rc = shms__membarrier_setup()) != SHMS_OK)
    return rc;
  if ((rc = shms__segment_attach(name, flags, shms__recover_class, out)) != SHMS_OK)
    return rc;
  /* An entry taken over from a dead owner: what it held is settled now, as its recovery
   * would (its command was ended before the entry became ours), not left for a waiter. */
  if ((*out)->took_over != 0) {
    shms__settle_dead_owner(*out, (*out)->took_over);
    (*out)->took_over = 0;
  }
  /* The keyed jobs the entry's previous owner had joined and not let go: its shares go. */
  shms__joins_adopt(*out);
  shms__prepared_setup(*out);
  /* What the entry's previous owner (or an earlier handle of ours) tallied, into the tenant
   * table: counted all the while, and from then on not tied to this entry. */
  shms__tally_adopt(*out);
  return rc;
}

/*
 * Observations: one class's figures as a coherent snapshot. Counters are
 * read inside the class's ck_sequence read section, so a reader never blocks
 * scheduling and never sees a half-applied update; cell figures are derived
 * from the cells' own state words.
 */
#include <ck_pr.h>
#include <ck_sequence.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/handle.h"
#include "sched.h"

static const struct shms__cell *cell_at(const struct shms *h, const struct shms__class_desc *d,
                                        uint32_t i) {
  return SHMS__AT(h->base, d->cells_off + (uint64_t)i * sizeof(struct shms__cell),
                  const struct shms__cell);
}

static void count_cells(const struct shms *h, const struct shms__class_desc *d, uint64_t now_ns,
                        shms_class_stats *out) {
  for (uint32_t i = 0; i < d->cells_count; i++) {
    const struct shms__cell *cell = cell_at(h, d, i);
    out->granted += shms__load_64((uint64_t *)&cell->leases);
    uint32_t state = SHMS__CELL_STATE(shms__load_64((uint64_t *)&cell->word));
    if (state == SHMS__CELL_BOUND) {
      /* A companion counts as its lease does (whose start is its lead's, counted there). */
      uint32_t lead = shms__load_32((uint32_t *)&cell->lead) - 1;
      uint64_t lw =
          lead < d->cells_count ? shms__load_64((uint64_t *)&cell_at(h, d, lead)->word) : 0;
      if (SHMS__CELL_STATE(lw) == SHMS__CELL_GRANTED)
        out->granted_unaccepted++;
      else
        out->leased++;
      continue;
    }
    switch (state) {
    case SHMS__CELL_RESERVED:
      out->reserved++;
      break;
    case SHMS__CELL_AVAILABLE:
      out->available++;
      break;
    case SHMS__CELL_GRANTED:
    case SHMS__CELL_LEASED: {
      /* Granted is not leased: its waiter may be stopped or dead, the cell unused meanwhile. */
      int granted = state == SHMS__CELL_GRANTED;
      uint64_t *oldest = granted ? &out->oldest_grant_age_ns : &out->oldest_lease_age_ns;
      if (granted)
        out->granted_unaccepted++;
      else
        out->leased++;
      uint64_t start = shms__load_64((uint64_t *)&cell->lease_start_ns);
      if (start != 0 && now_ns > start && now_ns - start > *oldest)
        *oldest = now_ns - start;
      break;
    }
    case SHMS__CELL_QUARANTINED:
      out->quarantined++;
      break;
    default:
      out->offline++;
      break;
    }
  }
}

/*
 * ck_sequence's read_begin waits for an odd (write in progress) sequence to
 * turn even: forever, if the writer died inside its write section. So wait a
 * bounded number of times, then read anyway (a torn figure beats a hung
 * observer; recovery makes the sequence even again).
 */
static unsigned read_begin(const ck_sequence_t *seq) {
  unsigned version = 0;
  for (int tries = 0; tries < 100000; tries++) {
    version = shms__load_32((uint32_t *)&seq->sequence);
    if ((version & 1) == 0)
      break;
    ck_pr_stall();
  }
  ck_pr_fence_load();
  return version;
}

static void read_counters(const struct shms__class_ctl *ctl, shms_class_stats *out) {
  const ck_sequence_t *seq = (const ck_sequence_t *)&ctl->obs_seq;
  unsigned version;
  int tries = 0;
  do {
    version = read_begin(seq);
    out->rejected = shms__load_64((uint64_t *)&ctl->rejected);
    out->cancelled = shms__load_64((uint64_t *)&ctl->cancelled);
    out->expired = shms__load_64((uint64_t *)&ctl->expired);
    out->revoked = shms__load_64((uint64_t *)&ctl->revoked);
    out->total_wait_ns = shms__load_64((uint64_t *)&ctl->total_wait_ns);
    out->max_wait_ns = shms__load_64((uint64_t *)&ctl->max_wait_ns);
    out->queued_tenants = shms__load_32((uint32_t *)&ctl->tenants_queued);
    out->quarantines = shms__load_64((uint64_t *)&ctl->quarantines);
    out->recovered = shms__load_64((uint64_t *)&ctl->recovered);
    out->joined = shms__load_64((uint64_t *)&ctl->joined);
    for (int r = 0; r < SHMS_REJECT_REASONS; r++)
      out->rejected_by[r] = shms__load_64((uint64_t *)&ctl->rejected_by[r]);
    for (int b = 0; b < SHMS_WAIT_BUCKETS; b++)
      out->wait_buckets[b] = shms__load_64((uint64_t *)&ctl->wait_buckets[b]);
  } while ((version & 1) == 0 && ck_sequence_read_retry(seq, version) && ++tries < 100000);
}

int shms_observe(shms_t *h, shms_class_t c, shms_class_stats *out) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (out == NULL)
    return shms__fail(SHMS_EINVAL, "out is NULL");
  const struct shms__class_desc *d = shms__class_desc(h, (int)c);
  if (d == NULL)
    return SHMS_EINVAL;
  const struct shms__class_ctl *ctl = SHMS__AT(h->base, d->ctl_off, const struct shms__class_ctl);
  memset(out, 0, sizeof *out);
  out->cells = d->cells_count;
  out->queue_capacity = d->slots_count;
  out->queue_depth = SHMS__FAST_QUEUED(shms__load_64((uint64_t *)&ctl->fast)); /* never FROZEN */
  read_counters(ctl, out);
  count_cells(h, d, shms__now_ns(), out);
  return SHMS_OK;
}

/* The ticket of the lease a cell carries (held.h). */
#include "held.h"

#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/layout.h"

void shms__held_record(const struct shms__cls *k, uint32_t c, uint32_t gen, uint64_t seq) {
  struct shms__cell *cell = &k->cells[c];
  shms__store_64(&cell->ticket_seq, seq);
  /* The sequence is visible before the generation that vouches for it: a reader that sees the
   * lease's generation here sees its sequence too. */
  ck_pr_fence_store();
  shms__store_32(&cell->ticket_gen, gen);
}

/*
 * Each accepted lease has a generation of its own on its cell (every end of a
 * lease moves the generation on; a grant returned unaccepted records nothing),
 * so a record whose generation is the cell's current one is the current
 * lease's, never a previous one's.
 */
int shms__held_find(const struct shms__cls *k, uint32_t slot, uint64_t seq,
                    struct shms__held *out) {
  for (uint32_t c = 0; c < k->ncells; c++) {
    struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64(&cell->word);
    if (SHMS__CELL_STATE(w) != SHMS__CELL_LEASED || shms__load_32(&cell->slot) != slot + 1)
      continue;
    uint32_t gen = shms__load_32(&cell->ticket_gen);
    ck_pr_fence_load(); /* pairs with the record's store fence */
    if (gen != SHMS__CELL_GEN(w) || shms__load_64(&cell->ticket_seq) != seq)
      continue;
    uint64_t start = shms__load_64(&cell->lease_start_ns);
    ck_pr_fence_load();
    if (shms__load_64(&cell->word) != w)
      continue; /* the lease ended while we read it */
    *out = (struct shms__held){.cell = c, .owner = SHMS__CELL_OWNER(w), .start_ns = start};
    return 1;
  }
  return 0;
}

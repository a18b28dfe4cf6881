/*
 * A release asked for while the lease's class was held still (a check or a recovery that is
 * slow, stopped, or in a paused container): the holder records it in its process entry and goes
 * on, or exits, instead of waiting for a process it cannot hurry. Whoever next operates on the
 * class for the entry completes it, exactly as the holder's own release would have: the freezer
 * as it lets the class go, the holder's detach, the recovery of its death (docs/protocol.md,
 * "Held still").
 */
#include <ck_pr.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/proc.h"
#include "sched.h"

/* What a record reads while its writer stores the token: no class's, so nobody completes it. */
#define PENDING_WRITING SHMS__PENDING_WORD(0xffu, 0, 0)

int shms__pending_record(struct shms *h, const struct shms__cls *k, uint32_t cell, uint32_t gen,
                         uint64_t token) {
  struct shms__proc *p = shms__proc_at(h, shms__self_index(h));
  /* One record an entry: another thread of ours (or a predecessor's record not yet completed)
   * has it, and this release waits instead. */
  if (!ck_pr_cas_64(&p->pending_release, 0, PENDING_WRITING))
    return 0;
  shms__store_64(&p->pending_token, token);
  ck_pr_fence_store(); /* the token before the word that makes it count */
  shms__store_64(&p->pending_release, SHMS__PENDING_WORD(k->id, cell, gen));
  /* Pairs with shms__thaw's fence: either the freezer's sweep sees this record, or the caller
   * sees the class let go and completes the record itself. */
  ck_pr_fence_memory();
  return 1;
}

int shms__pending_complete(struct shms *h, const struct shms__cls *k, uint32_t index) {
  if (index >= h->layout.procs_count)
    return 0;
  struct shms__proc *p = shms__proc_at(h, index);
  uint64_t v = shms__load_64(&p->pending_release);
  if (v == 0 || SHMS__PENDING_CLASS(v) != k->id)
    return 0;
  uint64_t token = shms__load_64(&p->pending_token);
  uint32_t c = SHMS__PENDING_CELL(v);
  int done = 0;
  /* Exactly the lease recorded (its generation and token), or none: a record that outlived its
   * lease (released since, or the record is a dead predecessor's) changes nothing. */
  if (c < k->ncells) {
    uint64_t w = shms__load_64(&k->cells[c].word);
    if (SHMS__CELL_STATE(w) == SHMS__CELL_LEASED && SHMS__CELL_GEN(w) == SHMS__PENDING_GEN(v) &&
        shms__load_64(&k->cells[c].token) == token)
      done = shms__release_lease(h, k, c, w);
  }
  /* After the release: a completer that dies between the two leaves the record, and the next
   * finds its lease gone. Two completers race on the cell's word, and one of them wins. */
  ck_pr_cas_64(&p->pending_release, v, 0);
  return done;
}

uint64_t shms__pending_of(const struct shms *h, uint32_t index) {
  if (index >= h->layout.procs_count)
    return 0;
  uint64_t v = shms__load_64(&shms__proc_at(h, index)->pending_release);
  return v == PENDING_WRITING ? 0 : v;
}

int shms__pending_asks(const struct shms *h, const struct shms__cls *k, uint32_t c, uint64_t w) {
  uint32_t index = SHMS__OWNER_INDEX(SHMS__CELL_OWNER(w));
  uint64_t v = shms__pending_of(h, index);
  return v == SHMS__PENDING_WORD(k->id, c, SHMS__CELL_GEN(w)) &&
         shms__load_64(&shms__proc_at(h, index)->pending_token) ==
             shms__load_64(&k->cells[c].token);
}

void shms__thaw(struct shms *h, const struct shms__cls *k, uint64_t fast) {
  shms__unfreeze(k, fast);
  ck_pr_fence_memory(); /* pairs with shms__pending_record's */
  int entered = 0;
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    uint64_t v = shms__load_64(&shms__proc_at(h, i)->pending_release);
    if (v == 0 || SHMS__PENDING_CLASS(v) != k->id)
      continue;
    /* Held still again already: the next freezer completes it as it lets go. */
    if (!entered && shms__op_enter_until(h, k, shms__real_now_ns() + SHMS__PATIENCE_NS) != SHMS_OK)
      return;
    entered = 1;
    shms__pending_complete(h, k, i);
  }
  if (entered)
    shms__op_leave(h, k);
}

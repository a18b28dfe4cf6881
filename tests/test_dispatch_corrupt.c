/*
 * The dispatch pass on a corrupt segment ends (docs/protocol.md, "The dispatcher baton"): each
 * case breaks one thing the fuzzer found a pass looping on for ever, or a loop of the pass that
 * could, and checks that the operation that runs the pass returns, and what the pass made of
 * the broken state. Each case hung (the test's timeout) before its fix; the last one checks that
 * a cancel's prefetching (core/index.c), which reads the index without the baton, trusts no
 * link it reads.
 */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"
#include "shm/hbm.h"

/* Standard: 2 cells, both leased (alice, bob), carol's request queued in slot `queued`. */
struct fixture {
  const char *name;
  shms_t *h;
  const struct shms__cls *k;
  shms_lease a, b;
  shms_ticket t;
  struct shms__slot *queued;
};

static void setup(struct fixture *f) {
  f->h = sched_open(&f->name, 2, 8, NULL);
  f->k = &f->h->cls[SHMS_CLASS_STANDARD];
  shms_request a = sched_req("alice", 0), b = sched_req("bob", 0);
  ck_assert_shms_ok(shms_acquire(f->h, &a, &f->a));
  ck_assert_shms_ok(shms_acquire(f->h, &b, &f->b));
  f->t = sched_enqueue(f->h, "carol", 0, 0);
  f->queued = shms__slot_at(f->k, f->t.slot);
  uint64_t w = ck_pr_load_64(&f->queued->word);
  ck_assert_uint_eq(w & 0xf, SHMS__SLOT_QUEUED);
  ck_assert_uint_ne(w & SHMS__SLOT_INDEXED, 0);
}

/*
 * A queued, indexed request whose full sequence disagrees with its word's (the fuzzer's
 * regress-member-deadline-seq-mismatch and -2): past its deadline, the pass
 * settled it by the full sequence, which never matched, and picked it again for ever; without
 * a deadline it was granted under the full sequence, which its waiter never asked for. Either
 * way it now ends invariant-violated, by its word's sequence, and nothing is granted to it; the
 * waiter's ticket names a request the slot no longer holds, and its wait says not-found.
 */
START_TEST(a_request_whose_two_sequences_disagree_ends_invariant_violated) {
  struct fixture f;
  setup(&f);
  uint64_t rejected = sched_stats(f.h).rejected;
  if (_i == 0)
    ck_pr_store_64(&f.queued->deadline_ns, 1); /* long past */
  ck_pr_store_64(&f.queued->seq, ck_pr_load_64(&f.queued->seq) ^ 0xff);
  ck_assert_shms_ok(shms_release(f.h, &f.a)); /* a free cell: its kick runs the pass */
  uint64_t w = ck_pr_load_64(&f.queued->word);
  ck_assert_uint_eq(w & 0xf, SHMS__SLOT_SETTLED);
  ck_assert_int_eq(SHMS__SLOT_REASON(w), SHMS_EVIOLATION);
  ck_assert_uint_eq(SHMS__SLOT_SEQ(w), (uint32_t)f.t.seq);
  ck_assert_uint_eq(w & SHMS__SLOT_INDEXED, 0);
  ck_assert_uint_eq(f.k->ctl->ring_head, 0);
  shms_class_stats st = sched_stats(f.h);
  ck_assert_uint_eq(st.rejected, rejected + 1);
  ck_assert_uint_eq(st.available, 1); /* the released cell went to nobody */
  shms_lease l; /* its waiter, whose ticket no longer matches the slot, is told at once */
  ck_assert_shms_err(shms_wait(f.h, &f.t, 0, &l), SHMS_ENOTFOUND, "no live request");
  ck_assert_shms_ok(shms_release(f.h, &f.b));
  sched_close(f.h, f.name);
}
END_TEST

/*
 * A slot the index holds whose word is in a state the index never holds (neither QUEUED nor
 * settled while INDEXED): attending it changed nothing, and the pass picked it again for ever.
 * It is a torn index now: rebuilt from the slot words, which leave the slot out.
 */
START_TEST(an_indexed_slot_in_a_state_the_index_never_holds_is_a_torn_index) {
  struct fixture f;
  setup(&f);
  uint64_t w = ck_pr_load_64(&f.queued->word);
  uint64_t broken = _i == 0 ? SHMS__SLOT_WORD(SHMS__SLOT_SEQ(w), 0, 0, SHMS__SLOT_FREE)
                            : (w & ~0xfull) | SHMS__SLOT_GRANTED; /* still INDEXED */
  ck_pr_store_64(&f.queued->word, broken);
  ck_assert_shms_ok(shms_release(f.h, &f.a));
  ck_assert_uint_eq(ck_pr_load_64(&f.queued->word) & SHMS__SLOT_INDEXED, 0);
  ck_assert_uint_eq(f.k->ctl->ring_head, 0);
  ck_assert_uint_eq(f.k->ctl->ring_len, 0);
  ck_assert_uint_eq(f.k->ctl->tenants_queued, 0);
  ck_assert_shms_ok(shms_release(f.h, &f.b));
  sched_close(f.h, f.name);
}
END_TEST

/* A class of more cells than the fast word maps: it counts its free cells. */
#define COUNTED_CELLS 33

/* Every cell of a counting class leased, then its count of free cells set to 1. */
static shms_t *counted_full(const char **name, shms_lease *leases) {
  shms_t *h = sched_open(name, COUNTED_CELLS, 4, NULL);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  ck_assert_int_eq(k->fast_map, 0);
  for (int i = 0; i < COUNTED_CELLS; i++) {
    shms_request r = sched_req("alice", 0);
    ck_assert_shms_ok(shms_try_acquire(h, &r, &leases[i]));
  }
  return h;
}

static void set_free_count(const struct shms__cls *k, uint32_t n) {
  uint64_t fast = ck_pr_load_64(&k->ctl->fast);
  ck_pr_store_64(&k->ctl->fast, (fast & ~0xffffffffull) | n);
}

static void release_all(shms_t *h, shms_lease *leases) {
  for (int i = 0; i < COUNTED_CELLS; i++)
    ck_assert_shms_ok(shms_release(h, &leases[i]));
}

/*
 * A count of free cells that no AVAILABLE cell backs: the claim that follows a reservation
 * scanned the cells for ever, in the dispatcher's grant and on the fast path. The reservation
 * is now dropped (recovery recounts): the grant finds no cell, the fast path says would-block.
 */
START_TEST(a_free_count_no_cell_backs_is_dropped_not_scanned_for_ever) {
  const char *name;
  shms_lease leases[COUNTED_CELLS];
  shms_t *h = counted_full(&name, leases);
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_request r = sched_req("bob", 0);
  shms_lease l;
  set_free_count(k, 1);
  ck_assert_shms_err(shms_try_acquire(h, &r, &l), SHMS_EWOULDBLOCK, "");
  ck_assert_uint_eq(SHMS__FAST_LOW(ck_pr_load_64(&k->ctl->fast)), 0);

  shms_ticket t = sched_enqueue(h, "carol", 0, 0);
  set_free_count(k, 1);
  shms_tenant_stats rows[4];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_tenants(h, SHMS_CLASS_STANDARD, rows, 4, &n)); /* runs a pass */
  ck_assert_uint_eq(SHMS__FAST_LOW(ck_pr_load_64(&k->ctl->fast)), 0);
  uint64_t w = ck_pr_load_64(&shms__slot_at(k, t.slot)->word);
  ck_assert_uint_eq(w & 0xf, SHMS__SLOT_QUEUED); /* still waiting, for a real cell */
  release_all(h, leases);
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

/* The attention bit the stream below raises, and how many times it raised it. */
static const struct shms__cls *stream_class;
static uint32_t stream_slot;
static unsigned long stream_raised;

static void raise_attention(void) {
  if (!shms__hbm_test(&stream_class->sattn, stream_slot)) {
    shms__hbm_set(&stream_class->sattn, stream_slot);
    stream_raised++;
  }
}

/*
 * Work arriving during every pass, without end (an attention bit raised again at each step, as
 * a stream of publishers would, or a corrupt state each pass finds again): the holder re-checked,
 * found work and passed again for ever. It now hands off and lets go after a bounded number of
 * passes, having done more than one.
 */
START_TEST(a_holder_fed_work_without_end_lets_go) {
  struct fixture f;
  setup(&f);
  stream_class = f.k;
  stream_slot = f.t.slot + 1; /* free: attending it changes nothing */
  ck_assert_uint_eq(ck_pr_load_64(&shms__slot_at(f.k, stream_slot)->word) & 0xf, SHMS__SLOT_FREE);
  stream_raised = 0;
  shms__test_step_check(raise_attention);
  ck_assert_shms_ok(shms_release(f.h, &f.a));
  shms__test_step_check(NULL);
  ck_assert_uint_gt(stream_raised, 64); /* more than one pass's budget */
  /* The stream used every pass's budget on its bit; with it gone the next pass grants. */
  shms_tenant_stats rows[4];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_tenants(f.h, SHMS_CLASS_STANDARD, rows, 4, &n));
  shms_lease l;
  ck_assert_shms_ok(shms_wait(f.h, &f.t, 0, &l));
  ck_assert_shms_ok(shms_release(f.h, &l));
  ck_assert_shms_ok(shms_release(f.h, &f.b));
  sched_close(f.h, f.name);
}
END_TEST

/*
 * A cancel warms the lines its unlink will touch by reading the victim's links without the baton
 * (shms__index_prefetch_*): on a torn index every one of them may be anything. Loop 0: links far
 * out of range (a record read through such a tenant ref lies 512 GB past the table: it crashed);
 * loop 1: one past the end. The hints change nothing in the segment, and the cancel itself then
 * settles the request and finds the tear, as without them.
 */
START_TEST(a_cancel_reads_no_torn_link_it_prefetches_through) {
  struct fixture f;
  setup(&f);
  uint32_t far = _i == 0;
  f.queued->tenant = far ? UINT32_MAX : f.k->ntenants + 1;
  uint32_t bad = far ? UINT32_MAX : f.k->nslots + 1;
  f.queued->age_prev = f.queued->age_next = f.queued->grp_prev = f.queued->grp_next = bad;
  f.queued->all_prev = f.queued->all_next = bad;
  char *before = malloc(f.h->size);
  ck_assert_ptr_nonnull(before);
  memcpy(before, f.h->base, f.h->size);
  shms__index_prefetch_slot(f.k, f.t.slot);
  shms__index_prefetch_links(f.k, f.t.slot);
  shms__index_prefetch_root(f.k, f.t.slot);
  ck_assert_int_eq(memcmp(before, f.h->base, f.h->size), 0);
  free(before);
  ck_assert_int_eq(shms_cancel(f.h, &f.t), 1);
  uint64_t w = ck_pr_load_64(&f.queued->word);
  ck_assert_uint_eq(w & 0xf, SHMS__SLOT_SETTLED);
  ck_assert_int_eq(SHMS__SLOT_REASON(w), SHMS_ECANCELLED);
  /* The unlink found the tenant ref torn and the index was rebuilt: nothing is left queued. */
  ck_assert_uint_eq(f.k->ctl->ring_head, 0);
  shms_class_stats st = sched_stats(f.h);
  ck_assert_uint_eq(st.queue_depth, 0);
  ck_assert_uint_eq(st.cancelled, 1);
  shms_lease l;
  ck_assert_int_eq(shms_wait(f.h, &f.t, 0, &l), SHMS_ECANCELLED);
  ck_assert_shms_ok(shms_release(f.h, &f.a));
  ck_assert_shms_ok(shms_release(f.h, &f.b));
  sched_close(f.h, f.name);
}
END_TEST

static Suite *dispatch_corrupt_suite(void) {
  Suite *s = suite_create("dispatch_corrupt");
  TCase *tc = harness_tcase("passes end");
  tcase_add_loop_test(tc, a_request_whose_two_sequences_disagree_ends_invariant_violated, 0, 2);
  tcase_add_loop_test(tc, an_indexed_slot_in_a_state_the_index_never_holds_is_a_torn_index, 0, 2);
  tcase_add_test(tc, a_free_count_no_cell_backs_is_dropped_not_scanned_for_ever);
  tcase_add_test(tc, a_holder_fed_work_without_end_lets_go);
  tcase_add_loop_test(tc, a_cancel_reads_no_torn_link_it_prefetches_through, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(dispatch_corrupt_suite()); }

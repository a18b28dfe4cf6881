/*
 * shms_check names every invariant it finds broken, one line each, and shms_recover repairs
 * every one but a state word that holds no valid state, which the audit marks as such
 * (include/shmsched.h, shms_check). One case per kind of violation the audit knows, each on a
 * fresh segment in a known state, broken in exactly one place as a dead process or a stray
 * write would leave it.
 */
#include <ck_pr.h>
#include <stdio.h>
#include <string.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/handle.h"
#include "shm/hbm.h"

/* Standard: 2 cells, both leased (alice, bob), carol's request queued in slot `queued`.
 * Small: a worker class of 1 cell, no worker. */
struct fixture {
  const char *name;
  shms_t *h;
  const struct shms__cls *k, *w;
  shms_lease a, b;
  shms_ticket t;
  struct shms__slot *queued;
  struct shms__tenant *carol;
};

/* An owner id no process has: entry 7 was never claimed (its generation is 0). */
#define DEAD_OWNER SHMS__OWNER(7, 1)

static uint32_t audit(shms_t *h, char *report, size_t cap) {
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, cap, &violations));
  return violations;
}

static void setup(struct fixture *f) {
  shms_config cfg;
  harness_config(&cfg, 2, 8);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 2, .mode = SHMS_MODE_WORKER, .payload = 16};
  f->h = sched_open(&f->name, 0, 0, &cfg);
  f->k = &f->h->cls[SHMS_CLASS_STANDARD];
  f->w = &f->h->cls[SHMS_CLASS_SMALL];
  shms_request a = sched_req("alice", 0), b = sched_req("bob", 0);
  ck_assert_shms_ok(shms_acquire(f->h, &a, &f->a));
  ck_assert_shms_ok(shms_acquire(f->h, &b, &f->b));
  f->t = sched_enqueue(f->h, "carol", 0, 0);
  f->queued = shms__slot_at(f->k, f->t.slot);
  ck_assert_uint_eq(f->queued->word & 0xf, SHMS__SLOT_QUEUED);
  ck_assert_uint_eq(f->queued->tenant >= 1, 1);
  f->carol = &f->k->tenants[f->queued->tenant - 1];
  char report[4096];
  ck_assert_msg(audit(f->h, report, sizeof report) == 0, "before: %s", report);
}

static void set_flag(struct shms__slot *s, uint64_t flag, int on) {
  uint64_t w = ck_pr_load_64(&s->word);
  ck_pr_store_64(&s->word, on ? w | flag : w & ~flag);
}

/* A free slot taken off the free-slot map, as a claim does. */
static uint32_t take_free_slot(const struct fixture *f) {
  int64_t j = shms__hbm_take(&f->k->sfree);
  ck_assert_int_ge(j, 0);
  return (uint32_t)j;
}

static void break_unindexed(struct fixture *f) { set_flag(f->queued, SHMS__SLOT_INDEXED, 0); }
static void break_marked_free(struct fixture *f) { shms__hbm_set(&f->k->sfree, f->t.slot); }
static void break_lost_free_slot(struct fixture *f) { take_free_slot(f); }
static void break_claimed(struct fixture *f) {
  struct shms__slot *s = shms__slot_at(f->k, take_free_slot(f));
  ck_pr_store_64(&s->word, SHMS__SLOT_WORD(ck_pr_load_64(&s->seq) + 1, 0, 0, SHMS__SLOT_CLAIMED));
  ck_pr_inc_32(&f->k->ctl->used);
}
static void break_late_indexed(struct fixture *f) { set_flag(f->queued, SHMS__SLOT_LATE, 1); }
static void break_dead_waiter(struct fixture *f) { ck_pr_store_32(&f->queued->owner, DEAD_OWNER); }
static void break_tenant_count(struct fixture *f) { f->carol->queued++; }
static void break_ring_member(struct fixture *f) { f->carol->flags &= ~SHMS__TENANT_INRING; }
static void break_tenant_active(struct fixture *f) { f->carol->active++; }
static void break_ring_length(struct fixture *f) { f->k->ctl->ring_len++; }
static void break_tenants_queued(struct fixture *f) { f->k->ctl->tenants_queued++; }
static void break_quarantined_count(struct fixture *f) { f->k->ctl->quarantined++; }
static void break_odd_sequence(struct fixture *f) { f->k->ctl->obs_seq++; }
static void break_dead_baton(struct fixture *f) { ck_pr_store_64(&f->k->ctl->baton, DEAD_OWNER); }
static void set_cell(const struct shms__cls *k, uint32_t c, uint32_t owner, uint32_t state) {
  uint64_t w = ck_pr_load_64(&k->cells[c].word);
  ck_pr_store_64(&k->cells[c].word, SHMS__CELL_WORD(SHMS__CELL_GEN(w), owner, state));
}
static void break_dead_holder(struct fixture *f) {
  set_cell(f->k, f->b.cell, DEAD_OWNER, SHMS__CELL_LEASED);
}
static void break_grant_to_nobody(struct fixture *f) {
  set_cell(f->k, f->b.cell, 0, SHMS__CELL_GRANTED);
  ck_pr_store_32(&f->k->cells[f->b.cell].slot, 0);
}
static void break_dead_worker(struct fixture *f) {
  ck_pr_store_32(&f->w->cells[0].worker, DEAD_OWNER);
  set_cell(f->w, 0, 0, SHMS__CELL_AVAILABLE);
  shms__fast_put(f->w, 0);
}
static void break_slot_state(struct fixture *f) {
  uint64_t w = ck_pr_load_64(&f->queued->word);
  ck_pr_store_64(&f->queued->word, (w & ~0xfull) | 7);
}
static void break_cell_state(struct fixture *f) { set_cell(f->k, f->b.cell, 0, 9); }
static void break_offline_lease_cell(struct fixture *f) {
  set_cell(f->k, f->b.cell, 0, SHMS__CELL_OFFLINE);
}

static const struct {
  void (*breaks)(struct fixture *);
  const char *line; /* what the report says, after "class C: " */
  int repairable;
} cases[] = {
    {break_unindexed, "standard: slot 0: queued but neither indexed nor awaiting the dispatcher",
     1},
    {break_marked_free, "standard: slot 0: in use (state 2) but marked free", 1},
    {break_lost_free_slot, "standard: slot 1: free but missing from the free-slot map (lost)", 1},
    {break_claimed, "standard: slot 1: claimed by an enqueue that never finished (needs recovery)",
     1},
    {break_late_indexed, "standard: slot 0: late (its grant revoked) in state 2", 1},
    {break_dead_waiter, "standard: slot 0: waiting for a dead owner (needs recovery)", 1},
    {break_tenant_count, "standard: tenant 'carol': 1 requests in its list, its count says 2", 1},
    {break_ring_member, "standard: tenant 'carol': missing from the ring but has 1 queued", 1},
    {break_tenant_active, "standard: tenant 'carol': 1 leases counted, 0 held", 1},
    {break_ring_length, "standard: ring: 1 tenants in it, its length says 2", 1},
    {break_tenants_queued, "standard: 1 tenants have queued work, the count says 2", 1},
    {break_quarantined_count, "standard: quarantined count 1, but 0 cells are quarantined", 1},
    {break_odd_sequence, "standard: the observation sequence is odd while the class stands still",
     1},
    {break_dead_baton, "standard: the dispatcher baton is held while the class stands still", 1},
    {break_dead_holder, "standard: cell 1: leased to a dead process (needs recovery)", 1},
    {break_grant_to_nobody, "standard: cell 1: granted to slot 0, which is not granted this cell",
     1},
    {break_dead_worker, "small: cell 0: idle, bound to a dead worker", 1},
    {break_slot_state, "standard: slot 0: state 7 is not a slot state", 0},
    {break_cell_state, "standard: cell 1: state 9 is not a cell state", 0},
    {break_offline_lease_cell, "standard: cell 1: offline in a lease class", 0},
};

START_TEST(the_audit_names_each_violation_and_recovery_repairs_it) {
  struct fixture f;
  setup(&f);
  cases[_i].breaks(&f);
  char report[4096], line[256];
  ck_assert_uint_ge(audit(f.h, report, sizeof report), 1);
  snprintf(line, sizeof line, "class %s", cases[_i].line);
  const char *at = strstr(report, line);
  ck_assert_msg(at != NULL, "report lacks '%s':\n%s", line, report);
  /* A corrupt state word, and only that, says recovery cannot repair it. */
  const char *eol = strchr(at, '\n');
  const char *mark = strstr(at, SHMS_CHECK_UNREPAIRABLE);
  ck_assert_msg((mark != NULL && mark < eol) == !cases[_i].repairable, "%.*s", (int)(eol - at), at);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(f.h, &rec));
  uint32_t left = audit(f.h, report, sizeof report);
  if (cases[_i].repairable)
    ck_assert_msg(left == 0, "after recovery: %s", report);
  else
    ck_assert_msg(strstr(report, line) != NULL, "after recovery: %s", report);
  shms_release(f.h, &f.a); /* either lease may have been disposed of by the recovery */
  shms_release(f.h, &f.b);
  ck_assert_shms_ok(shms_detach(f.h));
  ck_assert_shms_ok(shms_destroy(f.name, SHMS_DESTROY_FORCE));
}
END_TEST

/* The report never runs past cap, and the count still counts every violation. */
START_TEST(a_short_report_is_cut_not_overrun) {
  struct fixture f;
  setup(&f);
  break_ring_length(&f);
  break_tenants_queued(&f);
  break_quarantined_count(&f);
  char report[40];
  memset(report, 'x', sizeof report);
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(f.h, report, 32, &violations));
  ck_assert_uint_eq(violations, 3);
  ck_assert_uint_lt(strlen(report), 32);
  ck_assert_int_eq(report[32], 'x');
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(f.h, &rec));
  ck_assert_uint_eq(audit(f.h, report, sizeof report), 0);
  ck_assert_shms_ok(shms_release(f.h, &f.a));
  ck_assert_shms_ok(shms_release(f.h, &f.b));
  sched_close(f.h, f.name);
}
END_TEST

/*
 * A request whose grant was revoked (parked, LATE) and then cancelled or drained before its
 * waiter came back is settled like any other: the audit has nothing to say about it, before
 * or after its waiter collects it.
 */
START_TEST(a_late_request_settled_before_its_waiter_returns_is_no_violation) {
  shms_set_clock(sched_fake_clock, NULL);
  shms_config cfg;
  harness_config(&cfg, 1, 8);
  cfg.classes[SHMS_CLASS_STANDARD].grant_timeout_ns = 1000000000ull;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_ticket late = sched_enqueue(h, "t", 0, 0); /* granted at once; nobody accepts it */
  sched_fake_now += 1000000000ull;
  shms_ticket next = sched_enqueue(h, "t", 0, 0); /* its kick revokes the late grant */
  const struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  uint64_t w = ck_pr_load_64(&shms__slot_at(k, late.slot)->word);
  ck_assert_uint_eq(w & 0xf, SHMS__SLOT_QUEUED);
  ck_assert_uint_ne(w & SHMS__SLOT_LATE, 0);
  ck_assert_int_eq(shms_cancel(h, &late), 1);
  char report[4096];
  ck_assert_msg(audit(h, report, sizeof report) == 0, "cancelled while late: %s", report);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover(h, &rec));
  ck_assert_msg(audit(h, report, sizeof report) == 0, "after recovery: %s", report);
  shms_lease l;
  ck_assert_shms_err(shms_wait(h, &late, 0, &l), SHMS_ECANCELLED, "cancelled");
  ck_assert_shms_ok(shms_wait(h, &next, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_msg(audit(h, report, sizeof report) == 0, "at the end: %s", report);
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

static Suite *audit_suite(void) {
  Suite *s = suite_create("audit");
  TCase *tc = harness_tcase("violations");
  tcase_add_loop_test(tc, the_audit_names_each_violation_and_recovery_repairs_it, 0,
                      sizeof cases / sizeof cases[0]);
  tcase_add_test(tc, a_short_report_is_cut_not_overrun);
  tcase_add_test(tc, a_late_request_settled_before_its_waiter_returns_is_no_violation);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(audit_suite()); }

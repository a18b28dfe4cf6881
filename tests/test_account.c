/*
 * The tenant table: weights set by policy and listed, kept while a tenant is idle; a full table
 * folds its least recently active records into `_other` and refuses a policy it has no room
 * for; a process that died holding the table's lock does not keep it.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/account.h"
#include "core/fair.h"
#include "core/sched.h"
#include "sched_util.h"
#include "shm/atomic.h"

static shms_t *open_timed(const char **name, uint32_t table) {
  shms_config cfg;
  harness_config(&cfg, 1, 16);
  cfg.classes[SHMS_CLASS_STANDARD].fairness = SHMS_FAIRNESS_TIME;
  cfg.tenant_table = table;
  return sched_open(name, 0, 0, &cfg);
}

/* Take a lease for tenant and give it back: the class makes a record of the tenant, and lets
 * it go (the tenant idle) once the release is attended. */
static void use_once(shms_t *h, const char *tenant) {
  shms_ticket t = sched_enqueue(h, tenant, 0, 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &t, UINT64_MAX, &l));
  ck_assert_shms_ok(shms_release(h, &l));
}

static const shms_policy_row *row_of(const shms_policy_row *rows, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(rows[i].name, name) == 0)
      return &rows[i];
  return NULL;
}

START_TEST(policy_sets_and_lists_weights) {
  const char *name;
  shms_t *h = open_timed(&name, 0);
  ck_assert_shms_ok(shms_policy_tenant(h, "paying", 3));
  ck_assert_shms_err(shms_policy_tenant(h, "paying", 0), SHMS_EINVAL, "weight: must be 1..1000");
  ck_assert_shms_err(shms_policy_tenant(h, "paying", 1001), SHMS_EINVAL, "got 1001");
  ck_assert_shms_err(shms_policy_tenant(h, "", 2), SHMS_EINVAL, "tenant name");
  use_once(h, "free");
  shms_policy_row rows[8];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_policy_list(h, rows, 8, &n));
  ck_assert_uint_eq(n, 2);
  const shms_policy_row *p = row_of(rows, n, "paying"), *f = row_of(rows, n, "free");
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(p->weight, 3);
  ck_assert_uint_eq(p->flags, SHMS_POLICY_SET);
  ck_assert_uint_eq(f->weight, 1);
  ck_assert_uint_eq(f->flags, 0);
  /* Changed again: the latest weight holds; the change is in the event ring. */
  ck_assert_shms_ok(shms_policy_tenant(h, "paying", 5));
  ck_assert_shms_ok(shms_policy_list(h, rows, 8, &n));
  ck_assert_uint_eq(row_of(rows, n, "paying")->weight, 5);
  shms_event_record recs[64];
  size_t got = 0;
  uint64_t cursor = 0;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, 64, &got, NULL));
  int seen = 0;
  for (size_t i = 0; i < got; i++)
    if (recs[i].event.kind == SHMS_EVENT_POLICY_CHANGED &&
        strcmp(recs[i].event.tenant, "paying") == 0)
      ck_assert_uint_eq(recs[i].value, seen++ == 0 ? 3 : 5);
  ck_assert_int_eq(seen, 2);
  /* An observer lists; only a member sets. */
  shms_t *o;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  ck_assert_shms_ok(shms_policy_list(o, rows, 8, &n));
  ck_assert_uint_eq(n, 2);
  ck_assert_shms_err(shms_policy_tenant(o, "x", 2), SHMS_EINVAL, "observer");
  shms_detach(o);
  sched_close(h, name);
}
END_TEST

/*
 * 16 records: tenants seen once, then idle, fill it; the next tenant folds the least recently
 * active (the first seen, and the others as old within an eighth of their span) into `_other`,
 * which keeps their cell-time. Records with a policy are
 * never folded: once every record but `_other` has one, another policy is refused.
 */
START_TEST(a_full_table_folds_into_other) {
  const char *name;
  shms_t *h = open_timed(&name, 16);
  shms_set_clock(sched_fake_clock, NULL);
  char tenant[32];
  for (int i = 0; i < 16; i++) {
    snprintf(tenant, sizeof tenant, "t%02d", i);
    shms_ticket t = sched_enqueue(h, tenant, 0, 0);
    shms_lease l;
    ck_assert_shms_ok(shms_wait(h, &t, UINT64_MAX, &l));
    sched_fake_now += 10 * 1000 * 1000; /* each held 10 ms */
    ck_assert_shms_ok(shms_release(h, &l));
    use_once(h, "kick"); /* its record goes once the release is attended */
  }
  shms_set_clock(NULL, NULL);
  shms_policy_row rows[32];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_policy_list(h, rows, 32, &n));
  ck_assert_uint_le(n, 16); /* folds take the oldest eighth of the records' span at once */
  ck_assert_uint_ge(n, 2);
  const shms_policy_row *other = row_of(rows, n, "_other");
  ck_assert_ptr_nonnull(other);
  ck_assert_uint_eq(other->flags, SHMS_POLICY_OTHER | SHMS_POLICY_SET);
  ck_assert_ptr_null(row_of(rows, n, "t00")); /* the least recently active went first */
  uint64_t held = 0;
  for (uint32_t i = 0; i < n; i++)
    held += rows[i].cell_ns[SHMS_CLASS_STANDARD];
  ck_assert_uint_ge(held, 16ull * 10 * 1000 * 1000); /* nothing of what they held was lost */
  for (int i = 0; i < 15; i++) {
    snprintf(tenant, sizeof tenant, "p%02d", i);
    ck_assert_shms_ok(shms_policy_tenant(h, tenant, 2));
  }
  ck_assert_shms_err(shms_policy_tenant(h, "one-more", 2), SHMS_EQUEUEFULL,
                     "the tenant table is full");
  ck_assert_shms_ok(shms_policy_tenant(h, "p00", 7)); /* one it has is changed as ever */
  sched_close(h, name);
}
END_TEST

/* A table full of records in use (more tenants with queued work than records) has nothing to
 * fold: a tenant new to it is served without a record, and the table is searched for one once,
 * not again for every such tenant, nor after a record was unused only for a moment; once a
 * record is left unused, the next search finds it. */
START_TEST(a_table_full_of_records_in_use_is_searched_once) {
  const char *name;
  shms_config cfg;
  harness_config(&cfg, 1, 64);
  cfg.classes[SHMS_CLASS_STANDARD].fairness = SHMS_FAIRNESS_TIME;
  cfg.max_tenants = 64;
  cfg.tenant_table = SHMS_TENANT_TABLE_MIN;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  shms_ticket hold = sched_enqueue(h, "holder", 0, 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &hold, UINT64_MAX, &l)); /* the one cell: the rest queue */
  char tenant[32];
  shms_ticket q[40];
  for (int i = 0; i < 20; i++) { /* more tenants with work than the table has records */
    snprintf(tenant, sizeof tenant, "q%02d", i);
    q[i] = sched_enqueue(h, tenant, 0, 0);
  }
  uint64_t searches = shms__account_searches;
  for (int i = 20; i < 40; i++) {
    snprintf(tenant, sizeof tenant, "q%02d", i);
    q[i] = sched_enqueue(h, tenant, 0, 0);
  }
  ck_assert_uint_eq(shms__account_searches, searches); /* nothing was left to fold: no search */
  /* A tenant's work ends and comes back at once (a cancel, then its next request): its record
   * was unused for a moment and is in use again. Still nothing to fold: no search. */
  ck_assert_int_eq(shms_cancel(h, &q[5]), 1);
  ck_assert_int_eq(shms_wait(h, &q[5], 0, &l), SHMS_ECANCELLED);
  q[5] = sched_enqueue(h, "q05", 0, 0);
  shms_ticket late = sched_enqueue(h, "late", 0, 0);
  ck_assert_uint_eq(shms__account_searches, searches);
  shms_policy_row rows[64];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_policy_list(h, rows, 64, &n));
  ck_assert_ptr_null(row_of(rows, n, "q39"));
  ck_assert_ptr_nonnull(row_of(rows, n, "q05")); /* it kept its record */
  ck_assert_ptr_null(row_of(rows, n, "late"));
  /* Two tenants' work ends: their records are in use no more. The first becomes `_other`, the
   * second is folded into it, and the next tenant new to the table takes its place. */
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(shms_cancel(h, &q[i]), 1);
    ck_assert_int_eq(shms_wait(h, &q[i], 0, &l), SHMS_ECANCELLED);
  }
  shms_ticket fresh = sched_enqueue(h, "fresh", 0, 0);
  ck_assert_uint_gt(shms__account_searches, searches);
  ck_assert_shms_ok(shms_policy_list(h, rows, 64, &n));
  ck_assert_ptr_nonnull(row_of(rows, n, "fresh"));
  ck_assert_ptr_nonnull(row_of(rows, n, "_other"));
  char report[2048];
  uint32_t violations = 1;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_int_eq(shms_cancel(h, &fresh), 1);
  ck_assert_int_eq(shms_cancel(h, &late), 1);
  for (int i = 2; i < 40; i++)
    ck_assert_int_eq(shms_cancel(h, &q[i]), 1);
  sched_close(h, name);
}
END_TEST

/* A process that dies holding the table's lock: the next to want it takes it over. */
START_TEST(a_dead_holders_lock_is_taken_over) {
  const char *name;
  shms_t *h = open_timed(&name, 0);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    shms_t *ch;
    if (shms_attach(name, 0, &ch) != SHMS_OK)
      _exit(1);
    uint32_t owner = ch->owner;
    if (write(p[1], &owner, sizeof owner) != (ssize_t)sizeof owner)
      _exit(2);
    pause();
    _exit(0);
  }
  uint32_t owner = 0;
  ck_assert_int_eq(read(p[0], &owner, sizeof owner), (ssize_t)sizeof owner);
  kill(child, SIGKILL);
  ck_assert_int_eq(waitpid(child, NULL, 0), child);
  struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms__store_64(&k->actl->lock, (1ull << 32) | owner); /* as if it died mid-change */
  ck_assert_shms_ok(shms_policy_tenant(h, "after", 4));
  ck_assert_uint_eq(shms__load_64(&k->actl->lock), 0);
  use_once(h, "after");
  shms_policy_row rows[4];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_policy_list(h, rows, 4, &n));
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(rows[0].weight, 4);
  close(p[0]);
  close(p[1]);
  sched_close(h, name);
}
END_TEST

/* The audit finds the report it is given a reason for, and recovery's rebuild leaves none. */
static void torn_is_found_and_rebuilt(shms_t *h, const char *reason) {
  char report[2048];
  uint32_t violations = 0;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations > 0 && strstr(report, reason) != NULL, "%s", report);
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r));
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
}

/*
 * A torn calendar or heap (a baton holder killed between two stores) is found by the audit and
 * rebuilt by recovery. Tenants alike are filed in the calendar; one charged for a lease of
 * 100 ms at weight 1 is beyond its reach (64 quanta, about 67 ms) and waits in the heap.
 */
START_TEST(a_torn_heap_is_found_and_rebuilt) {
  const char *name;
  shms_set_clock(sched_fake_clock, NULL);
  shms_t *h = open_timed(&name, 0);
  struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  ck_assert_shms_ok(shms_policy_tenant(h, "light", 1000));
  shms_ticket hold = sched_enqueue(h, "light", 0, 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &hold, UINT64_MAX, &l));
  shms_ticket t[4] = {sched_enqueue(h, "a", 0, 0), sched_enqueue(h, "b", 0, 0),
                      sched_enqueue(h, "c", 0, 0), sched_enqueue(h, "light", 0, 0)};
  char report[2048];
  uint32_t violations = 1;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_uint_eq(k->ctl->heap_len, 0);
  ck_assert_uint_eq(__builtin_popcountll(k->ctl->cal_bits), 1); /* all four alike, in one bucket */
  /* a's turn, then b's: each holds 100 ms and queues again, and goes to the heap. */
  for (int i = 0; i < 2; i++) {
    sched_fake_now += 100ull * 1000 * 1000;
    ck_assert_shms_ok(shms_release(h, &l));
    ck_assert_shms_ok(shms_wait(h, &t[i], UINT64_MAX, &l));
    t[i] = sched_enqueue(h, i == 0 ? "a" : "b", 0, 0);
  }
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_uint_eq(k->ctl->heap_len, 2); /* a, and b charged its lease's estimate: 100 ms */
  ck_assert(k->ctl->cal_bits != 0);
  uint32_t first = k->ctl->cal_head[__builtin_ctzll(k->ctl->cal_bits)];
  k->tenants[first - 1].cal_next = k->ntenants + 5;
  torn_is_found_and_rebuilt(h, "calendar");
  /* A place whose key is not its record's (a charge changed, the sift not yet run) is seen too. */
  ck_assert_uint_eq(k->ctl->heap_len, 2);
  k->theap[0].vt += 1ull << 40;
  torn_is_found_and_rebuilt(h, "not its record's");
  /* A member of the heap within the calendar's reach: filed late. */
  k->tenants[k->theap[0].ref - 1].vt = k->theap[0].vt = 0;
  torn_is_found_and_rebuilt(h, "within the calendar's reach");
  ck_assert_shms_ok(shms_release(h, &l));
  /* Each release grants the next in the order of charges: every round takes one lease. */
  int done[4] = {0}, left = 4;
  for (int round = 0; left > 0; round++) {
    ck_assert_int_lt(round, 4);
    for (int i = 0; i < 4; i++) {
      if (done[i] || shms_wait(h, &t[i], 0, &l) != SHMS_OK)
        continue;
      ck_assert_shms_ok(shms_release(h, &l));
      done[i] = 1;
      left--;
    }
  }
  shms_set_clock(NULL, NULL);
  sched_close(h, name);
}
END_TEST

/*
 * A long-lived class's charges near the top of their range are all moved back (a rebase): the
 * calendar stays as it was, its base moved back with them, and the order of turns with it. The
 * charges are moved up here by hand, by whole rounds of the calendar, as years of use would.
 */
START_TEST(a_rebase_keeps_the_calendar) {
  const char *name;
  shms_t *h = open_timed(&name, 0);
  struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  shms_ticket hold = sched_enqueue(h, "holder", 0, 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &hold, UINT64_MAX, &l));
  const char *who[3] = {"a", "b", "c"};
  shms_ticket t[3];
  for (int i = 0; i < 3; i++)
    t[i] = sched_enqueue(h, who[i], 0, 0);
  uint64_t round = (uint64_t)SHMS__FAIR_BUCKETS << SHMS__FAIR_QUANTUM_SHIFT;
  uint64_t up = (SHMS__FAIR_REBASE_AT - k->ctl->vtime) / round * round;
  for (uint32_t i = 0; i < k->ntenants; i++)
    if (k->tenants[i].heap_pos != 0)
      k->tenants[i].vt += up;
  k->ctl->vtime += up;
  k->ctl->cal_base += up >> SHMS__FAIR_QUANTUM_SHIFT;
  char report[2048];
  uint32_t violations = 1;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  /* Granted in their order, each grant's charge past the top: one rebase, and the order kept. */
  for (int i = 0; i < 3; i++) {
    ck_assert_shms_ok(shms_release(h, &l));
    ck_assert_shms_ok(shms_wait(h, &t[i], 0, &l));
    ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
    ck_assert_msg(violations == 0, "%s", report);
  }
  ck_assert_uint_eq(k->ctl->rebases, 1);
  ck_assert_uint_lt(k->ctl->vtime, SHMS__FAIR_REBASE_AT);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

/* Teams: a tenant put in a team and out again, a team's weight; listed, and in the event ring. */
START_TEST(teams_are_set_listed_and_recorded) {
  const char *name;
  shms_t *h = open_timed(&name, 0);
  ck_assert_shms_ok(shms_policy_tenant_team(h, "alice", "red"));
  ck_assert_shms_ok(shms_policy_team(h, "red", 4));
  ck_assert_shms_ok(shms_policy_team(h, "alice", 2)); /* a team may share a tenant's name */
  ck_assert_shms_err(shms_policy_team(h, "red", 0), SHMS_EINVAL, "team red: weight");
  ck_assert_shms_err(shms_policy_tenant_team(h, "alice", "bad name"), SHMS_EINVAL, "team name");
  shms_policy_row rows[8];
  uint32_t n = 0;
  ck_assert_shms_ok(shms_policy_list(h, rows, 8, &n));
  ck_assert_uint_eq(n, 3);
  int teams = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (rows[i].flags & SHMS_POLICY_TEAM) {
      teams++;
      ck_assert_uint_eq(rows[i].weight, strcmp(rows[i].name, "red") == 0 ? 4 : 2);
    } else {
      ck_assert_str_eq(rows[i].name, "alice");
      ck_assert_str_eq(rows[i].team, "red");
    }
  }
  ck_assert_int_eq(teams, 2);
  ck_assert_shms_ok(shms_policy_tenant_team(h, "alice", NULL));
  ck_assert_shms_ok(shms_policy_list(h, rows, 8, &n));
  ck_assert_str_eq(row_of(rows, n, "alice")->team, "");
  shms_event_record recs[16];
  size_t got = 0;
  uint64_t cursor = 0;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, 16, &got, NULL));
  ck_assert_uint_eq(got, 4);
  ck_assert_int_eq(recs[0].event.reason, SHMS_POLICY_EVENT_TEAM);
  ck_assert_str_eq(recs[0].event.tenant, "alice");
  ck_assert_str_eq(recs[0].team, "red");
  ck_assert_int_eq(recs[1].event.reason, SHMS_POLICY_EVENT_TEAM_WEIGHT);
  ck_assert_str_eq(recs[1].event.tenant, "");
  ck_assert_str_eq(recs[1].team, "red");
  ck_assert_uint_eq(recs[1].value, 4);
  ck_assert_int_eq(recs[3].event.reason, SHMS_POLICY_EVENT_TEAM);
  ck_assert_str_eq(recs[3].team, "");
  sched_close(h, name);
}
END_TEST

/*
 * A team's heap torn (a baton holder killed mid-change): the pass that finds it rebuilds the
 * index, and every member's request is still granted; a tenant moved to another team while its
 * requests wait keeps them.
 */
START_TEST(a_torn_team_heap_is_rebuilt) {
  const char *name;
  shms_t *h = open_timed(&name, 0);
  shms_ticket hold = sched_enqueue(h, "holder", 0, 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &hold, UINT64_MAX, &l));
  const char *member[3] = {"a", "b", "c"};
  for (int i = 0; i < 3; i++)
    ck_assert_shms_ok(shms_policy_tenant_team(h, member[i], "red"));
  shms_ticket t[3];
  for (int i = 0; i < 3; i++)
    t[i] = sched_enqueue(h, member[i], 0, 0);
  char report[2048];
  uint32_t violations = 1;
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  struct shms__cls *k = &h->cls[SHMS_CLASS_STANDARD];
  ck_assert_uint_eq(__builtin_popcountll(k->ctl->cal_bits),
                    1); /* the team takes its members' turns */
  uint32_t first = k->ctl->cal_head[__builtin_ctzll(k->ctl->cal_bits)];
  ck_assert_uint_eq(k->tenants[first - 1].cal_next, first);
  ck_assert_shms_ok(shms_policy_tenant_team(h, "c", "blue"));
  struct shms__tenant *team = &k->tenants[first - 1];
  ck_assert(team->flags & SHMS__TENANT_TEAM);
  team->mroot = k->ntenants + 7; /* as if its holder died between two stores */
  ck_assert_shms_ok(shms_release(h, &l));
  for (int i = 0; i < 3; i++) {
    ck_assert_shms_ok(shms_wait(h, &t[i], UINT64_MAX, &l));
    ck_assert_shms_ok(shms_release(h, &l));
  }
  ck_assert_shms_ok(shms_check(h, report, sizeof report, &violations));
  ck_assert_msg(violations == 0, "%s", report);
  ck_assert_uint_eq(k->ctl->tenants_used, 0); /* team records go with their last members */
  sched_close(h, name);
}
END_TEST

/* The tenant rows observers read: weight, team, cell-time held, and the entitled share of the
 * tenants taking turns by weight and team (status --tenants, top, metrics). */
START_TEST(tenant_rows_show_fair_share) {
  const char *name;
  shms_t *h = open_timed(&name, 0);
  ck_assert_shms_ok(shms_policy_tenant_team(h, "a", "red"));
  ck_assert_shms_ok(shms_policy_tenant_team(h, "b", "red"));
  ck_assert_shms_ok(shms_policy_tenant(h, "b", 3));
  shms_set_clock(sched_fake_clock, NULL);
  shms_ticket hold = sched_enqueue(h, "c", 0, 0);
  shms_lease l;
  ck_assert_shms_ok(shms_wait(h, &hold, UINT64_MAX, &l));
  shms_ticket t[3] = {sched_enqueue(h, "a", 0, 0), sched_enqueue(h, "b", 0, 0),
                      sched_enqueue(h, "c", 0, 0)};
  sched_fake_now += 200 * 1000 * 1000ull;
  ck_assert_shms_ok(shms_release(h, &l)); /* c held 200 ms: counted at once */
  shms_tenant_stats rows[8];
  uint32_t n = 0;
  for (int snapshot = 0; snapshot < 2; snapshot++) {
    ck_assert_shms_ok(snapshot ? shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, rows, 8, &n)
                               : shms_tenants(h, SHMS_CLASS_STANDARD, rows, 8, &n));
    ck_assert_uint_eq(n, 3);
    for (uint32_t i = 0; i < n; i++) {
      const shms_tenant_stats *r = &rows[i];
      if (strcmp(r->name, "c") == 0) {
        ck_assert_str_eq(r->team, "");
        ck_assert_uint_ge(r->cell_ns, 200 * 1000 * 1000ull);
        ck_assert(!r->in_ring || fabs(r->entitled_share - 0.5) < 1e-9);
      } else {
        ck_assert_str_eq(r->team, "red");
        ck_assert_uint_eq(r->team_weight, 1);
        ck_assert_uint_eq(r->weight, strcmp(r->name, "b") == 0 ? 3 : 1);
      }
    }
  }
  /* One of a and b was granted the cell c let go; the other two take turns: the team, and c. */
  double sum = 0;
  for (uint32_t i = 0; i < n; i++)
    sum += rows[i].entitled_share;
  ck_assert_msg(fabs(sum - 1) < 1e-9, "entitled shares sum to %f", sum);
  shms_set_clock(NULL, NULL);
  for (int i = 0; i < 3; i++)
    (void)shms_cancel(h, &t[i]);
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("account");
  TCase *tc = harness_tcase("table");
  tcase_add_test(tc, policy_sets_and_lists_weights);
  tcase_add_test(tc, a_full_table_folds_into_other);
  tcase_add_test(tc, a_table_full_of_records_in_use_is_searched_once);
  tcase_add_test(tc, a_dead_holders_lock_is_taken_over);
  tcase_add_test(tc, a_torn_heap_is_found_and_rebuilt);
  tcase_add_test(tc, a_rebase_keeps_the_calendar);
  tcase_add_test(tc, teams_are_set_listed_and_recorded);
  tcase_add_test(tc, a_torn_team_heap_is_rebuilt);
  tcase_add_test(tc, tenant_rows_show_fair_share);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

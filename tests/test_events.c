/*
 * The event ring (shm/events.c, docs/protocol.md "The event ring"): what the scheduler records
 * and how, that a writer killed at any step of a record leaves it skipped and stops nobody, that
 * a torn record is never read as valid, and that concurrent writers and a reader agree.
 */
#include <ck_pr.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/report.h"
#include "sched_util.h"
#include "shm/events.h"
#include "shm/handle.h"

#define MAX_RECS 4096
static shms_event_record recs[MAX_RECS];

/* Everything the ring holds now, skipping records being written; returns how many. */
static size_t read_all(shms_t *h, uint64_t *lost) {
  uint64_t cursor = 0;
  size_t n;
  ck_assert_shms_ok(
      shms_events_read(h, &cursor, SHMS_EVENTS_SKIP_PENDING, recs, MAX_RECS, &n, lost));
  return n;
}

/* The last record of kind among the n read, or NULL. */
static const shms_event_record *last_of(size_t n, uint32_t kind) {
  for (size_t i = n; i-- > 0;)
    if (recs[i].event.kind == kind)
      return &recs[i];
  return NULL;
}

static shms_t *open_ring(const char **name, unsigned cells, unsigned queue, uint32_t events) {
  shms_config cfg;
  harness_config(&cfg, cells, queue);
  cfg.events = events;
  return sched_open(name, 0, 0, &cfg);
}

START_TEST(the_fast_path_records_nothing_and_a_queued_grant_is_recorded) {
  const char *name;
  shms_t *h = open_ring(&name, 1, 8, 64);
  shms_request r = sched_req("alice", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  uint64_t lost;
  ck_assert_uint_eq(read_all(h, &lost), 0); /* a fast-path acquire is not recorded */
  shms_ticket t = sched_enqueue(h, "bob", 0, 0);
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  size_t n = read_all(h, &lost);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(lost, 0);
  const shms_event_record *g = &recs[0];
  ck_assert_uint_eq(g->event.kind, SHMS_EVENT_GRANTED);
  ck_assert_str_eq(shms_event_name(g->event.kind), "granted");
  ck_assert_int_eq(g->event.cls, SHMS_CLASS_STANDARD);
  ck_assert_int_eq(g->event.cell, 0);
  ck_assert_str_eq(g->event.tenant, "bob");
  ck_assert_uint_eq(g->event.uid, geteuid()); /* whose the request was */
  ck_assert_int_eq(g->event.pid, getpid());
  ck_assert_int_eq(g->writer, getpid());
  ck_assert_uint_eq(g->event.ticket.seq, t.seq);
  ck_assert_uint_eq(g->event.ticket.slot, t.slot);
  ck_assert_uint_eq(g->event.ticket.incarnation, t.incarnation);
  ck_assert_uint_ne(g->mono_ns, 0);
  ck_assert_uint_gt(g->wall_ns, 1600000000ull * 1000000000ull);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

START_TEST(rejections_cancellations_expirations_quarantines_repairs_and_drains_are_recorded) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = open_ring(&name, 2, 2, 64);
  shms_request r = sched_req("alice", 0);
  shms_lease held, other;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  ck_assert_shms_ok(shms_acquire(h, &r, &other));
  shms_ticket a = sched_enqueue(h, "bob", 0, 0);
  shms_ticket b = sched_enqueue(h, "carol", 0, sched_fake_now + 100);
  shms_ticket c;
  shms_request full = sched_req("dave", 0);
  ck_assert_int_eq(shms_enqueue(h, &full, &c), SHMS_EQUEUEFULL);
  ck_assert_int_eq(shms_cancel(h, &a), 1);
  sched_fake_now += 500; /* b is past its deadline: the next pass ends it */
  ck_assert_shms_ok(shms_quarantine(h, &held, 42));
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, (int)held.cell), 1);
  shms_lease l;
  ck_assert_int_eq(shms_wait(h, &b, 0, &l), SHMS_EDEADLINE);
  ck_assert_shms_ok(shms_release(h, &other));
  ck_assert_shms_ok(shms_drain(h));
  uint64_t lost;
  size_t n = read_all(h, &lost);
  ck_assert_uint_eq(lost, 0);
  const shms_event_record *e = last_of(n, SHMS_EVENT_REJECTED);
  ck_assert_ptr_nonnull(e);
  ck_assert_int_eq(e->event.reason, SHMS_EQUEUEFULL);
  ck_assert_str_eq(e->event.tenant, "dave");
  ck_assert_uint_eq(e->event.uid, geteuid()); /* refused at enqueue: the caller's */
  e = last_of(n, SHMS_EVENT_CANCELLED);
  ck_assert_ptr_nonnull(e);
  ck_assert_str_eq(e->event.tenant, "bob");
  ck_assert_uint_eq(e->event.uid, geteuid());
  ck_assert_uint_eq(e->event.ticket.seq, a.seq);
  ck_assert_int_eq(e->event.reason, SHMS_ECANCELLED);
  e = last_of(n, SHMS_EVENT_EXPIRED);
  ck_assert_ptr_nonnull(e);
  ck_assert_uint_eq(e->event.ticket.seq, b.seq);
  ck_assert_str_eq(e->event.tenant, "carol");
  ck_assert_uint_eq(e->event.uid, geteuid());
  e = last_of(n, SHMS_EVENT_CELL_QUARANTINED);
  ck_assert_ptr_nonnull(e);
  ck_assert_int_eq(e->event.reason, 42);
  ck_assert_int_eq(e->event.cell, (int)held.cell);
  ck_assert_str_eq(e->event.tenant, "alice");
  ck_assert_uint_eq(e->event.uid, geteuid()); /* the lease's, on the fast path */
  ck_assert_int_eq(e->event.pid, getpid());
  e = last_of(n, SHMS_EVENT_CELL_REPAIRED);
  ck_assert_ptr_nonnull(e);
  ck_assert_uint_eq(e->value, 1); /* back in service */
  e = last_of(n, SHMS_EVENT_DRAINED);
  ck_assert_ptr_nonnull(e);
  ck_assert_int_eq(e->event.pid, getpid());
  ck_assert_uint_eq(e->event.uid, SHMS_UID_NONE); /* a drain concerns no request or lease */
  /* In the order they happened. */
  for (size_t i = 1; i < n; i++)
    ck_assert_uint_gt(recs[i].position, recs[i - 1].position);
  sched_close(h, name);
}
END_TEST

START_TEST(a_quarantine_names_the_ticket_of_a_lease_granted_from_the_queue) {
  const char *name;
  shms_t *h = open_ring(&name, 1, 4, 64);
  shms_request r = sched_req("alice", 0);
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  shms_ticket t = sched_enqueue(h, "bob", 0, 0);
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_quarantine(h, &l, SHMS_EWORKERLOST));
  uint64_t lost;
  const shms_event_record *q = last_of(read_all(h, &lost), SHMS_EVENT_CELL_QUARANTINED);
  ck_assert_ptr_nonnull(q);
  ck_assert_str_eq(q->event.tenant, "bob");
  ck_assert_uint_eq(q->event.ticket.seq, t.seq);
  ck_assert_uint_eq(q->event.ticket.slot, t.slot);
  ck_assert_int_eq(q->event.reason, SHMS_EWORKERLOST);
  sched_close(h, name);
}
END_TEST

START_TEST(a_recovery_records_what_it_settled) {
  const char *name;
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.events = 64;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  pid_t p = fork();
  if (p == 0) {
    shms_t *v;
    shms_lease l;
    shms_request r = sched_req("victim", 0);
    if (shms_attach(name, 0, &v) != SHMS_OK || shms_acquire(v, &r, &l) != SHMS_OK)
      _exit(1);
    if (write(ready[1], "x", 1) != 1)
      _exit(2);
    pause();
  }
  char x;
  ck_assert_int_eq(read(ready[0], &x, 1), 1);
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
  ck_assert_shms_ok(shms_recover_dead(h, 0, NULL, NULL, NULL));
  uint64_t lost;
  size_t n = read_all(h, &lost);
  const shms_event_record *d = last_of(n, SHMS_EVENT_PROCESS_DIED);
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(d->event.pid, p);
  ck_assert_int_eq(d->writer, getpid());
  ck_assert_uint_eq(d->event.uid, SHMS_UID_NONE);
  const shms_event_record *q = last_of(n, SHMS_EVENT_LEASE_QUARANTINED);
  ck_assert_ptr_nonnull(q);
  ck_assert_int_eq(q->event.pid, p);
  ck_assert_str_eq(q->event.tenant, "victim");
  ck_assert_uint_eq(q->event.uid, geteuid()); /* noted before the recovery settled it */
  ck_assert_int_eq(q->event.reason, SHMS_EOWNERLOST);
  sched_close(h, name);
}
END_TEST

/* A holder that detaches holding its lease (a program that exits without releasing it) leaves
 * it quarantined, and the record says whose it was and why; no recovery runs to tell it. */
START_TEST(a_lease_quarantined_at_its_holders_detach_is_recorded) {
  const char *name;
  shms_t *h = open_ring(&name, 2, 4, 64);
  pid_t p = fork();
  if (p == 0) {
    shms_t *v;
    shms_lease l;
    shms_request r = sched_req("leaver", 0);
    if (shms_attach(name, 0, &v) != SHMS_OK || shms_acquire(v, &r, &l) != SHMS_OK ||
        shms_detach(v) != SHMS_OK)
      _exit(1);
    _exit(0);
  }
  int st;
  ck_assert_int_eq(waitpid(p, &st, 0), p);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  uint64_t lost;
  size_t n = read_all(h, &lost);
  const shms_event_record *q = last_of(n, SHMS_EVENT_LEASE_QUARANTINED);
  ck_assert_ptr_nonnull(q);
  ck_assert_int_eq(q->event.pid, p);
  ck_assert_int_eq(q->writer, p);
  ck_assert_int_eq(q->event.cls, SHMS_CLASS_STANDARD);
  ck_assert_int_eq(q->event.cell, 0);
  ck_assert_str_eq(q->event.tenant, "leaver");
  ck_assert_uint_eq(q->event.uid, geteuid());
  ck_assert_int_eq(q->event.reason, SHMS_EOWNERLOST);
  ck_assert_ptr_null(last_of(n, SHMS_EVENT_PROCESS_DIED)); /* it detached: nobody died */
  sched_close(h, name);
}
END_TEST

/* A holder's own records of its command: started and ended, named by the lease while it is
 * current, with the ticket given; nothing for a lease no longer current or another kind. */
START_TEST(a_holder_records_its_commands_start_and_end) {
  const char *name;
  shms_t *h = open_ring(&name, 1, 4, 64);
  shms_request r = sched_req("runner", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_lease_event(h, &l, NULL, SHMS_EVENT_LEASE_STARTED, 0));
  ck_assert_shms_ok(shms_lease_event(h, &l, NULL, SHMS_EVENT_LEASE_ENDED, SHMS_LEASE_EXITED(3)));
  ck_assert_int_eq(shms_lease_event(h, &l, NULL, SHMS_EVENT_GRANTED, 0), SHMS_EINVAL);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(shms_lease_event(h, &l, NULL, SHMS_EVENT_LEASE_ENDED, 0), SHMS_ELEASE);
  uint64_t lost;
  size_t n = read_all(h, &lost);
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_eq(recs[0].event.kind, SHMS_EVENT_LEASE_STARTED);
  ck_assert_str_eq(shms_event_name(recs[0].event.kind), "lease-started");
  ck_assert_str_eq(recs[0].event.tenant, "runner");
  ck_assert_int_eq(recs[0].event.pid, getpid());
  ck_assert_uint_eq(recs[0].event.uid, geteuid());
  ck_assert_uint_eq(recs[0].event.ticket.seq, 0); /* taken at once: no request */
  ck_assert_uint_eq(recs[1].event.kind, SHMS_EVENT_LEASE_ENDED);
  ck_assert_uint_eq(SHMS_LEASE_HOW(recs[1].value), 1);
  ck_assert_uint_eq(SHMS_LEASE_CODE(recs[1].value), 3);
  ck_assert_uint_eq(shms_event_kind("lease-ended"), SHMS_EVENT_LEASE_ENDED);
  ck_assert_uint_eq(shms_event_kind("resumed"), SHMS_EVENT_RESUMED);
  sched_close(h, name);
}
END_TEST

/* A record's fields as a writer in these tests makes them: each a function of (pid, i). */
static struct shms__ev made(int32_t pid, uint32_t i) {
  struct shms__ev e = {.kind = SHMS_EVENT_REJECTED,
                       .cls = SHMS_CLASS_STANDARD,
                       .cell = (int32_t)(i % 7),
                       .pid = pid,
                       .reason = -(int32_t)(i % 20) - 1,
                       .slot_ref = i % 5 + 1,
                       .ticket_seq = (uint64_t)i + 1,
                       .value = (uint64_t)pid * 1000003u + i};
  snprintf((char *)e.tenant, sizeof e.tenant - 1, "t%d-%u", pid, i);
  return e;
}

/* Whether record r is exactly what made() gives for its pid and sequence. */
static int consistent(const shms_event_record *r) {
  uint32_t i = (uint32_t)(r->event.ticket.seq - 1);
  struct shms__ev e = made(r->event.pid, i);
  char tenant[SHMS_TENANT_MAX + 1];
  memcpy(tenant, e.tenant, sizeof tenant);
  return r->event.kind == e.kind && r->event.cell == e.cell && r->event.reason == e.reason &&
         r->event.ticket.slot + 1 == e.slot_ref && r->value == e.value &&
         strcmp(r->event.tenant, tenant) == 0 && r->writer == r->event.pid;
}

START_TEST(the_ring_keeps_the_newest_and_counts_what_it_lost) {
  const char *name;
  shms_t *h = open_ring(&name, 1, 4, 16);
  for (uint32_t i = 0; i < 40; i++) {
    struct shms__ev e = made(getpid(), i);
    shms__note(h, &e);
  }
  uint64_t lost;
  size_t n = read_all(h, &lost);
  ck_assert_uint_eq(n, 16);
  ck_assert_uint_eq(lost, 24);
  for (size_t i = 0; i < n; i++) {
    ck_assert_uint_eq(recs[i].position, 24 + i);
    ck_assert(consistent(&recs[i]));
  }
  /* A cursor past what was read continues there; cap 0 moves it to the end. */
  uint64_t cursor = 38;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, MAX_RECS, &n, &lost));
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_eq(cursor, 40);
  cursor = 0;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, NULL, 0, &n, NULL));
  ck_assert_uint_eq(cursor, 40);
  ck_assert_int_eq(shms_events_read(h, &cursor, 2, recs, 1, &n, NULL), SHMS_EINVAL);
  sched_close(h, name);
}
END_TEST

START_TEST(a_record_torn_or_of_another_lap_is_never_read_as_valid) {
  const char *name;
  shms_t *h = open_ring(&name, 1, 4, 16);
  for (uint32_t i = 0; i < 3; i++) {
    struct shms__ev e = made(getpid(), i);
    shms__note(h, &e);
  }
  struct shms__ev_rec *r = &h->events.recs[1];
  /* A writer a lap behind, stopped mid-record, writes a field over a finished record. */
  ck_pr_store_64(&r->value, r->value ^ 1);
  uint64_t lost, cursor = 0;
  size_t n = read_all(h, &lost);
  ck_assert_uint_eq(n, 2);
  ck_assert_uint_eq(lost, 1);
  ck_assert_uint_eq(recs[0].position, 0);
  ck_assert_uint_eq(recs[1].position, 2);
  /* Being written (odd): a read stops before it, unless told to skip it. */
  ck_pr_store_64(&r->seq, 2 * 1 + 1);
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, MAX_RECS, &n, &lost));
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(cursor, 1);
  ck_assert_shms_ok(shms_events_read(h, &cursor, SHMS_EVENTS_SKIP_PENDING, recs, 4, &n, &lost));
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(recs[0].position, 2);
  /* Never written: all zero. */
  ck_pr_store_64(&r->seq, 0);
  ck_assert_uint_eq(read_all(h, &lost), 2);
  /* Whole, but another lap's: two writers a lap apart both wrote every field, the older last,
   * and the younger marked it valid (tests/model/events.pml found it). Position 0's record in
   * slot 0 under position 16's valid word is lost, not read as position 16. */
  ck_pr_store_64(&h->events.head->pos, 17);
  ck_pr_store_64(&h->events.recs[0].seq, 2 * 16 + 2);
  cursor = 16;
  ck_assert_shms_ok(shms_events_read(h, &cursor, SHMS_EVENTS_SKIP_PENDING, recs, 4, &n, &lost));
  ck_assert_uint_eq(n, 0);
  ck_assert_uint_eq(lost, 1);
  sched_close(h, name);
}
END_TEST

/*
 * SIGKILL a writer at each crash point of one record's write (shms__ev_put): the record is
 * skipped (a read that does not skip stops before it, never shows it half-written), the ring goes
 * on for every other writer, and the next lap's writer takes its slot over.
 */
START_TEST(a_writer_killed_at_each_step_of_a_record_stops_nobody) {
  int steps = 0;
  for (uint32_t k = 1;; k++) {
    const char *name;
    shms_t *h = open_ring(&name, 1, 4, 16);
    struct shms__ev first = made(getpid(), 0);
    shms__note(h, &first);
    pid_t p = fork();
    if (p == 0) {
      shms_t *v;
      if (shms_attach(name, 0, &v) != SHMS_OK)
        _exit(1);
      struct shms__ev e = made(getpid(), 1);
      shms__test_crash_at(k);
      shms__note(v, &e);
      _exit(0); /* the record completed before step k */
    }
    int status;
    ck_assert_int_eq(waitpid(p, &status, 0), p);
    int died = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    ck_assert(died || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
    shms_recover_dead(h, 0, NULL, NULL, NULL);
    for (uint32_t i = 2; i < 6; i++) { /* the survivor goes on writing */
      struct shms__ev e = made(getpid(), i);
      shms__note(h, &e);
    }
    uint64_t lost, cursor = 0;
    size_t n = read_all(h, &lost);
    for (size_t i = 0; i < n; i++)
      ck_assert_msg(recs[i].event.kind != SHMS_EVENT_REJECTED || consistent(&recs[i]),
                    "step %u: record %zu is torn", k, i);
    /* Every survivor record is there; the victim's only if it finished. The recovery of the
     * dead victim recorded process-died as well (not of made()'s kind). */
    size_t mine = 0, victims = 0;
    for (size_t i = 0; i < n; i++) {
      if (recs[i].event.kind != SHMS_EVENT_REJECTED)
        continue;
      mine += recs[i].event.pid == getpid();
      victims += recs[i].event.pid == p;
    }
    ck_assert_uint_eq(mine, 5);
    ck_assert_uint_eq(victims, died ? 0 : 1);
    /* Without skipping, a read stops only at a record its writer is still (or died) writing. */
    size_t m;
    ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, MAX_RECS, &m, &lost));
    if (m < n)
      ck_assert_uint_eq(cursor, 1); /* the victim's position */
    /* A lap later its slot is written again and read like any other. */
    for (uint32_t i = 6; i < 6 + 16; i++) {
      struct shms__ev e = made(getpid(), i);
      shms__note(h, &e);
    }
    n = read_all(h, &lost);
    ck_assert_uint_eq(n, 16);
    for (size_t i = 0; i < n; i++)
      ck_assert(consistent(&recs[i]) && recs[i].event.pid == getpid());
    shms__test_crash_at(0);
    sched_close(h, name);
    if (!died)
      break;
    steps++;
  }
  ck_assert_int_ge(steps, 4); /* a death at every step of the write was seen */
}
END_TEST

/* Read from *cursor on, checking every record read is whole; returns how many were read. */
static size_t read_whole(shms_t *h, uint64_t *cursor) {
  size_t n;
  uint64_t lost;
  ck_assert_shms_ok(shms_events_read(h, cursor, SHMS_EVENTS_SKIP_PENDING, recs, 64, &n, &lost));
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(consistent(&recs[i]), "record at %llu is torn",
                  (unsigned long long)recs[i].position);
  return n;
}

/* Writers in several processes on a small ring while a reader reads: everything read is whole. */
START_TEST(concurrent_writers_and_a_reader_agree) {
  const char *name;
  shms_t *h = open_ring(&name, 1, 4, 16);
  enum { WRITERS = 3, EACH = 20000 };
  int go[2];
  ck_assert_int_eq(pipe(go), 0);
  pid_t kids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    kids[w] = fork();
    if (kids[w] == 0) {
      shms_t *v;
      char x;
      if (shms_attach(name, 0, &v) != SHMS_OK || read(go[0], &x, 1) != 1)
        _exit(1);
      for (uint32_t i = 0; i < EACH; i++) {
        struct shms__ev e = made(getpid(), i);
        shms__note(v, &e);
      }
      shms_detach(v);
      _exit(0);
    }
  }
  ck_assert_int_eq(write(go[1], "xxx", WRITERS), WRITERS);
  uint64_t cursor = 0, seen = 0;
  int running = WRITERS;
  while (running > 0) {
    seen += read_whole(h, &cursor);
    for (int w = 0; w < WRITERS; w++)
      if (kids[w] > 0 && waitpid(kids[w], NULL, WNOHANG) == kids[w]) {
        kids[w] = 0;
        running--;
      }
  }
  /* A reader kept off the CPU until every writer was done (a loaded machine) has read nothing
   * yet: the ring still holds the newest records, and they too must read whole. */
  seen += read_whole(h, &cursor);
  ck_assert_uint_eq(h->events.head->pos, (uint64_t)WRITERS * EACH);
  ck_assert_uint_gt(seen, 0);
  sched_close(h, name);
}
END_TEST

START_TEST(an_observer_reads_the_ring_and_a_segment_without_one_has_none) {
  const char *name;
  shms_t *h = open_ring(&name, 1, 4, 16);
  struct shms__ev e = made(getpid(), 0);
  shms__note(h, &e);
  shms_t *o;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  uint64_t cursor = 0;
  size_t n;
  ck_assert_shms_ok(shms_events_read(o, &cursor, 0, recs, 4, &n, NULL));
  ck_assert_uint_eq(n, 1);
  ck_assert(consistent(&recs[0]));
  ck_assert_shms_ok(shms_detach(o));
  sched_close(h, name);

  h = open_ring(&name, 1, 4, 0);
  shms__note(h, &e); /* no ring: nothing to write, nothing written */
  cursor = 0;
  ck_assert_shms_ok(shms_events_read(h, &cursor, 0, recs, 4, &n, NULL));
  ck_assert_uint_eq(n, 0);
  ck_assert_uint_eq(cursor, 0);
  sched_close(h, name);
}
END_TEST

START_TEST(the_ring_size_is_validated) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.events = 0;
  ck_assert_shms_ok(shms_config_validate(&cfg));
  const uint32_t bad[] = {1, 8, 15, 17, 1000, 2097152};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cfg.events = bad[i];
    ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "events: must be 0");
  }
  cfg.events = 16;
  ck_assert_shms_ok(shms_config_validate(&cfg));
  cfg.events = SHMS_EVENTS_MAX;
  ck_assert_shms_ok(shms_config_validate(&cfg));
  cfg.tenant_table = 15;
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "tenant-table: must be 16..");
}
END_TEST

int main(void) {
  Suite *s = suite_create("events");
  TCase *tc = harness_tcase("ring");
  tcase_add_test(tc, the_fast_path_records_nothing_and_a_queued_grant_is_recorded);
  tcase_add_test(tc,
                 rejections_cancellations_expirations_quarantines_repairs_and_drains_are_recorded);
  tcase_add_test(tc, a_quarantine_names_the_ticket_of_a_lease_granted_from_the_queue);
  tcase_add_test(tc, a_recovery_records_what_it_settled);
  tcase_add_test(tc, a_lease_quarantined_at_its_holders_detach_is_recorded);
  tcase_add_test(tc, a_holder_records_its_commands_start_and_end);
  tcase_add_test(tc, the_ring_keeps_the_newest_and_counts_what_it_lost);
  tcase_add_test(tc, a_record_torn_or_of_another_lap_is_never_read_as_valid);
  tcase_add_test(tc, a_writer_killed_at_each_step_of_a_record_stops_nobody);
  tcase_add_test(tc, concurrent_writers_and_a_reader_agree);
  tcase_add_test(tc, an_observer_reads_the_ring_and_a_segment_without_one_has_none);
  tcase_add_test(tc, the_ring_size_is_validated);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * What observers read, through the library: the queue-wait histogram (its buckets' bounds, and
 * quantiles read from it as Prometheus does, on a fake clock), rejections by reason, quarantines
 * with their reason and time, the ticket of a lease taken from the queue, recoveries counted, the
 * supervisor named in the segment's info, and the tenant snapshot from an observer handle.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "sched_util.h"

static const uint64_t le[SHMS_WAIT_BUCKETS] = SHMS_WAIT_BUCKET_LE_NS;

static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Hold the only cell, queue one request, let fake time pass by waited, release: the request is
 * granted from the queue having waited exactly that long. */
static void wait_for(shms_t *h, shms_lease *held, uint64_t waited) {
  shms_ticket t = sched_enqueue(h, "a", 0, 0);
  sched_fake_now += waited;
  ck_assert_shms_ok(shms_release(h, held));
  ck_assert_int_eq(sched_granted(h, &t, 1, held), 0);
}

START_TEST(wait_histogram_buckets) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_request r = sched_req("a", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l)); /* the fast path: no wait counted */
  /* A bound is inclusive: 10 us goes in the first bucket, 10 us + 1 ns in the second. */
  const uint64_t waits[] = {le[0], le[0] + 1, 50000, 2000000000ull, 500000000000ull};
  const int want[] = {0, 1, 7, 53, SHMS_WAIT_BUCKETS - 1}; /* 50 us, 2 s: bounds of their own */
  uint64_t total = 0;
  for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
    wait_for(h, &l, waits[i]);
    total += waits[i];
  }
  shms_class_stats st = sched_stats(h);
  uint64_t counted[SHMS_WAIT_BUCKETS] = {0}, sum = 0;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    counted[want[i]]++;
  for (int b = 0; b < SHMS_WAIT_BUCKETS; b++) {
    ck_assert_msg(st.wait_buckets[b] == counted[b], "bucket %d: %llu, expected %llu", b,
                  (unsigned long long)st.wait_buckets[b], (unsigned long long)counted[b]);
    sum += st.wait_buckets[b];
  }
  ck_assert_uint_eq(sum, 5);
  ck_assert_uint_eq(st.total_wait_ns, total);
  ck_assert_uint_eq(st.max_wait_ns, 500000000000ull);
  ck_assert_uint_eq(st.granted, 6);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

/* What Prometheus's histogram_quantile(q) says of the buckets: the bucket the rank falls in,
 * and a linear interpolation between its bounds (the lowest from 0; in the last, the highest
 * finite bound). */
static double histogram_quantile(double q, const uint64_t *buckets) {
  uint64_t total = 0, cum = 0;
  for (int b = 0; b < SHMS_WAIT_BUCKETS; b++)
    total += buckets[b];
  double rank = q * (double)total;
  for (int b = 0; b < SHMS_WAIT_BUCKETS; b++) {
    if ((double)(cum + buckets[b]) >= rank && buckets[b] != 0) {
      if (b == SHMS_WAIT_BUCKETS - 1)
        return (double)le[b - 1];
      double lower = b == 0 ? 0 : (double)le[b - 1];
      return lower + ((double)le[b] - lower) * (rank - (double)cum) / (double)buckets[b];
    }
    cum += buckets[b];
  }
  return (double)le[SHMS_WAIT_BUCKETS - 2];
}

static int by_value(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* A deterministic stream of doubles in [0, 1). */
static double uniform01(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / 9007199254740992.0;
}

/* Waits of known distributions, each recorded by the dispatcher: p50, p90 and p99 from the
 * buckets as histogram_quantile reads them are within 25% of the same waits' true quantiles
 * (nearest rank), over the range the docs claim (10 us .. 100 s). */
START_TEST(wait_quantiles_match) {
  enum { N = 1000, DISTS = 5 };
  static const char *const dist[DISTS] = {"all 320 ms", "uniform 1 ms..1 s",
                                          "log-uniform 10 us..100 s", "exponential, mean 50 ms",
                                          "90% near 2 ms, 10% near 1.5 s"};
  for (int d = 0; d < DISTS; d++) {
    shms_set_clock(sched_fake_clock, NULL);
    const char *name;
    shms_t *h = sched_open(&name, 1, 8, NULL);
    shms_request r = sched_req("a", 0);
    shms_lease l;
    ck_assert_shms_ok(shms_acquire(h, &r, &l));
    static uint64_t waits[N];
    uint64_t seed = 42 + (uint64_t)d;
    for (int i = 0; i < N; i++) {
      double u = uniform01(&seed), w;
      switch (d) {
      case 0:
        w = 320e6;
        break;
      case 1:
        w = 1e6 + u * (1e9 - 1e6);
        break;
      case 2:
        w = 1e4 * pow(1e7, u);
        break;
      case 3:
        w = -50e6 * log(1 - u);
        break;
      default:
        w = u < 0.9 ? 2e6 * (0.9 + 0.2 * u) : 1.5e9 * (0.9 + 0.2 * uniform01(&seed));
        break;
      }
      waits[i] = w < 1e4 ? 10000 : (uint64_t)w;
      wait_for(h, &l, waits[i]);
    }
    shms_class_stats st = sched_stats(h);
    qsort(waits, N, sizeof waits[0], by_value);
    static const double qs[] = {0.5, 0.9, 0.99};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
      double truth = (double)waits[(size_t)ceil(qs[i] * N) - 1];
      double est = histogram_quantile(qs[i], st.wait_buckets);
      ck_assert_msg(fabs(est / truth - 1) <= 0.25, "%s: p%g is %.0f ns, the buckets say %.0f",
                    dist[d], qs[i] * 100, truth, est);
    }
    ck_assert_shms_ok(shms_release(h, &l));
    sched_close(h, name);
    shms_set_clock(NULL, NULL);
  }
}
END_TEST

START_TEST(rejections_by_reason) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 2, NULL);
  shms_request r = sched_req("a", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  shms_ticket t1, t2;
  r.activation = "job-1";
  ck_assert_shms_ok(shms_enqueue(h, &r, &t1));
  ck_assert_int_eq(shms_enqueue(h, &r, &t2), SHMS_EDUPACT);
  r.activation = NULL;
  ck_assert_shms_ok(shms_enqueue(h, &r, &t2));
  ck_assert_int_eq(shms_enqueue(h, &r, &t2), SHMS_EQUEUEFULL);
  ck_assert_int_eq(shms_cancel(h, &t2), 1);
  ck_assert_shms_ok(shms_drain(h)); /* t1 ends shutdown */
  shms_class_stats st = sched_stats(h);
  static const int codes[SHMS_REJECT_REASONS] = SHMS_REJECT_REASON_CODES;
  uint64_t sum = 0;
  for (int i = 0; i < SHMS_REJECT_REASONS; i++) {
    uint64_t want =
        codes[i] == SHMS_EDUPACT || codes[i] == SHMS_EQUEUEFULL || codes[i] == SHMS_ESHUTDOWN;
    ck_assert_msg(st.rejected_by[i] == want, "%s: %llu", shms_err_name(codes[i]),
                  (unsigned long long)st.rejected_by[i]);
    sum += st.rejected_by[i];
  }
  ck_assert_uint_eq(st.rejected, sum);
  ck_assert_uint_eq(st.cancelled, 1);
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
}
END_TEST

/* A quarantine says why and when; a lease from the queue carries its ticket, one taken on the
 * fast path none. */
START_TEST(cells_say_quarantine_and_ticket) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_request r = sched_req("a", 0);
  shms_lease l;
  shms_cell_info ci;
  uint32_t n;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, &ci, 1, &n));
  ck_assert_uint_eq(ci.state, SHMS_CELL_LEASED);
  ck_assert_uint_eq(ci.ticket.seq, 0);
  shms_ticket t = sched_enqueue(h, "b", 0, 0);
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, &t, 1, &l), 0);
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, &ci, 1, &n));
  ck_assert_str_eq(ci.tenant, "b");
  ck_assert_msg(memcmp(&ci.ticket, &t, sizeof t) == 0, "the cell's ticket is not the request's");
  uint64_t before = wall_ns();
  ck_assert_shms_ok(shms_quarantine(h, &l, 77));
  uint64_t after = wall_ns();
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, &ci, 1, &n));
  ck_assert_uint_eq(ci.state, SHMS_CELL_QUARANTINED);
  ck_assert_int_eq(ci.reason, 77);
  ck_assert_uint_eq(ci.ticket.seq, 0);
  ck_assert_msg(ci.quarantined_unix_ns >= before && ci.quarantined_unix_ns <= after,
                "quarantined at %llu, not within [%llu, %llu]",
                (unsigned long long)ci.quarantined_unix_ns, (unsigned long long)before,
                (unsigned long long)after);
  ck_assert_uint_eq(sched_stats(h).quarantines, 1);
  ck_assert_int_eq(shms_repair(h, SHMS_CLASS_STANDARD, -1), 1);
  ck_assert_uint_eq(sched_stats(h).quarantines, 1); /* a count of events, not of cells now */
  sched_close(h, name);
}
END_TEST

/* A holder dies with its lease: the recovery is counted in the class, and its quarantine. */
START_TEST(recoveries_counted) {
  const char *name;
  shms_t *h = sched_open(&name, 2, 4, NULL);
  int go[2];
  ck_assert(pipe(go) == 0);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    shms_t *c;
    shms_lease cl;
    shms_request r = sched_req("dies", 0);
    if (shms_attach(name, 0, &c) != SHMS_OK || shms_acquire(c, &r, &cl) != SHMS_OK)
      _exit(1);
    _exit(write(go[1], "x", 1) == 1 ? 0 : 2); /* dies holding the lease, not detached */
  }
  char x;
  ck_assert_int_eq(read(go[0], &x, 1), 1);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_int_eq(sched_stats(h).recovered, 0);
  shms_recovery rec;
  ck_assert_shms_ok(shms_recover_dead(h, 0, NULL, NULL, &rec));
  ck_assert_uint_eq(rec.leases_quarantined, 1);
  shms_class_stats st = sched_stats(h);
  ck_assert_uint_ge(st.recovered, 1);
  ck_assert_uint_eq(st.quarantines, 1);
  ck_assert_uint_eq(st.quarantined, 1);
  sched_close(h, name);
}
END_TEST

/* The segment's info names the supervisor, for an observer too; 0 once it is gone. */
START_TEST(supervisor_pid_in_info) {
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_t *o;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(o, &info));
  ck_assert_int_eq(info.supervisor_pid, 0);
  ck_assert_shms_ok(shms_supervisor_claim(h));
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_int_eq(info.supervisor_pid, getpid()); /* our own lock, which F_GETLK cannot see */
  int ready[2], done[2];
  ck_assert(pipe(ready) == 0 && pipe(done) == 0);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) { /* another process looks, as observers do */
    shms_t *c;
    shms_segment_info ci;
    int ok = shms_attach(name, SHMS_ATTACH_OBSERVER, &c) == SHMS_OK &&
             shms_segment_info_get(c, &ci) == SHMS_OK && ci.supervisor_pid == getppid();
    _exit(ok ? 0 : 1);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw no supervisor");
  ck_assert_shms_ok(shms_detach(o));
  sched_close(h, name);
}
END_TEST

/* The tenant snapshot from an observer while requests are queued: the holder's tenant, whose
 * lease was taken on the fast path, is a row too. */
START_TEST(tenant_snapshot_rows) {
  shms_set_clock(sched_fake_clock, NULL);
  const char *name;
  shms_t *h = sched_open(&name, 1, 8, NULL);
  shms_request r = sched_req("h", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  shms_ticket t[3] = {sched_enqueue(h, "a", 0, 0), sched_enqueue(h, "a", 0, 0),
                      sched_enqueue(h, "b", 0, 0)};
  sched_fake_now += 7000;
  ck_assert_shms_ok(shms_release(h, &l));
  ck_assert_int_eq(sched_granted(h, t, 3, &l), 0); /* a's first: a waited 7 us */
  shms_t *o;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &o));
  shms_tenant_stats rows[8], locked[8];
  uint32_t n, m;
  ck_assert_shms_ok(shms_tenants_snapshot(o, SHMS_CLASS_STANDARD, rows, 8, &n));
  ck_assert_shms_ok(shms_tenants(h, SHMS_CLASS_STANDARD, locked, 8, &m));
  ck_assert_uint_eq(n, 3);
  ck_assert_uint_eq(m, 3);
  /* Nothing moves meanwhile: the snapshot reads what the baton holder's walk reads. */
  for (uint32_t i = 0; i < n; i++) {
    ck_assert_str_eq(rows[i].name, locked[i].name);
    ck_assert_uint_eq(rows[i].queued, locked[i].queued);
    ck_assert_uint_eq(rows[i].active, locked[i].active);
    ck_assert_uint_eq(rows[i].in_ring, locked[i].in_ring);
    ck_assert_uint_eq(rows[i].granted, locked[i].granted);
    ck_assert_uint_eq(rows[i].total_wait_ns, locked[i].total_wait_ns);
    ck_assert_uint_eq(rows[i].max_wait_ns, locked[i].max_wait_ns);
  }
  for (uint32_t i = 0; i < n; i++) {
    int a = strcmp(rows[i].name, "a") == 0;
    if (strcmp(rows[i].name, "h") == 0) {
      ck_assert_uint_eq(rows[i].queued, 0);
      ck_assert_uint_eq(rows[i].granted, 1);
      ck_assert_uint_eq(rows[i].total_wait_ns, 0);
      ck_assert_uint_eq(rows[i].in_ring, 0);
      continue;
    }
    ck_assert_uint_eq(rows[i].queued, 1);
    ck_assert_uint_eq(rows[i].granted, a ? 1 : 0);
    ck_assert_uint_eq(rows[i].total_wait_ns, a ? 7000 : 0);
    ck_assert_uint_eq(rows[i].in_ring, 1);
  }
  ck_assert_shms_ok(shms_detach(o));
  for (int i = 0; i < 2; i++) {
    ck_assert_shms_ok(shms_release(h, &l));
    ck_assert_int_ge(sched_granted(h, t, 3, &l), 1);
  }
  ck_assert_shms_ok(shms_release(h, &l));
  sched_close(h, name);
  shms_set_clock(NULL, NULL);
}
END_TEST

static Suite *view_suite(void) {
  Suite *s = suite_create("view");
  TCase *tc = harness_tcase("view");
  tcase_add_test(tc, wait_histogram_buckets);
  tcase_add_test(tc, wait_quantiles_match);
  tcase_add_test(tc, rejections_by_reason);
  tcase_add_test(tc, cells_say_quarantine_and_ticket);
  tcase_add_test(tc, recoveries_counted);
  tcase_add_test(tc, supervisor_pid_in_info);
  tcase_add_test(tc, tenant_snapshot_rows);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(view_suite()); }

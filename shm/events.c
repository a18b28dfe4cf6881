/* The event ring (events.h): writing and reading sequence-checked records. */
#include "events.h"

#include <ck_pr.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "crashpoint.h"
#include "pidns.h"

void shms__evlog_init(struct shms__evlog *log, char *base, const struct shms__layout *l) {
  log->count = l->events_count;
  log->pid = (int32_t)getpid();
  struct shms__pidns ns;
  shms__pidns_self(&ns);
  log->pidns = (uint32_t)ns.ino;
  log->head = l->events_count ? SHMS__AT(base, l->events_off, struct shms__ev_head) : NULL;
  log->recs = l->events_count ? (struct shms__ev_rec *)(log->head + 1) : NULL;
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC, sampled at most once a second per process: a record's wall
 * time is its monotonic time plus this, one clock read instead of two.
 * A step of the wall clock shows in the records within a second. Racy between threads by
 * design: each word is read and written whole, and either thread's sample is good. */
static uint64_t wall_offset, wall_sampled;

static uint64_t wall_of(uint64_t mono) {
  uint64_t at = shms__load_64(&wall_sampled);
  if (at == 0 || mono - at > 1000000000ull) {
    shms__store_64(&wall_offset, clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC));
    shms__store_64(&wall_sampled, mono);
  }
  return mono + shms__load_64(&wall_offset);
}

/* A record's words as an array (the record is sixteen 64-bit words, no padding). */
static uint64_t *words(struct shms__ev_rec *r) { return (uint64_t *)r; }

/*
 * Each word times its own odd constant, summed: the products are independent, so the CPU
 * computes them side by side (a few nanoseconds, where a chained hash took thirty). A record
 * mixed from two writers' words checks only if the differences of the mixed words, weighted,
 * sum to 0 mod 2^64; one changed word never does (an odd constant is invertible).
 */
uint64_t shms__ev_check(const struct shms__ev_rec *r) {
  const uint64_t *w = (const uint64_t *)r;
  uint64_t x = 0;
  for (size_t i = 1; i + 1 < SHMS__EV_WORDS; i++)
    x += w[i] * (0x9e3779b97f4a7c15ull + 2 * (uint64_t)i * 0x632be59bd9b4e019ull);
  x ^= x >> 29;
  return x | 1; /* never 0: a zero-filled (never written) record never checks */
}

/*
 * Claim the record at p for writing: its word goes from an older position's value to 2p+1.
 * 0 if a later lap holds it already (we were overtaken before we began: the record is lost,
 * and must not overwrite the newer one). Lock-free: a failed CAS means another writer moved.
 */
static int claim(struct shms__ev_rec *r, uint64_t p) {
  uint64_t s = shms__load_64(&r->seq);
  for (;;) {
    if (s >= 2 * p + 1)
      return 0;
    if (ck_pr_cas_64_value(&r->seq, s, 2 * p + 1, &s))
      return 1;
  }
}

void shms__ev_put(const struct shms__evlog *log, const struct shms__ev *e) {
  if (log->count == 0)
    return;
  uint64_t p = ck_pr_faa_64(&log->head->pos, 1);
  SHMS__STEP_PLAIN();
  struct shms__ev_rec *r = &log->recs[p & (log->count - 1)];
  if (!claim(r, p))
    return;
  /* The odd word is visible before any field changes: a reader that copies a field of this
   * write then sees the word changed when it looks again (ck_sequence_write_begin's fence). */
  ck_pr_fence_store();
  SHMS__STEP_PLAIN();
  uint64_t mono = clock_ns(CLOCK_MONOTONIC_COARSE);
  struct shms__ev_rec v = {
      .mono_ns = mono,
      .wall_ns = wall_of(mono),
      .ticket_seq = e->ticket_seq,
      .what = (uint64_t)(e->kind & 0xffu) | (uint64_t)((uint32_t)(e->cls + 1) & 0xffu) << 8 |
              (uint64_t)(uint32_t)e->reason << 32,
      .where = (uint64_t)(uint32_t)(e->cell + 1) | (uint64_t)(uint32_t)e->pid << 32,
      .slot = (uint64_t)e->slot_ref |
              (uint64_t)(e->pidns != 0 || e->pid != log->pid ? e->pidns : log->pidns) << 32,
      .value = e->value,
      .writer = (uint32_t)log->pid,
      .position = p,
      .uid = e->uid_ref,
  };
  for (size_t i = 0; i < SHMS__NAME_WORDS; i++)
    v.tenant[i] = e->tenant[i];
  v.check = shms__ev_check(&v);
  uint64_t *dst = words(r), *src = words(&v);
  for (size_t i = 1; i < SHMS__EV_WORDS; i++) {
    shms__store_64(&dst[i], src[i]);
    if (i == SHMS__EV_WORDS / 2)
      SHMS__STEP_PLAIN(); /* half a record written */
  }
  /* Every field is visible before the word says valid (ck_sequence_write_end's fence). */
  ck_pr_fence_store();
  SHMS__STEP_PLAIN();
  /* Valid only if the record is still ours: a writer a lap ahead may have claimed it. */
  ck_pr_cas_64(&r->seq, 2 * p + 1, 2 * p + 2);
}

uint64_t shms__ev_end(const struct shms__evlog *log) {
  return log->count ? shms__load_64(&log->head->pos) : 0;
}

enum shms__ev_got shms__ev_get(const struct shms__evlog *log, uint64_t pos,
                               struct shms__ev_rec *out) {
  if (log->count == 0)
    return SHMS__EV_LOST;
  struct shms__ev_rec *r = &log->recs[pos & (log->count - 1)];
  uint64_t s = shms__load_64(&r->seq);
  if (s == 2 * pos + 1)
    return SHMS__EV_PENDING;
  if (s != 2 * pos + 2)
    return SHMS__EV_LOST;
  /* The word before the fields (ck_sequence_read_begin's fence), the fields before the word
   * again (read_retry's): if it is unchanged, nobody wrote in between. */
  ck_pr_fence_load();
  uint64_t *dst = words(out), *src = words(r);
  for (size_t i = 1; i < SHMS__EV_WORDS; i++)
    dst[i] = shms__load_64(&src[i]);
  ck_pr_fence_load();
  if (shms__load_64(&r->seq) != s)
    return SHMS__EV_LOST;
  out->seq = s;
  return out->check == shms__ev_check(out) && out->position == pos ? SHMS__EV_VALID : SHMS__EV_LOST;
}

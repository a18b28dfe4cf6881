/*
 * The hierarchical bitmap as a publication: a setter stores some state, then
 * sets a bit; a taker takes the bit, then reads that state. Whatever the
 * interleaving, either the taker sees the state or the bit is there again
 * afterwards: a publication is never left with no bit at all.
 *
 * The case that once broke it is a bit that is already set (left by an
 * earlier setter) when the setter comes: a setter that then wrote nothing
 * let its state store wait in its store buffer while the taker took the old
 * bit and read the old state (x86 lets a load pass an earlier store). The
 * chaos test saw this about once in 500 runs as a queued request neither
 * indexed nor awaiting the dispatcher; this test sees it within a second.
 */
#include <ck_pr.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "shm/hbm.h"

/* Time-bounded: the race is a few nanoseconds wide, and each round aligns it differently. Without
 * the locked write, about one round in a million loses its state: 4 s runs ~5 million. */
#define SECONDS 4

static uint64_t bits[4], state;
static struct shms__hbm map;
static uint32_t go, published, stop;

static void pin(int cpu) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
    return; /* one CPU: the threads still interleave, through preemption only */
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spin(unsigned n) {
  for (unsigned i = 0; i < n; i++)
    ck_pr_stall();
}

/* Round n: wait for the start, store n, set the bit (usually there already). */
static void *setter(void *arg) {
  (void)arg;
  pin(0);
  unsigned seed = 1;
  for (uint32_t n = 1;; n++) {
    uint32_t g;
    while ((g = ck_pr_load_32(&go)) != n && !ck_pr_load_32(&stop))
      sched_yield();
    if (g != n)
      return NULL;
    spin(rand_r(&seed) % 8);
    ck_pr_store_64(&state, n);
    shms__hbm_set(&map, 5);
    ck_pr_store_32(&published, n);
  }
}

START_TEST(a_set_that_finds_its_bit_there_still_publishes) {
  shms__hbm_init(&map, bits, 64);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, setter, NULL), 0);
  pin(1);
  unsigned seed = 2;
  long rounds = 0, taken_early = 0, lost = 0;
  double end = now_s() + SECONDS;
  for (uint32_t n = 1; now_s() < end || rounds < 1000; n++, rounds++) {
    while (shms__hbm_take(&map) >= 0)
      ;
    shms__hbm_set(&map, 5); /* left by an earlier setter */
    ck_pr_store_32(&go, n);
    spin(rand_r(&seed) % 64);
    int64_t i = shms__hbm_take(&map);
    uint64_t seen = ck_pr_load_64(&state);
    while (ck_pr_load_32(&published) != n)
      ck_pr_stall();
    if (i == 5 && seen != n) { /* took the bit before the state was visible */
      taken_early++;
      lost += !shms__hbm_test(&map, 5);
    }
  }
  ck_pr_store_32(&stop, 1);
  pthread_join(t, NULL);
  ck_assert_msg(lost == 0, "%ld of %ld rounds left the state with no bit (%ld took it early)", lost,
                rounds, taken_early);
  /* The interleaving that matters happened, or the test proved nothing. */
  ck_assert_int_gt(taken_early, 0);
}
END_TEST

/* Every size's shape, from one word to more levels than the classes use: what is set is taken
 * back lowest first and only once, and an empty map says so (any, peek). */
static const uint32_t sizes[] = {1,    63,   64,    65,    511,   512,    513,   4095,
                                 4096, 4097, 32767, 32768, 32769, 100000, 262145};

START_TEST(every_shape_takes_back_what_was_set_in_order) {
  uint32_t n = sizes[_i];
  uint32_t words = shms__hbm_words(n);
  ck_assert_uint_ge(words, (n + 63) / 64);
  uint64_t *w = calloc(words, sizeof *w);
  uint8_t *want = calloc(n, 1);
  struct shms__hbm b;
  shms__hbm_init(&b, w, n);
  ck_assert(!shms__hbm_any(&b));
  ck_assert_int_eq(shms__hbm_peek(&b), -1);
  ck_assert_int_eq(shms__hbm_take(&b), -1);
  unsigned seed = n;
  uint32_t count = 0, lowest = n;
  for (uint32_t r = 0; r < 200; r++) {
    uint32_t i = r == 0 ? n - 1 : (uint32_t)rand_r(&seed) % n;
    count += !want[i];
    want[i] = 1;
    lowest = i < lowest ? i : lowest;
    shms__hbm_set(&b, i);
    ck_assert(shms__hbm_test(&b, i));
  }
  ck_assert(shms__hbm_any(&b));
  ck_assert_int_eq(shms__hbm_peek(&b), lowest);
  int64_t last = -1;
  for (uint32_t k = 0; k < count; k++) {
    int64_t i = shms__hbm_take(&b);
    ck_assert_msg(i > last && i < n && want[i], "n %u: took %ld after %ld", n, (long)i, (long)last);
    ck_assert(!shms__hbm_test(&b, (uint32_t)i));
    last = i;
  }
  ck_assert_int_eq(shms__hbm_take(&b), -1);
  ck_assert(!shms__hbm_any(&b));
  /* Every summary word is clean again: only the leaves were ever the truth. */
  for (uint32_t k = 0; k < words; k++)
    ck_assert_msg(w[k] == 0, "n %u: word %u left %#lx", n, k, (unsigned long)w[k]);
  free(want);
  free(w);
}
END_TEST

/* A crash can leave a summary bit over an empty word, and a scribble a bit past the end: a take
 * repairs both and finds what is really there. */
START_TEST(stale_and_stray_summary_bits_are_repaired) {
  uint32_t n = sizes[_i];
  uint32_t words = shms__hbm_words(n);
  uint64_t *w = calloc(words, sizeof *w);
  struct shms__hbm b;
  shms__hbm_init(&b, w, n);
  if (b.levels < 2) {
    /* One level: a bit past the end of the leaves. */
    if (n % 64)
      w[n / 64] |= 1ull << (n % 64);
  } else {
    uint32_t top = b.levels - 1;
    w[b.off[top]] |= 1;                             /* over an empty word */
    w[b.off[top] + b.words[top] - 1] |= 1ull << 63; /* past the end, or over an empty word */
    w[b.off[1]] |= 1ull << 1;                       /* a middle or top word's stale bit */
  }
  ck_assert_int_eq(shms__hbm_take(&b), -1);
  ck_assert(!shms__hbm_any(&b));
  shms__hbm_set(&b, n / 2);
  ck_assert_int_eq(shms__hbm_peek(&b), n / 2);
  ck_assert_int_eq(shms__hbm_take(&b), n / 2);
  ck_assert_int_eq(shms__hbm_take(&b), -1);
  free(w);
}
END_TEST

int main(void) {
  Suite *s = suite_create("hbm");
  TCase *tc = harness_tcase("publication");
  tcase_add_test(tc, a_set_that_finds_its_bit_there_still_publishes);
  suite_add_tcase(s, tc);
  TCase *shapes = harness_tcase("shapes");
  int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
  tcase_add_loop_test(shapes, every_shape_takes_back_what_was_set_in_order, 0, nsizes);
  tcase_add_loop_test(shapes, stale_and_stray_summary_bits_are_repaired, 0, nsizes);
  suite_add_tcase(s, shapes);
  return harness_run(s);
}

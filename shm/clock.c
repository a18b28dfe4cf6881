/*
 * The monotonic clock. Tests install a deterministic clock with
 * shms_set_clock; the library reads time only through here.
 */
#include "clock.h"

#include <ck_pr.h>
#include <time.h>

#include "shmsched.h"

static shms_clock_fn test_clock;
static void *test_clock_ctx;

void shms_set_clock(shms_clock_fn fn, void *ctx) {
  test_clock_ctx = ctx;
  ck_pr_store_ptr(&test_clock, (void *)fn);
}

static uint64_t read_clock(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t shms__real_now_ns(void) { return read_clock(CLOCK_MONOTONIC); }

uint64_t shms__wall_now_ns(void) { return read_clock(CLOCK_REALTIME); }

uint64_t shms__now_ns(void) {
  shms_clock_fn fn = (shms_clock_fn)ck_pr_load_ptr(&test_clock);
  return fn != NULL ? fn(test_clock_ctx) : read_clock(CLOCK_MONOTONIC);
}

uint64_t shms__coarse_now_ns(void) {
  shms_clock_fn fn = (shms_clock_fn)ck_pr_load_ptr(&test_clock);
  return fn != NULL ? fn(test_clock_ctx) : read_clock(CLOCK_MONOTONIC_COARSE);
}

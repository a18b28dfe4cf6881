/* The monotonic clock; one place to read it, so tests can replace it later. */
#include "clock.h"

#include <time.h>

uint64_t shms__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

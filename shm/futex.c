/* Shared futex wait/wake with absolute monotonic timeouts. */
#include "futex.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shmsched.h"

int shms__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
  struct timespec ts, *tsp = NULL;
  if (deadline_ns != 0) {
    ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
    ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
    tsp = &ts;
  }
  /* FUTEX_WAIT_BITSET takes an absolute timeout on CLOCK_MONOTONIC (no FUTEX_CLOCK_REALTIME). */
  long rc =
      syscall(SYS_futex, word, FUTEX_WAIT_BITSET, expected, tsp, NULL, FUTEX_BITSET_MATCH_ANY);
  if (rc == 0 || errno == EAGAIN || errno == EINTR)
    return SHMS_OK;
  if (errno == ETIMEDOUT)
    return SHMS_ETIMEDOUT;
  return SHMS_ESYSTEM;
}

void shms__futex_wake(uint32_t *word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

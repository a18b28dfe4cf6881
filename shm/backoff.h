/*
 * Waiting for a word another process must change (a freeze to end, an operation to finish):
 * a few yields first, since a running peer's step is a few stores, then sleeps that double
 * up to 2 ms. A peer that is stopped (^Z, a debugger, a paused container) or descheduled then
 * costs its waiters no CPU, and a waiter still sees the change within 2 ms of it.
 */
#ifndef SHMS_SHM_BACKOFF_H
#define SHMS_SHM_BACKOFF_H

#include <sched.h>
#include <stdint.h>
#include <time.h>

#define SHMS__BACKOFF_YIELDS   64
#define SHMS__BACKOFF_FIRST_NS 20000L   /* 20 us */
#define SHMS__BACKOFF_MAX_NS   2000000L /* 2 ms */

struct shms__backoff {
  uint32_t turns;
  long pause_ns;
};

static inline void shms__backoff_pause(struct shms__backoff *b) {
  if (b->turns++ < SHMS__BACKOFF_YIELDS) {
    sched_yield();
    return;
  }
  if (b->pause_ns == 0)
    b->pause_ns = SHMS__BACKOFF_FIRST_NS;
  nanosleep(&(struct timespec){.tv_nsec = b->pause_ns}, NULL);
  if (b->pause_ns < SHMS__BACKOFF_MAX_NS)
    b->pause_ns = b->pause_ns * 2 < SHMS__BACKOFF_MAX_NS ? b->pause_ns * 2 : SHMS__BACKOFF_MAX_NS;
}

#endif

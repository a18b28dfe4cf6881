/* The monotonic clock every deadline, wait figure and aging decision is measured on. */
#ifndef SHMS_SHM_CLOCK_H
#define SHMS_SHM_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds, or the test clock installed with shms_set_clock. */
uint64_t shms__now_ns(void);
/* The real CLOCK_MONOTONIC, for futex timeouts (the kernel knows no other clock). */
uint64_t shms__real_now_ns(void);
/* CLOCK_REALTIME in nanoseconds (never the test clock): times shown to operators. */
uint64_t shms__wall_now_ns(void);
/* A cheap clock of millisecond resolution, for lease start times on the fast path. */
uint64_t shms__coarse_now_ns(void);

#endif

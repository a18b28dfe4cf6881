/* The monotonic clock every deadline and wait figure is measured on. */
#ifndef SHMS_SHM_CLOCK_H
#define SHMS_SHM_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds (or the test clock, once one is installed). */
uint64_t shms__now_ns(void);

#endif

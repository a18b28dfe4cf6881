/*
 * Futex waits and wakes on 32-bit words in the shared segment. Always the
 * shared (not PRIVATE) variant: a PRIVATE futex never wakes a waiter in
 * another process. Timeouts are absolute CLOCK_MONOTONIC times.
 */
#ifndef SHMS_SHM_FUTEX_H
#define SHMS_SHM_FUTEX_H

#include <stdint.h>

/*
 * Sleep while *word == expected, until woken or until deadline_ns (absolute
 * CLOCK_MONOTONIC; 0 = no limit). Returns 0 when woken or when the word had
 * already changed, SHMS_ETIMEDOUT at the deadline; EINTR counts as a wake-up.
 * Spurious wake-ups happen: callers re-check their condition.
 */
int shms__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns);
/* Wake every process sleeping on word. */
void shms__futex_wake(uint32_t *word);

#endif

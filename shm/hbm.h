/*
 * A hierarchical bitmap in shared memory: a set of indexes 0..n-1 that many
 * processes add to and take from concurrently, lock-free, with cost
 * independent of n (one word per level, at most four levels for 2^20).
 *
 * Level 0 holds one bit per index; each bit of level k+1 says "word i of
 * level k may be non-zero". Summary bits may be stale in one direction only
 * for an instant: a taker that empties a word clears its summary bit and then
 * re-checks the word, re-setting the bit if it refilled; a setter that found
 * its word empty propagates upward. A bit is added and taken with one atomic
 * step on its leaf word, so a process dying between steps never loses a bit
 * that was set; at worst a summary bit is left set over an empty word, which
 * the next taker repairs.
 *
 * Used for: free request slots, slots needing the dispatcher's attention
 * (arrivals, cancellations), and tenants needing attention.
 */
#ifndef SHMS_SHM_HBM_H
#define SHMS_SHM_HBM_H

#include <stdint.h>

/* 64-bit words the bitmap for n indexes occupies (n may be 0). */
uint32_t shms__hbm_words(uint32_t n);
/* Set every index 0..n-1 (at create time, single-threaded). */
void shms__hbm_fill(uint64_t *w, uint32_t n);
/* Add index i. Lock-free; may be called by any process at any time. Always a locked write, so
 * what the caller stored before is visible to whoever takes i after (see hbm.c). */
void shms__hbm_set(uint64_t *w, uint32_t n, uint32_t i);
/* Take (clear and return) some set index, lowest first, or -1 if none. Lock-free. */
int64_t shms__hbm_take(uint64_t *w, uint32_t n);
/* Whether index i is set (a snapshot). */
int shms__hbm_test(const uint64_t *w, uint32_t n, uint32_t i);
/* Whether any index may be set: a hint that errs only toward "yes". */
int shms__hbm_any(const uint64_t *w, uint32_t n);
/* Some set index without taking it, or -1 (a snapshot). */
int64_t shms__hbm_peek(const uint64_t *w, uint32_t n);

#endif

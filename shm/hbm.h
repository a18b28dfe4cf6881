/*
 * A hierarchical bitmap in shared memory: a set of indexes 0..n-1 that many
 * processes add to and take from concurrently, lock-free, with cost
 * independent of n (one word per level: one level up to 512 indexes, two up
 * to 32,768, three up to 2,097,152).
 *
 * Level 0 holds one bit per index; each bit of level k+1 says "word i of
 * level k may be non-zero". The top level has up to eight words, in one cache
 * line, which a take scans: a summary word over them would cost every set into
 * an empty map and every take that empties it one more locked write. Summary bits may be stale in
 * one direction only for an instant: a taker that empties a word clears its summary bit and then
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

#define SHMS__HBM_MAX_LEVELS 6

/* A process-local view of one bitmap: its words and its shape, worked out once (at attach) so
 * that a set or a take does no arithmetic on n. */
struct shms__hbm {
  uint64_t *w;
  uint32_t n;
  uint32_t levels;                      /* 0 when n is 0; level levels-1 is the top */
  uint32_t off[SHMS__HBM_MAX_LEVELS];   /* level k starts at word off[k] */
  uint32_t words[SHMS__HBM_MAX_LEVELS]; /* and has words[k] words */
};

/* 64-bit words the bitmap for n indexes occupies (n may be 0). */
uint32_t shms__hbm_words(uint32_t n);
/* The view of the bitmap for n indexes at w. */
void shms__hbm_init(struct shms__hbm *b, uint64_t *w, uint32_t n);
/* Set every index 0..n-1 (at create time, single-threaded). */
void shms__hbm_fill(const struct shms__hbm *b);
/* Add index i. Lock-free; may be called by any process at any time. Always a locked write, so
 * what the caller stored before is visible to whoever takes i after (see hbm.c). */
void shms__hbm_set(const struct shms__hbm *b, uint32_t i);
/* Take (clear and return) some set index, lowest first, or -1 if none. Lock-free. */
int64_t shms__hbm_take(const struct shms__hbm *b);
/* Whether index i is set (a snapshot). */
int shms__hbm_test(const struct shms__hbm *b, uint32_t i);
/* Whether any index may be set: a hint that errs only toward "yes", except that an index a
 * concurrent take moves past (its summary bits cleared and set again, or the top words read one
 * by one) may be missed; an index set before the call and not taken meanwhile is always seen.
 * Only a dispatcher pass takes from the attention maps, so the check a holder makes as it hands
 * the baton back races no take. */
int shms__hbm_any(const struct shms__hbm *b);
/* Some set index without taking it, or -1 (a snapshot). */
int64_t shms__hbm_peek(const struct shms__hbm *b);

#endif

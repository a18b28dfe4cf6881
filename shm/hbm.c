/* The hierarchical bitmap (hbm.h). */
#include "hbm.h"

#include "atomic.h"
#include <ck_pr.h>
#include <string.h>

/* Words the top level may have (one cache line); a take scans them. */
#define TOP_WORDS 8

void shms__hbm_init(struct shms__hbm *b, uint64_t *w, uint32_t n) {
  *b = (struct shms__hbm){.w = w, .n = n};
  uint32_t words = (n + 63) / 64, off = 0;
  if (n == 0)
    return;
  for (;;) {
    if (words <= TOP_WORDS) /* the top level in one cache line */
      off = (off + TOP_WORDS - 1) / TOP_WORDS * TOP_WORDS;
    b->off[b->levels] = off;
    b->words[b->levels] = words;
    b->levels++;
    off += words;
    if (words <= TOP_WORDS)
      break;
    words = (words + 63) / 64;
  }
}

uint32_t shms__hbm_words(uint32_t n) {
  struct shms__hbm b;
  shms__hbm_init(&b, NULL, n);
  return b.levels == 0 ? 0 : b.off[b.levels - 1] + b.words[b.levels - 1];
}

void shms__hbm_fill(const struct shms__hbm *b) {
  for (uint32_t i = 0; i < b->n; i++)
    shms__hbm_set(b, i);
}

static uint64_t *word(const struct shms__hbm *b, uint32_t k, uint32_t idx) {
  return &b->w[b->off[k] + idx];
}

/* Atomically OR bits into *p and return the previous value. */
static uint64_t fetch_or(uint64_t *p, uint64_t bits) {
  uint64_t prev = shms__load_64(p);
  while ((prev & bits) != bits && !ck_pr_cas_64_value(p, prev, prev | bits, &prev))
    ;
  return prev;
}

/*
 * Word idx of level k just went from empty to non-empty: set its summary
 * bit, and walk up while parents were empty too. A parent that was already
 * non-empty has its own summary bit set (or a taker re-checking it).
 */
static void propagate(const struct shms__hbm *b, uint32_t k, uint32_t idx) {
  for (; k + 1 < b->levels; k++, idx /= 64)
    if (fetch_or(word(b, k + 1, idx / 64), 1ull << (idx % 64)) != 0)
      return;
}

/*
 * The leaf is always written with a locked instruction, even when the bit is
 * there already. A setter publishes what it stored just before (a slot's new
 * state) by the bit: a taker takes the bit, then reads that state. Had the
 * setter only read a bit that was there already (left by an earlier setter),
 * its own store could still sit in its store buffer while a taker took that
 * bit and read the old state, and the new state would be left with no bit at
 * all. The locked write orders the store before it, and either comes after
 * the take (the bit is set again) or before it (the taker sees the state).
 */
void shms__hbm_set(const struct shms__hbm *b, uint32_t i) {
  uint64_t *leaf = word(b, 0, i / 64), bit = 1ull << (i % 64);
  uint64_t prev = shms__load_64(leaf);
  while (!ck_pr_cas_64_value(leaf, prev, prev | bit, &prev))
    ;
  if (prev == 0)
    propagate(b, 0, i / 64);
}

/*
 * Word idx of level k was seen empty: clear its summary bit, walking up while
 * parents empty too. Re-check after each clear: a setter may have refilled the
 * word in between, and then the bit goes back (with its ancestors).
 */
static void clear_up(const struct shms__hbm *b, uint32_t k, uint32_t idx) {
  for (; k + 1 < b->levels; k++, idx /= 64) {
    uint64_t *parent = word(b, k + 1, idx / 64);
    uint64_t bit = 1ull << (idx % 64);
    ck_pr_and_64(parent, ~bit);
    /* The clear is visible before we look at the child again: on x86 the locked AND is itself
     * a full barrier, and this fence costs nothing there (an mfence here was a tenth of a
     * cancel's time with 10,000 slots). */
    ck_pr_fence_atomic_load();
    if (shms__load_64(word(b, k, idx)) != 0) {
      if (fetch_or(parent, bit) == 0)
        propagate(b, k + 1, idx / 64);
      return;
    }
    if (shms__load_64(parent) != 0)
      return;
  }
}

/* The first non-empty word of the top level, or -1. */
static int64_t first_top(const struct shms__hbm *b, uint64_t *v) {
  uint32_t k = b->levels - 1;
  for (uint32_t idx = 0; idx < b->words[k]; idx++)
    if ((*v = shms__load_64(word(b, k, idx))) != 0)
      return idx;
  return -1;
}

int64_t shms__hbm_take(const struct shms__hbm *b) {
  if (b->levels == 0)
    return -1;
  for (;;) {
    uint64_t v;
    int64_t top = first_top(b, &v);
    if (top < 0)
      return -1;
    uint32_t idx = (uint32_t)top, k = b->levels - 1;
    /* Descend along the lowest set summary bits. */
    while (k > 0 && v != 0) {
      uint32_t child = idx * 64 + (uint32_t)__builtin_ctzll(v);
      if (child >= b->words[k - 1]) { /* a summary bit past the end (corrupt): drop it */
        ck_pr_and_64(word(b, k, idx), ~(1ull << (child % 64)));
        v = shms__load_64(word(b, k, idx));
        continue;
      }
      idx = child;
      k--;
      v = shms__load_64(word(b, k, idx));
    }
    if (v == 0) { /* a stale summary bit: repair it and start over */
      clear_up(b, k, idx);
      continue;
    }
    uint64_t *leaf = word(b, 0, idx);
    while (v != 0) {
      uint64_t bit = v & -v;
      if (ck_pr_cas_64_value(leaf, v, v & ~bit, &v)) {
        if ((v & ~bit) == 0)
          clear_up(b, 0, idx);
        int64_t i = (int64_t)idx * 64 + __builtin_ctzll(bit);
        if (i < (int64_t)b->n)
          return i;
        break; /* a bit past the end (a corrupt map): dropped, look again */
      }
    }
    clear_up(b, 0, idx);
  }
}

int shms__hbm_test(const struct shms__hbm *b, uint32_t i) {
  return (shms__load_64(&b->w[i / 64]) >> (i % 64)) & 1;
}

int shms__hbm_any(const struct shms__hbm *b) {
  uint64_t v;
  return b->levels != 0 && first_top(b, &v) >= 0;
}

int64_t shms__hbm_peek(const struct shms__hbm *b) {
  if (b->levels == 0)
    return -1;
  uint64_t v;
  int64_t top = first_top(b, &v);
  if (top < 0)
    return -1;
  uint32_t idx = (uint32_t)top;
  for (int k = (int)b->levels - 1;; k--) {
    idx = idx * 64 + (uint32_t)__builtin_ctzll(v);
    if (idx >= (k > 0 ? b->words[k - 1] : b->n))
      return -1; /* past the end: a corrupt map (take repairs it) */
    if (k == 0)
      return idx;
    if ((v = shms__load_64(word(b, k - 1, idx))) == 0)
      return -1;
  }
}

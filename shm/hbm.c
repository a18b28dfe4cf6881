/* The hierarchical bitmap (hbm.h). */
#include "hbm.h"

#include "atomic.h"
#include <ck_pr.h>
#include <string.h>

#define HBM_MAX_LEVELS 6

/* Level k starts at word off[k]; level 0 is the leaves, level levels-1 is a single word. */
struct levels {
  uint32_t count;
  uint32_t off[HBM_MAX_LEVELS];
  uint32_t words[HBM_MAX_LEVELS];
};

static void levels_of(uint32_t n, struct levels *l) {
  *l = (struct levels){0};
  uint32_t words = (n + 63) / 64, off = 0;
  if (n == 0)
    return;
  for (;;) {
    l->off[l->count] = off;
    l->words[l->count] = words;
    l->count++;
    off += words;
    if (words == 1)
      break;
    words = (words + 63) / 64;
  }
}

uint32_t shms__hbm_words(uint32_t n) {
  struct levels l;
  levels_of(n, &l);
  return l.count == 0 ? 0 : l.off[l.count - 1] + 1;
}

void shms__hbm_fill(uint64_t *w, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    shms__hbm_set(w, n, i);
}

static uint64_t *word(uint64_t *w, const struct levels *l, uint32_t k, uint32_t idx) {
  return &w[l->off[k] + idx];
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
static void propagate(uint64_t *w, const struct levels *l, uint32_t k, uint32_t idx) {
  for (; k + 1 < l->count; k++, idx /= 64)
    if (fetch_or(word(w, l, k + 1, idx / 64), 1ull << (idx % 64)) != 0)
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
void shms__hbm_set(uint64_t *w, uint32_t n, uint32_t i) {
  struct levels l;
  levels_of(n, &l);
  uint64_t *leaf = word(w, &l, 0, i / 64), bit = 1ull << (i % 64);
  uint64_t prev = shms__load_64(leaf);
  while (!ck_pr_cas_64_value(leaf, prev, prev | bit, &prev))
    ;
  if (prev == 0)
    propagate(w, &l, 0, i / 64);
}

/*
 * Word idx of level k was seen empty: clear its summary bit, walking up while
 * parents empty too. Re-check after each clear: a setter may have refilled the
 * word in between, and then the bit goes back (with its ancestors).
 */
static void clear_up(uint64_t *w, const struct levels *l, uint32_t k, uint32_t idx) {
  for (; k + 1 < l->count; k++, idx /= 64) {
    uint64_t *parent = word(w, l, k + 1, idx / 64);
    uint64_t bit = 1ull << (idx % 64);
    ck_pr_and_64(parent, ~bit);
    /* The clear is visible before we look at the child again: on x86 the locked AND is itself
     * a full barrier, and this fence costs nothing there (an mfence here was a tenth of a
     * cancel's time with 10,000 slots). */
    ck_pr_fence_atomic_load();
    if (shms__load_64(word(w, l, k, idx)) != 0) {
      if (fetch_or(parent, bit) == 0)
        propagate(w, l, k + 1, idx / 64);
      return;
    }
    if (shms__load_64(parent) != 0)
      return;
  }
}

int64_t shms__hbm_take(uint64_t *w, uint32_t n) {
  struct levels l;
  levels_of(n, &l);
  if (l.count == 0)
    return -1;
  for (;;) {
    uint32_t idx = 0, k = l.count - 1;
    uint64_t v = shms__load_64(word(w, &l, k, 0));
    if (v == 0)
      return -1;
    /* Descend along the lowest set summary bits. */
    while (k > 0 && v != 0) {
      uint32_t child = idx * 64 + (uint32_t)__builtin_ctzll(v);
      if (child >= l.words[k - 1]) { /* a summary bit past the end (corrupt): drop it */
        ck_pr_and_64(word(w, &l, k, idx), ~(1ull << (child % 64)));
        v = shms__load_64(word(w, &l, k, idx));
        continue;
      }
      idx = child;
      k--;
      v = shms__load_64(word(w, &l, k, idx));
    }
    if (v == 0) { /* a stale summary bit: repair it and start over */
      clear_up(w, &l, k, idx);
      continue;
    }
    uint64_t *leaf = word(w, &l, 0, idx);
    while (v != 0) {
      uint64_t bit = v & -v;
      if (ck_pr_cas_64_value(leaf, v, v & ~bit, &v)) {
        if ((v & ~bit) == 0)
          clear_up(w, &l, 0, idx);
        int64_t i = (int64_t)idx * 64 + __builtin_ctzll(bit);
        if (i < (int64_t)n)
          return i;
        break; /* a bit past the end (a corrupt map): dropped, look again */
      }
    }
    clear_up(w, &l, 0, idx);
  }
}

int shms__hbm_test(const uint64_t *w, uint32_t n, uint32_t i) {
  (void)n;
  return (shms__load_64((uint64_t *)&w[i / 64]) >> (i % 64)) & 1;
}

int shms__hbm_any(const uint64_t *w, uint32_t n) {
  struct levels l;
  levels_of(n, &l);
  return l.count != 0 && shms__load_64((uint64_t *)&w[l.off[l.count - 1]]) != 0;
}

int64_t shms__hbm_peek(const uint64_t *w, uint32_t n) {
  struct levels l;
  levels_of(n, &l);
  if (l.count == 0)
    return -1;
  uint32_t idx = 0;
  for (int k = (int)l.count - 1; k >= 0; k--) {
    uint64_t v = shms__load_64((uint64_t *)&w[l.off[k] + idx]);
    if (v == 0)
      return -1;
    idx = idx * 64 + (uint32_t)__builtin_ctzll(v);
    if (idx >= (k > 0 ? l.words[k - 1] : n))
      return -1; /* past the end: a corrupt map (take repairs it) */
  }
  return idx;
}

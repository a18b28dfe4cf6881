/*
 * Loads and stores of shared words. In every normal build these are
 * Concurrency Kit's (ck_pr_load_* / ck_pr_store_*: aligned volatile
 * accesses, atomic on x86-64). ThreadSanitizer cannot see those as atomics,
 * and would report every handoff that they order as a race; under TSan they
 * become the compiler's __atomic builtins with acquire/release order, which
 * is what the protocol relies on and what TSan can check.
 */
#ifndef SHMS_SHM_ATOMIC_H
#define SHMS_SHM_ATOMIC_H

#include <ck_pr.h>

/* The same for exchanges: Concurrency Kit's builtins port reads before its CAS loop, which TSan
 * takes for a plain read racing every atomic add to the word. */
#if defined(__SANITIZE_THREAD__)
#define shms__fas_64(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)
#define shms__fas_32(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)
#else
#define shms__fas_64(p, v) ck_pr_fas_64((p), (v))
#define shms__fas_32(p, v) ck_pr_fas_32((p), (v))
#endif

#if defined(__SANITIZE_THREAD__)
#define shms__load_64(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define shms__load_32(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define shms__store_64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define shms__store_32(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#else
#define shms__load_64(p)     ck_pr_load_64(p)
#define shms__load_32(p)     ck_pr_load_32(p)
#define shms__store_64(p, v) ck_pr_store_64((p), (v))
#define shms__store_32(p, v) ck_pr_store_32((p), (v))
#endif

/*
 * Ask for the line at p for writing (PREFETCHW: Concurrency Kit's read for ownership) where a
 * load of a shared word is followed by a CAS on it: the load alone would bring the line shared
 * and the CAS then take it over, two transfers from the CPU that wrote it last, where this asks
 * once (design/overtaking.md, "One transfer, not two"). A hint, which changes no memory: a port
 * without it does nothing.
 */
#if defined(CK_F_PR_RFO)
#define shms__rfo(p) ck_pr_rfo(p)
#else
#define shms__rfo(p) ((void)(p))
#endif

#include <stdint.h>

/*
 * A CAS of two adjacent words (target 16-byte aligned) from cur to set: CMPXCHG16B. On failure
 * cur is given the two words found, as a CAS loop wants them. Concurrency Kit's x86-64 port has
 * it; its builtins port, which the ThreadSanitizer build uses, does not, so there it is the
 * compiler's 16-byte atomic (which TSan instruments).
 */
static inline int shms__cas_pair(uint64_t *target, uint64_t cur[2], const uint64_t set[2]) {
  uint64_t was[2];
#if defined(CK_F_PR_CAS_64_2_VALUE) && !defined(__SANITIZE_THREAD__)
  int ok = ck_pr_cas_64_2_value(target, cur, (uint64_t *)set, was);
#else
  unsigned __int128 e = (unsigned __int128)cur[1] << 64 | cur[0];
  unsigned __int128 s = (unsigned __int128)set[1] << 64 | set[0];
  int ok = __atomic_compare_exchange_n((unsigned __int128 *)(void *)target, &e, s, 0,
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  was[0] = (uint64_t)e;
  was[1] = (uint64_t)(e >> 64);
#endif
  cur[0] = was[0];
  cur[1] = was[1];
  return ok;
}

#endif

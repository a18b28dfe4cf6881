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

#endif

/* The library's heap allocations, all through here so that a test can make one fail. */
#ifndef SHMS_SHM_ALLOC_H
#define SHMS_SHM_ALLOC_H

#include <stddef.h>

/* malloc, calloc and realloc, unless the failure hook says this call fails (then NULL). */
void *shms__malloc(size_t size);
void *shms__calloc(size_t n, size_t size);
void *shms__realloc(void *p, size_t size);

/*
 * Test hook (SQLite's out-of-memory loop): after shms__alloc_fail_at(n), the n-th allocation from
 * now (n >= 1) fails, once, and the rest succeed; n = 0 turns failures off. Process-wide, any
 * thread. shms__alloc_count() is the number of allocations made since the last
 * shms__alloc_fail_at, so a test can learn how many a call makes, then fail each in turn.
 */
void shms__alloc_fail_at(unsigned long n);
unsigned long shms__alloc_count(void);

#endif

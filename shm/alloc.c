/* Every heap allocation of the library, and the hook that fails the n-th (shm/alloc.h). */
#include "alloc.h"

#include <stdlib.h>

/* Armed by a test, read on every allocation: relaxed atomics, the hook orders nothing else. */
static unsigned long fail_at, made;

/* 1 if this allocation is the one the hook fails. */
static int fails(void) {
  unsigned long n = __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED);
  return n == __atomic_load_n(&fail_at, __ATOMIC_RELAXED);
}

void *shms__malloc(size_t size) { return fails() ? NULL : malloc(size); }

void *shms__calloc(size_t n, size_t size) { return fails() ? NULL : calloc(n, size); }

void *shms__realloc(void *p, size_t size) { return fails() ? NULL : realloc(p, size); }

void shms__alloc_fail_at(unsigned long n) {
  __atomic_store_n(&made, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&fail_at, n, __ATOMIC_RELAXED);
}

unsigned long shms__alloc_count(void) { return __atomic_load_n(&made, __ATOMIC_RELAXED); }

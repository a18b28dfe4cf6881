/* Internal error helpers: every failure path sets a detail for the caller. */
#ifndef SHMS_SHM_ERROR_H
#define SHMS_SHM_ERROR_H

#include "shmsched.h"

/* Record a detail line for the calling thread's next shms_last_error_detail(). */
void shms__detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Record a detail and evaluate to err, so a failure reads
 * `return shms__fail(SHMS_EINVAL, "cells: must be 1..%u", max);`. A macro, so
 * that every reader (and the static analyser) sees the code it returns.
 */
#define shms__fail(err, ...) (shms__detail(__VA_ARGS__), (err))
/* Forget the previous detail; each public entry point calls this first. */
void shms__clear_detail(void);
/* Map an errno from open/ftruncate/mmap to the closest shmsched code. */
int shms__from_errno(int e);

#endif

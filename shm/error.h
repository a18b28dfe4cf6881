/* Internal error helpers: every failure path sets a detail for the caller. */
#ifndef SHMS_SHM_ERROR_H
#define SHMS_SHM_ERROR_H

#include "shmsched.h"

/*
 * Record a detail line for the calling thread and return err, so a failure
 * reads `return shms__fail(SHMS_EINVAL, "cells: must be 1..%u", max);`.
 */
int shms__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forget the previous detail; each public entry point calls this first. */
void shms__clear_detail(void);
/* Map an errno from open/ftruncate/mmap to the closest shmsched code. */
int shms__from_errno(int e);

#endif

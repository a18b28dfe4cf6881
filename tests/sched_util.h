/* Helpers for the scheduling suites: segments, requests, and "which ticket was granted". */
#ifndef SHMS_TESTS_SCHED_UTIL_H
#define SHMS_TESTS_SCHED_UTIL_H

#include "harness.h"

/* Create a segment with one lease class `standard` (cells, queue) and attach to it. */
shms_t *sched_open(const char **name, unsigned cells, unsigned queue, const shms_config *base);
void sched_close(shms_t *h, const char *name);

shms_request sched_req(const char *tenant, int32_t priority);

/* Enqueue, failing the test on error. */
shms_ticket sched_enqueue(shms_t *h, const char *tenant, int32_t priority, uint64_t deadline);

/*
 * Exactly one of tickets[0..n) must be granted now: accept it into *lease
 * and return its index. The others must still be queued.
 */
int sched_granted(shms_t *h, const shms_ticket *tickets, int n, shms_lease *lease);

/* The class's figures. */
shms_class_stats sched_stats(shms_t *h);

/* A settable clock for deterministic aging and deadlines. */
extern uint64_t sched_fake_now;
uint64_t sched_fake_clock(void *ctx);

#endif

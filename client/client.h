/* Shared checks of the client API: turning a public request or ticket into a class and slot. */
#ifndef SHMS_CLIENT_CLIENT_H
#define SHMS_CLIENT_CLIENT_H

#include "../core/sched.h"

/*
 * The prologue of a call taking a request: forget the last detail, then
 * validate h (a member handle), req (class, tenant, allow list, bounds,
 * segment state) and the caller's output pointer out (named out_name).
 */
int shms__check_request(struct shms *h, const shms_request *req, const void *out,
                        const char *out_name, struct shms__cls **k);
/*
 * The prologue of a call taking a ticket: the class and slot it names, or
 * SHMS_ENOTFOUND / SHMS_EINVAL with a detail; out may be NULL if unused.
 */
int shms__check_ticket(struct shms *h, const shms_ticket *t, const void *out, const char *out_name,
                       struct shms__cls **k, uint32_t *slot);
/* The segment's state (shms_segment_state_t). */
uint32_t shms__segment_state(const struct shms *h);
/* How long a waiter sleeps before it checks on the baton's holder. */
#define SHMS__POLL_NS (200ull * 1000 * 1000)

#endif

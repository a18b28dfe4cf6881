/* Shared checks of the client API: turning a public request or ticket into a class and slot. */
#ifndef SHMS_CLIENT_CLIENT_H
#define SHMS_CLIENT_CLIENT_H

#include "../core/sched.h"

/* Validate req for h (member handle, class, tenant, allow list, bounds, segment state). */
int shms__check_request(struct shms *h, const shms_request *req, struct shms__cls **k);
/* The class and slot a ticket names, or SHMS_ENOTFOUND / SHMS_EINVAL with a detail. */
int shms__check_ticket(struct shms *h, const shms_ticket *t, struct shms__cls **k, uint32_t *slot);
/* The segment's state (shms_segment_state_t). */
uint32_t shms__segment_state(const struct shms *h);
/* How long a waiter sleeps before it checks on the baton's holder. */
#define SHMS__POLL_NS (200ull * 1000 * 1000)

#endif

/*
 * grant.pml -- the grant-accept-cancel race, checked with spin: the
 * dispatcher's grant (core/dispatch.c: grant, grant_lost), the waiter's
 * accept (client/request.c: accept), a cancel from another process
 * (client/cancel.c, core/slot.c: shms__slot_settle) and the cell going back
 * (core/cell.c: shms__cell_unaccepted), with slot reuse: the waiter collects
 * a cancelled request and enqueues again into the same slot. The operations,
 * and how each corresponds to the code, are in shms.pml.
 *
 * Bounds: two cells, one request slot (so A's second request reuses it);
 * client A acquires and releases twice, always through the queue (a class
 * with a tenant limit has no fast path); the Canceller cancels A's first
 * request at any moment. One Dispatcher process stands for everyone's kicks
 * (the baton makes passes mutually exclusive; baton.pml checks the baton).
 *
 * Checks (tests/model/CMakeLists.txt, run_spin.sh): safety (pan -DSAFETY): no
 * double grant, no cell granted twice, conservation, no waiter left asleep;
 * cycles (pan -DNP -l): the state graph has no cycle, so everything ends.
 *
 * Variant that must FAIL:
 *  -DSETTLE_CELL_AFTER_CAS   shms__slot_settle reads s->cell AFTER the CAS
 *                            that settles the slot, as core/slot.c does. Once
 *                            the CAS is done the waiter may collect the
 *                            outcome, free the slot, enqueue again and be
 *                            granted another cell; the canceller then returns
 *                            THAT cell, which is still bound to the new
 *                            request, while the cancelled grant's cell stays
 *                            GRANTED for ever. spin finds it: the new request
 *                            accepts a cell that is AVAILABLE (and counted
 *                            free), so a second lease on it can follow.
 *                            Without the flag the model reads s->cell before
 *                            the CAS, while the word still names the occupant
 *                            (the fix this proposes), and the check passes.
 */
#define N_CELLS 2
#define N_SLOTS 1
#define ITERS_A 2
#define HOLD_B  0
#define NO_FAST_PATH
#define DISPATCHER_PROCESS
#include "shms.pml"

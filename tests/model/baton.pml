/*
 * baton.pml -- the dispatcher baton and its release-then-recheck protocol
 * (core/dispatch.c: shms__kick, run, baton_try, work_pending), with the
 * SLEEPING/futex wait (client/request.c: shms__sleep_on) and the fast path
 * (shms__cell_take), checked with spin. The operations themselves, and how
 * each corresponds to the code, are in shms.pml.
 *
 * Bounds: one cell, two request slots; client A acquires and releases once,
 * client B acquires and releases once, the Canceller cancels A's request if
 * A had to queue. Every process dispatches itself, as in the code: whoever
 * publishes a change kicks (takes the baton with one CAS, or leaves the work
 * to the holder, whose re-check after letting go must see it).
 *
 * Checks (tests/model/CMakeLists.txt, run_spin.sh):
 *  - safety (pan -DSAFETY): assertions, the Monitor's invariants, and invalid
 *    end states -- a waiter asleep for ever is a lost wake-up;
 *  - cycles (pan -DNP -l, no progress labels): the state graph has no cycle
 *    at all, so no livelock either. With the safety check this proves that
 *    every execution, under any scheduling, ends with everyone done.
 *
 * Variants that must FAIL (they show that the model can find what it claims
 * to rule out):
 *  -DNO_RECHECK              run lets go of the baton without re-checking:
 *                            spin finds a published request or freed cell
 *                            that nobody dispatches (invalid end state);
 *  -DRECHECK_BEFORE_RELEASE  the re-check's loads are ordered before the
 *                            store that frees the baton (what a plain store
 *                            without a full barrier allows on x86, where a
 *                            store waits in the store buffer while later
 *                            loads go ahead): spin finds a lost wake-up;
 *  -DMAX_PASSES=2 -DITERS_A=2 -DSTOP_AFTER_MAX_PASSES
 *                            run stops after MAX_PASSES passes WITHOUT a
 *                            re-check, as core/dispatch.c once did with 4:
 *                            work published during the last pass is left
 *                            for a waiter's 200 ms poll, which the model does
 *                            not have, so spin reports the sleeper;
 *  -DMAX_PASSES=2 -DITERS_A=2 -DSTOP_ON_IDLE_PASS
 *                            run stops without the re-check on a pass past
 *                            MAX_PASSES that did nothing, as the code did
 *                            next: the same sleeper, after an idle pass.
 *                            With 4 passes either needs more publishers than
 *                            these bounds allow (docs/testing.md).
 * -DITERS_A=2 alone (model_baton_last_pass, label model_long) is the code as
 * it is under those deeper bounds, and passes.
 */
#include "shms.pml"

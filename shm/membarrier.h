/*
 * membarrier(2) for operation marks (docs/protocol.md, "Recovery": "Plain marks").
 *
 * A process registered with MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED may mark its operations
 * with plain stores: a freezer that issues MEMBARRIER_CMD_GLOBAL_EXPEDITED after setting FROZEN
 * and before reading the marks turns each such thread's compiler barrier into a full fence.
 * A process that cannot register, or whose environment says SHMSCHED_MEMBARRIER=0, keeps the
 * locked mark. The decision is taken once per process (again in a forked child) and never
 * changes: registration cannot be undone, and a thread's marks must all be of one kind.
 */
#ifndef SHMS_SHM_MEMBARRIER_H
#define SHMS_SHM_MEMBARRIER_H

#include <stdint.h>

/*
 * Decide, once per process: read SHMSCHED_MEMBARRIER (unset, "" or "1": plain marks where the
 * kernel allows; "0": locked marks), ask the kernel (MEMBARRIER_CMD_QUERY), register, and issue
 * one barrier to see that it is allowed. SHMS_OK, or SHMS_EINVAL with a detail for any other
 * value of the variable (the decision is then "locked"). Safe from any thread.
 */
int shms__membarrier_setup(void);

/* Whether this process marks plainly: the decision above (taken now, if not yet). */
int shms__membarrier_plain(void);

/*
 * MEMBARRIER_CMD_GLOBAL_EXPEDITED: on return, every thread of every registered process has
 * run a full memory barrier, or was not running. 0, or the errno of the failure.
 */
int shms__membarrier_global(void);

/*
 * Tests: no_register makes the next decision "locked" as if registration failed (the
 * decision is taken again at the next attach); fail_global makes every barrier fail with
 * EPERM, as under a seccomp filter that denies it. (0, 0) restores the real behaviour.
 */
void shms__test_membarrier_force(int no_register, int fail_global);
/* Tests: how many barriers this process has asked for (registration's own included). */
uint32_t shms__test_membarrier_calls(void);

#endif

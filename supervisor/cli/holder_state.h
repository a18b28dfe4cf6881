/*
 * What a cell's holder process is doing, as /proc says: for `status --leases`, `top` and
 * `metrics`, so that a stopped (SIGSTOP, a debugger) or dead holder stands out from a slow one.
 */
#ifndef SHMS_SUPERVISOR_HOLDER_STATE_H
#define SHMS_SUPERVISOR_HOLDER_STATE_H

#include <stdint.h>
#include <sys/types.h>

/*
 * "running" (any live state: running, sleeping, disk wait), "stopped" (T, t: stopped or traced),
 * "dead" (it no longer holds its liveness lock, is a zombie or gone), or "" for no holder
 * (pid 0). alive: shms_cell_info.alive (the lock, which tells a reused pid apart). *code gets
 * /proc's state letter, or '-' when there is none.
 */
const char *holder_state(pid_t pid, int alive, char *code);

/* The same for a holder that may be of another pid namespace: "unknown" (code '-') when its
 * number cannot be translated to ours (foreign: shms_cell_info.pid_foreign) and it lives, whose
 * state /proc here cannot tell; "dead" if its lock is free. pid is its number here. */
const char *holder_state_ns(pid_t pid, uint32_t foreign, int alive, char *code);

/* The supervisor's state (shms_segment_info.supervisor_pid holds its lock, so it is alive):
 * "running", "stopped" (it recovers nothing until it runs again), "dead", or "none" for pid 0. */
const char *supervisor_state(pid_t pid);

#endif

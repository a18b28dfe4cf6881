/*
 * Recorded pids as the viewer sees them. A process entry records its pid as its own pid
 * namespace numbers it (shm/pidns.h); shown as it is to a viewer of another namespace, the
 * number names an unrelated process there (a container's holder as `pid=1`, with the state of
 * the host's init). Observers translate it here, at display time only: to the number the
 * viewer's namespace gives the same process, or to "of another namespace" when that cannot be
 * proven (docs/protocol.md, "Commands across pid namespaces").
 */
#ifndef SHMS_SHM_PIDVIEW_H
#define SHMS_SHM_PIDVIEW_H

#include <stdint.h>

#include "pidns.h"

/* A process as a record names it. */
struct shms__pidref {
  int32_t pid;               /* its number in its own pid namespace; 0: none */
  uint64_t start_time;       /* /proc/PID/stat field 22, as it read it */
  uint64_t attached_unix_ns; /* when it recorded itself (CLOCK_REALTIME) */
  struct shms__pidns ns;     /* that namespace */
};

/*
 * Its number in the caller's pid namespace, or 0 when that cannot be told: it is of a namespace
 * above or beside the caller's, the caller's /proc is not its own namespace's, or the process is
 * gone from a namespace other than the caller's. The caller's own namespace's numbers are taken
 * as they are. One below it is found by a walk over /proc (NSpid), checked by start time and by
 * the start time of that namespace's init. may_walk 0: never walk, only what an earlier walk of
 * this process found (a recovery reporting a dead process). The walk is cached process-wide: a
 * walk is made again only for a process that attached after the last one began, so an observer
 * makes one walk per look, not one per row.
 */
int32_t shms__pid_here(const struct shms__pidref *ref, int may_walk);

/* What observers show of a recorded process (the public structs' pid, ns_pid, pid_foreign and
 * pidns): its number here (0: none, or it cannot be told), its own number, whether it is of a
 * namespace whose numbers cannot be translated, and that namespace. */
struct shms__pidshown {
  int32_t here, own;
  uint32_t foreign;
  uint64_t ns;
};
void shms__pid_show(const struct shms__pidref *ref, int may_walk, struct shms__pidshown *out);
/* The same, into a public struct's four fields (pid, ns_pid, pid_foreign, pidns). */
void shms__pid_show_into(const struct shms__pidref *ref, int may_walk, int32_t *pid,
                         int32_t *ns_pid, uint32_t *foreign, uint64_t *pidns);

#endif

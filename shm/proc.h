/*
 * The attached-process table and liveness by byte-range lock.
 *
 * A registered process holds a POSIX write lock on the one file byte at its
 * entry's offset, and one on its owner id's own byte (SHMS__LOCK_OWNERS +
 * id). The kernel drops the locks when the process dies, so "is the lock
 * held" is the ground truth for liveness: immune to pid reuse and to pid
 * namespaces. The entry byte decides between processes claiming the entry and
 * says whether the entry's current occupant lives; the owner byte says whether
 * one owner id lives. They differ while a dead owner's entry is being claimed
 * again: the claimant holds the entry byte before it moves the generation on,
 * but never the dead owner's byte. The pid and start time in the entry only
 * name the owner.
 * POSIX locks belong to the process, are not inherited by fork, and all of a
 * process's locks on a file drop when it closes any descriptor of that file:
 * segment.c therefore keeps one registration and one set of descriptors per
 * process per segment.
 */
#ifndef SHMS_SHM_PROC_H
#define SHMS_SHM_PROC_H

#include <stdint.h>
#include <sys/types.h>

#include "handle.h"
#include "layout.h"
#include "pidview.h"

/*
 * The table's geometry is h->layout's, computed from the validated
 * configuration: a header changed under an attached process cannot move it.
 */

/* Entry index (< h->layout.procs_count). */
struct shms__proc *shms__proc_at(const struct shms *h, uint32_t index);

/*
 * Claim an entry of h's table, through the writable
 * descriptor fd: a free one, or if none is free one whose owner is dead (its command ended
 * first). *dead_owner gets that owner's id when it may have held something, for the caller to
 * settle; else 0. SHMS_EBUSY if every entry belongs to a live process.
 */
int shms__proc_register(const struct shms *h, int fd, uint32_t role, uint32_t *index_out,
                        uint32_t *dead_owner);
/* Give entry index back and drop its lock. */
void shms__proc_unregister(const struct shms *h, int fd, uint32_t index);

/*
 * Whether a live process holds entry index's lock. self is the caller's own
 * entry or UINT32_MAX: a process never conflicts with its own locks, so its
 * own entry is answered without asking the kernel. Returns 1 live, 0 dead
 * (or never registered), negative on a system error.
 */
int shms__proc_alive(const struct shms *h, int fd, uint32_t index, uint32_t self);

/*
 * Whether owner id owner (SHMS__OWNER) is alive: its entry's generation still
 * its own and its owner byte locked. self_owner is the caller's own id or 0
 * (then its entry is asked of the kernel like any other). 1 live, 0 dead,
 * negative on a system error.
 */
int shms__owner_alive(const struct shms *h, int fd, uint32_t owner, uint32_t self_owner);
/* Whether owner id names a process that is gone (its lock is free or its entry reused), asked
 * through h (our own owner id counts as alive). */
int shms__owner_dead(const struct shms *h, uint32_t owner);
/* What entry p's process recorded of itself: its pid, start and attach times, and its pid
 * namespace (for shms__pid_show: observers translate the pid at display time). */
void shms__proc_ref(const struct shms__proc *p, struct shms__pidref *out);
/* The same for owner id owner while its entry is still that owner's (its generation has not
 * moved on since): 1, else 0 (*out zeroed). What observers show of a holder. */
int shms__owner_ref(const struct shms *h, uint32_t owner, struct shms__pidref *out);
/* Fill out's pid, ns_pid, pid_foreign and pidns from entry p, the pid translated to the caller's
 * pid namespace (shms_processes: an observer's look, which may walk /proc). */
void shms__proc_show(const struct shms__proc *p, shms_process_info *out);
/*
 * A pid the event ring recorded with its namespace's inode (pidns, 0: not recorded), as the
 * caller (of namespace me) sees it: as it is if of the caller's namespace or not recorded; else
 * translated through the live process entry that names it (its start time proves it), or, with
 * none, of another namespace (here 0, foreign 1).
 */
void shms__proc_name_pid(const struct shms *h, const struct shms__pidns *me, int32_t pid,
                         uint32_t pidns, struct shms__pidshown *out);

/*
 * Free entry index if its owner is dead: take its lock (so nobody claims it
 * meanwhile), mark it FREE, let go. 1 if freed.
 */
int shms__proc_reap(const struct shms *h, int fd, uint32_t index);
/* Leave entry index as a dead process's: LIVE, its locks let go. Recovery settles what it
 * holds, as after a death (a detach that could not settle it all: shm/handle.h). */
void shms__proc_abandon(const struct shms *h, int fd, uint32_t index);
/* The same, only while the entry's generation is still gen (the owner recovered is its owner). */
int shms__proc_reap_gen(const struct shms *h, int fd, uint32_t index, uint32_t gen);

/*
 * End the command recorded in entry index (shms_command_set), and its cgroup: SIGKILL to the
 * cgroup (cgroup.kill) and to the recorded process group (only if its leader is the recorded
 * process, by start time, or gone), then wait, up to 2 s, until none of it is alive, remove
 * the cgroup and clear the record. SHMS_OK when nothing of it runs any more (or nothing was
 * recorded); SHMS_EBUSY (detail: why) when that cannot be proven: another user's processes,
 * or processes that did not die. The caller holds the entry's lock (its own entry, or a dead
 * owner's it took). Without a cgroup, a descendant that left the process group is not found.
 */
int shms__proc_end_command(const struct shms *h, uint32_t index);

/*
 * The same for dead owner id owner, taking its entry's lock meanwhile (through the writable
 * descriptor fd) so that nobody claims the entry before the command is gone. What recovery
 * calls before it disposes of a dead holder's lease or a dead worker's job: a cell is never
 * handed on while the previous holder's command runs. SHMS_OK also when the entry was claimed
 * again since (its claimant ended the command first); SHMS_EBUSY if the owner is alive.
 */
int shms__proc_kill_command(const struct shms *h, int fd, uint32_t owner);

/* What an entry's process is to the segment (shms__proc.role). */
enum {
  SHMS__ROLE_MEMBER = 0, /* a client or worker */
  SHMS__ROLE_SUPERVISOR =
      1, /* the process that holds the supervisor lock (shms_supervisor_claim) */
};

/*
 * Count live registered processes; if pids is not NULL, store up to max of their pids.
 * but_supervisor: leave out the supervisor (it holds nothing, and leaves a removed segment).
 */
uint32_t shms__proc_count_live(const struct shms *h, int fd, uint32_t self, pid_t *pids,
                               uint32_t max, int but_supervisor);

#endif

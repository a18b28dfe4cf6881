/*
 * Pid numbers across pid namespaces. A process records its command's process group by the
 * number its own pid namespace gives it; whoever kills that group after its death may live in
 * another namespace (a container beside the host, or the host beside a container), where the
 * same number names an unrelated group. A recorded number is therefore kept with the
 * namespace it belongs to, and is used here only once it is proven to name the same thing here
 * (docs/protocol.md, "Commands across pid namespaces").
 */
#ifndef SHMS_SHM_PIDNS_H
#define SHMS_SHM_PIDNS_H

#include <stdint.h>
#include <sys/types.h>

/*
 * A pid namespace as a number recorded in it needs it: the namespace's inode (nsfs), and the
 * start time of its init (its pid 1), which tells a namespace from a later one that was given
 * the inode of a dead one. init_start is 0 when unknown: the /proc the recorder saw was not its
 * own namespace's, and nothing recorded there can be proven.
 */
struct shms__pidns {
  uint64_t ino;
  uint64_t init_start;
};

/* The caller's pid namespace. */
void shms__pidns_self(struct shms__pidns *out);

/* Whether /proc here shows the caller's own pid namespace (its numbers are the caller's). */
int shms__procfs_ours(void);

/* Pid namespaces nest at most 32 deep: a process has at most 33 numbers. */
#define SHMS__PIDNS_LEVELS 33

/* A process of a namespace below the caller's, as a walk over /proc finds it. */
struct shms__pidns_proc {
  const char *name; /* its /proc directory */
  uint64_t ino;     /* its pid namespace's inode */
  int n;            /* its numbers, NSpid and NSpgid: [0] the caller's, [n - 1] its own */
  long pid[SHMS__PIDNS_LEVELS], pgid[SHMS__PIDNS_LEVELS];
};

/*
 * Call fn for every process now in /proc with more than one number (of a namespace below the
 * caller's, when /proc is the caller's own: shms__procfs_ours); fn returning nonzero stops the
 * walk. Returns how many processes could not be read (another user's, without ptrace rights),
 * where that could hide one of them; -1 if /proc cannot be read at all. The one walk behind
 * shms__pidns_group and the translation of recorded pids (shm/pidview.h).
 */
int shms__pidns_scan(int (*fn)(const struct shms__pidns_proc *p, void *ctx), void *ctx);

/* What a recorded process group is here (shms__pidns_group). */
enum {
  SHMS__GROUP_UNPROVEN = -1, /* it cannot be told: leave it alone */
  SHMS__GROUP_GONE = 0,      /* proven: no process of it is alive */
  SHMS__GROUP_HERE = 1,      /* it has processes, and this is its number here */
};

/*
 * Resolve process group pgid of namespace ns, whose leader started at start (/proc/PID/stat
 * field 22), to its number here in *here. Numbers of the caller's own namespace are taken as
 * they are (a group whose leader's pid now names a process of another start time has no member
 * left: GONE). A group of a namespace below the caller's is found through /proc (NSpid,
 * NSpgid); one of a namespace the caller cannot see (above it, or beside it) is UNPROVEN unless
 * the caller is in the initial namespace, which sees every namespace: there a namespace with no
 * process left has none of the group either. UNPROVEN sets *why to the reason (static text).
 */
int shms__pidns_group(const struct shms__pidns *ns, pid_t pgid, uint64_t start, pid_t *here,
                      const char **why);

#endif

/*
 * Command cgroups (cgroup v2): each registered process may put the commands
 * it runs in a cgroup of its own, so that the whole tree of a command, even a
 * descendant that left its process group (setsid, double fork), can be killed
 * at once with cgroup.kill when that process dies.
 *
 * A process's cgroup is named by its registration: ROOT/<incarnation>-<entry>-<gen>
 * (incarnation in hex), so whoever disposes of a dead process's entry finds it
 * without reading anything the dead wrote. ROOT is $SHMSCHED_CGROUP when set
 * (an absolute directory in a cgroup v2 hierarchy, or "off" for none), else
 * "shmsched" under the first cgroup2 mount of /proc/self/mountinfo. Every
 * process that runs or disposes of commands must see the same ROOT.
 */
#ifndef SHMS_SHM_CGROUP_H
#define SHMS_SHM_CGROUP_H

#include <stddef.h>
#include <stdint.h>

/* ROOT into out; 0, or -1 when there is none (off, or no cgroup2 mount). */
int shms__cgroup_root(char *out, size_t n);

/* The cgroup of entry index at generation gen of segment incarnation; 0, or -1 (no ROOT). */
int shms__cgroup_path(char *out, size_t n, uint64_t incarnation, uint32_t index, uint32_t gen);

/* The caller's cgroup namespace (the inode of /proc/self/ns/cgroup), 0 if it cannot be read. */
uint64_t shms__cgroupns_self(void);

/* Make ROOT (if missing) and the cgroup at path (existing is fine). 0, or -errno. */
int shms__cgroup_make(const char *path);

/*
 * Kill every process of the cgroup at path (cgroup.kill; one by one from
 * cgroup.procs on a kernel without it) and wait until none is alive, up to
 * timeout_ns; then remove the cgroup. 1 when it is empty (or does not exist),
 * 0 when that could not be proven (still populated at the timeout, or not
 * permitted); errno says why.
 */
int shms__cgroup_kill(const char *path, uint64_t timeout_ns);

/* Remove the empty cgroups of segment incarnation, but those of entries keep says to keep
 * (keep(ctx, index, gen) nonzero; NULL: none): when the segment is destroyed, what its
 * processes that died unrecovered left. A populated one stays (rmdir refuses it). */
void shms__cgroup_sweep(uint64_t incarnation, int (*keep)(void *ctx, uint32_t index, uint32_t gen),
                        void *ctx);

/* 1 if the cgroup at path holds a live process, 0 if not (or it does not exist). */
int shms__cgroup_populated(const char *path);

#endif

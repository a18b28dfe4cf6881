/*
 * The command a process runs under its leases or jobs (shmsched.h, "Commands"): its
 * cgroup and its process group, recorded in the process's entry so that they die with it.
 */
#include <ck_pr.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/cgroup.h"
#include "../shm/error.h"
#include "../shm/pidns.h"
#include "../shm/proc.h"
#include "../shm/procfs.h"
#include "client.h"

int shms_command_cgroup(shms_t *h, char *path, size_t cap) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (path == NULL || cap == 0)
    return shms__fail(SHMS_EINVAL, "path is NULL or empty");
  char p[PATH_MAX];
  if (shms__cgroup_path(p, sizeof p, h->incarnation, h->self, shms__load_32(&h->proc->gen)) != 0)
    return shms__fail(SHMS_ENOTFOUND, "no cgroup v2 hierarchy to use (SHMSCHED_CGROUP=off, or "
                                      "no cgroup2 mount in /proc/self/mountinfo)");
  if (strlen(p) >= cap)
    return shms__fail(SHMS_EINVAL, "the cgroup path needs %zu bytes, more than %zu", strlen(p) + 1,
                      cap);
  /* Named before it exists: a killer that finds the flag looks for it, and finds it or not; in
   * the namespace it was named in, which a killer of another one may not see. */
  shms__store_64(&h->proc->cgroupns_ino, shms__cgroupns_self());
  ck_pr_fence_store();
  uint32_t flags = shms__load_32(&h->proc->cmd_flags);
  shms__store_32(&h->proc->cmd_flags, flags | SHMS__CMD_CGROUP);
  int e = -shms__cgroup_make(p);
  if (e != 0) {
    shms__store_32(&h->proc->cmd_flags, flags);
    return shms__fail(e == EACCES || e == EPERM || e == EROFS ? SHMS_EPERM : shms__from_errno(e),
                      "cannot make cgroup %s: %s", p, strerror(e));
  }
  memcpy(path, p, strlen(p) + 1);
  return SHMS_OK;
}

int shms_command_set(shms_t *h, pid_t pgid) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (pgid <= 1)
    return shms__fail(SHMS_EINVAL, "process group %d is not a command's", (int)pgid);
  /* The group is named by /proc's numbers, and killed by ours: they must be the same. */
  if (!shms__procfs_ours())
    return shms__fail(
        SHMS_EPERM, "the /proc mounted here shows another pid namespace than this process's: "
                    "a command cannot be recorded (mount this namespace's: unshare --mount-proc)");
  uint64_t start = shms__proc_start_time(pgid);
  if (start == 0)
    return shms__fail(SHMS_ENOTFOUND, "no process %d to name the group by", (int)pgid);
  struct shms__proc *p = h->proc;
  uint32_t flags = shms__load_32(&p->cmd_flags) & ~(uint32_t)SHMS__CMD_SET;
  shms__store_32(&p->cmd_flags, flags); /* a torn record is never read as set */
  ck_pr_fence_store();
  shms__store_32((uint32_t *)&p->cmd_pgid, (uint32_t)pgid);
  shms__store_64(&p->cmd_start_time, start);
  ck_pr_fence_store(); /* the record before the flag that makes it one */
  shms__store_32(&p->cmd_flags, flags | SHMS__CMD_SET);
  return SHMS_OK;
}

int shms_command_clear(shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  shms__store_32(&h->proc->cmd_flags, shms__load_32(&h->proc->cmd_flags) & ~SHMS__CMD_SET);
  return SHMS_OK;
}

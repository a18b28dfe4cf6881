/* The attached-process table: claiming entries and proving owners alive by their locks. */
#include "proc.h"

#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "cgroup.h"
#include "crashpoint.h"
#include "error.h"
#include "membarrier.h"
#include "pidns.h"
#include "procfs.h"

static off_t lock_offset(const struct shms *h, uint32_t index) {
  return (off_t)(h->layout.procs_off + (uint64_t)index * sizeof(struct shms__proc));
}

struct shms__proc *shms__proc_at(const struct shms *h, uint32_t index) {
  return SHMS__AT(h->base, lock_offset(h, index), struct shms__proc);
}

static off_t owner_offset(uint32_t owner) { return (off_t)(SHMS__LOCK_OWNERS + owner); }

static int lock_byte(int fd, off_t off, short type) {
  struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = off, .l_len = 1};
  return fcntl(fd, F_SETLK, &fl);
}

/* 1 if another process holds a lock on byte off, 0 if not, negative on a system error. */
static int byte_locked(int fd, off_t off) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = off, .l_len = 1};
  if (fcntl(fd, F_GETLK, &fl) != 0)
    return -errno;
  return fl.l_type != F_UNLCK;
}

int shms__proc_alive(const struct shms *h, int fd, uint32_t index, uint32_t self) {
  if (index == self)
    return 1;
  return byte_locked(fd, lock_offset(h, index));
}

int shms__owner_alive(const struct shms *h, int fd, uint32_t owner, uint32_t self_owner) {
  uint32_t index = SHMS__OWNER_INDEX(owner);
  if (owner == 0 || index >= h->layout.procs_count)
    return 0;
  if (self_owner != 0 && index == SHMS__OWNER_INDEX(self_owner))
    return owner == self_owner; /* our own entry: only our id is alive */
  const struct shms__proc *p = shms__proc_at(h, index);
  if ((shms__load_32((uint32_t *)&p->gen) & 0xfffu) != (owner & 0xfffu))
    return 0; /* the entry has been claimed again since */
  return byte_locked(fd, owner_offset(owner));
}

int shms__owner_dead(const struct shms *h, uint32_t owner) {
  return shms__owner_alive(h, h->fd, owner, h->self == UINT32_MAX ? 0 : h->owner) == 0;
}

void shms__proc_ref(const struct shms__proc *p, struct shms__pidref *out) {
  *out = (struct shms__pidref){.pid = (int32_t)shms__load_32((uint32_t *)&p->pid),
                               .start_time = shms__load_64((uint64_t *)&p->start_time),
                               .attached_unix_ns = shms__load_64((uint64_t *)&p->attached_unix_ns),
                               .ns = {shms__load_64((uint64_t *)&p->pidns_ino),
                                      shms__load_64((uint64_t *)&p->pidns_init_start)}};
}

int shms__owner_ref(const struct shms *h, uint32_t owner, struct shms__pidref *out) {
  uint32_t i = SHMS__OWNER_INDEX(owner);
  *out = (struct shms__pidref){0};
  if (owner == 0 || i >= h->layout.procs_count)
    return 0;
  const struct shms__proc *p = shms__proc_at(h, i);
  if ((shms__load_32((uint32_t *)&p->gen) & 0xfffu) != (owner & 0xfffu))
    return 0;
  shms__proc_ref(p, out);
  /* Read again after the fields: an entry claimed meanwhile may have mixed two owners'. */
  ck_pr_fence_load();
  if ((shms__load_32((uint32_t *)&p->gen) & 0xfffu) != (owner & 0xfffu)) {
    *out = (struct shms__pidref){0};
    return 0;
  }
  return 1;
}

void shms__proc_show(const struct shms__proc *p, shms_process_info *out) {
  struct shms__pidref ref;
  shms__proc_ref(p, &ref);
  shms__pid_show_into(&ref, 1, &out->pid, &out->ns_pid, &out->pid_foreign, &out->pidns);
}

void shms__proc_name_pid(const struct shms *h, const struct shms__pidns *me, int32_t pid,
                         uint32_t pidns, struct shms__pidshown *out) {
  *out = (struct shms__pidshown){.here = pid, .own = pid, .ns = pidns};
  if (pid <= 0 || pidns == 0 || (me->init_start != 0 && pidns == (uint32_t)me->ino))
    return;
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    const struct shms__proc *p = shms__proc_at(h, i);
    if (shms__load_32((uint32_t *)&p->state) != SHMS__PROC_LIVE ||
        (int32_t)shms__load_32((uint32_t *)&p->pid) != pid ||
        (uint32_t)shms__load_64((uint64_t *)&p->pidns_ino) != pidns)
      continue;
    struct shms__pidref ref;
    shms__proc_ref(p, &ref);
    shms__pid_show(&ref, 1, out);
    return;
  }
  out->here = 0; /* gone, or never named here: its number is its namespace's only */
  out->foreign = 1;
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Holding the lock makes us the only live claimant of the entry; its state
 * word may still say LIVE for a dead previous owner, whose entry we now take
 * over. (Recovery of what a dead owner held runs before its entry is freed:
 * see docs/protocol.md, "Process entries".)
 */
static int claim(const struct shms *h, int fd, uint32_t index, uint32_t role) {
  struct shms__proc *p = shms__proc_at(h, index);
  shms__store_32(&p->state, SHMS__PROC_CLAIMING);
  /* The previous owner's record of requests (core/owned.c) is marked as being changed before
   * the generation moves on, and emptied after: whoever recovers that owner reads its list only
   * with the generation still its own and unmarked on both sides of the read. */
  shms__store_32(&p->own_dirty, 1);
  ck_pr_fence_store();
  /* An owner id is (index, gen mod 4096); 0 is no owner, so entry 0 skips gen 0 mod 4096. */
  uint32_t gen = p->gen + 1;
  if (index == 0 && (gen & 0xfffu) == 0)
    gen++;
  shms__store_32(&p->gen, gen);
  ck_pr_fence_store();
  shms__store_32(&p->own_head, 0);
  /* The new owner's byte only after the generation moved on: nobody can take it for the
   * previous owner's, whose byte stays free. Nobody else holds it: only a live owner of this
   * entry would, and the entry lock is ours. */
  if (lock_byte(fd, owner_offset(SHMS__OWNER(index, gen)), F_WRLCK) != 0) {
    int e = errno;
    shms__store_32(&p->state, SHMS__PROC_FREE);
    lock_byte(fd, lock_offset(h, index), F_UNLCK);
    return shms__fail(shms__from_errno(e), "cannot lock the owner byte of process entry %u: %s",
                      index, strerror(e));
  }
  shms__store_32(&p->cmd_flags, 0); /* the dead predecessor's command is dead (register) */
  /* A predecessor's recorded release stays for whoever completes it (core/pending.c), unless it
   * died writing it: such a record names no class, and only keeps this entry from recording. */
  if (SHMS__PENDING_CLASS(shms__load_64(&p->pending_release)) == 0xff)
    shms__store_64(&p->pending_release, 0);
  shms__store_64(&p->cgroupns_ino, 0);
  shms__store_32(&p->uid, (uint32_t)geteuid());
  shms__store_32(&p->gid, (uint32_t)getegid());
  shms__store_32((uint32_t *)&p->pid, (uint32_t)getpid());
  shms__store_64(&p->start_time, shms__proc_start_time(getpid()));
  struct shms__pidns ns;
  shms__pidns_self(&ns);
  shms__store_64(&p->pidns_ino, ns.ino);
  shms__store_64(&p->pidns_init_start, ns.init_start);
  shms__store_64(&p->attached_unix_ns, realtime_ns());
  shms__store_32(&p->role, role);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    shms__store_32(&p->ops[c], 0); /* a dead predecessor's operations are not ours */
  for (int t = 0; t < SHMS__MARKS; t++)
    shms__store_32(&p->marks[t], 0);
  /* The lock of its tallies' keys (core/tally.c), which a dead predecessor may hold: the
   * tallies themselves stay, counted, until the new owner moves them into the tenant table. */
  shms__store_32(&p->tally[0].reserved, 0);
  /* Whether our threads mark plainly: visible before any of them marks, hence a full fence (a
   * freezer that reads our PLAIN bit too late must have set FROZEN before our first look at
   * it: docs/protocol.md, "Plain marks"). */
  shms__store_32(&p->marks_used, shms__membarrier_plain() ? SHMS__MARKS_PLAIN : 0u);
  shms__store_32(&p->own_dirty, 0); /* our record: empty, and whole */
  /* Identity fields must be visible before the entry reads as LIVE. */
  ck_pr_fence_memory();
  shms__store_32(&p->state, SHMS__PROC_LIVE);
  return SHMS_OK;
}

/* Claim entry i if it is free (pass 0) or its owner is dead (pass 1): 1 done, 0 not, or an
 * error. */
static int try_claim(const struct shms *h, int fd, uint32_t i, int pass, uint32_t role,
                     uint32_t *dead_owner) {
  uint32_t state = shms__load_32(&shms__proc_at(h, i)->state);
  /* Skip entries that look taken cheaply; the lock below is what decides. */
  if (pass == 0 ? state != SHMS__PROC_FREE : shms__proc_alive(h, fd, i, UINT32_MAX) != 0)
    return 0;
  if (lock_byte(fd, lock_offset(h, i), F_WRLCK) != 0) {
    if (errno == EAGAIN || errno == EACCES)
      return 0; /* a live process holds it */
    return shms__fail(shms__from_errno(errno), "cannot lock process entry %u: %s", i,
                      strerror(errno));
  }
  /* A dead owner's command must be gone before its entry (and the record of it) is ours;
   * one we cannot prove gone leaves the entry to a recovery that may (another uid's). */
  const struct shms__proc *p = shms__proc_at(h, i);
  uint32_t was = shms__load_32(&p->state);
  if (was != SHMS__PROC_FREE && shms__proc_end_command(h, i) != SHMS_OK) {
    lock_byte(fd, lock_offset(h, i), F_UNLCK);
    return 0;
  }
  /* A dead owner that got as far as LIVE may have held leases and requests: its id, for the
   * caller to settle (one that died claiming owned nothing yet). */
  *dead_owner = was == SHMS__PROC_LIVE ? SHMS__OWNER(i, shms__load_32(&p->gen)) : 0;
  int rc = claim(h, fd, i, role);
  return rc == SHMS_OK ? 1 : rc;
}

int shms__proc_register(const struct shms *h, int fd, uint32_t role, uint32_t *index_out,
                        uint32_t *dead_owner) {
  /* Free entries first: a dead owner's entry, taken over, no longer says that its owner died
   * without detaching, which the supervisor reads there (docs/protocol.md, "Process entries"). */
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t i = 0; i < h->layout.procs_count; i++) {
      int rc = try_claim(h, fd, i, pass, role, dead_owner);
      if (rc == 1)
        *index_out = i;
      if (rc != 0)
        return rc == 1 ? SHMS_OK : rc;
    }
  return shms__fail(SHMS_EBUSY, "process table is full: %u live processes attached",
                    h->layout.procs_count);
}

void shms__proc_unregister(const struct shms *h, int fd, uint32_t index) {
  struct shms__proc *p = shms__proc_at(h, index);
  uint32_t owner = SHMS__OWNER(index, shms__load_32(&p->gen));
  shms__store_32((uint32_t *)&p->pid, 0);
  ck_pr_fence_store();
  shms__store_32(&p->state, SHMS__PROC_FREE);
  /* Only after the entry reads FREE may another process claim it. (Reaping a dead owner, we
   * never held its byte: letting go of it changes nothing.) */
  lock_byte(fd, owner_offset(owner), F_UNLCK);
  lock_byte(fd, lock_offset(h, index), F_UNLCK);
}

void shms__proc_abandon(const struct shms *h, int fd, uint32_t index) {
  struct shms__proc *p = shms__proc_at(h, index);
  lock_byte(fd, owner_offset(SHMS__OWNER(index, shms__load_32(&p->gen))), F_UNLCK);
  lock_byte(fd, lock_offset(h, index), F_UNLCK);
}

int shms__proc_reap(const struct shms *h, int fd, uint32_t index) {
  return shms__proc_reap_gen(h, fd, index, shms__load_32(&shms__proc_at(h, index)->gen));
}

int shms__proc_reap_gen(const struct shms *h, int fd, uint32_t index, uint32_t gen) {
  struct shms__proc *p = shms__proc_at(h, index);
  if (shms__load_32(&p->state) == SHMS__PROC_FREE)
    return 0;
  if (lock_byte(fd, lock_offset(h, index), F_WRLCK) != 0)
    return 0;                          /* alive, or being claimed right now */
  if (shms__load_32(&p->gen) != gen) { /* claimed again since: another owner's entry */
    lock_byte(fd, lock_offset(h, index), F_UNLCK);
    return 0;
  }
  if (shms__proc_end_command(h, index) != SHMS_OK) {
    lock_byte(fd, lock_offset(h, index), F_UNLCK);
    return 0; /* its command may still run: the entry keeps its record */
  }
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    shms__store_32(&p->ops[c], 0);
  for (int t = 0; t < SHMS__MARKS; t++)
    shms__store_32(&p->marks[t], 0);
  /* The lock of its tallies' keys (core/tally.c), which a dead predecessor may hold: the
   * tallies themselves stay, counted, until the new owner moves them into the tenant table. */
  shms__store_32(&p->tally[0].reserved, 0);
  shms__store_32(&p->marks_used, 0);
  shms__proc_unregister(h, fd, index);
  return 1;
}

uint32_t shms__proc_count_live(const struct shms *h, int fd, uint32_t self, pid_t *pids,
                               uint32_t max, int but_supervisor) {
  uint32_t live = 0;
  for (uint32_t i = 0; i < h->layout.procs_count; i++) {
    if (shms__proc_alive(h, fd, i, self) != 1)
      continue;
    if (but_supervisor &&
        shms__load_32(&shms__proc_at(h, i)->role) == (uint32_t)SHMS__ROLE_SUPERVISOR)
      continue;
    if (pids != NULL && live < max)
      pids[live] = (pid_t)shms__load_32((uint32_t *)&shms__proc_at(h, i)->pid);
    live++;
  }
  return live;
}

/* ---- the command a process runs, and killing it when the process is gone ---- */

/* How long a kill waits for a command tree to be gone: SIGKILLed processes exit at once, unless
 * stuck in the kernel (uninterruptible sleep). */
#define KILL_WAIT_NS (2ull * 1000 * 1000 * 1000)

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct group {
  pid_t pgid;
  int found;
};

/* Stops the walk at a live process of the group (a zombie is not: it runs nothing). */
static int of_group(const struct shms__proc_stat *st, void *ctx) {
  struct group *g = ctx;
  g->found = st->pgrp == g->pgid && st->state != 'Z' && st->state != 'X';
  return g->found;
}

/* 1 if a process of group pgid is alive, from /proc. */
static int group_alive(pid_t pgid) {
  struct group g = {pgid, 0};
  if (shms__proc_scan(of_group, &g) != 0)
    return 1; /* cannot tell: assume it is */
  return g.found;
}

/*
 * SIGKILL process group pgid of namespace ns, whose leader started at start_time, and wait
 * until no process of it is alive: only once the group is proven to be that one here
 * (shm/pidns.h); a number of another namespace is never signalled as it is. 1 gone; 0 not, with
 * *why saying why.
 */
static int kill_group(const struct shms__pidns *ns, pid_t pgid, uint64_t start_time,
                      const char **why) {
  if (pgid <= 1)
    return 1;
  pid_t here = 0;
  int found = shms__pidns_group(ns, pgid, start_time, &here, why);
  if (found == SHMS__GROUP_GONE)
    return 1;
  if (found == SHMS__GROUP_UNPROVEN || here <= 1)
    return 0;
  if (kill(-here, SIGKILL) != 0 && errno != ESRCH) {
    *why = errno == EPERM ? "not permitted to kill it" : strerror(errno);
    return 0; /* another user's: not ours to prove gone */
  }
  uint64_t until = mono_ns() + KILL_WAIT_NS;
  while (group_alive(here)) {
    if (mono_ns() >= until) {
      *why = "still alive after SIGKILL";
      return 0;
    }
    struct timespec ms = {0, 1000L * 1000};
    nanosleep(&ms, NULL);
  }
  return 1;
}

/*
 * Kill entry index's command cgroup and wait until it is empty. A cgroup named here by the path
 * its recorder used that does not exist is proof of nothing unless we see the recorder's cgroup
 * namespace: a container's cgroups live under its own root, which another namespace may not see
 * under that path, or at all.
 */
static int end_cgroup(const struct shms *h, struct shms__proc *p, uint32_t index, char *path,
                      size_t n) {
  if (shms__cgroup_path(path, n, h->incarnation, index, shms__load_32(&p->gen)) != 0)
    path[0] = '\0'; /* no hierarchy here at all: as good as a path that does not exist */
  struct stat st;
  if (path[0] == '\0' || (stat(path, &st) != 0 && errno == ENOENT)) {
    uint64_t ns = shms__load_64(&p->cgroupns_ino);
    if (ns == 0 || ns != shms__cgroupns_self())
      return shms__fail(SHMS_EBUSY,
                        "process entry %u: its command's cgroup was made in cgroup namespace %llu, "
                        "which this process does not see (%s): its processes cannot be proven "
                        "gone",
                        index, (unsigned long long)ns, path[0] != '\0' ? path : "no cgroup here");
    return SHMS_OK;
  }
  if (!shms__cgroup_kill(path, KILL_WAIT_NS))
    return shms__fail(SHMS_EBUSY, "process entry %u: its command's cgroup %s: %s", index, path,
                      errno == EBUSY ? "still has live processes after SIGKILL" : strerror(errno));
  return SHMS_OK;
}

int shms__proc_end_command(const struct shms *h, uint32_t index) {
  struct shms__proc *p = shms__proc_at(h, index);
  uint32_t flags = shms__load_32(&p->cmd_flags);
  if (flags == 0)
    return SHMS_OK;
  ck_pr_fence_load(); /* the record's fields were stored before its flags */
  char path[PATH_MAX];
  int rc = (flags & SHMS__CMD_CGROUP) ? end_cgroup(h, p, index, path, sizeof path) : SHMS_OK;
  if (rc != SHMS_OK)
    return rc;
  SHMS__STEP(); /* a killer dying here leaves the record: the next one kills again */
  pid_t pgid = (pid_t)shms__load_32((uint32_t *)&p->cmd_pgid);
  struct shms__pidns ns = {shms__load_64(&p->pidns_ino), shms__load_64(&p->pidns_init_start)};
  const char *why = "";
  if ((flags & SHMS__CMD_SET) && !kill_group(&ns, pgid, shms__load_64(&p->cmd_start_time), &why))
    return shms__fail(SHMS_EBUSY,
                      "process entry %u: its command's process group %d (pid namespace %llu): %s",
                      index, (int)pgid, (unsigned long long)ns.ino, why);
  SHMS__STEP();
  shms__store_32(&p->cmd_flags, 0);
  return SHMS_OK;
}

int shms__proc_kill_command(const struct shms *h, int fd, uint32_t owner) {
  uint32_t index = SHMS__OWNER_INDEX(owner);
  if (owner == 0 || index >= h->layout.procs_count)
    return SHMS_OK;
  struct shms__proc *p = shms__proc_at(h, index);
  for (;;) {
    /* Claimed again since: its claimant ended the command before it moved the generation. */
    if ((shms__load_32(&p->gen) & 0xfffu) != (owner & 0xfffu))
      return SHMS_OK;
    if (shms__owner_alive(h, fd, owner, 0) == 1)
      return shms__fail(SHMS_EBUSY, "process entry %u: its owner is alive", index);
    if (lock_byte(fd, lock_offset(h, index), F_WRLCK) == 0)
      break;
    if (errno != EAGAIN && errno != EACCES)
      return shms__fail(shms__from_errno(errno), "cannot lock process entry %u: %s", index,
                        strerror(errno));
    /* A claimant or another killer is at it: wait for its verdict. */
    struct timespec ms = {0, 1000L * 1000};
    nanosleep(&ms, NULL);
  }
  int rc = SHMS_OK;
  if ((shms__load_32(&p->gen) & 0xfffu) == (owner & 0xfffu))
    rc = shms__proc_end_command(h, index);
  lock_byte(fd, lock_offset(h, index), F_UNLCK);
  return rc;
}

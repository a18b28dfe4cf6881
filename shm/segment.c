/*
 * Creating, attaching, detaching and destroying segments.
 *
 * Each process keeps one registration per segment file, shared by all of its
 * handles, and keeps every descriptor of that file open until its last handle
 * detaches: closing any descriptor of a file drops all of the process's POSIX
 * locks on it, which would make the process look dead (proc.h).
 */
#include <ck_pr.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "atomic.h"
#include "cgroup.h"
#include "crashpoint.h"
#include "error.h"
#include "format.h"
#include "handle.h"
#include "identity.h"
#include "proc.h"
#include "segpath.h"

struct shms__file {
  struct shms__file *next;
  dev_t dev;
  ino_t ino;
  int fd_ro, fd_rw;         /* -1 when not open */
  uint32_t refs;            /* handles using this file */
  uint32_t registered_refs; /* of which registered (neither observer nor admin) */
  uint32_t proc_index;      /* our entry while registered_refs > 0 */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shms__file *registry;
static pid_t registry_pid;

/* A forked child inherits the list but none of the locks: start it afresh. */
static void registry_after_fork(void) {
  if (registry_pid == getpid())
    return;
  while (registry != NULL) {
    struct shms__file *f = registry;
    registry = f->next;
    if (f->fd_ro >= 0)
      close(f->fd_ro);
    if (f->fd_rw >= 0)
      close(f->fd_rw);
    free(f);
  }
  registry_pid = getpid();
}

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t random_u64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
    v = realtime_ns() ^ ((uint64_t)getpid() << 32);
  return v ? v : 1;
}

static int open_fail(int e, const char *name, const char *what) {
  return shms__fail(shms__from_errno(e), "cannot %s segment '%s': %s", what, name, strerror(e));
}

/* Whether path (a segment's file) still names the file open as fd. */
static int same_file(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Remove the file we created, but only if path still names it. */
static void unlink_if_ours(const char *path, int fd) {
  if (same_file(fd, path))
    unlink(path);
}

static int size_and_map(const char *name, int fd, const shms_config *cfg) {
  struct shms__layout l;
  uint64_t size = shms__layout_compute(cfg, &l);
  /* Reserve every page now: a tmpfs that runs out later would SIGBUS a process at random. */
  int e = posix_fallocate(fd, 0, (off_t)size);
  if (e == EOPNOTSUPP || e == ENOSYS)
    e = ftruncate(fd, (off_t)size) == 0 ? 0 : errno;
  if (e != 0)
    return shms__fail(shms__from_errno(e), "cannot size segment '%s' to %llu bytes: %s", name,
                      (unsigned long long)size, strerror(e));
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED)
    return open_fail(errno, name, "map");
  shms__format(base, cfg, &l, random_u64(), realtime_ns());
  munmap(base, size);
  return SHMS_OK;
}

int shms_create(const char *name, const shms_config *cfg) {
  int rc = shms_name_check(name);
  if (rc != SHMS_OK)
    return rc;
  if ((rc = shms_config_validate(cfg)) != SHMS_OK)
    return rc;
  char path[SHMS__PATH_MAX];
  int fd = -1;
  if ((rc = shms__seg_path(name, path, sizeof path)) != SHMS_OK ||
      (rc = shms__seg_create(name, path, cfg->file_mode, &fd)) != SHMS_OK)
    return rc;
  /* The umask must not narrow the mode the operator asked for. */
  if (fchmod(fd, cfg->file_mode) != 0)
    rc = open_fail(errno, name, "set the mode of");
  else if (cfg->group >= 0 && fchown(fd, (uid_t)-1, (gid_t)cfg->group) != 0)
    rc = shms__fail(shms__from_errno(errno), "cannot give segment '%s' to group %lld: %s", name,
                    (long long)cfg->group, strerror(errno));
  else
    rc = size_and_map(name, fd, cfg);
  if (rc != SHMS_OK)
    unlink_if_ours(path, fd);
  close(fd);
  return rc;
}

static struct shms__file *registry_find(dev_t dev, ino_t ino) {
  for (struct shms__file *f = registry; f != NULL; f = f->next)
    if (f->dev == dev && f->ino == ino)
      return f;
  return NULL;
}

/* Find or open this process's entry for NAME with a descriptor of the needed access. */
static int file_get(const char *name, int writable, struct shms__file **out, int *fd_out) {
  char path[SHMS__PATH_MAX];
  struct stat st;
  int rc = shms__seg_path(name, path, sizeof path);
  if (rc != SHMS_OK)
    return rc;
  /* Judged without opening: a descriptor of a file we have locks on must not be closed. */
  if ((rc = shms__seg_check(name, path, &st)) != SHMS_OK)
    return rc;
  struct shms__file *f = registry_find(st.st_dev, st.st_ino);
  int fd = f == NULL ? -1 : (writable ? f->fd_rw : (f->fd_rw >= 0 ? f->fd_rw : f->fd_ro));
  if (fd < 0) {
    if ((rc = shms__seg_open(name, path, writable ? O_RDWR : O_RDONLY, &fd)) != SHMS_OK)
      return rc;
    if (fstat(fd, &st) != 0) {
      int e = errno;
      close(fd);
      return open_fail(e, name, "inspect");
    }
    /* NAME may have been replaced since stat(): key by what we actually opened. */
    f = registry_find(st.st_dev, st.st_ino);
    if (f == NULL) {
      if ((f = shms__calloc(1, sizeof *f)) == NULL) {
        close(fd);
        return shms__fail(SHMS_ENOMEM, "cannot allocate a handle");
      }
      *f = (struct shms__file){.next = registry,
                               .dev = st.st_dev,
                               .ino = st.st_ino,
                               .fd_ro = -1,
                               .fd_rw = -1,
                               .proc_index = UINT32_MAX};
      registry = f;
    }
    int *slot = writable ? &f->fd_rw : &f->fd_ro;
    if (*slot >= 0)
      close(fd); /* raced with ourselves: impossible under registry_lock, but harmless */
    else
      *slot = fd;
    fd = *slot;
  }
  *out = f;
  *fd_out = fd;
  return SHMS_OK;
}

/* Drop a reference; the last one closes the descriptors (and with them our locks). */
static void file_put(struct shms__file *f) {
  if (--f->refs > 0)
    return;
  for (struct shms__file **p = &registry; *p != NULL; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      break;
    }
  if (f->fd_ro >= 0)
    close(f->fd_ro);
  if (f->fd_rw >= 0)
    close(f->fd_rw);
  free(f);
}

static int map_and_validate(const char *name, int fd, int writable, struct shms *h) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return open_fail(errno, name, "inspect");
  if ((uint64_t)st.st_size < sizeof(struct shms__header))
    return shms__validate(NULL, (uint64_t)st.st_size);
  void *base =
      mmap(NULL, (size_t)st.st_size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
  if (base == MAP_FAILED)
    return open_fail(errno, name, "map");
  int rc = shms__validate(base, (uint64_t)st.st_size);
  if (rc != SHMS_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", shms_last_error_detail());
    munmap(base, (size_t)st.st_size);
    return shms__fail(rc, "segment '%s': %s", name, why);
  }
  h->base = base;
  h->size = (uint64_t)st.st_size;
  h->hdr = base;
  /* Every view and limit comes from what was validated, not from later reads of the header. */
  memcpy(&h->config, &h->hdr->config, sizeof h->config);
  h->incarnation = h->hdr->incarnation;
  if (shms__validate_config_copy(&h->config, h->size) != SHMS_OK) {
    munmap(base, (size_t)st.st_size);
    return shms__fail(SHMS_EINCOMPAT, "segment '%s' changed while it was being validated", name);
  }
  shms__layout_compute(&h->config, &h->layout);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    h->cls[c].id = -1;
    if (h->config.classes[c].configured)
      shms__cls_init(&h->cls[c], h->base, c, &h->config, &h->layout);
    h->cls[c].h = h;
  }
  shms__evlog_init(&h->events, h->base, &h->layout);
  return SHMS_OK;
}

static int attach_locked(const char *name, unsigned flags, struct shms *h) {
  int observer = (flags & SHMS_ATTACH_OBSERVER) != 0;
  int registers = !observer && !(flags & SHMS__ATTACH_ADMIN);
  struct shms__file *f = NULL;
  int fd = -1, rc = file_get(name, !observer, &f, &fd);
  if (rc != SHMS_OK)
    return rc;
  // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): file_get sets f whenever it succeeds
  f->refs++;
  if ((rc = map_and_validate(name, fd, !observer, h)) != SHMS_OK) {
    file_put(f);
    return rc;
  }
  if (registers && shms__load_32(&h->hdr->state) == SHMS_SEG_DESTROYING)
    rc = shms__fail(SHMS_ESHUTDOWN, "segment '%s' is being destroyed", name);
  else if (registers && f->registered_refs == 0)
    rc = shms__proc_register(h, fd, 0, &f->proc_index, &h->took_over);
  if (rc != SHMS_OK) {
    munmap(h->base, h->size);
    file_put(f);
    return rc;
  }
  if (registers)
    f->registered_refs++;
  h->file = f;
  h->fd = fd;
  h->self = registers ? f->proc_index : UINT32_MAX;
  if (registers) {
    h->proc = shms__proc_at(h, h->self);
    h->owner = SHMS__OWNER(h->self, shms__load_32(&h->proc->gen));
    /* From the entry, which our first registration on this file set: every handle of the
     * process on it marks the same way (shm/membarrier.h). */
    h->marks_plain = (shms__load_32(&h->proc->marks_used) & SHMS__MARKS_PLAIN) != 0;
  }
  return SHMS_OK;
}

static pid_t self_pid;
static pthread_once_t self_pid_once = PTHREAD_ONCE_INIT;

static void self_pid_after_fork(void) { self_pid = getpid(); }

static void self_pid_init(void) {
  self_pid = getpid();
  pthread_atfork(NULL, NULL, self_pid_after_fork);
}

/* Our pid without a system call: getpid() is one, and handle checks sit on the fast path. */
static pid_t current_pid(void) {
  pthread_once(&self_pid_once, self_pid_init);
  return self_pid;
}

int shms__segment_attach(const char *name, unsigned flags, shms__finish_fn *finish,
                         struct shms **out) {
  int rc = shms_name_check(name);
  if (rc != SHMS_OK)
    return rc;
  if (out == NULL)
    return shms__fail(SHMS_EINVAL, "out is NULL");
  struct shms *h = shms__calloc(1, sizeof *h);
  if (h == NULL)
    return shms__fail(SHMS_ENOMEM, "cannot allocate a handle");
  h->flags = flags;
  h->pid = current_pid();
  h->finish = finish;
  pthread_mutex_init(&h->sleepers_lock, NULL);
  pthread_mutex_lock(&registry_lock);
  registry_after_fork();
  rc = attach_locked(name, flags, h);
  pthread_mutex_unlock(&registry_lock);
  if (rc != SHMS_OK) {
    pthread_mutex_destroy(&h->sleepers_lock);
    free(h);
    return rc;
  }
  *out = h;
  return SHMS_OK;
}

int shms__handle_check(const struct shms *h) {
  if (h == NULL)
    return shms__fail(SHMS_EINVAL, "handle is NULL");
  /* self_pid was set when h was attached, and a fork updated it in the child: no call needed. */
  if (h->pid != self_pid)
    return shms__fail(SHMS_EINVAL, "handle was attached by process %d; attach again after fork",
                      (int)h->pid);
  return SHMS_OK;
}

int shms__segment_detach(struct shms *h, shms__leave_fn *leave) {
  int rc = shms__handle_check(h);
  if (rc == SHMS_OK) {
    pthread_mutex_lock(&registry_lock);
    struct shms__file *f = h->file;
    if (h->self != UINT32_MAX && --f->registered_refs == 0) {
      /* The process leaves the segment: nothing it held may stay behind, nor any command it
       * recorded as running under what it held (first: the leases go after it). */
      int contained = shms__proc_end_command(h, f->proc_index) == SHMS_OK;
      if (leave == NULL || leave(h, h->owner, contained))
        shms__proc_unregister(h, f->fd_rw, f->proc_index);
      else
        shms__proc_abandon(h, f->fd_rw, f->proc_index);
      f->proc_index = UINT32_MAX;
    }
    file_put(f);
    pthread_mutex_unlock(&registry_lock);
  }
  munmap(h->base, h->size);
  pthread_mutex_destroy(&h->sleepers_lock);
  free(h);
  return rc;
}

/* Mark the segment DESTROYING unless live processes are attached (or force). */
static int refuse_if_busy(struct shms *h, const char *name, unsigned flags, uint32_t *old) {
  uint32_t *state = &h->hdr->state;
  do {
    *old = shms__load_32(state);
  } while (!ck_pr_cas_32(state, *old, SHMS_SEG_DESTROYING));
  pid_t pids[8];
  /* A supervisor does not keep a segment in use: it leaves once the segment is removed. */
  uint32_t live = shms__proc_count_live(h, h->fd, shms__self_index(h), pids, 8, 1);
  if (live == 0 || (flags & SHMS_DESTROY_FORCE))
    return SHMS_OK;
  shms__store_32(state, *old);
  char list[128] = "";
  for (uint32_t i = 0; i < live && i < 8; i++) {
    size_t n = strlen(list);
    snprintf(list + n, sizeof list - n, "%s%d", i ? ", " : "", (int)pids[i]);
  }
  return shms__fail(SHMS_EBUSY,
                    "segment '%s' has %u live attached process%s (pid %s%s); "
                    "SHMS_DESTROY_FORCE removes it anyway",
                    name, live, live == 1 ? "" : "es", list, live > 8 ? ", ..." : "");
}

/*
 * NAME failed validation. An operator must be able to remove a corrupt or
 * foreign-version segment (with force), but never a file that is not a
 * shmsched segment at all: that is someone else's, and its directory (/dev/shm
 * or another) is shared. It is judged from an open descriptor, and unlinked
 * only if path still names that file.
 */
static int destroy_invalid(const char *name, const char *path, unsigned flags) {
  char why[256];
  snprintf(why, sizeof why, "%s", shms_last_error_detail());
  int fd = -1;
  int rc = shms__seg_open(name, path, O_RDONLY, &fd);
  if (rc != SHMS_OK)
    return rc;
  struct stat st;
  char head[sizeof(struct shms__header)];
  ssize_t len = fstat(fd, &st) == 0 ? pread(fd, head, sizeof head, 0) : -1;
  int e = errno;
  if (len < 0) {
    close(fd);
    return open_fail(e, name, "read");
  }
  int ours = shms__format_recognise(head, (size_t)len, (uint64_t)st.st_size);
  if (!ours)
    rc = shms__fail(SHMS_EINCOMPAT,
                    "%s (%lld bytes) is not a shmsched segment: its first 8 bytes are "
                    "not the magic, nor is it one of ours whose creation was cut short; not "
                    "removed, forced or not (remove it by hand if you know whose it is)",
                    path, (long long)st.st_size);
  else if (!(flags & SHMS_DESTROY_FORCE))
    rc = shms__fail(SHMS_EINCOMPAT, "%s; SHMS_DESTROY_FORCE removes it anyway", why);
  else if (!same_file(fd, path))
    rc = shms__fail(SHMS_EBUSY, "segment '%s' was replaced while it was being removed", name);
  else if (unlink(path) != 0)
    rc = open_fail(errno, name, "remove");
  close(fd);
  return rc;
}

/* Whether entry index at generation gen is a live process's: its cgroup is its own to remove
 * (at its detach), and may be joined by its next command meanwhile. */
static int entry_live(void *ctx, uint32_t index, uint32_t gen) {
  const struct shms *h = ctx;
  if (index >= h->layout.procs_count)
    return 0;
  const struct shms__proc *p = shms__proc_at(h, index);
  return shms__load_32((uint32_t *)&p->gen) == gen &&
         shms__load_32((uint32_t *)&p->state) != SHMS__PROC_FREE &&
         shms__proc_alive(h, h->fd, index, shms__self_index(h)) != 0;
}

/*
 * The segment's file is gone: nobody can dispose of what its dead processes left any
 * more. So end each dead process's recorded command now, with its cgroup (what recovery would
 * have done before handing its cells on: docs/operations.md, "Containment"), and remove the
 * empty cgroups left of processes that died unrecovered. A live process ends its own at its
 * detach.
 */
static void end_dead_commands(struct shms *h) {
  uint32_t self = shms__self_index(h);
  for (uint32_t i = 0; i < h->layout.procs_count; i++)
    if (i != self && shms__load_32(&shms__proc_at(h, i)->state) != SHMS__PROC_FREE &&
        shms__proc_alive(h, h->fd, i, self) == 0)
      shms__proc_reap(h, h->fd, i);
  shms__cgroup_sweep(h->incarnation, entry_live, h);
}

int shms_destroy(const char *name, unsigned flags) {
  int rc = shms_name_check(name);
  if (rc != SHMS_OK)
    return rc;
  char path[SHMS__PATH_MAX];
  if ((rc = shms__seg_path(name, path, sizeof path)) != SHMS_OK)
    return rc;
  shms_t *h;
  struct stat st;
  rc = shms__segment_attach(name, SHMS__ATTACH_ADMIN, NULL, &h);
  /* A refusal of what is at path (a directory, a FIFO, a link...) stands: only a file that is
   * not a valid segment is judged further. */
  if (rc == SHMS_EINCOMPAT && shms__seg_check(name, path, &st) == SHMS_OK)
    return destroy_invalid(name, path, flags);
  if (rc != SHMS_OK)
    return rc;
  uint32_t old = SHMS_SEG_ACTIVE;
  rc = shms__admin_check(h, "destroy the segment");
  if (rc == SHMS_OK)
    rc = refuse_if_busy(h, name, flags, &old);
  /* Only the file we attached: path may have been replaced since. */
  if (rc == SHMS_OK && !same_file(h->fd, path)) {
    rc = shms__fail(SHMS_EBUSY, "segment '%s' was replaced while it was being removed", name);
    shms__store_32(&h->hdr->state, old);
  } else if (rc == SHMS_OK && unlink(path) != 0) {
    rc = open_fail(errno, name, "remove");
    shms__store_32(&h->hdr->state, old);
  }
  if (rc == SHMS_OK)
    end_dead_commands(h);
  char why[256];
  snprintf(why, sizeof why, "%s", shms_last_error_detail());
  shms__segment_detach(h, NULL); /* an admin handle never registers: it leaves nothing held */
  return rc == SHMS_OK ? rc : shms__fail(rc, "%s", why);
}

int shms_segment_removed(const shms_t *h) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  struct stat st;
  if (fstat(h->fd, &st) != 0)
    return shms__fail(SHMS_ESYSTEM, "cannot stat the segment: %s", strerror(errno));
  /* A segment file's one link is its name (destroy unlinks it); a link an operator added by
   * hand keeps the file, and so the segment, until it goes too. */
  return st.st_nlink == 0;
}

int shms_get_config(const shms_t *h, shms_config *out) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (out == NULL)
    return shms__fail(SHMS_EINVAL, "out is NULL");
  *out = h->config;
  return SHMS_OK;
}

/* Who holds the supervisor lock (SHMS__LOCK_SUPERVISOR), asked of the kernel: F_GETLK needs no
 * write access, so an observer's read-only descriptor will do. A lock of our own process never
 * conflicts with us, so our own entry's role answers for us. */
static int32_t supervisor_pid(const struct shms *h) {
  uint32_t self = shms__self_index(h);
  if (self != UINT32_MAX && self < h->layout.procs_count &&
      shms__load_32(&shms__proc_at(h, self)->role) == (uint32_t)SHMS__ROLE_SUPERVISOR)
    return (int32_t)getpid();
  struct flock fl = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHMS__LOCK_SUPERVISOR, .l_len = 1};
  if (fcntl(h->fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
    return 0;
  return (int32_t)fl.l_pid;
}

int shms_segment_info_get(const shms_t *h, shms_segment_info *out) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (out == NULL)
    return shms__fail(SHMS_EINVAL, "out is NULL");
  const struct shms__header *hdr = h->hdr;
  *out = (shms_segment_info){
      .incarnation = hdr->incarnation,
      .created_unix_ns = hdr->created_unix_ns,
      .size = h->layout.total_size,
      .layout_version = hdr->layout_version,
      .state = shms__load_32((uint32_t *)&hdr->state),
      .live_processes = shms__proc_count_live(h, h->fd, shms__self_index(h), NULL, 0, 0),
      .max_processes = h->layout.procs_count,
      .supervisor_pid = supervisor_pid(h),
  };
  /* The file as it is now: an operator may have changed its mode or group since create. */
  struct stat st;
  if (fstat(h->fd, &st) != 0)
    return shms__fail(shms__from_errno(errno), "cannot stat the segment file: %s", strerror(errno));
  out->file_mode = (uint32_t)(st.st_mode & 07777);
  out->file_gid = (uint32_t)st.st_gid;
  out->file_uid = (uint32_t)st.st_uid;
  out->file_size = (uint64_t)st.st_size;
  return SHMS_OK;
}

uint32_t shms__self_index(const struct shms *h) {
  /* Our own lock never conflicts with us, so the kernel cannot vouch for our own entry. */
  return shms__load_32(&h->file->proc_index);
}

struct shms__cls *shms__class(struct shms *h, int c) {
  if (c < 0 || c >= SHMS_CLASS_COUNT || h->cls[c].id < 0) {
    shms__detail("class %s is not configured in this segment",
                 c >= 0 && c < SHMS_CLASS_COUNT ? shms_class_name((shms_class_t)c)
                                                : "(out of range)");
    return NULL;
  }
  return &h->cls[c];
}

int shms__handle_check_member(const struct shms *h) {
  int rc = shms__handle_check(h);
  if (rc == SHMS_OK && h->owner == 0)
    rc = shms__fail(SHMS_EINVAL, "an observer handle cannot take part in scheduling");
  return rc;
}

const struct shms__class_desc *shms__class_desc(const struct shms *h, int c) {
  if (c < 0 || c >= SHMS_CLASS_COUNT || !(h->layout.class_mask & (1u << c))) {
    shms__detail("class %s is not configured in this segment",
                 c >= 0 && c < SHMS_CLASS_COUNT ? shms_class_name((shms_class_t)c) : "?");
    return NULL;
  }
  return &h->layout.classes[c];
}

/* Pid numbers across pid namespaces: which namespace a number is of, what it names here. */
#include "pidns.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "procfs.h"

/* The initial pid namespace's inode, fixed by the kernel (include/linux/proc_ns.h). */
#define INIT_PIDNS_INO 0xEFFFFFFCull

int shms__procfs_ours(void) {
  char buf[32];
  ssize_t n = readlink("/proc/self", buf, sizeof buf - 1);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  char *end;
  long v = strtol(buf, &end, 10);
  return *end == '\0' && v == (long)getpid();
}

static int ns_ino(const char *proc_name, uint64_t *ino) {
  char path[300];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%s/ns/pid", proc_name);
  if (stat(path, &st) != 0)
    return -1;
  *ino = (uint64_t)st.st_ino;
  return 0;
}

void shms__pidns_self(struct shms__pidns *out) {
  out->ino = 0;
  out->init_start = 0;
  if (ns_ino("self", &out->ino) != 0)
    out->ino = 0;
  else if (shms__procfs_ours())
    out->init_start = shms__proc_start_time(1);
}

static int parse_levels(const char *buf, const char *key, long *out) {
  const char *p = strstr(buf, key);
  if (p == NULL)
    return 0;
  p += strlen(key);
  int n = 0;
  while (n < SHMS__PIDNS_LEVELS && *p != '\n' && *p != '\0') {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p)
      break;
    out[n++] = v;
    p = end;
  }
  return n;
}

static int read_nsids(const char *proc_name, struct shms__pidns_proc *ids) {
  char buf[8192];
  ids->n = 0;
  if (shms__procfs_read(proc_name, "status", buf, sizeof buf) != 0)
    return -1;
  ids->n = parse_levels(buf, "\nNSpid:", ids->pid);
  int ng = parse_levels(buf, "\nNSpgid:", ids->pgid);
  return ids->n > 0 && ng == ids->n ? 0 : -1;
}

int shms__pidns_scan(int (*fn)(const struct shms__pidns_proc *p, void *ctx), void *ctx) {
  DIR *d = opendir("/proc");
  if (d == NULL)
    return -1;
  int unreadable = 0;
  struct dirent *e;
  struct shms__pidns_proc p;
  while ((e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0]))
      continue;
    /* A process with one number is of our own namespace: the callers look below it only,
     * and its namespace's inode is not even read. */
    if (read_nsids(e->d_name, &p) != 0 || p.n == 1) {
      if (p.n != 1 && ns_ino(e->d_name, &p.ino) != 0 && errno != ENOENT && errno != ESRCH)
        unreadable++; /* status unreadable and the namespace too: not merely gone */
      continue;
    }
    if (ns_ino(e->d_name, &p.ino) != 0) {
      if (errno != ENOENT && errno != ESRCH)
        unreadable++; /* gone meanwhile is not a process; anything else hides one */
      continue;
    }
    p.name = e->d_name;
    if (fn(&p, ctx))
      break;
  }
  closedir(d);
  return unreadable;
}

/* Whether the pid namespace `up` levels above proc_name's own is the one of inode ino: 1 yes, 0
 * no, -1 cannot tell. */
static int ancestor_is(const char *proc_name, int up, uint64_t ino) {
  char path[300];
  snprintf(path, sizeof path, "/proc/%s/ns/pid", proc_name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT || errno == ESRCH ? 0 : -1;
  for (int i = 0; i < up && fd >= 0; i++) {
    int parent = ioctl(fd, NS_GET_PARENT);
    close(fd);
    fd = parent;
  }
  if (fd < 0)
    return -1;
  struct stat st;
  int r = fstat(fd, &st) == 0 ? (uint64_t)st.st_ino == ino : -1;
  close(fd);
  return r;
}

/* What a walk over /proc found of namespace ns and of group pgid in it. */
struct found {
  int seen;       /* processes of the namespace */
  int unreadable; /* processes whose namespace could not be read */
  int depth;      /* the namespace's level below ours */
  uint64_t init_start;
  int init_found;
  long leader; /* the group's leader, here; 0 none */
  uint64_t leader_start;
  long group;    /* the group's number here, from a member; 0 none */
  int undecided; /* a process of a deeper namespace whose ancestry could not be read */
};

/* What walk looks for, and what it found. */
struct walking {
  const struct shms__pidns *ns;
  pid_t pgid;
  int deeper;
  struct found *f;
};

static int walk_one(const struct shms__pidns_proc *p, void *ctx) {
  const struct walking *w = ctx;
  struct found *f = w->f;
  if (!w->deeper && p->ino == w->ns->ino) {
    f->seen++;
    f->depth = p->n - 1;
    uint64_t start = shms__proc_start_time((pid_t)p->pid[0]);
    if (p->pid[p->n - 1] == 1) {
      f->init_found = 1;
      f->init_start = start;
    }
    if (p->pid[p->n - 1] == w->pgid) {
      f->leader = p->pid[0];
      f->leader_start = start;
    }
    if (p->pgid[p->n - 1] == w->pgid && p->pgid[0] > 0)
      f->group = p->pgid[0];
  } else if (w->deeper && p->ino != w->ns->ino && p->n > f->depth + 1 &&
             p->pgid[f->depth] == w->pgid && p->pgid[0] > 0) {
    /* Its number at the namespace's level is the group's, if that level is the namespace. */
    int is = ancestor_is(p->name, p->n - 1 - f->depth, w->ns->ino);
    if (is < 0)
      f->undecided++;
    else if (is)
      f->group = p->pgid[0];
  }
  return 0;
}

static void walk(const struct shms__pidns *ns, pid_t pgid, int deeper, struct found *f) {
  struct walking w = {ns, pgid, deeper, f};
  int unreadable = shms__pidns_scan(walk_one, &w);
  f->unreadable += unreadable < 0 ? 1 : unreadable;
}

static int unproven(const char **why, const char *text) {
  *why = text;
  return SHMS__GROUP_UNPROVEN;
}

int shms__pidns_group(const struct shms__pidns *ns, pid_t pgid, uint64_t start, pid_t *here,
                      const char **why) {
  struct shms__pidns me;
  shms__pidns_self(&me);
  if (me.ino == 0 || me.init_start == 0)
    return unproven(why, "the /proc mounted here is not this process's pid namespace's");
  if (ns->ino == 0 || ns->init_start == 0)
    return unproven(why, "it was recorded where /proc showed another pid namespace");
  if (ns->ino == me.ino) {
    /* Two live namespaces never share an inode, and ours lives: the same inode with another
     * init is a dead namespace's (or a clock of another time namespace: then no proof). */
    if (ns->init_start != me.init_start)
      return unproven(why, "its pid namespace's inode is now another namespace's");
    /* A pid in use as a group id is never given to a new process: a process with the
     * leader's pid and another start time means the group has no member left. */
    uint64_t now_start = shms__proc_start_time(pgid);
    if (now_start != 0 && now_start != start)
      return SHMS__GROUP_GONE;
    *here = pgid;
    return SHMS__GROUP_HERE;
  }
  struct found f = {0};
  walk(ns, pgid, 0, &f);
  if (f.seen == 0) {
    /* The initial namespace sees every process of every namespace: none left means the
     * namespace ended, and every process of it (and of those below it) with it. */
    if (me.ino == INIT_PIDNS_INO && f.unreadable == 0)
      return SHMS__GROUP_GONE;
    return unproven(why, f.unreadable ? "processes here whose pid namespace cannot be read"
                                      : "it is of a pid namespace not visible from here");
  }
  if (!f.init_found || f.init_start != ns->init_start)
    return unproven(why, "its pid namespace's inode is now another namespace's");
  if (f.leader != 0) {
    if (f.leader_start != start)
      return SHMS__GROUP_GONE; /* the leader's pid is another process's: no member left */
    *here = (pid_t)f.leader;
    return SHMS__GROUP_HERE;
  }
  if (f.group == 0)
    walk(ns, pgid, 1, &f); /* members only in namespaces below it */
  if (f.group != 0) {
    *here = (pid_t)f.group;
    return SHMS__GROUP_HERE;
  }
  if (f.undecided || f.unreadable)
    return unproven(why, "processes here whose pid namespace cannot be read");
  return SHMS__GROUP_GONE;
}

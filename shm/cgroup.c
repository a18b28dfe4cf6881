/* Command cgroups: finding the hierarchy, making a process's cgroup, killing it (cgroup.h). */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The mount point of the first cgroup2 file system in mountinfo ("... MOUNTPOINT ... - cgroup2
 * ..."). */
static int cgroup2_mount(char *out, size_t n) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL)
    return -1;
  char line[4096];
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f) != NULL) {
    const char *dash = strstr(line, " - ");
    if (dash == NULL || strncmp(dash + 3, "cgroup2 ", 8) != 0)
      continue;
    /* Fields: id parent major:minor root mountpoint ...; mountpoint is the fifth. */
    char *save = NULL, *tok = strtok_r(line, " ", &save);
    for (int i = 1; tok != NULL && i < 5; i++)
      tok = strtok_r(NULL, " ", &save);
    /* A mount point with a space is written \040: leave such a hierarchy alone. */
    if (tok != NULL && tok[0] == '/' && strchr(tok, '\\') == NULL &&
        (size_t)snprintf(out, n, "%s", tok) < n)
      found = 0;
  }
  fclose(f);
  return found;
}

int shms__cgroup_root(char *out, size_t n) {
  const char *env = secure_getenv("SHMSCHED_CGROUP") /* ignored by a setgid program */;
  if (env != NULL && env[0] != '\0') {
    if (strcmp(env, "off") == 0 || env[0] != '/')
      return -1;
    return (size_t)snprintf(out, n, "%s", env) < n ? 0 : -1;
  }
  char mount[PATH_MAX];
  if (cgroup2_mount(mount, sizeof mount) != 0)
    return -1;
  return (size_t)snprintf(out, n, "%s/shmsched", strcmp(mount, "/") == 0 ? "" : mount) < n ? 0 : -1;
}

int shms__cgroup_path(char *out, size_t n, uint64_t incarnation, uint32_t index, uint32_t gen) {
  char root[PATH_MAX];
  if (shms__cgroup_root(root, sizeof root) != 0)
    return -1;
  return (size_t)snprintf(out, n, "%s/%016" PRIx64 "-%" PRIu32 "-%" PRIu32, root, incarnation,
                          index, gen) < n
             ? 0
             : -1;
}

int shms__cgroup_make(const char *path) {
  char root[PATH_MAX];
  snprintf(root, sizeof root, "%s", path);
  char *slash = strrchr(root, '/');
  if (slash == NULL || slash == root)
    return -EINVAL;
  *slash = '\0';
  if (mkdir(root, 0755) != 0 && errno != EEXIST)
    return -errno;
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return -errno;
  return 0;
}

/* The value of "populated" in path/cgroup.events read from fd; -1 if unreadable. */
static int read_populated(int fd) {
  char buf[256];
  ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
  if (r <= 0)
    return -1;
  buf[r] = '\0';
  const char *p = strstr(buf, "populated ");
  return p == NULL ? -1 : p[10] == '1';
}

int shms__cgroup_populated(const char *path) {
  char file[PATH_MAX + 16];
  snprintf(file, sizeof file, "%s/cgroup.events", path);
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  int p = read_populated(fd);
  close(fd);
  return p == 1;
}

/* SIGKILL each process listed in path/cgroup.procs: for kernels before cgroup.kill (5.14). */
static void kill_listed(const char *path) {
  char file[PATH_MAX + 16];
  snprintf(file, sizeof file, "%s/cgroup.procs", path);
  FILE *f = fopen(file, "re");
  if (f == NULL)
    return;
  long pid;
  /* Each is in the cgroup as read; one that exits meanwhile is not reused within a read. */
  // NOLINTNEXTLINE(cert-err34-c): the kernel writes these numbers; a bad one ends the read
  while (fscanf(f, "%ld", &pid) == 1)
    if (pid > 0)
      kill((pid_t)pid, SIGKILL);
  fclose(f);
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Write "1" to path/cgroup.kill: 0, or -1 (errno) when the kernel has no cgroup.kill or refuses. */
static int write_kill(const char *path) {
  char file[PATH_MAX + 16];
  snprintf(file, sizeof file, "%s/cgroup.kill", path);
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int ok = write(fd, "1", 1) == 1;
  int e = errno;
  close(fd);
  errno = e;
  return ok ? 0 : -1;
}

int shms__cgroup_kill(const char *path, uint64_t timeout_ns) {
  char file[PATH_MAX + 16];
  snprintf(file, sizeof file, "%s/cgroup.events", path);
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 1 : 0; /* no such cgroup: nothing of it can run */
  int listed = write_kill(path) != 0;
  if (listed && errno != ENOENT) {
    int e = errno;
    close(fd);
    errno = e;
    return 0; /* not ours to kill */
  }
  uint64_t until = mono_ns() + timeout_ns;
  int populated;
  while ((populated = read_populated(fd)) == 1) {
    uint64_t now = mono_ns();
    if (now >= until)
      break;
    if (listed)
      kill_listed(path);
    /* cgroup.events signals a change with POLLPRI; the 10 ms cap covers a kill one by one. */
    struct pollfd p = {.fd = fd, .events = POLLPRI};
    uint64_t left_ms = (until - now) / 1000000 + 1;
    poll(&p, 1, left_ms < 10 ? (int)left_ms : 10);
  }
  close(fd);
  if (populated != 0) {
    errno = populated == 1 ? EBUSY : EIO;
    return 0;
  }
  rmdir(path); /* empty now; a failure only leaves an empty directory behind */
  return 1;
}

void shms__cgroup_sweep(uint64_t incarnation, int (*keep)(void *ctx, uint32_t index, uint32_t gen),
                        void *ctx) {
  char root[PATH_MAX], prefix[24];
  if (shms__cgroup_root(root, sizeof root) != 0)
    return;
  DIR *d = opendir(root);
  if (d == NULL)
    return;
  snprintf(prefix, sizeof prefix, "%016" PRIx64 "-", incarnation);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned index, gen;
    char end;
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
        // NOLINTNEXTLINE(cert-err34-c): a pattern match; a name it does not fit is skipped
        sscanf(e->d_name + strlen(prefix), "%u-%u%c", &index, &gen, &end) != 2)
      continue; /* not one of this segment's: never ours to remove */
    if (keep == NULL || !keep(ctx, index, gen))
      unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR); /* refused while populated */
  }
  closedir(d);
}

uint64_t shms__cgroupns_self(void) {
  struct stat st;
  return stat("/proc/self/ns/cgroup", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/*
 * The SIGBUS handler (sigbus.h). Everything here runs inside a signal handler,
 * so it uses only async-signal-safe calls (open, read, close, write, _exit, and
 * the string functions POSIX.1-2017 lists as such: strstr, strcspn, strlen,
 * memcpy) and formats by hand: no stdio, no malloc.
 */
#include "sigbus.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char *who = "shmsched";
/* The directory of plain segment names with a trailing '/' ($SHMSCHED_DIR or /dev/shm), read at
 * install: a file there is named as its segment was, by its plain name. */
static char plain_dir[4096];
/* The cgroup of this process's commands (contain.c), "" for none: removed before we exit. */
static char cgroup[4096];

/* A line of text under construction, never past its end. */
struct line {
  char buf[8192];
  size_t len;
};

static void put(struct line *l, const char *s) {
  while (*s != '\0' && l->len + 1 < sizeof l->buf)
    l->buf[l->len++] = *s++;
}

static void put_hex(struct line *l, uintptr_t v) {
  char digits[2 * sizeof v + 1];
  size_t n = sizeof digits - 1;
  digits[n] = '\0';
  do {
    digits[--n] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0 && n > 0);
  put(l, "0x");
  put(l, digits + n);
}

static uintptr_t parse_hex(const char **p) {
  uintptr_t v = 0;
  for (;; (*p)++) {
    char c = **p;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0)
      return v;
    v = v << 4 | (uintptr_t)d;
  }
}

/*
 * One line of /proc/self/maps ("start-end perms offset dev inode   path"):
 * if it maps addr shared from a file, copy the file's path (less a
 * " (deleted)" suffix) into path. Returns 1 then. The CLI maps no file
 * shared but segments, wherever they are (a plain name's directory or any
 * path), so a shared file mapping is taken for one.
 */
static int maps_line(const char *p, uintptr_t addr, char *path, size_t n) {
  uintptr_t start = parse_hex(&p);
  if (*p++ != '-')
    return 0;
  uintptr_t end = parse_hex(&p);
  if (addr < start || addr >= end || *p++ != ' ' || strlen(p) < 4 || p[3] != 's')
    return 0;
  const char *file = strstr(p, " /");
  if (file == NULL)
    return 0;
  file++;
  size_t len = strcspn(file, "\n");
  const char *deleted = " (deleted)";
  size_t dl = strlen(deleted);
  if (len > dl && memcmp(file + len - dl, deleted, dl) == 0)
    len -= dl;
  if (len == 0 || len >= n)
    return 0;
  memcpy(path, file, len);
  path[len] = '\0';
  return 1;
}

/* The segment file mapped at addr, from /proc/self/maps: 1 with its path, or 0. */
static int segment_at(uintptr_t addr, char *name, size_t n) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  char buf[4096], line[8192];
  size_t used = 0;
  int found = 0;
  ssize_t r;
  while (!found && (r = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < r && !found; i++) {
      if (buf[i] != '\n') {
        if (used + 1 < sizeof line)
          line[used++] = buf[i];
        continue;
      }
      line[used] = '\0';
      found = maps_line(line, addr, name, n);
      used = 0;
    }
  close(fd);
  return found;
}

/*
 * We exit without detaching: nobody can recover what we left in a segment that no longer
 * validates, so our cgroup is ours to end. Kill what is left in it (cgroup.kill) and remove it
 * once empty, waiting up to 2 s as the library's kill does. Async-signal-safe calls only.
 */
static void end_cgroup(void) {
  if (cgroup[0] == '\0')
    return;
  struct line path = {.len = 0};
  put(&path, cgroup);
  put(&path, "/cgroup.kill");
  path.buf[path.len] = '\0';
  int fd = open(path.buf, O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t w = write(fd, "1", 1);
    (void)w;
    close(fd);
  }
  for (int i = 0; i < 2000 && rmdir(cgroup) != 0 && errno == EBUSY; i++) {
    struct timespec ms = {0, 1000L * 1000};
    nanosleep(&ms, NULL);
  }
}

void cli_sigbus_cgroup(const char *path) {
  size_t n = path != NULL ? strlen(path) : 0;
  if (n >= sizeof cgroup)
    n = 0;
  memcpy(cgroup, path != NULL ? path : "", n);
  cgroup[n] = '\0';
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  char path[8192];
  if (!segment_at((uintptr_t)si->si_addr, path, sizeof path))
    return; /* not a segment: SA_RESETHAND restored the default, the access faults again */
  /* Named as the user named it: by its plain name when it is in the plain names' directory. */
  size_t dl = strlen(plain_dir);
  const char *name = path;
  if (dl > 0 && strncmp(path, plain_dir, dl) == 0 && strchr(path + dl, '/') == NULL)
    name = path + dl;
  struct line l = {.len = 0};
  put(&l, "shmsched: incompatible-segment: ");
  put(&l, who);
  put(&l, ": segment '");
  put(&l, name);
  put(&l, "' was truncated under this process (SIGBUS at ");
  put_hex(&l, (uintptr_t)si->si_addr);
  put(&l, ", past the end of ");
  put(&l, path);
  put(&l, "): it can no longer be used; remove it (shmsched destroy --force, or rm if it is "
          "empty now) and create it again\n");
  ssize_t w = write(STDERR_FILENO, l.buf, l.len);
  (void)w;
  end_cgroup();
  _exit(CLI_EXIT_SEGMENT_LOST);
}

/* The plain names' directory with one trailing '/', or "" when it is not usable (then every
 * segment is named by its path). Not in the handler: getenv is not async-signal-safe. */
static void set_plain_dir(void) {
  const char *dir = secure_getenv("SHMSCHED_DIR"); /* as the library reads it */
  if (dir == NULL || dir[0] == '\0')
    dir = "/dev/shm";
  size_t n = strlen(dir);
  while (n > 0 && dir[n - 1] == '/')
    n--;
  plain_dir[0] = '\0';
  if (dir[0] == '/' && n + 2 <= sizeof plain_dir) {
    memcpy(plain_dir, dir, n);
    plain_dir[n] = '/';
    plain_dir[n + 1] = '\0';
  }
}

void cli_sigbus_install(const char *cmd) {
  who = cmd;
  set_plain_dir();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, NULL);
}

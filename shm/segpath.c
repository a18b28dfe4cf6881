/* Where a segment's file is, and opening it safely (segpath.h). */
#include "segpath.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* Where plain names live when SHMSCHED_DIR is unset or empty: shm_open's directory. */
#define DEFAULT_DIR "/dev/shm"

/* SHMSCHED_DIR's first byte that a name could not hold either, or -1: what a path may hold is
 * the same either way, so that every path prints and parses unambiguously. */
static long bad_dir_byte(const char *dir) {
  for (size_t i = 0; dir[i] != '\0'; i++)
    if ((unsigned char)dir[i] < 0x21 || (unsigned char)dir[i] > 0x7e)
      return (long)i;
  return -1;
}

static int plain_dir(const char **out) {
  /* secure_getenv: in a set-id program (the setgid front end) the caller's environment must
   * not steer where it opens files with the borrowed group; a path is still the caller's to
   * give, and goes through the same checks. */
  const char *dir = secure_getenv("SHMSCHED_DIR");
  if (dir == NULL || dir[0] == '\0') {
    *out = DEFAULT_DIR;
    return SHMS_OK;
  }
  if (dir[0] != '/')
    return shms__fail(SHMS_EINVAL,
                      "SHMSCHED_DIR must be an absolute path (it is shared by every process of "
                      "the segment), got '%.64s'",
                      dir);
  long bad = bad_dir_byte(dir);
  if (bad >= 0)
    return shms__fail(SHMS_EINVAL,
                      "SHMSCHED_DIR has byte 0x%02x at %ld (no spaces, controls or non-ASCII "
                      "bytes)",
                      (unsigned char)dir[bad], bad);
  if (strlen(dir) > SHMS__PATH_MAX - SHMS_NAME_MAX - 2)
    return shms__fail(SHMS_EINVAL, "SHMSCHED_DIR is longer than %d bytes",
                      SHMS__PATH_MAX - SHMS_NAME_MAX - 2);
  *out = dir;
  return SHMS_OK;
}

int shms__seg_path(const char *name, char *out, size_t n) {
  if (strchr(name, '/') != NULL) {
    snprintf(out, n, "%s", name); /* shms_name_check bounds it well below n */
    return SHMS_OK;
  }
  const char *dir;
  int rc = plain_dir(&dir);
  if (rc != SHMS_OK)
    return rc;
  size_t len = strlen(dir);
  snprintf(out, n, "%s%s%s", dir, len > 0 && dir[len - 1] == '/' ? "" : "/", name);
  return SHMS_OK;
}

/* "'NAME'", or "'NAME' (PATH)" when the name is not the path: every message names both. */
static const char *shown(char *buf, size_t n, const char *name, const char *path) {
  if (strcmp(name, path) == 0)
    snprintf(buf, n, "'%s'", name);
  else
    snprintf(buf, n, "'%s' (%s)", name, path);
  return buf;
}

static const char *kind(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
         : S_ISLNK(m)  ? "a symbolic link"
                       : "not a regular file";
}

/* The file at path is of type m, not a regular file: refused for what it is. */
static int not_regular(const char *name, const char *path, mode_t m) {
  char who[SHMS__PATH_MAX + SHMS_NAME_MAX + 8];
  shown(who, sizeof who, name, path);
  if (S_ISLNK(m))
    return shms__fail(SHMS_EINCOMPAT,
                      "segment %s is a symbolic link: a segment is opened by its file's own "
                      "path, never through a link (not followed)",
                      who);
  return shms__fail(SHMS_EINCOMPAT, "segment %s is %s, not a segment file (not opened)", who,
                    kind(m));
}

/* The directory part of path into dir ("." for none, "/" for the root). */
static void dir_of(const char *path, char *dir, size_t n) {
  snprintf(dir, n, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash != NULL)
    *(slash == dir ? slash + 1 : slash) = '\0';
  else
    snprintf(dir, n, ".");
}

/*
 * A segment's directory must be one that others cannot empty or fill: in a directory that
 * anyone may write and that is not sticky, anyone may remove the segment file or put another
 * in its place, a forged segment for everyone who attaches next. So such a directory is
 * refused, for create and attach alike (/dev/shm and /tmp are sticky). Whether the right
 * users can reach it is the directory's mode's business (the kernel's refusal says so).
 */
static int dir_check(const char *name, const char *path) {
  char dir[SHMS__PATH_MAX];
  struct stat st;
  dir_of(path, dir, sizeof dir);
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return SHMS_OK; /* the open that follows says what is missing */
  /* The directory first: a detail is cut at 256 bytes, and the name ends it. */
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
    return shms__fail(SHMS_EPERM,
                      "directory '%s' is writable by anyone and not sticky (mode 0%03o: chmod "
                      "+t, or let only the segment's users write it): anyone could replace "
                      "segment '%s'",
                      dir, (unsigned)(st.st_mode & 0777), name);
  return SHMS_OK;
}

/* open(2) or lstat(2) failed with e on path: why, naming a missing directory as such. */
static int path_fail(int e, const char *name, const char *path, const char *what) {
  char who[SHMS__PATH_MAX + SHMS_NAME_MAX + 8], dir[SHMS__PATH_MAX];
  shown(who, sizeof who, name, path);
  dir_of(path, dir, sizeof dir);
  struct stat st;
  if (e == ENOTDIR || (e == ENOENT && stat(dir, &st) != 0 && errno == ENOTDIR))
    return shms__fail(SHMS_ENOTFOUND,
                      "no segment named '%s': a component of '%s' is not a directory", name, dir);
  if (e == ENOENT && stat(dir, &st) != 0 && errno == ENOENT)
    return shms__fail(SHMS_ENOTFOUND, "no segment named '%s': directory '%s' does not exist", name,
                      dir);
  if (e == ENOENT)
    return strcmp(name, path) == 0 || strchr(name, '/') != NULL
               ? shms__fail(SHMS_ENOTFOUND, "no segment named '%s'", name)
               : shms__fail(SHMS_ENOTFOUND, "no segment named '%s' (no file %s)", name, path);
  if (e == ELOOP)
    return not_regular(name, path, S_IFLNK);
  return shms__fail(shms__from_errno(e), "cannot %s segment %s: %s", what, who, strerror(e));
}

int shms__seg_check(const char *name, const char *path, struct stat *st) {
  if (lstat(path, st) != 0)
    return path_fail(errno, name, path, "inspect");
  if (!S_ISREG(st->st_mode))
    return not_regular(name, path, st->st_mode);
  return dir_check(name, path);
}

int shms__seg_open(const char *name, const char *path, int flags, int *fd) {
  struct stat st;
  /* What is there, before opening anything: opening a FIFO or a device is not harmless. */
  int rc = shms__seg_check(name, path, &st);
  if (rc != SHMS_OK)
    return rc;
  /* It may have been replaced since: O_NONBLOCK so a FIFO put there cannot block us, O_NOCTTY so
   * a terminal cannot become ours, and the type checked again on what was opened. */
  int f = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (f < 0)
    return path_fail(errno, name, path,
                     (flags & O_ACCMODE) == O_RDONLY ? "open" : "open for writing");
  if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = errno;
    int rc = S_ISREG(st.st_mode) ? path_fail(e, name, path, "inspect")
                                 : not_regular(name, path, st.st_mode);
    close(f);
    return rc;
  }
  /* A regular file ignores O_NONBLOCK; cleared anyway, so the descriptor is as shm_open's. */
  if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(f);
    return path_fail(e, name, path, "open");
  }
  *fd = f;
  return SHMS_OK;
}

int shms__seg_create(const char *name, const char *path, mode_t mode, int *fd) {
  int rc = dir_check(name, path);
  if (rc != SHMS_OK)
    return rc;
  int f = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
  if (f >= 0) {
    *fd = f;
    return SHMS_OK;
  }
  int e = errno;
  struct stat st;
  if (e == EEXIST && lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    char who[SHMS__PATH_MAX + SHMS_NAME_MAX + 8];
    return shms__fail(SHMS_EEXISTS, "segment %s already exists and is %s (left untouched)",
                      shown(who, sizeof who, name, path), kind(st.st_mode));
  }
  if (e == EEXIST)
    return shms__fail(SHMS_EEXISTS, "segment '%s' already exists (left untouched)", name);
  return path_fail(e, name, path, "create");
}

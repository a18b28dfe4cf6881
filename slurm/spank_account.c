/* The job's account from its prolog to its steps (spank_account.h). */
#include "spank_account.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shmsched.h"

/* A directory that only its owner, root, can change: else anyone could plant an account. */
static int dir_safe(const char *dir, char *err, size_t n) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    snprintf(err, n, "state directory %s: %s", dir, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) {
    snprintf(err, n, "state directory %s must be a directory owned by root, writable by root alone",
             dir);
    return -1;
  }
  return 0;
}

int spank_account_save(const char *dir, uint32_t job, const char *account, char *err, size_t n) {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, n, "cannot make state directory %s: %s", dir, strerror(errno));
    return -1;
  }
  if (dir_safe(dir, err, n) != 0)
    return -1;
  char path[320], tmp[330];
  snprintf(path, sizeof path, "%s/%" PRIu32, dir, job);
  snprintf(tmp, sizeof tmp, "%s.new", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, n, "cannot write %s: %s", tmp, strerror(errno));
    return -1;
  }
  size_t len = strlen(account);
  int ok = write(fd, account, len) == (ssize_t)len;
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    snprintf(err, n, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

int spank_account_load(const char *dir, uint32_t job, char *out, size_t cap, char *err, size_t n) {
  char path[320];
  snprintf(path, sizeof path, "%s/%" PRIu32, dir, job);
  if (dir_safe(dir, err, n) != 0)
    return -1;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, n,
             "no account kept for job %" PRIu32 " in %s (%s): the plugin's job prolog did not "
             "run on this node; is shmsched_spank.so in slurmd's plugstack.conf?",
             job, dir, strerror(errno));
    return -1;
  }
  struct stat st;
  char buf[SHMS_TENANT_MAX + 2];
  ssize_t len = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && (st.st_mode & 022) == 0)
    len = read(fd, buf, sizeof buf);
  close(fd);
  if (len < 0) {
    snprintf(err, n, "%s is not a file root alone writes", path);
    return -1;
  }
  if (len == 0) {
    snprintf(err, n,
             "job %" PRIu32 " has no Slurm account: give it one (--account) or set tenant=user "
             "in plugstack.conf",
             job);
    return -1;
  }
  if (len > SHMS_TENANT_MAX) {
    snprintf(err, n, "job %" PRIu32 "'s account cannot be a tenant: longer than %d bytes", job,
             SHMS_TENANT_MAX);
    return -1;
  }
  buf[len] = '\0';
  if (shms_tenant_check(buf) != SHMS_OK) {
    snprintf(err, n, "job %" PRIu32 "'s account cannot be a tenant: %s", job,
             shms_last_error_detail());
    return -1;
  }
  snprintf(out, cap, "%s", buf);
  return 0;
}

void spank_account_forget(const char *dir, uint32_t job) {
  char path[320];
  snprintf(path, sizeof path, "%s/%" PRIu32, dir, job);
  unlink(path);
}

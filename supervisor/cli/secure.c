/* The setgid front end's hygiene (secure.h, docs/security.md). */
#include "secure.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

static int secure_mode;

int cli_secure_init(void) {
  secure_mode = getauxval(AT_SECURE) != 0;
  if (secure_mode) {
    /* The kernel already makes a set-id process undumpable (fs.suid_dumpable 0); say so
     * ourselves too, for a system set to 1 or 2: no core file, no ptrace, no /proc/PID/mem by
     * the user, any of which would hand over the mapping. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
  }
  return secure_mode;
}

int cli_secure(void) { return secure_mode; }

int cli_drop_group(void) {
  gid_t real = getgid(), r, e, s;
  gid_t borrowed = getegid();
  /* All three: setgid() would leave the saved gid, from which setegid() takes the group back. */
  if (setresgid(real, real, real) != 0)
    return -1;
  if (getresgid(&r, &e, &s) != 0 || r != real || e != real || s != real) {
    errno = EPERM;
    return -1;
  }
  /* Verified, not assumed: if the group could be had again, the command would have it. */
  if (borrowed != real && getuid() != 0 && setegid(borrowed) == 0) {
    errno = EPERM;
    return -1;
  }
  return 0;
}

int cli_open_as_user(const char *path, int flags) {
  if (!secure_mode)
    return open(path, flags | O_CLOEXEC);
  gid_t borrowed = getegid();
  if (setegid(getgid()) != 0)
    return -1;
  int fd = open(path, flags | O_CLOEXEC);
  int e = errno;
  if (setegid(borrowed) != 0) { /* cannot happen: the saved gid is the borrowed one */
    if (fd >= 0)
      close(fd);
    fd = -1;
    e = EPERM;
  }
  errno = e;
  return fd;
}

FILE *cli_fopen_as_user(const char *path) {
  int fd = cli_open_as_user(path, O_RDONLY);
  FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
  if (f == NULL && fd >= 0) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

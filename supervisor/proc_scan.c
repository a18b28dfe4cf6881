/* Every process's /proc/PID/stat, walked once (proc_scan.h). */
#include "proc_scan.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* /proc/PID/stat of pid (digits) into *st; 0, or -1 if it is gone or unreadable. */
static int read_stat(const char *pid, struct proc_stat *st) {
  char path[300], buf[1024];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  /* After the command's name (which may hold spaces and parentheses): state, ppid, pgrp, then
   * 14 fields to num_threads (field 20 of proc(5)). */
  char *p = strrchr(buf, ')');
  int ppid, pgrp;
  // NOLINTBEGIN(cert-err34-c): the kernel's own stat line; a field that does not fit fails it
  if (p == NULL || sscanf(p + 1,
                          " %c %d %d"
                          " %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %ld",
                          &st->state, &ppid, &pgrp, &st->threads) != 4)
    return -1;
  // NOLINTEND(cert-err34-c)
  st->pid = (pid_t)atoi(pid); // NOLINT(cert-err34-c): digits only
  st->ppid = (pid_t)ppid;
  st->pgrp = (pid_t)pgrp;
  return 0;
}

int proc_scan(int (*fn)(const struct proc_stat *st, void *ctx), void *ctx) {
  DIR *d = opendir("/proc");
  if (d == NULL)
    return -1;
  struct dirent *e;
  struct proc_stat st;
  while ((e = readdir(d)) != NULL)
    if (isdigit((unsigned char)e->d_name[0]) && read_stat(e->d_name, &st) == 0 && fn(&st, ctx))
      break;
  closedir(d);
  return 0;
}

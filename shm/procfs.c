/* Other processes, as /proc shows them (procfs.h). */
#include "procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int shms__procfs_read(const char *name, const char *file, char *buf, size_t cap) {
  char path[300];
  snprintf(path, sizeof path, "/proc/%s/%s", name, file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  return 0;
}

/* The stat line of /proc/<name>/stat, parsed. */
static int read_stat(const char *name, struct shms__proc_stat *st) {
  char buf[1024];
  if (shms__procfs_read(name, "stat", buf, sizeof buf) != 0)
    return -1;
  /* The command's name (field 2) may hold spaces and parentheses: count from the last ')'.
   * After it: state, ppid, pgrp, 14 fields to num_threads (20), one more, then starttime (22). */
  char *p = strrchr(buf, ')');
  int ppid, pgrp;
  unsigned long long start;
  // NOLINTBEGIN(cert-err34-c): the kernel's own stat line; a field that does not fit fails it
  if (p == NULL || sscanf(p + 1,
                          " %c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %ld"
                          " %*d %llu",
                          &st->state, &ppid, &pgrp, &st->threads, &start) != 5)
    return -1;
  st->pid = (pid_t)atoi(name);
  // NOLINTEND(cert-err34-c)
  st->ppid = (pid_t)ppid;
  st->pgrp = (pid_t)pgrp;
  st->start_time = start;
  return 0;
}

int shms__proc_stat_read(pid_t pid, struct shms__proc_stat *st) {
  char name[24];
  snprintf(name, sizeof name, "%d", (int)pid);
  return read_stat(name, st);
}

uint64_t shms__proc_start_time(pid_t pid) {
  struct shms__proc_stat st;
  return shms__proc_stat_read(pid, &st) == 0 ? st.start_time : 0;
}

int shms__proc_scan(int (*fn)(const struct shms__proc_stat *st, void *ctx), void *ctx) {
  DIR *d = opendir("/proc");
  if (d == NULL)
    return -1;
  struct dirent *e;
  struct shms__proc_stat st;
  while ((e = readdir(d)) != NULL)
    if (isdigit((unsigned char)e->d_name[0]) && read_stat(e->d_name, &st) == 0 && fn(&st, ctx))
      break;
  closedir(d);
  return 0;
}

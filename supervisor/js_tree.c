/* Counting the tasks below a process, from /proc (js_tree.h). */
#include "js_tree.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct proc_row {
  pid_t pid, ppid;
  long tasks;
  int below; /* a descendant of root */
};

static int by_pid(const void *a, const void *b) {
  pid_t x = ((const struct proc_row *)a)->pid, y = ((const struct proc_row *)b)->pid;
  return (x > y) - (x < y);
}

/* One /proc/PID/stat into *row; 0, or -1 if it is gone or unreadable. */
static int read_row(const char *pid, struct proc_row *row) {
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
  /* After the command's name (which may hold spaces and parentheses): state, ppid, then 16
   * fields to num_threads (field 20 of proc(5)). */
  char *p = strrchr(buf, ')'), state;
  int ppid;
  long threads;
  // NOLINTBEGIN(cert-err34-c): the kernel's own stat line; a field that does not fit fails it
  if (p == NULL || sscanf(p + 1,
                          " %c %d"
                          " %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %ld",
                          &state, &ppid, &threads) != 3)
    return -1;
  // NOLINTEND(cert-err34-c)
  row->pid = (pid_t)atoi(pid); // NOLINT(cert-err34-c): digits only
  row->ppid = (pid_t)ppid;
  row->tasks = threads > 0 ? threads : 1; /* a zombie shows 0 threads: it still counts */
  row->below = 0;
  return 0;
}

/* The rows of every process now; *n of them. NULL when /proc cannot be read. */
static struct proc_row *read_rows(size_t *n) {
  DIR *d = opendir("/proc");
  if (d == NULL)
    return NULL;
  size_t cap = 256, k = 0;
  struct proc_row *rows = malloc(cap * sizeof *rows);
  struct dirent *e;
  while (rows != NULL && (e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0]))
      continue;
    if (k == cap) {
      struct proc_row *more = realloc(rows, 2 * cap * sizeof *rows);
      if (more == NULL) {
        free(rows);
        rows = NULL;
        break;
      }
      rows = more;
      cap *= 2;
    }
    if (read_row(e->d_name, &rows[k]) == 0)
      k++;
  }
  closedir(d);
  *n = k;
  return rows;
}

long js_tree_tasks(pid_t root) {
  size_t n;
  struct proc_row *rows = read_rows(&n);
  if (rows == NULL)
    return -1;
  qsort(rows, n, sizeof *rows, by_pid);
  /* Mark down from root until nothing changes: a pass per level of the tree. */
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t i = 0; i < n; i++) {
      if (rows[i].below)
        continue;
      struct proc_row key = {.pid = rows[i].ppid};
      struct proc_row *parent = bsearch(&key, rows, n, sizeof *rows, by_pid);
      if (rows[i].ppid == root || (parent != NULL && parent->below)) {
        rows[i].below = 1;
        changed = 1;
      }
    }
  }
  long tasks = 0;
  for (size_t i = 0; i < n; i++)
    if (rows[i].below)
      tasks += rows[i].tasks;
  free(rows);
  return tasks;
}

/* Counting the tasks below a process, from /proc (js_tree.h). */
#include "js_tree.h"
#include "../../shm/procfs.h"

#include <stdlib.h>

struct proc_row {
  pid_t pid, ppid;
  long tasks;
  int below; /* a descendant of root */
};

static int by_pid(const void *a, const void *b) {
  pid_t x = ((const struct proc_row *)a)->pid, y = ((const struct proc_row *)b)->pid;
  return (x > y) - (x < y);
}

struct rows {
  struct proc_row *row;
  size_t n, cap;
};

/* One process into the rows; stops the walk (with no rows left) when memory runs out. */
static int add_row(const struct shms__proc_stat *st, void *ctx) {
  struct rows *r = ctx;
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 256;
    struct proc_row *more = realloc(r->row, cap * sizeof *more);
    if (more == NULL) {
      free(r->row);
      r->row = NULL;
      return 1;
    }
    r->row = more;
    r->cap = cap;
  }
  /* A zombie shows 0 threads: it still counts. */
  r->row[r->n++] = (struct proc_row){st->pid, st->ppid, st->threads > 0 ? st->threads : 1, 0};
  return 0;
}

/* The rows of every process now; *n of them. NULL when /proc cannot be read, or no memory. */
static struct proc_row *read_rows(size_t *n) {
  struct rows r = {NULL, 0, 0};
  if (shms__proc_scan(add_row, &r) != 0) {
    free(r.row);
    return NULL;
  }
  *n = r.n;
  return r.row;
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

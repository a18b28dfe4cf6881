/*
 * Every process's /proc/PID/stat, walked once: what `run`'s containment (its children) and the
 * jobserver (the tasks below the build) read of the process tree.
 */
#ifndef SHMS_SUPERVISOR_PROC_SCAN_H
#define SHMS_SUPERVISOR_PROC_SCAN_H

#include <sys/types.h>

struct proc_stat {
  pid_t pid, ppid, pgrp;
  char state;   /* R, S, D, Z, T, ... */
  long threads; /* num_threads; a zombie shows 0 */
};

/* Call fn for each process now (one that ends meanwhile is skipped); -1 if /proc cannot be
 * read, else 0. fn returning nonzero stops the walk. */
int proc_scan(int (*fn)(const struct proc_stat *st, void *ctx), void *ctx);

#endif

/*
 * What shmsched reads of other processes in /proc: one parser of /proc/PID/stat and one walk
 * over every process. The library names and kills owners' commands with it (shm/proc.c), the
 * CLI finds a command's children and counts the tasks below a build (supervisor/run/contain.c,
 * supervisor/jobserver/js_tree.c).
 */
#ifndef SHMS_SHM_PROCFS_H
#define SHMS_SHM_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The fields of /proc/PID/stat (proc(5)) that shmsched reads. */
struct shms__proc_stat {
  pid_t pid, ppid, pgrp; /* fields 1, 4, 5 */
  char state;            /* field 3: R, S, D, Z, T, ... */
  long threads;          /* field 20, num_threads: a zombie shows 0 */
  uint64_t start_time;   /* field 22: with the pid, names one process across pid reuse */
};

/* Read /proc/NAME/FILE (NAME a pid or "self") into buf, NUL-terminated, at most cap - 1 bytes
 * (one read: what the kernel gives at once): 0, or -1 if it is gone or unreadable. */
int shms__procfs_read(const char *name, const char *file, char *buf, size_t cap);
/* Read pid's /proc/PID/stat into *st: 0, or -1 if it is gone or unreadable. */
int shms__proc_stat_read(pid_t pid, struct shms__proc_stat *st);
/* Start time of pid (field 22 of /proc/PID/stat), 0 if it cannot be read. */
uint64_t shms__proc_start_time(pid_t pid);
/*
 * Call fn for each process now (one that ends meanwhile is skipped): -1 if /proc cannot be read,
 * else 0. fn returning nonzero stops the walk.
 */
int shms__proc_scan(int (*fn)(const struct shms__proc_stat *st, void *ctx), void *ctx);

#endif

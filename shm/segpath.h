/*
 * Where a segment's file is, and opening it safely.
 *
 * A name with a '/' is a path to the segment file, relative ones against the
 * working directory (as any file's). A plain name is a file in $SHMSCHED_DIR
 * (an absolute directory), or in /dev/shm when that is unset or empty, where
 * shm_open would put it. Every segment is opened with open(2) on that path.
 *
 * What a path names is judged before it is opened and again from what was
 * opened: only a regular file, never through a symbolic link as its last
 * component, and never a FIFO (opening one could block) or a device (opening
 * one could change it); and never in a directory anyone may write that is not
 * sticky (SHMS_EPERM: anyone could replace the file). Each refusal is a
 * specific error and changes nothing.
 */
#ifndef SHMS_SHM_SEGPATH_H
#define SHMS_SHM_SEGPATH_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Room for any resolved path: $SHMSCHED_DIR is refused when it leaves less for a name. */
#define SHMS__PATH_MAX 4096

/* The file of segment name (already checked by shms_name_check) into out; SHMS_OK, or
 * SHMS_EINVAL naming SHMSCHED_DIR when it is not usable. */
int shms__seg_path(const char *name, char *out, size_t n);

/* Whether path names a regular file (into *st), judged without opening it: SHMS_OK, or the
 * refusal shms__seg_open would give. */
int shms__seg_check(const char *name, const char *path, struct stat *st);

/*
 * Open the existing segment file at path (the file of name) with flags (O_RDONLY or O_RDWR;
 * O_NOFOLLOW and O_CLOEXEC are added) into *fd. SHMS_ENOTFOUND when it or its directory does
 * not exist, SHMS_EINCOMPAT when it is not a regular file (a directory, FIFO, device, socket or
 * symbolic link), else what open(2) failed with.
 */
int shms__seg_open(const char *name, const char *path, int flags, int *fd);

/* Create the segment file at path with mode, failing if anything exists there (named for what
 * it is), or when its directory does not exist (SHMS_ENOTFOUND). */
int shms__seg_create(const char *name, const char *path, mode_t mode, int *fd);

#endif

/*
 * shmsched installed setgid (docs/security.md, "A real boundary"): the CLI holds a group that
 * alone can open the segments, and must neither lend it to the user's commands nor let the
 * user's environment steer what it does with it.
 */
#ifndef SHMS_SUPERVISOR_SECURE_H
#define SHMS_SUPERVISOR_SECURE_H

#include <stdio.h>

/*
 * Called first in main. In secure mode (the kernel's AT_SECURE: the program runs setgid or
 * setuid) make the process undumpable and core-less, so the user cannot read the group's
 * segments out of it. Returns 1 in secure mode, else 0.
 */
int cli_secure_init(void);

/* 1 in secure mode (cli_secure_init ran). */
int cli_secure(void);

/*
 * In a child about to exec a user's command: set the real, effective and saved gid to the real
 * gid and prove the borrowed group cannot be taken back. Returns 0, or -1 (errno set) when the
 * group could not be dropped: the caller must not exec.
 */
int cli_drop_group(void);

/* open(path, flags | O_CLOEXEC) with the user's own rights: a file the user names (--config,
 * --payload-file) is opened as the user, never with the borrowed group. -1 with errno. */
int cli_open_as_user(const char *path, int flags);
/* The same for reading with stdio (fopen "re"). */
FILE *cli_fopen_as_user(const char *path);

#endif

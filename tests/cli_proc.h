/*
 * End-to-end CLI tests' background processes: <build>/bin/shmsched started
 * with pipes the test holds on its stdin, stdout and stderr, and a record of
 * what the tests leave behind (segments, processes, a scratch directory)
 * that an unchecked teardown cleans up even after a failed test.
 *
 * Synchronisation is by these pipes, FIFOs and waitpid only, never by
 * sleeping: a process is known to have reached a point when it says so on
 * one of its pipes.
 */
#ifndef SHMS_TESTS_CLI_PROC_H
#define SHMS_TESTS_CLI_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

struct cli_proc {
  pid_t pid;
  int in, out, err; /* its stdin (our write end), stdout and stderr (our read ends) */
};

/* Unchecked fixture: the shared record and the scratch directory (cli_dir()). */
void cli_left_setup(void);
/* Kill (SIGKILL) and reap every process still running, remove every segment and the directory. */
void cli_left_teardown(void);

/* The scratch directory, "/tmp/shmst-<tag>-XXXXXX" made unique. */
const char *cli_dir(void);
/* dir/file into buf. */
const char *cli_path(char *buf, size_t n, const char *file);

/* A fresh segment made by `create NAME --class spec [--class extra]`, removed at teardown. */
const char *cli_segment(const char *tag, const char *spec, const char *extra);

/*
 * A fresh segment made by `create NAME` with the options in opts (NULL-ended),
 * removed at teardown.
 */
const char *cli_segment_opts(const char *tag, const char *const opts[]);
#define CLI_SEGMENT(tag, ...) cli_segment_opts((tag), (const char *const[]){__VA_ARGS__, NULL})

/* Start the CLI with argv (NULL-ended, without argv[0]) in the background. */
void cli_spawn(struct cli_proc *p, const char *const argv[]);
#define CLI_SPAWN(p, ...) cli_spawn((p), (const char *const[]){__VA_ARGS__, NULL})

/* One line from fd, without its newline; fails the test at EOF. */
void cli_read_line(int fd, char *buf, size_t n);

/* Read fd to EOF into buf (at most n-1 bytes, then NUL). Returns the bytes read. */
size_t cli_slurp(int fd, char *buf, size_t n);

/*
 * Collect the rest of its stdout (into out, out_n bytes; NUL-ended, and its
 * length in *out_len if not NULL) and stderr (into err), and reap it.
 * Its stdin is closed first if close_in, else after it ended.
 * Returns its exit status, or 128+signal.
 */
int cli_reap(struct cli_proc *p, int close_in, char *out, size_t out_n, size_t *out_len, char *err,
             size_t err_n);

#endif

/*
 * A segment truncated (or replaced by a shorter file) under a running command
 * makes its next access to the lost pages raise SIGBUS. The CLI turns that into
 * one error line naming the segment and exit CLI_EXIT_SEGMENT_LOST, instead of
 * dying of the signal. docs/cli.md, "Exit status", is the user's view.
 */
#ifndef SHMS_SUPERVISOR_SIGBUS_H
#define SHMS_SUPERVISOR_SIGBUS_H

/*
 * Install the SIGBUS handler for subcommand cmd (named in the error line; the
 * string must outlive the process). A SIGBUS on a shared mapping of a file (the
 * CLI maps only segments so) prints "shmsched: incompatible-segment: CMD:
 * segment 'NAME' was truncated under this process (...)" and _exits
 * CLI_EXIT_SEGMENT_LOST: NAME is the plain name for a file in the plain names'
 * directory ($SHMSCHED_DIR or /dev/shm, as at install), else the file's path. Any other SIGBUS
 * (a bug) is left to the default action: the handler resets itself and returns,
 * so the faulting access faults again and the process dies of it as before.
 */
void cli_sigbus_install(const char *cmd);

/*
 * The cgroup of this process's commands (path copied; NULL or "" for none): the handler above
 * kills what is left in it and removes it before it exits, since the process then leaves
 * without detaching and nobody can dispose of what it left in the lost segment.
 */
void cli_sigbus_cgroup(const char *path);

#endif

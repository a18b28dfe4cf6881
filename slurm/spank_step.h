/*
 * The leases of one Slurm step's tasks on this node, independent of Slurm's own API so that
 * the tests can drive it with plain processes (tests/test_spank_step.c).
 *
 * slurmstepd holds every task's lease; the task waits for it. The order of calls:
 *
 *   slurmstepd, as the job's user, before the tasks fork:  spank_step_open (attach; each task's
 *                                                           request queued, or a free cell taken)
 *   slurmstepd, after task i forked:                        spank_step_task_forked
 *   task i, before it executes its program:                 spank_step_task_wait (blocks until
 *                                                           the lease is granted; the program's
 *                                                           environment)
 *   slurmstepd, once task i's process is reaped:            spank_step_task_exited
 *   slurmstepd, at the step's end:                          spank_step_close
 *
 * Why slurmstepd holds the lease: it outlives the task, so a task's end is an ordinary release
 * (on-holder-death is for a holder that crashed), and the waiting is still the task's alone: each
 * task sleeps in its own process until its own request is granted. Each task runs in a process
 * group of its own, and its lease is released once that group is empty, as `shmsched run`'s is.
 */
#ifndef SHMS_SLURM_SPANK_STEP_H
#define SHMS_SLURM_SPANK_STEP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "spank_conf.h"

struct spank_step;

/*
 * Attach to c->segment and, for each of ntasks tasks, take a free cell of c->cls or queue a
 * request for c->cells cells under tenant. Returns the step, or NULL with one line in err
 * (nothing held or queued then). Call before the tasks fork: each task inherits the means to
 * hear of its grant.
 */
struct spank_step *spank_step_open(const struct spank_conf *c, const char *tenant, uint32_t ntasks,
                                   char *err, size_t n);

/* Task i forked as pid. Once every task has, start waiting for their grants on their behalf
 * (threads: no task may fork after that). 0, or -1 with err. */
int spank_step_task_forked(struct spank_step *s, uint32_t i, pid_t pid, char *err, size_t n);

/*
 * In task i's process: make it a process group of its own, then sleep until its lease is granted.
 * Returns the environment to give its program (a NULL-ended list of "VAR=value", malloc'd: free
 * with spank_step_env_free), or NULL with err saying why there is no lease (refused, cancelled,
 * the step's holder gone). Signals keep their default action meanwhile: scancel ends the wait.
 */
char **spank_step_task_wait(struct spank_step *s, uint32_t i, char *err, size_t n);
void spank_step_env_free(char **env);

/* Task i's process ended with wait status st: cancel its request, or release its lease once
 * its process group is empty. Never blocks. */
void spank_step_task_exited(struct spank_step *s, uint32_t i, int st);

/* The step ends: whatever is left of each task's group is killed, every lease released, and
 * the segment detached. Blocks until then. NULL is a no-op. */
void spank_step_close(struct spank_step *s);

#endif

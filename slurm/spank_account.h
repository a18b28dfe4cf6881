/*
 * The job's Slurm account, as its prolog sees it, kept for its steps. A task's environment is
 * the user's to set (srun passes a SLURM_JOB_ACCOUNT the user exported), so the steps do not
 * read it there: slurmd gives the prolog the account from the job's credential, the prolog
 * (root) writes it to DIR/JOBID, and each step (root, before it drops privileges) reads it back.
 */
#ifndef SHMS_SLURM_SPANK_ACCOUNT_H
#define SHMS_SLURM_SPANK_ACCOUNT_H

#include <stddef.h>
#include <stdint.h>

/* Keep account ("" when the job has none) for job in dir, which is made if missing (0700).
 * 0, or -1 with err. */
int spank_account_save(const char *dir, uint32_t job, const char *account, char *err, size_t n);

/* The account kept for job into out (cap bytes). 0; -1 with err when none was kept, the file
 * is not root's own, or it names no valid tenant. */
int spank_account_load(const char *dir, uint32_t job, char *out, size_t cap, char *err, size_t n);

/* Forget job's account (its epilog). */
void spank_account_forget(const char *dir, uint32_t job);

#endif

/*
 * The SPANK plugin's settings: its arguments in plugstack.conf, then the job's own options
 * (--shmsched-class, --shmsched-cells). Pure parsing, no Slurm calls: the tests drive it
 * directly. docs/slurm.md is the user's view.
 *
 *   required shmsched_spank.so segment=NAME [class=CLASS] [tenant=account|user] [cells=K]
 *       [cell-env=VAR=LIST]... [steps=LIST] [kill-after=DUR] [state=DIR]
 */
#ifndef SHMS_SLURM_SPANK_CONF_H
#define SHMS_SLURM_SPANK_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "run/run_env.h"
#include "shmsched.h"

/* Which steps of a job take leases (steps=): by default its ordinary steps (srun) only. */
enum {
  SPANK_STEP_NORMAL = 1u << 0, /* srun's steps, and salloc's interactive step */
  SPANK_STEP_BATCH = 1u << 1,  /* the batch script's step */
  SPANK_STEP_EXTERN = 1u << 2, /* the extern step (PrologFlags=contain) */
};

#define SPANK_STATE_DEFAULT "/run/shmsched-slurm"

struct spank_conf {
  char segment[SHMS_NAME_MAX + 1];
  int cls;         /* the class, or -1: none (the job must name one, else no lease) */
  int tenant_user; /* 1: tenant=user; 0: tenant=account */
  uint32_t cells;
  struct cell_envs cell_env; /* specs point into the plugin's arguments, which Slurm keeps */
  unsigned steps;
  uint64_t kill_after_ns; /* at the step's end, from SIGTERM of a task's leftovers to SIGKILL */
  char state[256];        /* where the prolog keeps each job's account, for its steps */
};

/* Defaults, then the plugstack.conf arguments av[0..ac). 0, or -1 with one line in err naming
 * the argument (e.g. "cells=0: must be at least 1"). */
int spank_conf_parse(struct spank_conf *c, int ac, char **av, char *err, size_t n);

/* The job's --shmsched-class / --shmsched-cells value into c. 0, or -1 with err. */
int spank_conf_class(struct spank_conf *c, const char *value, char *err, size_t n);
int spank_conf_cells(struct spank_conf *c, const char *value, char *err, size_t n);

/* Slurm's ids of its special steps (slurm.h; the plugin checks they agree). */
#define SPANK_ID_INTERACTIVE 0xfffffffau
#define SPANK_ID_BATCH       0xfffffffbu
#define SPANK_ID_EXTERN      0xfffffffcu

/* Whether a step of this id takes leases under c. */
int spank_conf_takes_step(const struct spank_conf *c, uint32_t stepid);

#endif

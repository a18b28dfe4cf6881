/*
 * What `shmsched run` tells its command about where it runs: SHMSCHED_SEGMENT,
 * SHMSCHED_CLASS, SHMSCHED_CELL (its cells, comma-separated, for a lease of
 * several), SHMSCHED_TENANT, SHMSCHED_TICKET (when the lease came through the
 * queue), and each --cell-env VAR=LIST as VAR set to the LIST items at its
 * cells' indices (CUDA_VISIBLE_DEVICES=0,1,2,3 gives cell 2 the value 2, and
 * cells 1 and 3 the value 1,3).
 */
#ifndef SHMS_SUPERVISOR_RUN_ENV_H
#define SHMS_SUPERVISOR_RUN_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "shmsched.h"

#define RUN_CELL_ENV_MAX 8 /* --cell-env options per run */

/* The --cell-env options, as given (each "VAR=a,b,c", checked by run_cell_env_add). */
struct cell_envs {
  const char *spec[RUN_CELL_ENV_MAX];
  unsigned n;
};

/* Check and keep one --cell-env VAR=LIST. 0, or -1 with err saying what is wrong. */
int run_cell_env_add(struct cell_envs *e, const char *spec, char *err, size_t n);

/* 0 if every LIST has at least cells items, else -1 with err naming the short one. */
int run_cell_env_check(const struct cell_envs *e, uint32_t cells, const char *cls, char *err,
                       size_t n);

/* The strings for the command's environment. */
struct run_env {
  char segment[24 + SHMS_NAME_MAX], cls[40], tenant[24 + SHMS_TENANT_MAX],
      ticket[24 + SHMS_TICKET_STRLEN];
  char *cell;                          /* malloc'd "SHMSCHED_CELL=c[,c...]" */
  char *cell_values[RUN_CELL_ENV_MAX]; /* malloc'd "VAR=item[,item...]" */
  char *list[6 + RUN_CELL_ENV_MAX];    /* NULL-ended */
};

/* Fill env for a lease on cells[0..n) of class cls (ascending); ticket NULL when the lease was
 * taken at once. -1 when out of memory. */
int run_env_build(struct run_env *env, const char *segment, const char *cls, const char *tenant,
                  const uint32_t *cells, uint32_t n, const shms_ticket *ticket,
                  const struct cell_envs *e);
void run_env_free(struct run_env *env);

#endif

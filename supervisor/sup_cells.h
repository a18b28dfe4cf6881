/*
 * The supervisor's eye on the cells: what changed a cell's state outside its own recoveries (a
 * holder quarantining its lease, `run` quarantining after a crash, an operator's repair) is
 * logged from the difference between two looks, once per tick.
 */
#ifndef SHMS_SUPERVISOR_SUP_CELLS_H
#define SHMS_SUPERVISOR_SUP_CELLS_H

#include "shmsched.h"

struct sup_cells {
  uint32_t count[SHMS_CLASS_COUNT];
  shms_cell_info *seen[SHMS_CLASS_COUNT]; /* the last look, count[c] rows */
};

/* Take a look without telling anything (at start, and after a recovery whose changes it
 * logged itself). */
void sup_cells_look(shms_t *h, struct sup_cells *s);

/* Look again and tell each cell quarantined, or repaired (out of quarantine), since the last
 * look: one line each through say, with its class, cell, tenant, pid and reason. */
void sup_cells_tell(shms_t *h, struct sup_cells *s, void (*say)(const char *line));

void sup_cells_free(struct sup_cells *s);

#endif

/*
 * The supervisor's eye on what changed outside its own recoveries (a holder quarantining its
 * lease, `run` quarantining after a crash, an operator's repair or drain, another process's
 * recovery): read from the segment's event ring, the records other processes wrote since the
 * last look; on a segment without a ring, from the difference between two looks at the cells,
 * once per tick. Either way one line per event, made by the one formatter (event_fmt.h).
 */
#ifndef SHMS_SUPERVISOR_SUP_CELLS_H
#define SHMS_SUPERVISOR_SUP_CELLS_H

#include "shmsched.h"

struct sup_cells {
  int ring;         /* the segment has an event ring */
  int started;      /* the first look was taken */
  int verbose;      /* also tell grants, rejections, cancellations, expirations, revocations */
  int32_t self;     /* our pid: what we recorded we told already */
  uint64_t cursor;  /* the ring's next position to read */
  uint64_t stalled; /* since when (CLOCK_MONOTONIC ns) a record being written holds us up */
  uint32_t count[SHMS_CLASS_COUNT];
  shms_cell_info *seen[SHMS_CLASS_COUNT]; /* no ring: the last look, count[c] rows */
};

/* A line to log, stamped with wall_ns (CLOCK_REALTIME; 0: now). */
typedef void sup_say_fn(uint64_t wall_ns, const char *line);

/* Take a look without telling anything: at start (the ring: from its end on), and after a
 * recovery whose changes the supervisor told itself. */
void sup_cells_look(shms_t *h, struct sup_cells *s);

/* Look again and tell, one line each through say, what others changed since the last look. */
void sup_cells_tell(shms_t *h, struct sup_cells *s, sup_say_fn *say);

void sup_cells_free(struct sup_cells *s);

#endif

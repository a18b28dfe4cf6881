/*
 * What `shmsched status` shows, gathered once and then printed either as
 * Redis-INFO-like "key: value" sections or as JSON. Both printers are driven
 * by one walk over the figures (status_print.c), so their key names agree.
 */
#ifndef SHMS_SUPERVISOR_STATUS_H
#define SHMS_SUPERVISOR_STATUS_H

#include <stdio.h>

#include "shmsched.h"

struct status_view {
  const char *name;
  shms_segment_info info;
  shms_config cfg;
  shms_class_stats stats[SHMS_CLASS_COUNT]; /* for the classes cfg configures */
};

void status_print_text(FILE *f, const struct status_view *v);
void status_print_json(FILE *f, const struct status_view *v);

#endif

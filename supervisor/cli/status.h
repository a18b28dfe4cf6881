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
  /* --tenants: per class, rows of the tenants with queued work or counted leases */
  int with_tenants;
  shms_tenant_stats *tenants[SHMS_CLASS_COUNT]; /* malloc'd; status_view_free() */
  uint32_t tenants_shown[SHMS_CLASS_COUNT];     /* rows in tenants[c] */
  uint32_t tenants_count[SHMS_CLASS_COUNT];     /* tenants present (may exceed shown) */
  /* --leases: per class, every cell (shms_cells), and the monotonic time they were read at */
  int with_leases;
  shms_cell_info *cells[SHMS_CLASS_COUNT]; /* malloc'd; status_view_free() */
  uint32_t cells_count[SHMS_CLASS_COUNT];
  uint64_t now_ns;
  /* The quota table: each quota's maximum, units held and parked requests */
  shms_quota_row quotas[SHMS_QUOTAS_MAX];
  uint32_t nquotas;
};

void status_view_free(struct status_view *v);

void status_print_text(FILE *f, const struct status_view *v);
void status_print_json(FILE *f, const struct status_view *v);

#endif

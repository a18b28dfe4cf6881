/*
 * memory: what a cell and a request slot cost in the segment, measured with
 * shms_segment_size on the default configuration (shms_config_init: 1,024
 * tenants and 1,024 processes) plus one lease class `standard`.
 *
 *   bytes_per_cell         size(cells = 65) - size(cells = 64), queue 1,024
 *   bytes_per_slot         (size(queue = 2,048) - size(queue = 1,024)) / 1,024, cells 4:
 *                          the slot itself plus its share of the activation hash
 *                          buckets and the slot bitmaps
 *   bytes_per_slot_worker  the same for a worker class with the default 4,096-byte payload
 *   bytes_per_tenant       (size(max-tenants = 2,048) - size(max-tenants = 1,024)) / 1,024,
 *                          per configured class
 *   segment_bytes          the whole segment of `--class standard:cells=4,queue=64`
 *
 * The formula behind these is in docs/architecture.md ("Size").
 * Output: `memory,shmsched,METRIC,V,bytes`.
 */
#include <stdio.h>

#include "bench_util.h"
#include "shmsched.h"

static uint64_t size_of(uint32_t cells, uint32_t queue, uint32_t mode, uint32_t tenants) {
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){
      .configured = 1,
      .cells = cells,
      .queue = queue,
      .mode = mode,
      .payload = mode == SHMS_MODE_WORKER ? SHMS_DEFAULT_PAYLOAD : 0,
  };
  if (tenants)
    cfg.max_tenants = tenants;
  int rc = shms_config_validate(&cfg);
  if (rc != SHMS_OK)
    bu_die_shms("shms_config_validate", rc);
  return shms_segment_size(&cfg);
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "(no options)");
  bu_args_done();
  const uint32_t q = 1024;
  double cell = (double)(size_of(65, q, SHMS_MODE_LEASE, 0) - size_of(64, q, SHMS_MODE_LEASE, 0));
  double slot = (double)(size_of(4, 2 * q, SHMS_MODE_LEASE, 0) - size_of(4, q, SHMS_MODE_LEASE, 0));
  double wslot =
      (double)(size_of(4, 2 * q, SHMS_MODE_WORKER, 0) - size_of(4, q, SHMS_MODE_WORKER, 0));
  double tenant = (double)(size_of(4, q, SHMS_MODE_LEASE, 2 * SHMS_DEFAULT_MAX_TENANTS) -
                           size_of(4, q, SHMS_MODE_LEASE, SHMS_DEFAULT_MAX_TENANTS));
  bu_row("memory", "shmsched", "bytes_per_cell", cell, "bytes");
  bu_row("memory", "shmsched", "bytes_per_slot", slot / q, "bytes");
  bu_row("memory", "shmsched", "bytes_per_slot_worker", wslot / q, "bytes");
  bu_row("memory", "shmsched", "bytes_per_tenant", tenant / SHMS_DEFAULT_MAX_TENANTS, "bytes");
  bu_row("memory", "shmsched", "segment_bytes", (double)size_of(4, 64, SHMS_MODE_LEASE, 0),
         "bytes");
  return 0;
}

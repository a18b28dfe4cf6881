/*
 * event-record: what one record of the event ring costs its writer (shms__note, as the
 * scheduler calls it after a grant, a cancel, a quarantine ...), in one process pinned to one
 * CPU, against a ring of --events records; and, beside it, the two clock reads a record takes
 * (CLOCK_MONOTONIC and CLOCK_REALTIME through the vDSO), which are most of it.
 *
 * Output: `event-record,shmsched,ns_per_event,V,ns` and `event-record,clocks,ns_per_pair,V,ns`:
 * means over --iters after a warm-up of the same length.
 * Usage: bench_events [--iters N] [--events N]
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/report.h"
#include "shm/handle.h"

static void put_many(shms_t *h, long iters) {
  struct shms__ev e = {.kind = SHMS_EVENT_GRANTED,
                       .cls = SHMS_CLASS_STANDARD,
                       .cell = 0,
                       .pid = 1,
                       .slot_ref = 1,
                       .ticket_seq = 1};
  memcpy(e.tenant, "bench", 6);
  for (long i = 0; i < iters; i++) {
    e.value = (uint64_t)i;
    shms__note(h, &e);
  }
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "[--iters N] [--events N]");
  long iters = bu_arg_long("iters", 2000000);
  long events = bu_arg_long("events", SHMS_DEFAULT_EVENTS);
  bu_args_done();
  bu_pin(0);
  char name[64];
  snprintf(name, sizeof name, "shms-bench-events-%d", (int)getpid());
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){.configured = 1, .cells = 1, .queue = 1};
  cfg.events = (uint32_t)events;
  shms_t *h;
  int rc = shms_create(name, &cfg);
  if (rc != SHMS_OK || (rc = shms_attach(name, 0, &h)) != SHMS_OK)
    bu_die_shms("create/attach", rc);
  put_many(h, iters); /* warm-up: every record's lines faulted in, the branch history */
  uint64_t t0 = bu_now_ns();
  put_many(h, iters);
  double per_event = (double)(bu_now_ns() - t0) / (double)iters;
  struct timespec ts;
  uint64_t sink = 0;
  t0 = bu_now_ns();
  for (long i = 0; i < iters; i++) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sink += (uint64_t)ts.tv_nsec;
    clock_gettime(CLOCK_REALTIME, &ts);
    sink += (uint64_t)ts.tv_nsec;
  }
  double per_pair = (double)(bu_now_ns() - t0) / (double)iters;
  __asm__ volatile("" : : "r"(sink));
  shms_detach(h);
  shms_destroy(name, SHMS_DESTROY_FORCE);
  bu_row("event-record", "shmsched", "ns_per_event", per_event, "ns");
  bu_row("event-record", "clocks", "ns_per_pair", per_pair, "ns");
  return 0;
}

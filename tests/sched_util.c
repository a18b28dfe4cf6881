/* Helpers for the scheduling suites (sched_util.h). */
#include "sched_util.h"

uint64_t sched_fake_now = 1000000000ull;

uint64_t sched_fake_clock(void *ctx) {
  (void)ctx;
  return sched_fake_now;
}

shms_t *sched_open(const char **name, unsigned cells, unsigned queue, const shms_config *base) {
  shms_config cfg;
  if (base != NULL)
    cfg = *base;
  else
    harness_config(&cfg, cells, queue);
  *name = harness_name("sched");
  harness_create(*name, &cfg);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(*name, 0, &h));
  return h;
}

void sched_close(shms_t *h, const char *name) {
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_destroy(name, 0));
}

shms_request sched_req(const char *tenant, int32_t priority) {
  return (shms_request){.cls = SHMS_CLASS_STANDARD, .tenant = tenant, .priority = priority};
}

shms_ticket sched_enqueue(shms_t *h, const char *tenant, int32_t priority, uint64_t deadline) {
  shms_request r = sched_req(tenant, priority);
  r.deadline_ns = deadline;
  shms_ticket t;
  ck_assert_shms_ok(shms_enqueue(h, &r, &t));
  return t;
}

int sched_granted(shms_t *h, const shms_ticket *tickets, int n, shms_lease *lease) {
  int found = -1;
  for (int i = 0; i < n; i++) {
    shms_lease l;
    int rc = shms_wait(h, &tickets[i], 0, &l);
    if (rc == SHMS_OK) {
      ck_assert_msg(found < 0, "tickets %d and %d were both granted", found, i);
      found = i;
      *lease = l;
    } else {
      ck_assert_msg(rc == SHMS_ETIMEDOUT || rc == SHMS_ENOTFOUND, "ticket %d: %s (%s)", i,
                    shms_err_name(rc), shms_last_error_detail());
    }
  }
  ck_assert_msg(found >= 0, "no ticket was granted");
  return found;
}

shms_class_stats sched_stats(shms_t *h) {
  shms_class_stats s;
  ck_assert_shms_ok(shms_observe(h, SHMS_CLASS_STANDARD, &s));
  return s;
}

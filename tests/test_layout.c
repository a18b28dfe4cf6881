/*
 * Layout round trips: a segment laid out from a configuration attaches, gives
 * the same configuration back, and has exactly the size of the documented
 * formula (docs/architecture.md, "Size").
 */
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "shm/layout.h"

static uint64_t line(uint64_t n) { return (n + 63) / 64 * 64; }
static uint64_t pow2(uint64_t n) {
  uint64_t p = 1;
  while (p < n)
    p *= 2;
  return p;
}

/* 64-bit words of a hierarchical bitmap over n indexes: 64 per word, then 64 per summary word,
 * up to a level of at most 8 words, which starts at a multiple of 8 words. */
static uint64_t hbm_words(uint64_t n) {
  if (n == 0)
    return 0;
  uint64_t w = (n + 63) / 64, total = w;
  while (w > 8) {
    w = (w + 63) / 64;
    total = (w <= 8 ? (total + 7) / 8 * 8 : total) + w;
  }
  return total;
}

/* The formula as docs/architecture.md states it, written independently of layout.c. */
static uint64_t documented_size(const shms_config *cfg) {
  uint64_t size = line(sizeof(struct shms__header));
  uint64_t t = cfg->max_tenants;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const shms_class_config *k = &cfg->classes[c];
    if (!k->configured)
      continue;
    uint64_t slot = 256 + (k->mode == SHMS_MODE_WORKER ? line(k->payload) : 0);
    size += 1344 + 128ull * k->cells + slot * k->queue + 192 * t + line(4 * pow2(2 * t)) +
            line(4 * pow2(k->queue ? k->queue : 1)) + 2 * line(8 * hbm_words(k->queue)) +
            line(8 * hbm_words(t)) + line(24 * t) +
            line(8 * hbm_words(cfg->tenant_table ? cfg->tenant_table : SHMS_DEFAULT_TENANT_TABLE)) +
            line(8ull * k->cells);
  }
  size += 576ull * cfg->max_processes;
  uint64_t a = cfg->tenant_table ? cfg->tenant_table : SHMS_DEFAULT_TENANT_TABLE;
  size += 64 + line(4 * pow2(2 * (uint32_t)a)) + 512 * a;       /* the tenant table */
  return cfg->events ? size + 64 + 128ull * cfg->events : size; /* the event ring */
}

static void set_class(shms_config *cfg, shms_class_t c, unsigned cells, unsigned queue,
                      unsigned mode, unsigned payload) {
  shms_class_config *k = &cfg->classes[c];
  k->configured = 1;
  k->cells = cells;
  k->queue = queue;
  k->mode = mode;
  k->payload = payload;
}

static void round_trip(const shms_config *cfg) {
  const char *name = harness_name("layout");
  harness_create(name, cfg);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_config back;
  ck_assert_shms_ok(shms_get_config(h, &back));
  ck_assert(memcmp(&back, cfg, sizeof back) == 0);
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_uint_eq(info.size, documented_size(cfg));
  ck_assert_uint_eq(info.size, shms_segment_size(cfg));
  ck_assert_uint_eq(info.state, SHMS_SEG_ACTIVE);
  ck_assert_uint_eq(info.live_processes, 1);
  ck_assert_uint_eq(info.max_processes, cfg->max_processes);
  ck_assert_uint_ne(info.incarnation, 0);
  char path[256];
  struct stat st;
  harness_shm_path(path, sizeof path, name);
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq((uint64_t)st.st_size, info.size);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    shms_class_stats s;
    const shms_class_config *k = &cfg->classes[c];
    if (!k->configured) {
      ck_assert_shms_err(shms_observe(h, (shms_class_t)c, &s), SHMS_EINVAL, "not configured");
      continue;
    }
    ck_assert_shms_ok(shms_observe(h, (shms_class_t)c, &s));
    ck_assert_uint_eq(s.cells, k->cells);
    /* A lease class starts with every cell available, a worker class with every cell offline. */
    ck_assert_uint_eq(s.available, k->mode == SHMS_MODE_LEASE ? k->cells : 0);
    ck_assert_uint_eq(s.offline, k->mode == SHMS_MODE_WORKER ? k->cells : 0);
    ck_assert_uint_eq(s.leased + s.granted_unaccepted + s.quarantined, 0);
    ck_assert_uint_eq(s.queue_capacity, k->queue);
    ck_assert_uint_eq(s.queue_depth + s.granted + s.rejected, 0);
  }
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_destroy(name, 0));
}

START_TEST(one_lease_class) {
  shms_config cfg;
  harness_config(&cfg, 4, 16);
  round_trip(&cfg);
}
END_TEST

START_TEST(every_class_and_mode) {
  shms_config cfg;
  shms_config_init(&cfg);
  set_class(&cfg, SHMS_CLASS_TINY, 1, 1, SHMS_MODE_LEASE, 0);
  set_class(&cfg, SHMS_CLASS_SMALL, 7, 33, SHMS_MODE_WORKER, 1000);
  set_class(&cfg, SHMS_CLASS_STANDARD, 64, 1000, SHMS_MODE_LEASE, 0);
  set_class(&cfg, SHMS_CLASS_LARGE, 3, 0, SHMS_MODE_LEASE, 0);
  set_class(&cfg, SHMS_CLASS_EXTRA_LARGE, 2, 5, SHMS_MODE_WORKER, 1);
  cfg.classes[SHMS_CLASS_EXTRA_LARGE].allow_count = 2;
  strcpy(cfg.classes[SHMS_CLASS_EXTRA_LARGE].allow[0], "alice");
  strcpy(cfg.classes[SHMS_CLASS_EXTRA_LARGE].allow[1], "bob");
  cfg.classes[SHMS_CLASS_STANDARD].tenant_max_active = 3;
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  cfg.max_tenants = 17;
  cfg.max_processes = 5;
  cfg.starvation_after_ns = 250ull * 1000 * 1000;
  cfg.events = 16;
  round_trip(&cfg);
}
END_TEST

START_TEST(large_queue_and_many_tenants) {
  shms_config cfg;
  harness_config(&cfg, 16, 100000);
  cfg.max_tenants = 10000;
  cfg.events = 0; /* no ring: no region at all */
  round_trip(&cfg);
}
END_TEST

START_TEST(mode_is_exact_despite_umask) {
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  umask(077);
  const char *a = harness_name("mode-default"), *b = harness_name("mode-0660");
  harness_create(a, &cfg);
  cfg.file_mode = 0660;
  harness_create(b, &cfg);
  char path[256];
  struct stat st;
  harness_shm_path(path, sizeof path, a);
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  harness_shm_path(path, sizeof path, b);
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0660);
  harness_remove(a);
  harness_remove(b);
}
END_TEST

START_TEST(size_formula_rejects_oversized_configs) {
  shms_config cfg;
  shms_config_init(&cfg);
  set_class(&cfg, SHMS_CLASS_LARGE, 4, SHMS_QUEUE_MAX, SHMS_MODE_WORKER, SHMS_PAYLOAD_MAX);
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "more than the");
  ck_assert_uint_eq(shms_segment_size(&cfg), 0);
  const char *name = harness_name("huge");
  ck_assert_int_eq(shms_create(name, &cfg), SHMS_EINVAL);
  char path[256];
  struct stat st;
  harness_shm_path(path, sizeof path, name);
  ck_assert_int_ne(stat(path, &st), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("layout");
  TCase *tc = harness_tcase("round-trip");
  tcase_add_test(tc, one_lease_class);
  tcase_add_test(tc, every_class_and_mode);
  tcase_add_test(tc, large_queue_and_many_tenants);
  tcase_add_test(tc, mode_is_exact_despite_umask);
  tcase_add_test(tc, size_formula_rejects_oversized_configs);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

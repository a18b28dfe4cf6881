/*
 * attach refuses every segment it cannot trust, each with the right reason
 * and a detail naming the failed check; create never touches an existing
 * segment; names are checked.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "shm/layout.h"

static int open_file(const char *name) {
  char path[256];
  harness_shm_path(path, sizeof path, name);
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  return fd;
}

/* Overwrite size bytes at off with value's low bytes, run attach, then restore. */
static int attach_with(const char *name, uint64_t off, size_t size, uint64_t value) {
  int fd = open_file(name);
  uint64_t saved = 0;
  ck_assert_int_eq(pread(fd, &saved, size, (off_t)off), (ssize_t)size);
  ck_assert_int_eq(pwrite(fd, &value, size, (off_t)off), (ssize_t)size);
  shms_t *h = NULL;
  int rc = shms_attach(name, 0, &h);
  if (rc == SHMS_OK)
    shms_detach(h);
  ck_assert_int_eq(pwrite(fd, &saved, size, (off_t)off), (ssize_t)size);
  close(fd);
  return rc;
}

static uint64_t read_field(const char *name, uint64_t off, size_t size) {
  int fd = open_file(name);
  uint64_t v = 0;
  ck_assert_int_eq(pread(fd, &v, size, (off_t)off), (ssize_t)size);
  close(fd);
  return v;
}

#define HDR(field) offsetof(struct shms__header, field), sizeof(((struct shms__header *)0)->field)

static void expect_refused(const char *name, uint64_t off, size_t size, uint64_t value,
                           const char *needle) {
  int rc = attach_with(name, off, size, value);
  ck_assert_msg(rc == SHMS_EINCOMPAT, "corrupting %s gave %s (%s)", needle, shms_err_name(rc),
                shms_last_error_detail());
  ck_assert_msg(strstr(shms_last_error_detail(), needle) != NULL, "detail '%s' lacks '%s'",
                shms_last_error_detail(), needle);
}

static const char *make_segment(shms_config *cfg) {
  const char *name = harness_name("attach");
  shms_config_init(cfg);
  cfg->classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1, .cells = 2, .queue = 8};
  cfg->classes[SHMS_CLASS_LARGE] =
      (shms_class_config){.configured = 1, .cells = 3, .queue = 4, .mode = 1, .payload = 100};
  harness_create(name, cfg);
  return name;
}

START_TEST(refuses_each_corrupted_header_field) {
  shms_config cfg;
  const char *name = make_segment(&cfg);
  expect_refused(name, HDR(magic), 0x1122334455667788ull, "magic");
  expect_refused(name, HDR(magic), 0, "magic: not set");
  expect_refused(name, HDR(layout_version), SHMS__LAYOUT_VERSION + 1, "layout_version");
  expect_refused(name, HDR(header_size), sizeof(struct shms__header) + 8, "header_size");
  expect_refused(name, HDR(total_size), read_field(name, HDR(total_size)) + 64, "total_size");
  expect_refused(name, HDR(state), 77, "state");
  expect_refused(name, HDR(class_mask), 1u << SHMS_CLASS_TINY | 1u << SHMS_CLASS_SMALL,
                 "class_mask");
  expect_refused(name, HDR(procs_off), read_field(name, HDR(procs_off)) + 64, "procs_off");
  expect_refused(name, HDR(procs_count), read_field(name, HDR(procs_count)) + 1, "procs_count");
  /* Nothing was left registered by the refusals. */
  shms_t *h;
  shms_segment_info info;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_uint_eq(info.live_processes, 1);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

START_TEST(refuses_each_corrupted_class_offset_and_count) {
  static const struct {
    size_t off, size;
    const char *field;
  } fields[] = {
#define F(f) {offsetof(struct shms__class_desc, f), sizeof(((struct shms__class_desc *)0)->f), #f}
      F(ctl_off),      F(cells_off),     F(slots_off),      F(tenants_off),
      F(tbuckets_off), F(abuckets_off),  F(cells_count),    F(slots_count),
      F(slot_size),    F(tenants_count), F(tbuckets_count), F(abuckets_count),
#undef F
  };
  shms_config cfg;
  const char *name = make_segment(&cfg);
  int classes[] = {SHMS_CLASS_SMALL, SHMS_CLASS_LARGE, SHMS_CLASS_TINY};
  for (size_t c = 0; c < 3; c++) {
    uint64_t base = offsetof(struct shms__header, classes) +
                    (uint64_t)classes[c] * sizeof(struct shms__class_desc);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
      uint64_t off = base + fields[i].off;
      uint64_t v = read_field(name, off, fields[i].size);
      /* Plausible and huge wrong values: neither may get past validation. */
      expect_refused(name, off, fields[i].size, v + 1, fields[i].field);
      expect_refused(name, off, fields[i].size, fields[i].size == 4 ? 0xffffffffu : ~0ull,
                     fields[i].field);
    }
  }
  harness_remove(name);
}
END_TEST

START_TEST(refuses_a_corrupted_stored_config) {
  shms_config cfg;
  const char *name = make_segment(&cfg);
  uint64_t cfg_off = offsetof(struct shms__header, config);
  uint64_t cells = cfg_off + offsetof(shms_config, classes) +
                   SHMS_CLASS_SMALL * sizeof(shms_class_config) +
                   offsetof(shms_class_config, cells);
  expect_refused(name, cells, 4, 0, "config");
  expect_refused(name, cells, 4, 3, "expected"); /* valid config, layout no longer matches */
  uint64_t procs = cfg_off + offsetof(shms_config, max_processes);
  expect_refused(name, procs, 4, 0, "max-processes");
  uint64_t starv = cfg_off + offsetof(shms_config, starvation_after_ns);
  expect_refused(name, starv, 8, 0, "starvation-after");
  harness_remove(name);
}
END_TEST

static void write_file(const char *name, const void *buf, size_t n) {
  char shm_name[256];
  snprintf(shm_name, sizeof shm_name, "/%s", name);
  int fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
  close(fd);
}

START_TEST(refuses_random_bytes) {
  static unsigned char buf[65536];
  srandom(42);
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (unsigned char)random();
  const char *name = harness_name("random");
  write_file(name, buf, sizeof buf);
  shms_t *h;
  ck_assert_shms_err(shms_attach(name, 0, &h), SHMS_EINCOMPAT, "magic");
  ck_assert_shms_err(shms_attach(name, SHMS_ATTACH_OBSERVER, &h), SHMS_EINCOMPAT, "magic");
  harness_remove(name);
  /* The right magic and version in front of garbage is still refused. */
  uint64_t magic = SHMS__MAGIC;
  uint32_t version = SHMS__LAYOUT_VERSION;
  memcpy(buf + offsetof(struct shms__header, magic), &magic, sizeof magic);
  memcpy(buf + offsetof(struct shms__header, layout_version), &version, sizeof version);
  write_file(name, buf, sizeof buf);
  ck_assert_int_eq(shms_attach(name, 0, &h), SHMS_EINCOMPAT);
  harness_remove(name);
  write_file(name, buf, 0);
  ck_assert_shms_err(shms_attach(name, 0, &h), SHMS_EINCOMPAT, "truncated");
  harness_remove(name);
}
END_TEST

START_TEST(refuses_truncated_files) {
  shms_config cfg;
  const char *name = make_segment(&cfg);
  uint64_t size = shms_segment_size(&cfg);
  char path[256];
  harness_shm_path(path, sizeof path, name);
  shms_t *h;
  ck_assert_int_eq(truncate(path, (off_t)(size - 64)), 0);
  ck_assert_shms_err(shms_attach(name, 0, &h), SHMS_EINCOMPAT, "total_size");
  ck_assert_int_eq(truncate(path, 100), 0);
  ck_assert_shms_err(shms_attach(name, 0, &h), SHMS_EINCOMPAT, "truncated");
  ck_assert_int_eq(truncate(path, (off_t)(size + 4096)), 0);
  ck_assert_shms_err(shms_attach(name, 0, &h), SHMS_EINCOMPAT, "total_size");
  harness_remove(name);
}
END_TEST

/* Run attach as user nobody in a child; returns the child's view of the result code. */
static int attach_as_nobody(const char *name, unsigned flags) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0)
      _exit(100);
    shms_t *h;
    int rc = shms_attach(name, flags, &h);
    _exit(rc == SHMS_EPERM && strstr(shms_last_error_detail(), name) != NULL ? 0 : 1);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  return WEXITSTATUS(status);
}

START_TEST(refuses_a_segment_it_may_not_open) {
  if (geteuid() != 0)
    return; /* needs to become another user; CI runs as root */
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  const char *name = harness_name("perm");
  harness_create(name, &cfg);
  ck_assert_int_eq(attach_as_nobody(name, 0), 0);
  ck_assert_int_eq(attach_as_nobody(name, SHMS_ATTACH_OBSERVER), 0);
  harness_remove(name);
}
END_TEST

START_TEST(refuses_missing_and_bad_names) {
  shms_t *h;
  ck_assert_shms_err(shms_attach("shmst-no-such-segment", 0, &h), SHMS_ENOTFOUND,
                     "shmst-no-such-segment");
  ck_assert_shms_err(shms_attach("a/", 0, &h), SHMS_EINVAL, "ends in '/'");
  ck_assert_shms_err(shms_attach("", 0, &h), SHMS_EINVAL, "empty");
  ck_assert_shms_err(shms_attach("..", 0, &h), SHMS_EINVAL, "reserved");
  char longname[SHMS_NAME_MAX + 2];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ck_assert_shms_err(shms_attach(longname, 0, &h), SHMS_EINVAL, "longer");
  ck_assert_shms_err(shms_destroy("shmst-no-such-segment", 0), SHMS_ENOTFOUND, "no segment");
}
END_TEST

START_TEST(create_leaves_an_existing_segment_untouched) {
  shms_config cfg;
  const char *name = make_segment(&cfg);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_segment_info before, after;
  ck_assert_shms_ok(shms_segment_info_get(h, &before));
  shms_config other;
  harness_config(&other, 9, 9);
  ck_assert_shms_err(shms_create(name, &other), SHMS_EEXISTS, "already exists");
  ck_assert_shms_ok(shms_segment_info_get(h, &after));
  ck_assert_uint_eq(before.incarnation, after.incarnation);
  shms_config back;
  ck_assert_shms_ok(shms_get_config(h, &back));
  ck_assert(memcmp(&back, &cfg, sizeof cfg) == 0);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

START_TEST(a_failed_create_leaves_nothing) {
  if (geteuid() != 0)
    return; /* needs to become another user; CI runs as root */
  const char *name = harness_name("failed");
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    /* As nobody, giving the new file to group 0 fails after the file exists. */
    if (setgid(65534) != 0 || setuid(65534) != 0)
      _exit(100);
    shms_config cfg;
    harness_config(&cfg, 1, 1);
    cfg.group = 0;
    _exit(shms_create(name, &cfg) == SHMS_EPERM ? 0 : 1);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char path[256];
  struct stat st;
  harness_shm_path(path, sizeof path, name);
  ck_assert_int_ne(stat(path, &st), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("attach");
  TCase *tc = harness_tcase("validate");
  tcase_add_test(tc, refuses_each_corrupted_header_field);
  tcase_add_test(tc, refuses_each_corrupted_class_offset_and_count);
  tcase_add_test(tc, refuses_a_corrupted_stored_config);
  tcase_add_test(tc, refuses_random_bytes);
  tcase_add_test(tc, refuses_truncated_files);
  tcase_add_test(tc, refuses_a_segment_it_may_not_open);
  tcase_add_test(tc, refuses_missing_and_bad_names);
  tcase_add_test(tc, create_leaves_an_existing_segment_untouched);
  tcase_add_test(tc, a_failed_create_leaves_nothing);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

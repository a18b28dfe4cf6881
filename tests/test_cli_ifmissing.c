/*
 * `shmsched create NAME --config FILE --if-missing`, what the shmsched@.service unit runs
 * before it supervises: a missing segment is created, one with the file's configuration is
 * accepted as it is, one with another is refused with the first difference on one line and
 * left untouched. And cli_config_diff, the comparison, driven directly.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_cfgdiff.h"
#include "cli/cli_config.h"
#include "cli_proc.h"
#include "harness.h"

static char out[4096], err[4096];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

/* Write text into the scratch directory's file; returns its path (a static buffer per file). */
static const char *write_conf(char *path, size_t n, const char *file, const char *text) {
  cli_path(path, n, file);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

/* The segment's incarnation (a new one for every creation) and its configuration. */
static uint64_t incarnation(const char *name, shms_config *cfg) {
  shms_t *h;
  shms_segment_info info;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_shms_ok(shms_get_config(h, cfg));
  shms_detach(h);
  return info.incarnation;
}

/* stderr is exactly this one line. */
static void assert_err(const char *line) {
  char want[1024];
  snprintf(want, sizeof want, "%s\n", line);
  ck_assert_str_eq(err, want);
}

static const char jobs_conf[] = "[segment]\nmax-processes = 64\n\n"
                                "[class small]\ncells = 2\nqueue = 8\n\n"
                                "[class large]\ncells = 1\nqueue = 4\ngrant-timeout = 2s\n";

START_TEST(missing_is_created_same_is_accepted) {
  char conf[256];
  write_conf(conf, sizeof conf, "jobs.conf", jobs_conf);
  const char *name = CLI_SEGMENT("ifm", "--config", conf, "--if-missing");
  shms_config cfg;
  uint64_t inc = incarnation(name, &cfg);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_SMALL].cells, 2);
  ck_assert_uint_eq(cfg.max_processes, 64);
  /* Again: the same configuration (grant-timeout = 2s is the default it stands for). */
  ck_assert_int_eq(CLI("create", name, "--config", conf, "--if-missing"), 0);
  char want[512];
  snprintf(want, sizeof want, "segment '%s' exists with the configuration of %s: left as it is\n",
           name, conf);
  ck_assert_str_eq(out, want);
  ck_assert_str_eq(err, "");
  ck_assert_uint_eq(incarnation(name, &cfg), inc);
  /* Without --if-missing it still fails as before. */
  ck_assert_int_eq(CLI("create", name, "--config", conf), 1);
  ck_assert_ptr_nonnull(strstr(err, "shmsched: already-exists: "));
}
END_TEST

START_TEST(a_difference_is_refused_with_one_line) {
  char conf[256], other[256], want[1024];
  write_conf(conf, sizeof conf, "jobs.conf", jobs_conf);
  const char *name = CLI_SEGMENT("ifmd", "--config", conf, "--if-missing");
  shms_config cfg;
  uint64_t inc = incarnation(name, &cfg);

  write_conf(other, sizeof other, "cells.conf",
             "[segment]\nmax-processes = 64\n[class small]\ncells = 4\nqueue = 8\n"
             "[class large]\ncells = 1\nqueue = 4\n");
  ck_assert_int_eq(CLI("create", name, "--config", other, "--if-missing"), 1);
  snprintf(want, sizeof want,
           "shmsched: already-exists: segment '%s' exists with another configuration: "
           "class small: cells is 2 in the segment, 4 in %s",
           name, other);
  assert_err(want);
  ck_assert_str_eq(out, "");

  write_conf(other, sizeof other, "class.conf",
             "[segment]\nmax-processes = 64\n[class small]\ncells = 2\nqueue = 8\n");
  ck_assert_int_eq(CLI("create", name, "--config", other, "--if-missing"), 1);
  snprintf(want, sizeof want,
           "shmsched: already-exists: segment '%s' exists with another configuration: "
           "class large: configured in the segment, not configured in %s",
           name, other);
  assert_err(want);

  /* The command line's segment options count too: they override the file. */
  ck_assert_int_eq(
      CLI("create", name, "--config", conf, "--if-missing", "--starvation-after", "2s"), 1);
  snprintf(want, sizeof want,
           "shmsched: already-exists: segment '%s' exists with another configuration: "
           "[segment]: starvation-after is 5s in the segment, 2s in %s",
           name, conf);
  assert_err(want);

  /* Untouched throughout. */
  ck_assert_uint_eq(incarnation(name, &cfg), inc);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_SMALL].cells, 2);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_LARGE].configured, 1);
}
END_TEST

START_TEST(bad_input_changes_nothing) {
  char conf[256], bad[256];
  write_conf(conf, sizeof conf, "jobs.conf", jobs_conf);
  const char *name = CLI_SEGMENT("ifmb", "--config", conf, "--if-missing");
  shms_config cfg;
  uint64_t inc = incarnation(name, &cfg);
  write_conf(bad, sizeof bad, "bad.conf", "[class small]\ncells = two\nqueue = 8\n");
  ck_assert_int_eq(CLI("create", name, "--config", bad, "--if-missing"), 2);
  ck_assert_ptr_nonnull(strstr(err, "bad.conf:2: [class small] cells: not a number: 'two'"));
  ck_assert_int_eq(CLI("create", name, "--config", "/nonexistent/x.conf", "--if-missing"), 2);
  ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.conf: cannot open"));
  ck_assert_uint_eq(incarnation(name, &cfg), inc);
  /* A missing segment with a bad file: nothing is created. */
  char path[256];
  const char *missing = harness_name("ifmm");
  ck_assert_int_eq(CLI("create", missing, "--config", bad, "--if-missing"), 2);
  harness_shm_path(path, sizeof path, missing);
  ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

/* ---- cli_config_diff itself ---------------------------------------------- */

static void load(shms_config *cfg, const char *file, const char *text) {
  char path[256], e[512];
  shms_config_init(cfg);
  write_conf(path, sizeof path, file, text);
  ck_assert_msg(cli_load_config_file(cfg, path, e, sizeof e) == 0, "%s", e);
}

START_TEST(diff_compares_defaults_as_their_values) {
  shms_config a, b;
  char e[512] = "";
  load(&a, "a.conf", "[class standard]\ncells = 4\nqueue = 16\n");
  load(&b, "b.conf",
       "[class standard]\nqueue = 16\ncells = 4\novertake = 300us\nfairness = time\n"
       "on-holder-death = quarantine\n[segment]\nevents = 1024\ntenant-table = 4096\n");
  ck_assert_int_eq(cli_config_diff(&a, &b, "b.conf", e, sizeof e), 0);
  load(&b, "b.conf", "[class standard]\ncells = 4\nqueue = 16\novertake = 0\n");
  ck_assert_int_eq(cli_config_diff(&a, &b, "b.conf", e, sizeof e), 1);
  ck_assert_str_eq(e, "class standard: overtake is 300us in the segment, 0 in b.conf");
  load(&b, "b.conf", "[class standard]\ncells = 4\nqueue = 16\nallow = web+@0\n");
  ck_assert_int_eq(cli_config_diff(&a, &b, "b.conf", e, sizeof e), 1);
  ck_assert_str_eq(e, "class standard: allow is (none given) in the segment, web+@0 in b.conf");
  load(&b, "b.conf", "[class standard]\ncells = 4\nqueue = 16\n[segment]\nmode = 0660\n");
  ck_assert_int_eq(cli_config_diff(&a, &b, "b.conf", e, sizeof e), 1);
  ck_assert_str_eq(e, "[segment]: mode is 0600 in the segment, 0660 in b.conf");
}
END_TEST

START_TEST(diff_of_worker_classes) {
  shms_config a, b;
  char e[512] = "";
  load(&a, "a.conf", "[class large]\ncells = 2\nqueue = 8\nmode = worker\n");
  load(&b, "b.conf", "[class large]\ncells = 2\nqueue = 8\nmode = worker\npayload = 4096\n");
  ck_assert_int_eq(cli_config_diff(&a, &b, "b.conf", e, sizeof e), 0);
  load(&b, "b.conf", "[class large]\ncells = 2\nqueue = 8\nmode = worker\npayload = 65536\n");
  ck_assert_int_eq(cli_config_diff(&a, &b, "b.conf", e, sizeof e), 1);
  ck_assert_str_eq(e, "class large: payload is 4096 in the segment, 65536 in b.conf");
  load(&b, "b.conf", "[class large]\ncells = 2\nqueue = 8\n");
  ck_assert_int_eq(cli_config_diff(&a, &b, "b.conf", e, sizeof e), 1);
  ck_assert_str_eq(e, "class large: mode is worker in the segment, lease in b.conf");
}
END_TEST

int main(void) {
  Suite *s = suite_create("cli_ifmissing");
  TCase *tc = harness_tcase("if_missing");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, missing_is_created_same_is_accepted);
  tcase_add_test(tc, a_difference_is_refused_with_one_line);
  tcase_add_test(tc, bad_input_changes_nothing);
  tcase_add_test(tc, diff_compares_defaults_as_their_values);
  tcase_add_test(tc, diff_of_worker_classes);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

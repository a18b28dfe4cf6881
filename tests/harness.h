/*
 * Shared test scaffolding: unique segment names, a runner main, and helpers
 * to run the CLI. Every suite runs in Check's fork mode with a timeout.
 */
#ifndef SHMS_TESTS_HARNESS_H
#define SHMS_TESTS_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <string.h>

#include "shmsched.h"

/* Seconds a single test may take before Check fails it. */
#define SHMS_TEST_TIMEOUT 60

/* A segment name unique to this test process: "shmst-<pid>-<n>-<tag>". */
const char *harness_name(const char *tag);

/* A config with one lease class `standard` of cells/queue. */
void harness_config(shms_config *cfg, unsigned cells, unsigned queue);

/* Create NAME from cfg, failing the test on error. */
void harness_create(const char *name, const shms_config *cfg);

/* Remove NAME whatever state it is in (ignores errors). */
void harness_remove(const char *name);

/* Path of /dev/shm/NAME in out. */
void harness_shm_path(char *out, size_t n, const char *name);

/*
 * Run the CLI `<build>/bin/shmsched` with argv (NULL-terminated, without
 * argv[0]); capture stdout and stderr (NUL-terminated, truncated to fit).
 * Returns the exit status, or 128+signal.
 */
int harness_cli(char *out, size_t out_n, char *err, size_t err_n, const char *const argv[]);

/* Whether process pid runs (exists and is not a zombie), by this pid namespace's /proc. */
int harness_running(int pid);

/* Assert rc is ok, printing the detail when it is not. */
#define ck_assert_shms_ok(expr)                                                                    \
  do {                                                                                             \
    int rc_ = (expr);                                                                              \
    ck_assert_msg(rc_ == SHMS_OK, "%s -> %s: %s", #expr, shms_err_name(rc_),                       \
                  shms_last_error_detail());                                                       \
  } while (0)

/* Assert expr fails with code and the detail contains needle. */
#define ck_assert_shms_err(expr, code, needle)                                                     \
  do {                                                                                             \
    int rc_ = (expr);                                                                              \
    ck_assert_msg(rc_ == (code), "%s -> %s (%s), expected %s", #expr, shms_err_name(rc_),          \
                  shms_last_error_detail(), shms_err_name(code));                                  \
    ck_assert_msg(strstr(shms_last_error_detail(), (needle)) != NULL,                              \
                  "%s: detail '%s' lacks '%s'", #expr, shms_last_error_detail(), (needle));        \
  } while (0)

/* Run one suite in fork mode; returns the process exit code. */
int harness_run(Suite *s);

/* Start a TCase with the standard timeout. */
TCase *harness_tcase(const char *name);

#endif

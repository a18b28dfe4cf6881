/*
 * Quotas through <build>/bin/shmsched: `create --quota`, `run --quota`, `policy --quota --max`,
 * `status` and `explain`. Synchronisation is by pipes, waitpid and observing the segment (its
 * status), never by sleeping: the commands' own `sleep` only gives them a duration, and what
 * they overlapped is judged from the times they recorded.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

static char out[65536], err[4096];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

/* The number after "key: " in `status NAME`. */
static unsigned long long status_figure(const char *name, const char *key) {
  char needle[96];
  ck_assert_int_eq(CLI("status", name), 0);
  snprintf(needle, sizeof needle, "\n%s: ", key);
  const char *at = strstr(out, needle);
  ck_assert_msg(at != NULL, "status lacks '%s':\n%s", key, out);
  return strtoull(at + strlen(needle), NULL, 10);
}

/* The nanosecond time a command wrote to file. */
static uint64_t stamp(const char *file) {
  char path[256];
  FILE *f = fopen(cli_path(path, sizeof path, file), "r");
  ck_assert_msg(f != NULL, "%s was not written", file);
  unsigned long long ns = 0;
  ck_assert_int_eq(fscanf(f, "%llu", &ns), 1);
  fclose(f);
  return ns;
}

/*
 * Four runs naming a quota of 2 on a class of 4 cells, each 0.5 s long: never more than two at
 * once, all done in about a second; a run of another tenant naming no quota, started while two
 * of them wait for the quota, runs at once, before either of them.
 */
START_TEST(run_quota_bounds_concurrency_without_blocking_others) {
  const char *name =
      CLI_SEGMENT("quota", "--class", "standard:cells=4,queue=16", "--quota", "gpu=2");
  struct cli_proc p[4];
  char script[512], path[256];
  for (int i = 0; i < 4; i++) {
    char tenant[8];
    snprintf(tenant, sizeof tenant, "t%d", i);
    snprintf(script, sizeof script, "date +%%s%%N > %s/s%d; sleep 0.5; date +%%s%%N > %s/e%d",
             cli_dir(), i, cli_dir(), i);
    CLI_SPAWN(&p[i], "run", name, "--class", "standard", "--tenant", tenant, "--quota", "gpu", "--",
              "sh", "-c", script);
  }
  /* Observed: two hold a unit each, two are parked waiting for one. */
  while (status_figure(name, "quota.gpu.waiters") != 2)
    ;
  ck_assert_uint_eq(status_figure(name, "quota.gpu.used"), 2);
  ck_assert_int_eq(
      CLI("run", name, "--class", "standard", "--tenant", "other", "--", "sh", "-c",
          (snprintf(script, sizeof script, "date +%%s%%N > %s/plain", cli_dir()), script)),
      0);
  char pout[4096], perr[4096];
  for (int i = 0; i < 4; i++) {
    int rc = cli_reap(&p[i], 1, pout, sizeof pout, NULL, perr, sizeof perr);
    ck_assert_msg(rc == 0, "run %d exited %d: %s", i, rc, perr);
  }
  uint64_t s[4], e[4], first = UINT64_MAX, last = 0, plain = stamp("plain");
  int later = 0;
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "s%d", i);
    s[i] = stamp(path);
    snprintf(path, sizeof path, "e%d", i);
    e[i] = stamp(path);
    first = s[i] < first ? s[i] : first;
    last = e[i] > last ? e[i] : last;
  }
  /* At each start, how many were running: never more than two. */
  int most = 0;
  for (int i = 0; i < 4; i++) {
    int running = 0;
    for (int j = 0; j < 4; j++)
      running += s[j] <= s[i] && e[j] > s[i];
    most = running > most ? running : most;
    later += s[i] > plain; /* the ones that waited started after the plain run */
  }
  ck_assert_int_eq(most, 2);
  ck_assert_int_eq(later, 2);
  ck_assert_msg(last - first < 2000000000ull, "four runs took %" PRIu64 " ns", last - first);
  ck_assert_uint_eq(status_figure(name, "quota.gpu.used"), 0);
  ck_assert_uint_eq(status_figure(name, "quota.gpu.max"), 2);
}
END_TEST

/* policy --quota --max changes the maximum (adding a quota if new); bad input changes nothing. */
START_TEST(policy_and_create_quota_errors) {
  const char *name = CLI_SEGMENT("qpol", "--class", "standard:cells=2,queue=8", "--quota", "gpu=1");
  ck_assert_int_eq(CLI("policy", name, "--quota", "gpu", "--max", "3"), 0);
  ck_assert_msg(strstr(out, "quota gpu: max 3") != NULL, "%s", out);
  ck_assert_uint_eq(status_figure(name, "quota.gpu.max"), 3);
  ck_assert_int_eq(CLI("policy", name, "--quota", "licence", "--max", "1"), 0);
  ck_assert_uint_eq(status_figure(name, "quotas"), 2);
  ck_assert_int_eq(CLI("policy", name, "--quota", "gpu", "--max", "0"), 2);
  ck_assert_msg(strstr(err, "must be 1..4095") != NULL, "%s", err);
  ck_assert_int_eq(CLI("policy", name, "--quota", "gpu", "--max", "x"), 2);
  ck_assert_int_eq(CLI("policy", name, "--quota", "gpu"), 2);
  ck_assert_msg(strstr(err, "go together") != NULL, "%s", err);
  ck_assert_uint_eq(status_figure(name, "quota.gpu.max"), 3);
  ck_assert_int_eq(
      CLI("run", name, "--class", "standard", "--tenant", "a", "--quota", "cpu", "--", "true"), 2);
  ck_assert_msg(strstr(err, "no quota 'cpu'") != NULL, "%s", err);
  ck_assert_int_eq(CLI("run", name, "--class", "standard", "--tenant", "a", "--quota", "gpu",
                       "--quota", "gpu", "--", "true"),
                   2);
  ck_assert_msg(strstr(err, "named twice") != NULL, "%s", err);
  ck_assert_int_eq(CLI("run", name, "--class", "standard", "--tenant", "a", "--quota", "gpu",
                       "--quota", "licence", "--", "true"),
                   0);
  ck_assert_uint_eq(status_figure(name, "quota.gpu.used"), 0);
  /* --if-missing compares the quotas it was created with (policy's changes since aside). */
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=2,queue=8", "--quota", "gpu=1",
                       "--if-missing"),
                   0);
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=2,queue=8", "--quota", "gpu=2",
                       "--if-missing"),
                   1);
  ck_assert_msg(strstr(err, "quota gpu: max is 1 in the segment, 2 in") != NULL, "%s", err);
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=2,queue=8", "--if-missing"), 1);
  ck_assert_msg(strstr(err, "quota gpu: present in the segment, absent in") != NULL, "%s", err);
  /* create: a bad maximum, a name twice, a bad spec: nothing is created. */
  const char *bad = harness_name("qbad");
  ck_assert_int_eq(CLI("create", bad, "--class", "standard:cells=1,queue=1", "--quota", "gpu=0"),
                   2);
  ck_assert_msg(strstr(err, "quota gpu: max: must be 1..4095") != NULL, "%s", err);
  ck_assert_int_eq(CLI("create", bad, "--class", "standard:cells=1,queue=1", "--quota", "gpu=1",
                       "--quota", "gpu=2"),
                   2);
  ck_assert_msg(strstr(err, "given twice") != NULL, "%s", err);
  ck_assert_int_eq(CLI("create", bad, "--class", "standard:cells=1,queue=1", "--quota", "gpu"), 2);
  ck_assert_msg(strstr(err, "expected NAME=MAX") != NULL, "%s", err);
  ck_assert_int_eq(CLI("status", bad), 1); /* never created */
}
END_TEST

/* The INI file's [quota NAME] sections: max, once; the errors name file, line and section. */
START_TEST(config_file_quota_sections) {
  char path[256];
  cli_path(path, sizeof path, "q.ini");
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("[class standard]\ncells = 2\nqueue = 8\n\n[quota gpu]\nmax = 2\n", f);
  fclose(f);
  const char *name = CLI_SEGMENT("qini", "--config", path, "--quota", "licence=1");
  ck_assert_uint_eq(status_figure(name, "quota.gpu.max"), 2);
  ck_assert_uint_eq(status_figure(name, "quota.licence.max"), 1);
  f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("[class standard]\ncells = 2\nqueue = 8\n\n[quota gpu]\n", f);
  fclose(f);
  const char *bad = harness_name("qinibad");
  ck_assert_int_eq(CLI("create", bad, "--config", path), 2);
  ck_assert_msg(strstr(err, ":5: [quota gpu] max: missing") != NULL, "%s", err);
  f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("[class standard]\ncells = 2\nqueue = 8\n[quota gpu]\nmax = 5000\n", f);
  fclose(f);
  ck_assert_int_eq(CLI("create", bad, "--config", path), 2);
  ck_assert_msg(strstr(err, ":5: [quota gpu] max: must be 1..4095, got 5000") != NULL, "%s", err);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cli_quota");
  TCase *tc = harness_tcase("quota");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, run_quota_bounds_concurrency_without_blocking_others);
  tcase_add_test(tc, policy_and_create_quota_errors);
  tcase_add_test(tc, config_file_quota_sections);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

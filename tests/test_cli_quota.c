/*
 * Quotas through <build>/bin/shmsched: `create --quota`, `run --quota`, `policy --quota --max`,
 * `submit --quota` and a batch line's "quota", `status` and `explain`. Synchronisation is by pipes,
 * waitpid and observing the segment (its status), never by sleeping: the commands' own `sleep` only
 * gives them a duration, and what they overlapped is judged from the times they recorded.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Let job n's command go: opening its gate (a FIFO) for writing returns once the command opened
 * it to read, that is once the job runs. */
static void open_gate(const char *n) {
  char file[16], path[256];
  snprintf(file, sizeof file, "gate%s", n);
  int fd = open(cli_path(path, sizeof path, file), O_WRONLY);
  ck_assert_int_ge(fd, 0);
  close(fd);
}

/*
 * Worker-class jobs naming a quota of 1 (a batch's lines, one by name, one as an array, and a
 * single `submit --quota`) run one at a time on a class of two workers; a job naming none runs
 * while one of them waits for the quota.
 */
START_TEST(submit_quota_bounds_worker_jobs) {
  const char *name = CLI_SEGMENT(
      "wquota", "--class", "small:cells=2,queue=16,mode=worker,payload=16", "--quota", "gpu=1");
  char path[256], script[512];
  const char *gates[] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; i++) {
    char file[16];
    snprintf(file, sizeof file, "gate%s", gates[i]);
    ck_assert_int_eq(mkfifo(cli_path(path, sizeof path, file), 0600), 0);
  }
  snprintf(script, sizeof script,
           "n=$(cat); date +%%s%%N > %s/s$n; cat %s/gate$n >/dev/null; date +%%s%%N > %s/e$n; "
           "echo $n",
           cli_dir(), cli_dir(), cli_dir());
  struct cli_proc w[2], b, one;
  for (int i = 0; i < 2; i++)
    CLI_SPAWN(&w[i], "worker", name, "--class", "small", "--", "sh", "-c", script);
  FILE *f = fopen(cli_path(path, sizeof path, "jobs"), "w");
  ck_assert_ptr_nonnull(f);
  fputs("{\"payload\": \"A\", \"quota\": \"gpu\"}\n{\"payload\": \"B\", \"quota\": [\"gpu\"]}\n"
        "{\"tenant\": \"b\", \"payload\": \"C\"}\n",
        f);
  fclose(f);
  CLI_SPAWN(&b, "submit", name, "-c", "small", "-t", "a", "--batch", path, "--wait");
  while (status_figure(name, "quota.gpu.waiters") != 1) /* B waits while A runs */
    ;
  ck_assert_uint_eq(status_figure(name, "quota.gpu.used"), 1);
  open_gate("C"); /* C, naming no quota, runs on the other worker meanwhile */
  ck_assert_uint_eq(status_figure(name, "quota.gpu.waiters"), 1);
  open_gate("A");
  open_gate("B");
  char bout[4096], berr[4096];
  int rc = cli_reap(&b, 1, bout, sizeof bout, NULL, berr, sizeof berr);
  ck_assert_msg(rc == 0, "submit --batch exited %d: %s", rc, berr);
  ck_assert_msg(stamp("sB") >= stamp("eA"), "B started before A ended");
  ck_assert_msg(stamp("sC") < stamp("eA"), "C waited for A");
  CLI_SPAWN(&one, "submit", name, "-c", "small", "-t", "a", "-P", "D", "--quota", "gpu", "--wait");
  open_gate("D");
  rc = cli_reap(&one, 1, bout, sizeof bout, NULL, berr, sizeof berr);
  ck_assert_msg(rc == 0 && strcmp(bout, "D\n") == 0, "submit --quota exited %d: %s%s", rc, bout,
                berr);
  ck_assert_uint_eq(status_figure(name, "quota.gpu.used"), 0);
  ck_assert_int_eq(CLI("check", name), 0);
  /* Bad input: nothing is queued. */
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "-P", "x", "--quota", "nope"), 2);
  ck_assert_msg(strstr(err, "no quota 'nope' in the segment") != NULL, "%s", err);
  ck_assert_int_eq(
      CLI("submit", name, "-c", "small", "-t", "a", "--quota", "gpu", "--quota", "gpu"), 2);
  ck_assert_msg(strstr(err, "named twice") != NULL, "%s", err);
  f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("{\"quota\": \"gpu\"}\n{\"quota\": [\"gpu\", \"nope\"]}\n", f);
  fclose(f);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path), 2);
  ck_assert_msg(strstr(err, "line 2: no quota 'nope' in the segment") != NULL &&
                    strstr(err, "nothing was submitted") != NULL,
                "%s", err);
  ck_assert_uint_eq(status_figure(name, "queue_depth"), 0);
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(kill(w[i].pid, SIGTERM), 0);
    ck_assert_int_eq(cli_reap(&w[i], 1, bout, sizeof bout, NULL, berr, sizeof berr), 0);
  }
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
  tcase_add_test(tc, submit_quota_bounds_worker_jobs);
  tcase_add_test(tc, policy_and_create_quota_errors);
  tcase_add_test(tc, config_file_quota_sections);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * `shmsched submit --batch` end to end, through <build>/bin/shmsched: results
 * in input order and the exit status rules, refusals that name the line and
 * submit nothing, and a stop signal cancelling the jobs not yet started.
 *
 * Synchronisation is by pipes, FIFOs and waitpid only, never by sleeping
 * (cli_proc.h): a job of the gated worker says "started" on the worker's
 * stderr and waits for the test to close its end of a FIFO.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

static char out[1 << 16], err[8192];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

/* The batch text into a file of the scratch directory; its path into path. */
static const char *batch_file(const char *tag, const char *text, char *path, size_t n) {
  char file[64];
  snprintf(file, sizeof file, "batch-%s.jsonl", tag);
  cli_path(path, n, file);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fputs(text, f) >= 0, 1);
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

/* `status NAME` holds the line "key: value". */
static void assert_status(const char *name, const char *key, const char *value) {
  static char sout[16384], serr[1024];
  char line[128];
  const char *argv[] = {"status", name, NULL};
  ck_assert_int_eq(harness_cli(sout, sizeof sout, serr, sizeof serr, argv), 0);
  snprintf(line, sizeof line, "\n%s: %s\n", key, value);
  ck_assert_msg(strstr(sout, line) != NULL, "status lacks '%s: %s':\n%s", key, value, sout);
}

/* Each job prints its payload's text before ':' upper-cased and exits with the number after. */
static const char upper_exit[] = "p=$(cat); printf '%s' \"${p%%:*}\" | tr a-z A-Z; exit ${p#*:}";

START_TEST(results_in_input_order_and_first_failing_status) {
  const char *name = cli_segment("bo", "small:cells=2,queue=8,mode=worker,payload=64", NULL);
  struct cli_proc w;
  CLI_SPAWN(&w, "worker", name, "--class", "small", "--", "sh", "-c", upper_exit);
  char path[256];
  batch_file("order",
             "{\"tenant\": \"a\", \"payload\": \"one:0\"}\n"
             "\n"
             "{\"payload\": \"two:4\", \"priority\": 2}\n"
             "{\"tenant\": \"b\", \"payload_b64\": \"dGhyZWU6MA==\"}\n"
             "{\"tenant\": \"a\", \"payload\": \"four:7\", \"deadline\": \"1h\"}\n",
             path, sizeof path);
  ck_assert_int_eq(
      CLI("submit", name, "--class", "small", "--tenant", "dflt", "--batch", path, "--wait"), 4);
  const char *want[] = {"{\"line\":1,", "\"status\":0,\"result\":\"ONE\"}\n",
                        "{\"line\":3,", "\"status\":4,\"result\":\"TWO\"}\n",
                        "{\"line\":4,", "\"status\":0,\"result\":\"THREE\"}\n",
                        "{\"line\":5,", "\"status\":7,\"result\":\"FOUR\"}\n"};
  const char *at = out;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *found = strstr(at, want[i]);
    ck_assert_msg(found != NULL, "'%s' missing or out of order in:\n%s", want[i], out);
    at = found + strlen(want[i]);
  }
  ck_assert_str_eq(at, "");
  /* Every job exited 0: so does submit. */
  batch_file("zero", "{\"tenant\": \"a\", \"payload\": \"x:0\"}\n{\"payload\": \"y:0\"}\n", path,
             sizeof path);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path, "--wait"), 0);
  ck_assert_msg(strstr(out, "\"result\":\"X\"") && strstr(out, "\"result\":\"Y\""), "%s", out);
  /* Without --wait: the tickets, one a line, once every job has started. */
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path), 0);
  char *nl = strchr(out, '\n');
  ck_assert_ptr_nonnull(nl);
  *nl = '\0';
  shms_ticket t;
  ck_assert_int_eq(shms_ticket_parse(out, &t), SHMS_OK);
  char *second = nl + 1;
  ck_assert_ptr_nonnull(nl = strchr(second, '\n'));
  *nl = '\0';
  ck_assert_int_eq(shms_ticket_parse(second, &t), SHMS_OK);
  ck_assert_str_eq(nl + 1, "");
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(cli_reap(&w, 1, out, sizeof out, NULL, err, sizeof err), 0);
}
END_TEST

/* Two lines of one key: the job runs once (the second line's payload never runs) and --wait
 * reports its result for both lines, in input order, beside the line without a key. */
START_TEST(lines_of_one_key_run_once_and_each_reports_the_result) {
  const char *name = cli_segment("bk", "small:cells=1,queue=8,mode=worker,payload=64", NULL);
  struct cli_proc w;
  CLI_SPAWN(&w, "worker", name, "--class", "small", "--", "sh", "-c", upper_exit);
  char path[256];
  batch_file("keyed",
             "{\"payload\": \"one:0\", \"key\": \"build-42\"}\n"
             "{\"payload\": \"two:3\", \"key\": \"build-42\"}\n"
             "{\"payload\": \"three:0\"}\n",
             path, sizeof path);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path, "--wait"), 0);
  const char *want[] = {"{\"line\":1,", "\"status\":0,\"result\":\"ONE\"}\n",
                        "{\"line\":2,", "\"status\":0,\"result\":\"ONE\"}\n",
                        "{\"line\":3,", "\"status\":0,\"result\":\"THREE\"}\n"};
  const char *at = out;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *found = strstr(at, want[i]);
    ck_assert_msg(found != NULL, "'%s' missing or out of order in:\n%s", want[i], out);
    at = found + strlen(want[i]);
  }
  ck_assert_msg(strstr(out, "TWO") == NULL, "the second line's job ran:\n%s", out);
  /* Both lines name one job: one ticket. */
  const char *t1 = strstr(out, "\"ticket\":\""), *t2 = t1 ? strstr(t1 + 1, "\"ticket\":\"") : NULL;
  ck_assert_ptr_nonnull(t2);
  ck_assert_int_eq(strncmp(t1, t2, strcspn(t1 + 10, "\"") + 10), 0);
  assert_status(name, "queue_depth", "0");
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(cli_reap(&w, 1, out, sizeof out, NULL, err, sizeof err), 0);
}
END_TEST

/* A bad line: exit 2, stderr names the line, and nothing was queued. */
static const struct {
  const char *text, *needle;
} bad_lines[] = {
    {"{\"tenant\": \"a\"}\n{\"tenant\": \"a\",\n", "line 2: not JSON"},
    {"{\"tenant\": \"a\"}\n[1]\n", "line 2: not a JSON object"},
    {"{\"tenant\": \"a\", \"colour\": \"red\"}\n", "line 1: unknown field \"colour\""},
    {"{\"tenant\": 7}\n", "line 1: \"tenant\" must be a string"},
    {"{\"tenant\": \"a b\"}\n", "line 1: \"tenant\": 1 to 31"},
    {"{}\n{\"priority\": 1.5}\n", "line 2: \"priority\" must be an integer"},
    {"{\"deadline\": 30}\n", "line 1: \"deadline\" must be a duration"},
    {"{\"payload\": \"x\", \"payload_b64\": \"eA==\"}\n", "line 1: give at most one of"},
    {"{\"payload_b64\": \"e!==\"}\n", "line 1: \"payload_b64\" is not valid base64"},
    {"{\"payload_file\": \"/nonexistent/file\"}\n", "line 1: \"payload_file\" '/nonexistent/file'"},
    {"{\"payload\": \"0123456789abcdefX\"}\n", "line 1: \"payload\": 17 bytes, more than"},
    {"\n\n", "the batch is empty"},
    {"{}\n{}\n{\"key\": \"build-42\", \"supersede\": true}\n",
     "line 3: \"supersede\": a batch's keyed jobs join or queue, they supersede nothing"},
    {"{\"quota\": 7}\n", "line 1: \"quota\" must be a quota's name or an array of 1 to 8"},
    {"{\"quota\": []}\n", "line 1: \"quota\" must be a quota's name or an array of 1 to 8"},
    {"{}\n{\"quota\": [\"ci\", \"ci\"]}\n", "line 2: \"quota\": 'ci' is named twice"},
    {"{\"quota\": [\"ci\", 1]}\n", "line 1: \"quota\" must be a string"},
    {"{\"key\": \"has space\"}\n", "line 1: \"key\": 1 to 31"},
};

START_TEST(a_bad_line_refuses_the_batch) {
  const char *name = cli_segment("bb", "small:cells=1,queue=4,mode=worker,payload=16", NULL);
  char path[256];
  batch_file("bad", bad_lines[_i].text, path, sizeof path);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path), 2);
  ck_assert_msg(strncmp(err, "shmsched: invalid-argument: submit: --batch ", 44) == 0, "%s", err);
  ck_assert_msg(strstr(err, bad_lines[_i].needle) != NULL, "stderr lacks '%s': %s",
                bad_lines[_i].needle, err);
  ck_assert_msg(strstr(err, "nothing was submitted") != NULL, "%s", err);
  assert_status(name, "queue_depth", "0");
}
END_TEST

/* Refusals by the scheduler: exit 75, the line named where one caused it, nothing queued. */
START_TEST(a_refused_batch_changes_nothing) {
  const char *name =
      cli_segment("br", "small:cells=1,queue=3,mode=worker,payload=16,allow=a+b", NULL);
  char path[256];
  batch_file("full", "{}\n{}\n{}\n{}\n", path, sizeof path);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path), 75);
  ck_assert_msg(strstr(err, "shmsched: queue-full: ") && strstr(err, "4 jobs"), "%s", err);
  assert_status(name, "queue_depth", "0");
  batch_file("denied", "{}\n{\"tenant\": \"b\"}\n{\"tenant\": \"c\"}\n", path, sizeof path);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path), 75);
  ck_assert_msg(strstr(err, "shmsched: class-denied: ") && strstr(err, "line 3: ") &&
                    strstr(err, "'c'") && strstr(err, "nothing was submitted"),
                "%s", err);
  assert_status(name, "queue_depth", "0");
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--batch", path, "-P", "x"), 2);
}
END_TEST

/*
 * SIGINT to `submit --batch --wait` while its first job runs: the two not started are
 * cancelled, the running one goes on to its end, and each is reported in input order.
 */
START_TEST(a_stop_signal_cancels_the_unstarted_jobs) {
  const char *name = cli_segment("bs", "small:cells=1,queue=8,mode=worker,payload=16", NULL);
  char gate[128], path[256], ticket[SHMS_TICKET_STRLEN];
  cli_path(gate, sizeof gate, "gate");
  ck_assert_int_eq(mkfifo(gate, 0600), 0);
  int fd = open(gate, O_RDWR | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  struct cli_proc w, s;
  CLI_SPAWN(&w, "worker", name, "--class", "small", "--", "sh", "-c",
            "exec 3<\"$1\"; echo started >&2; cat <&3; tr a-z A-Z", "sh", gate);
  batch_file("stop",
             "{\"payload\": \"first\", \"priority\": 9}\n{\"payload\": \"second\"}\n"
             "{\"payload\": \"third\"}\n",
             path, sizeof path);
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "a", "--batch", path, "--wait",
            "--print-ticket");
  for (int i = 0; i < 3; i++)
    cli_read_line(s.err, ticket, sizeof ticket);
  char line[256];
  cli_read_line(w.err, line, sizeof line);
  ck_assert_str_eq(line, "started");
  ck_assert_int_eq(kill(s.pid, SIGINT), 0);
  /* The unstarted two end cancelled (the last one's ticket tells); then the running one may
   * end, and the worker would take a job left queued. */
  int polls = 0;
  do
    ck_assert_int_eq(CLI("explain", name, ticket), 0);
  while (strstr(out, "\nstate: queued\n") != NULL && ++polls < 100000);
  ck_assert_msg(strstr(out, "cancelled") != NULL, "%s", out);
  close(fd);
  ck_assert_int_eq(cli_reap(&s, 1, out, sizeof out, NULL, err, sizeof err), 75);
  const char *one = strstr(out, "{\"line\":1,"), *two = strstr(out, "{\"line\":2,"),
             *three = strstr(out, "{\"line\":3,");
  ck_assert_msg(one && two && three && one < two && two < three, "%s", out);
  ck_assert_msg(strstr(one, "\"status\":0,\"result\":\"FIRST\"}\n{\"line\":2,") != NULL, "%s", out);
  ck_assert_msg(strstr(two, "\"error\":\"cancelled\"") && strstr(three, "\"error\":\"cancelled\""),
                "%s", out);
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(cli_reap(&w, 1, out, sizeof out, NULL, err, sizeof err), 0);
}
END_TEST

/* A keyed line joins the running job another `submit --key` queued: it has that job's ticket,
 * and --wait reports that job's result for it, as the other submit gets it. */
START_TEST(a_keyed_line_joins_a_running_job_of_its_key) {
  const char *name = cli_segment("bj", "small:cells=1,queue=8,mode=worker,payload=16", NULL);
  char gate[128], path[256], first[SHMS_TICKET_STRLEN], joined[SHMS_TICKET_STRLEN], line[256];
  cli_path(gate, sizeof gate, "gate-join");
  ck_assert_int_eq(mkfifo(gate, 0600), 0);
  int fd = open(gate, O_RDWR | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  struct cli_proc w, s1, s2;
  CLI_SPAWN(&w, "worker", name, "--class", "small", "--", "sh", "-c",
            "exec 3<\"$1\"; echo started >&2; cat <&3; tr a-z A-Z", "sh", gate);
  CLI_SPAWN(&s1, "submit", name, "-c", "small", "-t", "a", "-P", "first", "--key", "k", "--wait",
            "--print-ticket");
  cli_read_line(s1.err, first, sizeof first);
  cli_read_line(w.err, line, sizeof line);
  ck_assert_str_eq(line, "started");
  batch_file("join", "{\"payload\": \"second\", \"key\": \"k\"}\n", path, sizeof path);
  CLI_SPAWN(&s2, "submit", name, "-c", "small", "-t", "b", "--batch", path, "--wait",
            "--print-ticket");
  cli_read_line(s2.err, joined, sizeof joined);
  ck_assert_str_eq(joined, first);
  close(fd); /* the job ends */
  ck_assert_int_eq(cli_reap(&s1, 1, out, sizeof out, NULL, err, sizeof err), 0);
  ck_assert_str_eq(out, "FIRST");
  ck_assert_int_eq(cli_reap(&s2, 1, out, sizeof out, NULL, err, sizeof err), 0);
  ck_assert_msg(strstr(out, "{\"line\":1,") && strstr(out, "\"status\":0,\"result\":\"FIRST\"}\n"),
                "%s", out);
  assert_status(name, "queue_depth", "0");
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(cli_reap(&w, 1, out, sizeof out, NULL, err, sizeof err), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cli_batch");
  TCase *tc = harness_tcase("batch");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, results_in_input_order_and_first_failing_status);
  tcase_add_loop_test(tc, a_bad_line_refuses_the_batch, 0,
                      (int)(sizeof bad_lines / sizeof bad_lines[0]));
  tcase_add_test(tc, a_refused_batch_changes_nothing);
  tcase_add_test(tc, lines_of_one_key_run_once_and_each_reports_the_result);
  tcase_add_test(tc, a_keyed_line_joins_a_running_job_of_its_key);
  tcase_add_test(tc, a_stop_signal_cancels_the_unstarted_jobs);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

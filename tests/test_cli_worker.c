/*
 * Worker mode end to end: `shmsched worker` and `shmsched submit`, through
 * <build>/bin/shmsched.
 *
 * Synchronisation is by pipes, FIFOs and waitpid only, never by sleeping
 * (cli_proc.h). A worker's command says "started" on the worker's stderr
 * (the test's pipe) when it must be known to run; a "gate" command then
 * holds its job until the test closes its end of a FIFO. A submit with
 * --print-ticket is known to be queued once its first stderr line arrives.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

static char out[2 << 20], err[8192];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

/* Reap p into out/err; its stdin closed first. */
static int reap(struct cli_proc *p) {
  return cli_reap(p, 1, out, sizeof out, NULL, err, sizeof err);
}

/* stderr holds exactly one line, "shmsched: <reason>: ...", naming needle. */
static void assert_error_line(const char *text, const char *reason, const char *needle) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "shmsched: %s: ", reason);
  ck_assert_msg(strncmp(text, prefix, strlen(prefix)) == 0, "stderr '%s' lacks '%s'", text, prefix);
  ck_assert_msg(strstr(text, needle) != NULL, "stderr '%s' lacks '%s'", text, needle);
  const char *nl = strchr(text, '\n');
  ck_assert_msg(nl != NULL && nl[1] == '\0', "stderr is not one line: '%s'", text);
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

/* ---- workers, gates and queued submits ------------------------------------- */

/*
 * A worker of class small, --verbose, for --jobs jobs ("0": no limit),
 * running sh -c script with $1 $2.
 */
static void worker(struct cli_proc *p, const char *name, const char *jobs, const char *script,
                   const char *arg1, const char *arg2) {
  if (strcmp(jobs, "0") == 0)
    CLI_SPAWN(p, "worker", name, "--class", "small", "--verbose", "--", "sh", "-c", script, "sh",
              arg1 ? arg1 : "", arg2 ? arg2 : "");
  else
    CLI_SPAWN(p, "worker", name, "--class", "small", "--verbose", "--jobs", jobs, "--", "sh", "-c",
              script, "sh", arg1 ? arg1 : "", arg2 ? arg2 : "");
}

/* Read the worker's stderr up to the line "started" (its --verbose lines come before it). */
static void await_started(const struct cli_proc *w) {
  char line[512];
  do
    cli_read_line(w->err, line, sizeof line);
  while (strncmp(line, "shmsched: worker: class small cell ", 35) == 0);
  ck_assert_str_eq(line, "started");
}

/* The worker's --verbose lines: one per job, nothing else. */
static void assert_verbose_only(const char *text, int jobs) {
  int lines = 0;
  for (const char *at = text; *at != '\0'; lines++) {
    ck_assert_msg(strncmp(at, "shmsched: worker: class small cell ", 35) == 0, "%s", text);
    at = strchr(at, '\n');
    ck_assert_ptr_nonnull(at);
    at++;
  }
  ck_assert_msg(lines == jobs, "%d lines, not %d: %s", lines, jobs, text);
}

/*
 * A FIFO in the scratch directory named after the segment, held open by the
 * test: a gate command waits for its EOF, which comes when the test closes it
 * (or ends, however it ends).
 */
static int gate_open(const char *name, const char *tag, char *path, size_t n) {
  char file[128];
  snprintf(file, sizeof file, "gate-%s-%s", name, tag);
  cli_path(path, n, file);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  int fd = open(path, O_RDWR | O_CLOEXEC); /* never blocks, and keeps the FIFO's writer */
  ck_assert_int_ge(fd, 0);
  return fd;
}

/* Tenant "gate"'s jobs say "started" and wait for the gate ($1); every job then prints
 * "TENANT PAYLOAD" upper-cased. */
static const char gated_upper[] =
    "if [ \"$SHMSCHED_TENANT\" = gate ]; then exec 3<\"$1\"; echo started >&2; cat <&3; fi; "
    "printf '%s ' \"$SHMSCHED_TENANT\"; tr a-z A-Z";

/* A submit --wait --print-ticket of tenant with payload, known to be queued on return. */
static void queue_submit(struct cli_proc *p, const char *name, const char *tenant,
                         const char *payload, char *ticket) {
  CLI_SPAWN(p, "submit", name, "--class", "small", "--tenant", tenant, "--payload", payload,
            "--wait", "--print-ticket");
  cli_read_line(p->err, ticket, SHMS_TICKET_STRLEN);
  shms_ticket t;
  ck_assert_msg(shms_ticket_parse(ticket, &t) == SHMS_OK, "first stderr line is no ticket: '%s'",
                ticket);
}

/* Submit payload with --wait and expect result and status. */
static void round_trip(const char *name, const char *tenant, const char *payload,
                       const char *result, int status) {
  int rc = CLI("submit", name, "-c", "small", "-t", tenant, "--payload", payload, "--wait");
  ck_assert_msg(rc == status, "submit exited %d, not %d: %s", rc, status, err);
  ck_assert_str_eq(out, result);
  ck_assert_str_eq(err, "");
}

/* ---- round trips ------------------------------------------------------------ */

START_TEST(round_trip_tr) {
  const char *name = cli_segment("tr", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  struct cli_proc w;
  worker(&w, name, "2", "tr a-z A-Z", NULL, NULL);
  round_trip(name, "a", "hello, world", "HELLO, WORLD", 0);
  round_trip(name, "b", "", "", 0); /* an empty payload, and an empty result */
  /* --jobs 2: it exits by itself, its cell offline again; --verbose said one line a job. */
  ck_assert_int_eq(reap(&w), 0);
  assert_verbose_only(err, 2);
  assert_status(name, "cells_offline", "1");
  assert_status(name, "granted", "2");
  assert_status(name, "live_processes", "0");
}
END_TEST

START_TEST(status_is_exit_code) {
  const char *name = cli_segment("code", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  struct cli_proc w;
  worker(&w, name, "3", "read code; echo \"out $code\"; exit \"$code\"", NULL, NULL);
  round_trip(name, "a", "3", "out 3\n", 3);
  round_trip(name, "a", "0", "out 0\n", 0);
  round_trip(name, "a", "255", "out 255\n", 255);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

/* A worker written against the C API may complete with any int: outside 0..255, submit exits 255.
 */
START_TEST(status_outside_a_byte) {
  const char *name = cli_segment("wide", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  static const int statuses[] = {256, -1, 1000};
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) { /* a worker of our own: completes each job with the next status */
    shms_t *h;
    shms_worker_t *w;
    if (shms_attach(name, 0, &h) != SHMS_OK || shms_worker_open(h, SHMS_CLASS_SMALL, &w) != 0)
      _exit(1);
    for (int i = 0; i < 3; i++) {
      shms_job job;
      if (shms_worker_take(w, UINT64_MAX, &job) != SHMS_OK ||
          shms_worker_complete(w, &job, statuses[i], "r", 1) != SHMS_OK)
        _exit(1);
    }
    shms_worker_close(w);
    shms_detach(h);
    _exit(0);
  }
  for (int i = 0; i < 3; i++)
    round_trip(name, "a", "x", "r", 255);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

/* 256 bytes, every byte value, NUL and newline included. */
static void write_binary(const char *path, unsigned char *bytes, size_t n) {
  for (size_t i = 0; i < n; i++)
    bytes[i] = (unsigned char)(i * 7 + 3);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, bytes, n), (ssize_t)n);
  close(fd);
}

START_TEST(payload_from_file_and_stdin) {
  const char *name = cli_segment("file", "small:cells=1,queue=16,mode=worker,payload=256", NULL);
  char path[128];
  unsigned char bytes[256];
  write_binary(cli_path(path, sizeof path, "payload.bin"), bytes, sizeof bytes);
  struct cli_proc w, s;
  worker(&w, name, "2", "cat", NULL, NULL);
  size_t len;
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "a", "--payload-file", path, "--wait");
  ck_assert_int_eq(cli_reap(&s, 1, out, sizeof out, &len, err, sizeof err), 0);
  ck_assert_uint_eq(len, sizeof bytes);
  ck_assert(memcmp(out, bytes, sizeof bytes) == 0);
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "a", "-f", "-", "--wait");
  ck_assert_int_eq(write(s.in, bytes, sizeof bytes), (ssize_t)sizeof bytes);
  ck_assert_int_eq(cli_reap(&s, 1, out, sizeof out, &len, err, sizeof err), 0);
  ck_assert_uint_eq(len, sizeof bytes);
  ck_assert(memcmp(out, bytes, sizeof bytes) == 0);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

/* 1 MiB through cat: it writes before it has read everything, so the worker must interleave. */
START_TEST(large_payload_interleaved) {
  const char *name = cli_segment("big", "small:cells=1,queue=2,mode=worker,payload=1048576", NULL);
  static unsigned char bytes[1 << 20];
  for (size_t i = 0; i < sizeof bytes; i++)
    bytes[i] = (unsigned char)((i * 2654435761u) >> 13);
  char path[128];
  int fd = open(cli_path(path, sizeof path, "big.bin"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_eq(write(fd, bytes, sizeof bytes), (ssize_t)sizeof bytes);
  close(fd);
  struct cli_proc w;
  worker(&w, name, "1", "cat", NULL, NULL);
  size_t len = 0;
  struct cli_proc s;
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "a", "-f", path, "--wait");
  ck_assert_int_eq(cli_reap(&s, 1, out, sizeof out, &len, err, sizeof err), 0);
  ck_assert_uint_eq(len, sizeof bytes);
  ck_assert(memcmp(out, bytes, sizeof bytes) == 0);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

START_TEST(job_environment) {
  const char *name = cli_segment("env", "small:cells=1,queue=16,mode=worker,payload=512", NULL);
  struct cli_proc w, s;
  CLI_SPAWN(&w, "worker", name, "-c", "small", "-n", "1", "--verbose", "--", "sh", "-c",
            "printf '%s\\n' \"$SHMSCHED_SEGMENT\" \"$SHMSCHED_CLASS\" \"$SHMSCHED_CELL\" "
            "\"$SHMSCHED_TICKET\" \"$SHMSCHED_TENANT\" \"$SHMSCHED_PRIORITY\"");
  char ticket[SHMS_TICKET_STRLEN], expect[512];
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "env-tenant", "-p", "-4", "--wait",
            "--print-ticket");
  cli_read_line(s.err, ticket, sizeof ticket);
  ck_assert_int_eq(reap(&s), 0);
  snprintf(expect, sizeof expect, "%s\nsmall\n0\n%s\nenv-tenant\n-4\n", name, ticket);
  ck_assert_str_eq(out, expect);
  size_t result_len = strlen(expect);
  /* --verbose: one line for the job. */
  ck_assert_int_eq(reap(&w), 0);
  snprintf(expect, sizeof expect,
           "shmsched: worker: class small cell 0: job %s for tenant 'env-tenant': status 0, %zu "
           "result bytes, ",
           ticket, result_len);
  ck_assert_msg(strncmp(err, expect, strlen(expect)) == 0, "'%s' lacks '%s'", err, expect);
  ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "not one line: %s", err);
}
END_TEST

/* ---- limits ------------------------------------------------------------------ */

START_TEST(payload_too_large) {
  const char *name = cli_segment("large", "small:cells=1,queue=16,mode=worker,payload=16", NULL);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "-P", "0123456789abcdefX"), 2);
  assert_error_line(err, "invalid-argument",
                    "17 bytes, more than class small's payload size of "
                    "16 bytes");
  ck_assert_str_eq(out, "");
  char path[128];
  unsigned char bytes[256];
  write_binary(cli_path(path, sizeof path, "p17"), bytes, 17);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "-f", path, "--wait"), 2);
  assert_error_line(err, "invalid-argument", "more than class small's payload size of 16 bytes");
  /* Nothing was queued. */
  assert_status(name, "rejected", "0");
  assert_status(name, "queue_depth", "0");
  /* Exactly the limit goes through. */
  struct cli_proc w;
  worker(&w, name, "1", "cat", NULL, NULL);
  round_trip(name, "a", "0123456789abcdef", "0123456789abcdef", 0);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

/* A result beyond the payload size is never cut short: 125 and no result; yes(1) is stopped. */
START_TEST(result_too_large) {
  const char *name = cli_segment("over", "small:cells=1,queue=16,mode=worker,payload=16", NULL);
  struct cli_proc w;
  worker(&w, name, "1", "exec yes", NULL, NULL);
  round_trip(name, "a", "x", "", 125);
  ck_assert_int_eq(reap(&w), 0);
  ck_assert_msg(strstr(err, "'sh' wrote more than class small's payload size of 16 bytes: "
                            "completed with status 125 and no result\n") != NULL,
                "%s", err);
  assert_status(name, "cells_quarantined", "0");
}
END_TEST

/* ---- failures ------------------------------------------------------------------ */

/* A crash completes the job with its status and the worker goes on serving (the default). */
START_TEST(crashed_command_goes_on) {
  const char *name = cli_segment("crash", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  struct cli_proc w;
  worker(&w, name, "0", "case $(cat) in crash) kill -SEGV $$;; kill) kill -KILL $$;; esac; echo ok",
         NULL, NULL);
  round_trip(name, "a", "crash", "", 128 + SIGSEGV);
  round_trip(name, "a", "kill", "", 128 + SIGKILL);
  round_trip(name, "a", "x", "ok\n", 0);
  assert_status(name, "cells_quarantined", "0");
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&w), 0);
  ck_assert_msg(strstr(err, "'sh' crashed (SIGSEGV): completed with status 139; the worker goes "
                            "on\n") != NULL,
                "%s", err);
  assert_status(name, "cells_offline", "1");
}
END_TEST

/* on-command-crash=quarantine: the crash quarantines the worker's cell, and the worker stops. */
START_TEST(crashed_command_quarantines) {
  const char *name = cli_segment(
      "kill", "small:cells=1,queue=16,mode=worker,payload=64,on-command-crash=quarantine", NULL);
  struct cli_proc w;
  worker(&w, name, "0", "kill -SEGV $$", NULL, NULL);
  round_trip(name, "a", "x", "", 128 + SIGSEGV);
  ck_assert_int_eq(reap(&w), 1);
  ck_assert_msg(
      strstr(err, "shmsched: worker: 'sh' crashed (SIGSEGV): quarantined class small "
                  "cell 0 (on-command-crash=quarantine; return it with 'shmsched repair ") != NULL,
      "%s", err);
  assert_status(name, "cells_quarantined", "1");
  assert_status(name, "cells_offline", "0");
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--wait"), 75);
  assert_error_line(err, "all-cells-quarantined", "tenant 'a'");
  ck_assert_int_eq(CLI("repair", name, "--class", "small"), 0);
  ck_assert_str_eq(out, "repaired 1 cell of class small\n");
  assert_status(name, "cells_quarantined", "0");
  assert_status(name, "cells_offline", "1");
  /* A new worker binds to the repaired cell. */
  worker(&w, name, "1", "cat", NULL, NULL);
  round_trip(name, "a", "again", "again", 0);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

START_TEST(cancel_queued_job) {
  const char *name = cli_segment("cq", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  struct cli_proc s;
  char ticket[SHMS_TICKET_STRLEN];
  queue_submit(&s, name, "b", "x", ticket); /* no worker: it stays queued */
  assert_status(name, "queue_depth", "1");
  ck_assert_int_eq(CLI("cancel", name, ticket), 0);
  ck_assert_int_eq(reap(&s), 75);
  assert_error_line(err, "cancelled", "tenant 'b'");
  ck_assert_str_eq(out, "");
  assert_status(name, "cancelled", "1");
  assert_status(name, "queue_depth", "0");
  /* A stop signal cancels it as well. */
  queue_submit(&s, name, "b", "x", ticket);
  ck_assert_int_eq(kill(s.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&s), 75);
  assert_error_line(err, "cancelled",
                    "interrupted by SIGTERM while waiting: the job was cancelled");
  /* And so does --timeout. */
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "b", "--wait", "--timeout", "20ms"),
                   75);
  assert_error_line(err, "timed-out",
                    "no result within 20ms: the job was cancelled before it "
                    "started");
  assert_status(name, "queue_depth", "0");
}
END_TEST

/* Submits of one key join one job; a supersede ends it for all of them (exit 75). */
START_TEST(keyed_join_and_supersede) {
  const char *name = cli_segment("key", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  struct cli_proc a, b;
  char ta[SHMS_TICKET_STRLEN], tb[SHMS_TICKET_STRLEN];
  CLI_SPAWN(&a, "submit", name, "-c", "small", "-t", "a", "-P", "x", "--key", "k", "--wait",
            "--print-ticket");
  cli_read_line(a.err, ta, sizeof ta);
  CLI_SPAWN(&b, "submit", name, "-c", "small", "-t", "b", "-P", "y", "--key", "k", "--wait",
            "--print-ticket");
  cli_read_line(b.err, tb, sizeof tb);
  ck_assert_str_eq(ta, tb); /* the same job: no worker, so it is still queued */
  assert_status(name, "queue_depth", "1");
  /* b's submit joined a's job: counted in status (text and JSON) and in metrics. */
  assert_status(name, "joined", "1");
  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(strstr(out, "\n      \"joined\": 1,\n") != NULL, "%s", out);
  char sample[256];
  snprintf(sample, sizeof sample,
           "\nshmsched_jobs_joined_total{segment=\"%s\",class=\"small\"} 1\n", name);
  ck_assert_int_eq(CLI("metrics", name), 0);
  ck_assert_msg(strstr(out, sample) != NULL, "metrics lack %s:\n%s", sample, out);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "c", "--key", "k", "--supersede",
                       "--wait", "--timeout", "20ms"),
                   75);
  assert_error_line(err, "timed-out", "no result within 20ms");
  ck_assert_int_eq(reap(&a), 75);
  assert_error_line(err, "superseded", "tenant 'a'");
  ck_assert_int_eq(reap(&b), 75);
  assert_error_line(err, "superseded", "tenant 'b'");
  assert_status(name, "queue_depth", "0");
  assert_status(name, "joined", "1"); /* a supersede joins nothing */
}
END_TEST

/* Cancelling a running job: its command gets SIGTERM, and the job ends with its status. */
START_TEST(cancel_running_job) {
  const char *name = cli_segment("cr", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  char gate[128], ticket[SHMS_TICKET_STRLEN];
  int fd = gate_open(name, "1", gate, sizeof gate);
  struct cli_proc w, s;
  worker(&w, name, "0", "echo started >&2; exec cat \"$1\"", gate, NULL);
  queue_submit(&s, name, "a", "x", ticket);
  await_started(&w);
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  ck_assert_msg(strstr(out, "\nstate: running\n") != NULL, "%s", out);
  ck_assert_int_eq(CLI("cancel", name, ticket), 0);
  ck_assert_msg(strstr(out, "asked the worker running job ") != NULL, "%s", out);
  ck_assert_int_eq(reap(&s), 128 + SIGTERM);
  /* A stop signal sent to submit while the job runs: the same, through a cancel. */
  queue_submit(&s, name, "a", "x", ticket);
  await_started(&w);
  ck_assert_int_eq(kill(s.pid, SIGINT), 0);
  ck_assert_int_eq(reap(&s), 128 + SIGTERM);
  assert_status(name, "cells_quarantined", "0");
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&w), 0);
  ck_assert_msg(strstr(err, ": status 143, 0 result bytes, ") && strstr(err, "ms, cancelled\n"),
                "%s", err);
  close(fd);
}
END_TEST

/* SIGTERM to a worker: idle, it stops; with a job, CMD gets it and the job ends first. */
START_TEST(worker_stops_on_signal) {
  const char *name = cli_segment("stop", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  char gate[128], ticket[SHMS_TICKET_STRLEN];
  int fd = gate_open(name, "1", gate, sizeof gate);
  struct cli_proc w, s;
  worker(&w, name, "0", gated_upper, gate, NULL);
  round_trip(name, "a", "bound", "a BOUND", 0); /* it is bound and idle */
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&w), 0);
  assert_status(name, "cells_offline", "1");
  worker(&w, name, "0", gated_upper, gate, NULL);
  queue_submit(&s, name, "gate", "x", ticket);
  await_started(&w);
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&s), 128 + SIGTERM);
  /* sh died of it; its cat lives on, holding the worker's stderr, until the gate opens. */
  close(fd);
  ck_assert_int_eq(reap(&w), 0);
  assert_status(name, "cells_offline", "1");
  assert_status(name, "cells_quarantined", "0");
}
END_TEST

/* A running job whose command ignores SIGTERM: the first stop signal to submit --wait asks its
 * worker to stop it and goes on waiting; a second one stops the wait (exit 75). */
START_TEST(second_signal_stops_waiting) {
  const char *name = cli_segment("again", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  char gate[128], ticket[SHMS_TICKET_STRLEN];
  int fd = gate_open(name, "1", gate, sizeof gate);
  struct cli_proc w, s;
  CLI_SPAWN(&w, "worker", name, "--class", "small", "--verbose", "--kill-after", "100ms", "--",
            "sh", "-c", "trap '' TERM; echo started >&2; exec cat \"$1\"", "sh", gate);
  queue_submit(&s, name, "a", "x", ticket);
  await_started(&w);
  /* Two different signals: a second SIGINT sent before the first is taken would merge into
   * it. The worker forwards the cancel to the command, which ignores it: the job runs on. */
  ck_assert_int_eq(kill(s.pid, SIGINT), 0);
  ck_assert_int_eq(kill(s.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&s), 75);
  assert_error_line(err, "cancelled", "interrupted by SIGTERM again: stopped waiting");
  close(fd);
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

/* ---- idle means idle ---------------------------------------------------------- */

/* Voluntary context switches of every thread of pid (each return from a sleep is one). */
static long wakeups(pid_t pid) {
  char dir[64], path[384], line[256];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  long n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
    FILE *f = fopen(path, "re");
    long v;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
        n += v;
    if (f != NULL)
      fclose(f);
  }
  closedir(d);
  return n;
}

/* Whether every thread of pid sleeps (state S): it waits, its start-up over. */
static int asleep(pid_t pid) {
  char dir[64], path[384], buf[512];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int all = 1;
  for (struct dirent *e; all && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
    FILE *f = fopen(path, "re");
    size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL)
      fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    all = p != NULL && p[1] == ' ' && p[2] == 'S';
  }
  closedir(d);
  return all;
}

/* The window, and the wake-ups a process may take in it with nothing happening: one a second
 * (the library's safety poll, with which the worker's look at the segment's state coincides),
 * one more for a poll due before the window began, and a timeout's own. */
#define IDLE_WINDOW_NS (2500ull * 1000 * 1000)
#define IDLE_MAX_WAKES 4L

/* How often pid wakes in the window, once all its threads sleep. */
static long idle_wakes(pid_t pid) {
  while (!asleep(pid))
    sched_yield();
  long before = wakeups(pid);
  struct timespec window = {(time_t)(IDLE_WINDOW_NS / 1000000000ull),
                            (long)(IDLE_WINDOW_NS % 1000000000ull)};
  while (nanosleep(&window, &window) != 0)
    ;
  return wakeups(pid) - before;
}

/*
 * Nothing wakes a waiting submit --wait or an idle worker but what concerns it: a stop signal,
 * its job, the once-a-second safety poll (issue 12: they woke every 250 ms to look for stop
 * signals). Each still answers a stop signal at once.
 */
START_TEST(idle_means_idle) {
  const char *name = cli_segment("idle", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  char ticket[SHMS_TICKET_STRLEN];
  struct cli_proc w, s;
  queue_submit(&s, name, "a", "x", ticket); /* no worker: it waits */
  long n = idle_wakes(s.pid);
  ck_assert_msg(n <= IDLE_MAX_WAKES, "a waiting submit --wait woke %ld times in %llu ms", n,
                IDLE_WINDOW_NS / 1000000);
  worker(&w, name, "0", "tr a-z A-Z", NULL, NULL);
  ck_assert_int_eq(reap(&s), 0);
  ck_assert_str_eq(out, "X");
  n = idle_wakes(w.pid);
  ck_assert_msg(n <= IDLE_MAX_WAKES, "an idle worker woke %ld times in %llu ms", n,
                IDLE_WINDOW_NS / 1000000);
  queue_submit(&s, name, "a", "x", ticket);
  ck_assert_int_eq(reap(&s), 0); /* it still serves */
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&w), 0);
  /* A waiting submit --wait still stops at once on a signal. */
  queue_submit(&s, name, "a", "x", ticket);
  while (!asleep(s.pid))
    sched_yield();
  ck_assert_int_eq(kill(s.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&s), 75);
  assert_error_line(err, "cancelled",
                    "interrupted by SIGTERM while waiting: the job was cancelled");
}
END_TEST

/* Without --wait: the ticket at once; submit ends once the job started, which runs on. */
START_TEST(submit_without_wait) {
  const char *name = cli_segment("nowait", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  char gate[128], ticket[SHMS_TICKET_STRLEN], line[512];
  int fd = gate_open(name, "1", gate, sizeof gate);
  struct cli_proc w, s;
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "b", "-P", "x");
  cli_read_line(s.out, ticket, sizeof ticket); /* queued: no worker yet */
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  ck_assert_msg(strstr(out, "\nstate: queued\n") && strstr(out, "\nblocked_by: no-worker"), "%s",
                out);
  long n = idle_wakes(s.pid); /* waiting for a start that nothing brings: idle */
  ck_assert_msg(n <= IDLE_MAX_WAKES, "a queued submit woke %ld times in %llu ms", n,
                IDLE_WINDOW_NS / 1000000);
  ck_assert_int_eq(kill(s.pid, SIGTERM), 0); /* a stop signal cancels it */
  ck_assert_int_eq(reap(&s), 75);
  assert_error_line(err, "cancelled",
                    "interrupted by SIGTERM while waiting: the job was cancelled");
  worker(&w, name, "0", gated_upper, gate, NULL);
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "gate", "-P", "x");
  cli_read_line(s.out, ticket, sizeof ticket);
  await_started(&w);
  ck_assert_int_eq(reap(&s), 0);
  ck_assert_str_eq(out, "");
  ck_assert_str_eq(err, "");
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  ck_assert_msg(strstr(out, "\nstate: running\n") != NULL, "%s", out);
  close(fd); /* the job runs to its end; nobody takes its result */
  cli_read_line(w.err, line, sizeof line);
  ck_assert_msg(strstr(line, ": job ") &&
                    strstr(line, "for tenant 'gate': status 0, 6 result bytes"),
                "%s", line);
  /* Its slot dropped with the result: the event ring tells that a worker took it. */
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  ck_assert_msg(strstr(out, "state: ended\noutcome: completed\n") &&
                    strstr(out, "event: granted\n"),
                "%s", out);
  assert_status(name, "queue_depth", "0");
  ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

/* A drained segment: an idle worker stops by itself. */
START_TEST(drain_stops_worker) {
  const char *name = cli_segment("drain", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  struct cli_proc w;
  worker(&w, name, "0", "cat", NULL, NULL);
  round_trip(name, "a", "bound", "bound", 0);
  ck_assert_int_eq(CLI("drain", name), 0);
  ck_assert_int_eq(reap(&w), 0);
  ck_assert_msg(strstr(err, "is draining: stopping\n") != NULL, "%s", err);
  assert_status(name, "cells_offline", "1");
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--wait"), 75);
  assert_error_line(err, "shutdown", "tenant 'a'");
}
END_TEST

/* A worker killed mid-job: worker-lost, or with --retry-once the job runs again elsewhere. */
START_TEST(worker_lost_and_retry) {
  const char *name = cli_segment("lost", "small:cells=2,queue=16,mode=worker,payload=64", NULL);
  char gate[128], ticket[SHMS_TICKET_STRLEN];
  int fd = gate_open(name, "1", gate, sizeof gate);
  struct cli_proc w, s, w2;
  worker(&w, name, "0", gated_upper, gate, NULL);
  queue_submit(&s, name, "gate", "x", ticket);
  await_started(&w);
  ck_assert_int_eq(kill(w.pid, SIGKILL), 0);
  ck_assert_int_eq(reap(&s), 75);
  assert_error_line(err, "worker-lost", "tenant 'gate'");
  close(fd); /* the dead worker's command holds its stderr until the gate opens */
  ck_assert_int_eq(reap(&w), 128 + SIGKILL);
  assert_status(name, "cells_quarantined", "1");
  ck_assert_int_eq(CLI("repair", name, "--class", "small"), 0);
  /* Again with --retry-once: a second worker runs the job. */
  fd = gate_open(name, "2", gate, sizeof gate);
  worker(&w, name, "0", gated_upper, gate, NULL);
  CLI_SPAWN(&s, "submit", name, "-c", "small", "-t", "gate", "-P", "twice", "--wait",
            "--retry-once");
  await_started(&w);
  ck_assert_int_eq(kill(w.pid, SIGKILL), 0);
  close(fd);
  ck_assert_int_eq(reap(&w), 128 + SIGKILL);
  worker(&w2, name, "1", "printf '%s ' \"$SHMSCHED_TENANT\"; tr a-z A-Z", NULL, NULL);
  ck_assert_int_eq(reap(&s), 0);
  ck_assert_str_eq(out, "gate TWICE");
  ck_assert_int_eq(reap(&w2), 0);
}
END_TEST

START_TEST(every_cell_has_a_worker) {
  const char *name = cli_segment("busy", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  struct cli_proc w;
  worker(&w, name, "0", "cat", NULL, NULL);
  round_trip(name, "a", "bound", "bound", 0);
  ck_assert_int_eq(CLI("worker", name, "-c", "small", "--", "cat"), 1);
  assert_error_line(err, "busy", "class small");
  ck_assert_int_eq(kill(w.pid, SIGINT), 0);
  ck_assert_int_eq(reap(&w), 0);
}
END_TEST

/* ---- fairness ---------------------------------------------------------------- */

/* Tenants take turns: a flood queued first does not keep a later tenant waiting behind it. */
START_TEST(tenants_take_turns) {
  const char *name = cli_segment("turns", "small:cells=1,queue=16,mode=worker,payload=64", NULL);
  char gate[128], order[128], ticket[SHMS_TICKET_STRLEN];
  int fd = gate_open(name, "1", gate, sizeof gate);
  cli_path(order, sizeof order, "order");
  struct cli_proc w, g, q[4];
  worker(&w, name, "5",
         "if [ \"$SHMSCHED_TENANT\" = gate ]; then exec 3<\"$1\"; echo started >&2; cat <&3; fi; "
         "echo \"$SHMSCHED_TENANT $(cat)\" >>\"$2\"",
         gate, order);
  queue_submit(&g, name, "gate", "0", ticket);
  await_started(&w);
  static const char *const tenants[] = {"flood", "flood", "flood", "light"};
  static const char *const payloads[] = {"1", "2", "3", "4"};
  for (int i = 0; i < 4; i++)
    queue_submit(&q[i], name, tenants[i], payloads[i], ticket);
  close(fd);
  ck_assert_int_eq(reap(&g), 0);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(reap(&q[i]), 0);
  ck_assert_int_eq(reap(&w), 0);
  int ofd = open(order, O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge(ofd, 0);
  cli_slurp(ofd, out, sizeof out);
  close(ofd);
  ck_assert_str_eq(out, "gate 0\nflood 1\nlight 4\nflood 2\nflood 3\n");
}
END_TEST

/* Two workers run jobs at once; several tenants' jobs all come back right. */
START_TEST(two_workers_many_tenants) {
  const char *name = cli_segment("two", "small:cells=2,queue=16,mode=worker,payload=64", NULL);
  char gate[128], ticket[SHMS_TICKET_STRLEN], expect[64];
  int fd = gate_open(name, "1", gate, sizeof gate);
  struct cli_proc w[2], g[2], q[6];
  for (int i = 0; i < 2; i++)
    worker(&w[i], name, "0", gated_upper, gate, NULL);
  for (int i = 0; i < 2; i++)
    queue_submit(&g[i], name, "gate", "held", ticket);
  for (int i = 0; i < 2; i++) { /* both workers hold a job at the same time */
    await_started(&w[i]);
  }
  assert_status(name, "cells_offline", "0");
  static const char *const tenants[] = {"a", "a", "a", "b", "b", "c"};
  char payload[6][16];
  for (int i = 0; i < 6; i++) {
    snprintf(payload[i], sizeof payload[i], "job%d", i);
    queue_submit(&q[i], name, tenants[i], payload[i], ticket);
  }
  close(fd);
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(reap(&g[i]), 0);
    ck_assert_str_eq(out, "gate HELD");
  }
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(reap(&q[i]), 0);
    snprintf(expect, sizeof expect, "%s JOB%d", tenants[i], i);
    ck_assert_str_eq(out, expect);
  }
  assert_status(name, "granted", "8");
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(kill(w[i].pid, SIGTERM), 0);
    ck_assert_int_eq(reap(&w[i]), 0);
  }
  assert_status(name, "cells_offline", "2");
}
END_TEST

/* ---- usage errors: exit 2, one error line, nothing attempted -------------------- */

static const struct {
  const char *argv[12];
  const char *needle;
} bad_calls[] = {
    {{"submit", "@", "-t", "a"}, "submit: missing --class"},
    {{"submit", "@", "-c", "small", "-t", "a", "--key", ""}, "--key: empty"},
    {{"submit", "@", "-c", "small", "-t", "a", "--key", "0123456789abcdef0123456789abcdef"},
     "--key: too long"},
    {{"submit", "@", "-c", "small", "-t", "a", "--key", "a b"}, "--key: byte 2 (0x20)"},
    {{"submit", "@", "-c", "small", "-t", "a", "--supersede"}, "--supersede needs --key"},
    {{"submit", "@", "-c", "small", "-t", "a", "--key", "k", "--supersede=now"},
     "expected --supersede or --supersede=running"},
    {{"submit", "@", "-c", "small", "-t", "a", "--key", "k", "-a", "x"},
     "--key and --activation exclude each other"},
    {{"submit", "@", "-c", "small"}, "submit: missing --tenant"},
    {{"submit", "-c", "small", "-t", "a"}, "submit: missing NAME"},
    {{"submit", "@", "-c", "small", "-t", "a", "--timeout", "1s"}, "--timeout needs --wait"},
    {{"submit", "@", "-c", "small", "-t", "a", "--print-ticket"}, "--print-ticket needs --wait"},
    {{"submit", "@", "-c", "small", "-t", "a", "--wait", "--timeout", "5"}, "--timeout: '5' needs"},
    {{"submit", "@", "-c", "standard", "-t", "a"}, "class standard is a lease class"},
    {{"submit", "@", "-c", "large", "-t", "a"}, "has no class large"},
    {{"submit", "@", "-c", "small", "-t", "a", "-f", "/nonexistent/shmst"},
     "--payload-file '/nonexistent/shmst': cannot open"},
    {{"submit", "@", "-c", "small", "-t", "bad name"}, "tenant"},
    {{"submit", "@", "-c", "small", "-t", "a", "-p", "x"}, "--priority"},
    {{"worker", "@", "--", "cat"}, "worker: missing --class"},
    {{"worker", "@", "-c", "small"}, "missing '-- CMD"},
    {{"worker", "@", "-c", "small", "cat"}, "unexpected argument 'cat'"},
    {{"worker", "@", "-c", "small", "--jobs", "0", "--", "cat"}, "--jobs: must be at least 1"},
    {{"worker", "@", "-c", "small", "--jobs", "x", "--", "cat"}, "--jobs: not a number"},
    {{"worker", "@", "-c", "standard", "--", "cat"}, "class standard is a lease class"},
    {{"worker", "@", "-c", "large", "--", "cat"}, "has no class large"},
};

START_TEST(usage_errors) {
  const char *name = cli_segment("usage", "small:cells=1,queue=16,mode=worker,payload=8",
                                 "standard:cells=1,queue=4");
  const char *argv[13] = {NULL};
  for (int i = 0; i < 12 && bad_calls[_i].argv[i] != NULL; i++)
    argv[i] = strcmp(bad_calls[_i].argv[i], "@") == 0 ? name : bad_calls[_i].argv[i];
  int rc = harness_cli(out, sizeof out, err, sizeof err, argv);
  ck_assert_msg(rc == 2, "%s: exit %d, stderr %s", bad_calls[_i].needle, rc, err);
  assert_error_line(err, "invalid-argument", bad_calls[_i].needle);
  ck_assert_str_eq(out, "");
  assert_status(name, "rejected", "0");
  assert_status(name, "cells_offline", "1");
  assert_status(name, "live_processes", "0");
}
END_TEST

START_TEST(missing_segment) {
  const char *name = harness_name("none");
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--wait"), 1);
  assert_error_line(err, "not-found", name);
  ck_assert_int_eq(CLI("worker", name, "-c", "small", "--", "cat"), 1);
  assert_error_line(err, "not-found", name);
}
END_TEST

/* ---- help -------------------------------------------------------------------- */

static const char *const help_commands[][3] = {
    {"submit", "--help"}, {"worker", "-h"}, {"help", "submit"}, {"help", "worker"}};

START_TEST(help_texts) {
  int rc = harness_cli(out, sizeof out, err, sizeof err, help_commands[_i]);
  ck_assert_msg(rc == 0, "%s: exit %d: %s", help_commands[_i][0], rc, err);
  ck_assert_msg(strncmp(out, "Usage: shmsched ", 16) == 0, "no usage line:\n%s", out);
  ck_assert_msg(strstr(out, "\nOptions:\n") && strstr(out, "--help"), "no options:\n%s", out);
  ck_assert_msg(strstr(out, "\nExit status") != NULL, "no exit status:\n%s", out);
  ck_assert_msg(strstr(out, "\nExamples:\n  shmsched ") != NULL, "no Examples:\n%s", out);
  ck_assert_str_eq(err, "");
}
END_TEST

static Suite *cli_worker_suite(void) {
  Suite *s = suite_create("cli_worker");
  TCase *tc = harness_tcase("round_trips");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, round_trip_tr);
  tcase_add_test(tc, status_is_exit_code);
  tcase_add_test(tc, status_outside_a_byte);
  tcase_add_test(tc, payload_from_file_and_stdin);
  tcase_add_test(tc, large_payload_interleaved);
  tcase_add_test(tc, job_environment);
  suite_add_tcase(s, tc);
  tc = harness_tcase("limits");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, payload_too_large);
  tcase_add_test(tc, result_too_large);
  tcase_add_loop_test(tc, usage_errors, 0, sizeof bad_calls / sizeof bad_calls[0]);
  tcase_add_test(tc, missing_segment);
  suite_add_tcase(s, tc);
  tc = harness_tcase("failures");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, crashed_command_goes_on);
  tcase_add_test(tc, crashed_command_quarantines);
  tcase_add_test(tc, cancel_queued_job);
  tcase_add_test(tc, keyed_join_and_supersede);
  tcase_add_test(tc, cancel_running_job);
  tcase_add_test(tc, worker_stops_on_signal);
  tcase_add_test(tc, second_signal_stops_waiting);
  tcase_add_test(tc, idle_means_idle);
  tcase_add_test(tc, submit_without_wait);
  tcase_add_test(tc, drain_stops_worker);
  tcase_add_test(tc, worker_lost_and_retry);
  tcase_add_test(tc, every_cell_has_a_worker);
  suite_add_tcase(s, tc);
  tc = harness_tcase("fairness");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, tenants_take_turns);
  tcase_add_test(tc, two_workers_many_tenants);
  suite_add_tcase(s, tc);
  tc = harness_tcase("help");
  tcase_add_loop_test(tc, help_texts, 0, sizeof help_commands / sizeof help_commands[0]);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(cli_worker_suite()); }

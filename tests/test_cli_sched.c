/*
 * The scheduling subcommands end to end: run, cancel, explain, drain, repair
 * and status --tenants, through <build>/bin/shmsched.
 *
 * Synchronisation is by pipes and waitpid only, never by sleeping (cli_proc.h): a "holder"
 * run keeps the only cell with `sh -c 'echo held; read x'`, so the test knows
 * the lease is held when it reads "held" and lets it go by closing the
 * command's stdin; a queued run with --print-ticket is known to be queued
 * once its first stderr line (the ticket) arrives.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"
#include "shm/cgroup.h"

static char out[65536], err[4096];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

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
  char line[128];
  ck_assert_int_eq(CLI("status", name), 0);
  snprintf(line, sizeof line, "\n%s: %s\n", key, value);
  ck_assert_msg(strstr(out, line) != NULL, "status lacks '%s: %s':\n%s", key, value, out);
}

/* The number after "key: " in `status NAME`. */
static unsigned long long status_figure(const char *name, const char *key) {
  char needle[96];
  ck_assert_int_eq(CLI("status", name), 0);
  snprintf(needle, sizeof needle, "\n%s: ", key);
  const char *at = strstr(out, needle);
  ck_assert_msg(at != NULL, "status lacks '%s':\n%s", key, out);
  return strtoull(at + strlen(needle), NULL, 10);
}

/* ---- background CLI processes, with pipes the test holds (cli_proc.h) ------- */

static char pout[16384], perr[4096];

/* Collect the rest of its stdout/stderr in pout/perr and reap it (cli_reap): its status. */
static int reap(struct cli_proc *p, int close_in) {
  return cli_reap(p, close_in, pout, sizeof pout, NULL, perr, sizeof perr);
}

/* Hold the only cell of class standard until let_go(): returns once the command runs. */
/* Close its stdin (a command reading it sees EOF), then reap it. */
static int finish(struct cli_proc *p) { return reap(p, 1); }

static void hold(struct cli_proc *p, const char *name) {
  char line[64];
  CLI_SPAWN(p, "run", name, "--class", "standard", "--tenant", "holder", "--", "sh", "-c",
            "echo held; read x; exit 0");
  cli_read_line(p->out, line, sizeof line);
  ck_assert_str_eq(line, "held");
}

static void let_go(struct cli_proc *p) {
  int rc = finish(p);
  ck_assert_msg(rc == 0, "holder exited %d: %s", rc, perr);
}

/* A run of tenant queued behind the holder, with --print-ticket: returns once it is queued. */
static void queue_run(struct cli_proc *p, const char *name, const char *tenant, char *ticket,
                      const char *opt, const char *value) {
  CLI_SPAWN(p, "run", name, "--class", "standard", "--tenant", tenant, "--print-ticket",
            opt ? opt : "--", opt ? value : "true", opt ? "--" : NULL, opt ? "true" : NULL);
  cli_read_line(p->err, ticket, SHMS_TICKET_STRLEN);
  shms_ticket t;
  ck_assert_msg(shms_ticket_parse(ticket, &t) == SHMS_OK, "first stderr line is no ticket: '%s'",
                ticket);
}

/* ---- run: the command's status ------------------------------------------- */

START_TEST(run_exit_status) {
  const char *name = cli_segment("st", "standard:cells=2,queue=4", NULL);
  ck_assert_int_eq(
      CLI("run", name, "--class", "standard", "--tenant", "a", "--", "sh", "-c", "exit 3"), 3);
  ck_assert_str_eq(err, "");
  ck_assert_int_eq(CLI("run", "--class", "standard", name, "-t", "a", "--", "echo", "hi", "-c"), 0);
  ck_assert_str_eq(out, "hi -c\n");
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "no-such-command-shmst"),
                   127);
  assert_error_line(err, "not-found", "cannot execute 'no-such-command-shmst'");
  /* Every lease came back: both cells available, three grants counted. */
  assert_status(name, "cells_available", "2");
  assert_status(name, "granted", "3");
  assert_status(name, "live_processes", "0");
}
END_TEST

/* A crash (a fault signal nobody sent) releases the cell by default: the tree is gone. */
START_TEST(run_crash_releases_by_default) {
  const char *name = cli_segment("crash", "standard:cells=1,queue=4", NULL);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "kill -SEGV $$"),
                   128 + SIGSEGV);
  ck_assert_str_eq(err, "shmsched: run: 'sh' crashed (SIGSEGV): its processes are gone, class "
                        "standard cell 0 released\n");
  assert_status(name, "cells_quarantined", "0");
  assert_status(name, "cells_available", "1");
  assert_status(name, "on_command_crash", "release");
  /* Any other signal is no crash: released, and nothing to say. */
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "kill -KILL $$"),
                   128 + SIGKILL);
  ck_assert_str_eq(err, "");
  assert_status(name, "cells_available", "1");
}
END_TEST

/* on-command-crash=quarantine: a crash takes the cell out of service until repaired. */
START_TEST(run_crash_quarantines_by_policy) {
  const char *name =
      cli_segment("kill", "standard:cells=1,queue=4,on-command-crash=quarantine", NULL);
  assert_status(name, "on_command_crash", "quarantine");
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "kill -ABRT $$"),
                   128 + SIGABRT);
  ck_assert_msg(strstr(err,
                       "'sh' crashed (SIGABRT): quarantined class standard cell 0 "
                       "(on-command-crash=quarantine; return it with 'shmsched repair ") != NULL,
                "%s", err);
  assert_status(name, "cells_quarantined", "1");
  assert_status(name, "cells_available", "0");
  /* With its only cell quarantined the class fails fast instead of waiting forever. */
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "true"), 75);
  assert_error_line(err, "all-cells-quarantined", "tenant 'a'");
  ck_assert_int_eq(CLI("repair", name, "--class", "standard"), 0);
  ck_assert_str_eq(out, "repaired 1 cell of class standard\n");
  assert_status(name, "cells_quarantined", "0");
  assert_status(name, "cells_available", "1");
  /* A cell that is not quarantined cannot be repaired; "every cell" finds none. */
  ck_assert_int_eq(CLI("repair", name, "--class", "standard", "--cell", "0"), 1);
  assert_error_line(err, "invalid-argument", "cell 0 is not quarantined");
  ck_assert_int_eq(CLI("repair", name, "--class", "standard"), 0);
  ck_assert_str_eq(out, "repaired 0 cells of class standard\n");
  /* Signals that are no crash release the cell, even here. */
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "kill -TERM $$"),
                   128 + SIGTERM);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "kill -XCPU $$"),
                   128 + SIGXCPU);
  assert_status(name, "cells_quarantined", "0");
  /* repair --cell N on a quarantined cell. */
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "sh", "-c", "kill -BUS $$"),
                   128 + SIGBUS);
  ck_assert_int_eq(CLI("repair", name, "--class", "standard", "--cell", "0"), 0);
  ck_assert_str_eq(out, "repaired 1 cell of class standard\n");
}
END_TEST

/* --release-on-signal releases even a crash in a class that would quarantine it. */
START_TEST(run_release_on_signal) {
  const char *name =
      cli_segment("ros", "standard:cells=1,queue=4,on-command-crash=quarantine", NULL);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--release-on-signal", "--", "sh",
                       "-c", "kill -SEGV $$"),
                   128 + SIGSEGV);
  ck_assert_msg(strstr(err, "crashed (SIGSEGV): its processes are gone, class standard cell 0 "
                            "released") != NULL,
                "%s", err);
  assert_status(name, "cells_quarantined", "0");
  assert_status(name, "cells_available", "1");
}
END_TEST

/* SIGTERM sent to run while CMD runs goes to CMD; CMD ended by it: the cell is released. */
START_TEST(run_forwards_signals) {
  const char *name = cli_segment("fwd", "standard:cells=1,queue=4", NULL);
  struct cli_proc p;
  char line[64];
  CLI_SPAWN(&p, "run", name, "-c", "standard", "-t", "a", "--", "sh", "-c",
            "echo up; read x; exit 0");
  cli_read_line(p.out, line, sizeof line);
  ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
  /* Its stdin stays open: only the signal can end the command. */
  ck_assert_int_eq(reap(&p, 0), 128 + SIGTERM);
  ck_assert_str_eq(perr, "");
  assert_status(name, "cells_quarantined", "0");
  assert_status(name, "cells_available", "1");
}
END_TEST

/* ---- tickets: --print-ticket, cancel, explain ----------------------------- */

START_TEST(print_ticket_then_cancel) {
  const char *name = cli_segment("cancel", "standard:cells=1,queue=4", NULL);
  struct cli_proc holder, q;
  char ticket[SHMS_TICKET_STRLEN];
  hold(&holder, name);
  queue_run(&q, name, "b", ticket, NULL, NULL);
  ck_assert_msg(strncmp(ticket, "standard.", 9) == 0, "%s", ticket);
  /* The live figures while one lease is held and one request waits. */
  assert_status(name, "queue_depth", "1");
  assert_status(name, "queued_tenants", "1");
  assert_status(name, "cells_leased", "1");
  assert_status(name, "live_processes", "2");
  ck_assert_uint_gt(status_figure(name, "oldest_lease_age_ns"), 0);
  ck_assert_int_eq(CLI("cancel", name, ticket), 0);
  ck_assert_msg(strstr(out, "cancelled request ") != NULL, "%s", out);
  ck_assert_int_eq(finish(&q), 75);
  assert_error_line(perr, "cancelled", "tenant 'b'");
  /* Cancelled once: nothing left to cancel. */
  ck_assert_int_eq(CLI("cancel", name, ticket), 1);
  ck_assert_msg(strncmp(err, "shmsched: ", 10) == 0, "%s", err);
  assert_status(name, "cancelled", "1");
  assert_status(name, "queue_depth", "0");
  let_go(&holder);
}
END_TEST

/* Several tickets in one call, as arguments or on stdin: every one checked before any is
 * cancelled, and the exit status is the first failure's. */
START_TEST(cancel_several_tickets) {
  const char *name = cli_segment("cmany", "standard:cells=1,queue=8", NULL);
  shms_t *h;
  shms_lease held;
  shms_ticket t[4];
  char text[4][SHMS_TICKET_STRLEN];
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_assert_shms_ok(
      shms_try_acquire(h, &(shms_request){.cls = SHMS_CLASS_STANDARD, .tenant = "x"}, &held));
  for (int i = 0; i < 4; i++) {
    ck_assert_shms_ok(
        shms_enqueue(h, &(shms_request){.cls = SHMS_CLASS_STANDARD, .tenant = "y"}, &t[i]));
    shms_ticket_format(&t[i], text[i]);
  }
  /* A malformed ticket after a good one: usage error, and the good one is still queued. */
  ck_assert_int_eq(CLI("cancel", name, text[0], "standard.1.2"), 2);
  assert_error_line(err, "invalid-argument", "nothing cancelled");
  assert_status(name, "queue_depth", "4");
  ck_assert_int_eq(CLI("cancel", name, text[0], text[1]), 0);
  ck_assert_msg(strstr(out, text[0]) != NULL && strstr(out, text[1]) != NULL, "%s", out);
  assert_status(name, "queue_depth", "2");
  /* From stdin, with blank lines and blanks around: one already cancelled (exit 1, naming it),
   * the other two cancelled all the same. */
  struct cli_proc p;
  CLI_SPAWN(&p, "cancel", name, "-");
  dprintf(p.in, "%s\n\n  %s \n%s\n", text[2], text[1], text[3]);
  ck_assert_int_eq(cli_reap(&p, 1, out, sizeof out, NULL, err, sizeof err), 1);
  ck_assert_msg(strstr(out, text[2]) != NULL && strstr(out, text[3]) != NULL, "%s", out);
  assert_error_line(err, "cancelled", text[1]);
  assert_status(name, "queue_depth", "0");
  /* Nothing on stdin, or a bad line: usage errors naming why. */
  CLI_SPAWN(&p, "cancel", name, "-");
  dprintf(p.in, "\n%s\nnot-a-ticket\n", text[0]);
  ck_assert_int_eq(cli_reap(&p, 1, out, sizeof out, NULL, err, sizeof err), 2);
  assert_error_line(err, "invalid-argument", "standard input line 3");
  CLI_SPAWN(&p, "cancel", name, "-");
  ck_assert_int_eq(cli_reap(&p, 1, out, sizeof out, NULL, err, sizeof err), 2);
  assert_error_line(err, "invalid-argument", "no ticket on standard input");
  for (int i = 0; i < 4; i++) {
    shms_lease l;
    ck_assert_int_eq(shms_wait(h, &t[i], 0, &l), SHMS_ECANCELLED);
  }
  ck_assert_shms_ok(shms_release(h, &held));
  shms_detach(h);
}
END_TEST

/* Cancel as seen from a second process: installed once, then "already cancelled". */
START_TEST(cancel_outcomes) {
  const char *name = cli_segment("cout", "standard:cells=1,queue=4", NULL);
  shms_t *h;
  shms_ticket t;
  shms_lease lease;
  char text[SHMS_TICKET_STRLEN];
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_lease held;
  ck_assert_shms_ok(
      shms_try_acquire(h, &(shms_request){.cls = SHMS_CLASS_STANDARD, .tenant = "x"}, &held));
  ck_assert_shms_ok(
      shms_enqueue(h, &(shms_request){.cls = SHMS_CLASS_STANDARD, .tenant = "y"}, &t));
  shms_ticket_format(&t, text);
  ck_assert_int_eq(CLI("cancel", name, text), 0);
  /* Nobody has collected the outcome yet: the request has ended as cancelled. */
  ck_assert_int_eq(CLI("cancel", name, text), 1);
  assert_error_line(err, "cancelled", "already cancelled");
  ck_assert_int_eq(CLI("explain", name, text), 0);
  ck_assert_msg(strstr(out, "state: ended\noutcome: cancelled\n") != NULL, "%s", out);
  ck_assert_int_eq(shms_wait(h, &t, 0, &lease), SHMS_ECANCELLED);
  /* Collected: the ticket is retired; the event ring still tells how it ended. */
  ck_assert_int_eq(CLI("cancel", name, text), 1);
  assert_error_line(err, "not-found", "ticket");
  ck_assert_int_eq(CLI("explain", name, text), 0);
  ck_assert_msg(strstr(out, "state: ended\noutcome: cancelled\ntenant: y\nevent: cancelled\n"),
                "%s", out);
  /* A ticket of another incarnation is not-found; a malformed one a usage error. */
  t.incarnation ^= 1;
  shms_ticket_format(&t, text);
  ck_assert_int_eq(CLI("cancel", name, text), 1);
  assert_error_line(err, "not-found", "another segment");
  ck_assert_int_eq(CLI("cancel", name, "standard.1.2"), 2);
  assert_error_line(err, "invalid-argument", "expected CLASS.SLOT.SEQ.INCARNATION");
  ck_assert_int_eq(CLI("explain", name, "bogus.1.2.0000000000000000"), 2);
  assert_error_line(err, "invalid-argument", "unknown class");
  ck_assert_shms_ok(shms_release(h, &held));
  shms_detach(h);
}
END_TEST

START_TEST(explain_queued) {
  const char *name = cli_segment("explain", "standard:cells=1,queue=4", NULL);
  struct cli_proc holder, q1, q2, q3;
  char t1[SHMS_TICKET_STRLEN], t2[SHMS_TICKET_STRLEN], t3[SHMS_TICKET_STRLEN];
  hold(&holder, name);
  queue_run(&q1, name, "a", t1, "--priority", "-7");
  queue_run(&q2, name, "a", t2, "--priority", "5");
  queue_run(&q3, name, "b", t3, NULL, NULL);
  ck_assert_int_eq(CLI("explain", name, t1), 0);
  static const char *const needles[] = {
      "ticket: ",
      "\nclass: standard\n",
      "\nstate: queued\n",
      "\ntenant: a\n",
      "\npriority: -7\n",
      "\nwaited_ns: ",
      "\naged: no\n",
      "\ntenants_ahead: 0\n",
      "\nring_length: 2\n",
      "\nahead_in_tenant: 1\n",
      "\ntenant_queued: 2\n",
      "\nblocked_by: no-cell turn\n",
      "\nwhy: waiting: no free cell; 1 of its tenant's 2 queued requests go first\n"};
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
    ck_assert_msg(strstr(out, needles[i]) != NULL, "explain lacks '%s':\n%s", needles[i], out);
  ck_assert_int_eq(CLI("explain", name, t3, "--json"), 0);
  static const char *const json_needles[] = {
      "\"state\": \"queued\"",  "\"tenant\": \"b\"",
      "\"priority\": 0",        "\"aged\": false",
      "\"tenants_ahead\": 1",   "\"ring_length\": 2",
      "\"ahead_in_tenant\": 0", "\"blocked_by\": [\n    \"no-cell\",\n    \"turn\"\n  ]"};
  for (size_t i = 0; i < sizeof json_needles / sizeof json_needles[0]; i++)
    ck_assert_msg(strstr(out, json_needles[i]) != NULL, "explain --json lacks '%s':\n%s",
                  json_needles[i], out);
  /* The per-tenant rows, in both formats. */
  ck_assert_int_eq(CLI("status", name, "--tenants"), 0);
  ck_assert_msg(strstr(out, "\ntenants: 3\n") != NULL, "%s", out); /* a, b, and the holder's */
  ck_assert_msg(strstr(out, "\ntenant.a: queued=2 active=0 in_ring=yes granted=0 ") != NULL, "%s",
                out);
  ck_assert_msg(strstr(out, "\ntenant.b: queued=1 active=0 in_ring=yes granted=0 ") != NULL, "%s",
                out);
  ck_assert_msg(strstr(out, "\nlive_processes: 4\n") != NULL, "%s", out);
  ck_assert_int_eq(CLI("status", name, "--tenants", "--json"), 0);
  ck_assert_msg(strstr(out, "\"tenants\": [") && strstr(out, "\"name\": \"a\",\n") &&
                    strstr(out, "\"queued\": 2,") && strstr(out, "\"in_ring\": true,"),
                "%s", out);
  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(strstr(out, "\"tenants\"") == NULL, "tenants without --tenants:\n%s", out);
  ck_assert_msg(strstr(out, "\"queue_depth\": 3,") && strstr(out, "\"queued_tenants\": 2,"), "%s",
                out);
  for (struct cli_proc *p = &q1; p != NULL; p = p == &q1 ? &q2 : p == &q2 ? &q3 : NULL) {
    char *t = p == &q1 ? t1 : p == &q2 ? t2 : t3;
    ck_assert_int_eq(CLI("cancel", name, t), 0);
    ck_assert_int_eq(finish(p), 75);
  }
  let_go(&holder);
}
END_TEST

/*
 * The ticket of a request whose lease is held (its command runs) still
 * answers: explain says held, on which cell, by which pid, since when; cancel
 * says it cannot cancel a running lease (exit 3) and changes nothing. Its slot
 * was given back at acceptance: another request reusing it does not confuse it.
 */
START_TEST(ticket_of_a_held_lease) {
  const char *name = cli_segment("held", "standard:cells=1,queue=1", NULL);
  struct cli_proc holder, q, r;
  char ticket[SHMS_TICKET_STRLEN], other[SHMS_TICKET_STRLEN], line[64];
  hold(&holder, name);
  CLI_SPAWN(&q, "run", name, "-c", "standard", "-t", "b", "--print-ticket", "--", "sh", "-c",
            "echo running; read x; exit 0");
  cli_read_line(q.err, ticket, sizeof ticket);
  let_go(&holder);
  cli_read_line(q.out, line, sizeof line);
  ck_assert_str_eq(line, "running");           /* q's lease is accepted and held */
  queue_run(&r, name, "c", other, NULL, NULL); /* the same (only) slot, reused */
  ck_assert_str_ne(other, ticket);
  char pid[48];
  snprintf(pid, sizeof pid, "\nholder_pid: %d\n", (int)q.pid);
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  static const char *const needles[] = {
      "\nstate: held\n",  "\ncell: 0\n", "\nholder_alive: yes\n", "\nheld_ns: ", "\nheld: ",
      "\nheld_since: 20", "Z\n"};
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
    ck_assert_msg(strstr(out, needles[i]) != NULL, "explain lacks '%s':\n%s", needles[i], out);
  ck_assert_msg(strstr(out, pid) != NULL, "explain lacks '%s':\n%s", pid, out);
  ck_assert_int_eq(CLI("explain", name, ticket, "--json"), 0);
  snprintf(pid, sizeof pid, "\"holder_pid\": %d", (int)q.pid);
  ck_assert_msg(strstr(out, "\"state\": \"held\"") && strstr(out, pid) &&
                    strstr(out, "\"holder_alive\": true"),
                "%s", out);
  ck_assert_int_eq(CLI("cancel", name, ticket), 3);
  snprintf(pid, sizeof pid, "pid %d", (int)q.pid);
  assert_error_line(err, "busy", "holds its lease on class standard cell 0");
  ck_assert_msg(strstr(err, pid) && strstr(err, "cannot be cancelled") &&
                    strstr(err, "nothing changed"),
                "%s", err);
  /* Nothing changed: the command runs on, and ends as it will. */
  ck_assert_int_eq(finish(&q), 0);
  ck_assert_int_eq(finish(&r), 0);
  /* Its lease ended: the event ring tells that it was granted, and so accepted. */
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  ck_assert_msg(strstr(out, "state: ended\noutcome: accepted\n") && strstr(out, "event: granted\n"),
                "%s", out);
}
END_TEST

/* SIGTERM while waiting cancels the request. */
START_TEST(signal_cancels_wait) {
  const char *name = cli_segment("sigw", "standard:cells=1,queue=4", NULL);
  struct cli_proc holder, q;
  char ticket[SHMS_TICKET_STRLEN];
  hold(&holder, name);
  queue_run(&q, name, "b", ticket, NULL, NULL);
  ck_assert_int_eq(kill(q.pid, SIGTERM), 0);
  ck_assert_int_eq(finish(&q), 75);
  assert_error_line(perr, "cancelled", "interrupted by SIGTERM while waiting");
  assert_status(name, "cancelled", "1");
  assert_status(name, "queue_depth", "0");
  let_go(&holder);
  assert_status(name, "cells_available", "1");
}
END_TEST

/* Tenants take turns: a flood queued first does not keep a later tenant waiting behind it. */
START_TEST(tenants_take_turns) {
  const char *name = cli_segment("turns", "standard:cells=1,queue=8", NULL);
  struct cli_proc holder, q[4];
  char ticket[SHMS_TICKET_STRLEN], cmd[4][256];
  static const char *const tenants[] = {"flood", "flood", "flood", "light"};
  hold(&holder, name);
  for (int i = 0; i < 4; i++) {
    snprintf(cmd[i], sizeof cmd[i], "echo %s%d >> %s/order", tenants[i], i, cli_dir());
    CLI_SPAWN(&q[i], "run", name, "-c", "standard", "-t", tenants[i], "--print-ticket", "--", "sh",
              "-c", cmd[i]);
    cli_read_line(q[i].err, ticket, sizeof ticket);
  }
  let_go(&holder);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(finish(&q[i]), 0);
  char path[128], order[256] = "";
  cli_path(path, sizeof path, "order");
  int fd = open(path, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  cli_slurp(fd, order, sizeof order);
  close(fd);
  ck_assert_str_eq(order, "flood0\nlight3\nflood1\nflood2\n");
}
END_TEST

/* ---- scheduling failures exit 75 ------------------------------------------ */

START_TEST(drain_settles_queued) {
  const char *name = cli_segment("drain", "standard:cells=1,queue=4", NULL);
  struct cli_proc holder, q;
  char ticket[SHMS_TICKET_STRLEN];
  hold(&holder, name);
  queue_run(&q, name, "b", ticket, NULL, NULL);
  ck_assert_int_eq(CLI("drain", name), 0);
  ck_assert_msg(strstr(out, "is draining") != NULL, "%s", out);
  ck_assert_int_eq(finish(&q), 75);
  assert_error_line(perr, "shutdown", "tenant 'b'");
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "c", "--", "true"), 75);
  assert_error_line(err, "shutdown", "draining");
  assert_status(name, "state", "draining");
  /* The lease held through the drain runs to its end and is released. */
  let_go(&holder);
  assert_status(name, "cells_available", "1");
  ck_assert_int_eq(CLI("drain", name), 0);
}
END_TEST

START_TEST(queue_full) {
  const char *name = cli_segment("full", "standard:cells=1,queue=1", NULL);
  struct cli_proc holder, q;
  char ticket[SHMS_TICKET_STRLEN];
  hold(&holder, name);
  queue_run(&q, name, "b", ticket, NULL, NULL);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "c", "--", "true"), 75);
  assert_error_line(err, "queue-full", "request slots are in use");
  assert_status(name, "rejected", "1");
  /* The queued run is not disturbed: it runs once the holder lets go. */
  let_go(&holder);
  ck_assert_int_eq(finish(&q), 0);
  assert_status(name, "granted", "2");
  /* The queued run waited for its grant; the holder's immediate grant waited nothing. */
  unsigned long long total = status_figure(name, "total_wait_ns");
  ck_assert_uint_gt(total, 0);
  ck_assert_uint_eq(status_figure(name, "max_wait_ns"), total);
  assert_status(name, "oldest_lease_age_ns", "0");
}
END_TEST

START_TEST(duplicate_activation) {
  const char *name = cli_segment("dup", "standard:cells=1,queue=4", NULL);
  struct cli_proc holder, q;
  char ticket[SHMS_TICKET_STRLEN];
  hold(&holder, name);
  queue_run(&q, name, "b", ticket, "--activation", "job-1");
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "c", "-a", "job-1", "--", "true"), 75);
  assert_error_line(err, "duplicate-activation", "already live");
  ck_assert_int_eq(CLI("cancel", name, ticket), 0);
  ck_assert_int_eq(finish(&q), 75);
  let_go(&holder);
}
END_TEST

START_TEST(class_denied_and_deadline) {
  const char *name =
      cli_segment("deny", "standard:cells=1,queue=4,allow=ok+holder", "small:cells=1,queue=0");
  ck_assert_int_eq(CLI("run", name, "-c", "small", "-t", "a", "--", "true"), 75);
  assert_error_line(err, "class-denied", "queue=0");
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "other", "--", "true"), 75);
  assert_error_line(err, "class-denied", "does not allow tenant 'other'");
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "ok", "--", "true"), 0);
  /* A deadline passes while the only cell is held: the request queued (its ticket printed),
   * then expired. The deadline is long enough for run to attach and queue on a loaded machine
   * (it counts from run's start): one that passed before it queued is refused, not expired. */
  struct cli_proc holder, late;
  hold(&holder, name);
  char ticket[SHMS_TICKET_STRLEN];
  queue_run(&late, name, "ok", ticket, "--deadline", "1s");
  ck_assert_int_eq(reap(&late, 0), 75);
  assert_error_line(perr, "deadline-exceeded", "tenant 'ok'");
  assert_status(name, "expired", "1");
  let_go(&holder);
}
END_TEST

/* ---- usage errors: exit 2, one error line --------------------------------- */

static const struct {
  const char *argv[12];
  const char *needle;
} bad_runs[] = {
    {{"run", "@", "--", "true"}, "missing --class"},
    {{"run", "@", "-c", "standard", "--", "true"}, "missing --tenant"},
    {{"run", "@", "-c", "standard", "-t", "a"}, "missing '-- CMD"},
    {{"run", "@", "-c", "standard", "-t", "a", "--"}, "missing '-- CMD"},
    {{"run", "@", "-c", "standard", "-t", "a", "true"}, "unexpected argument 'true'"},
    {{"run", "-c", "standard", "-t", "a", "--", "true"}, "run: missing NAME"},
    {{"run", "@", "-c", "huge", "-t", "a", "--", "true"}, "--class 'huge': unknown class"},
    {{"run", "@", "-c", "standard", "-t", "a", "-p", "x", "--", "true"}, "--priority"},
    {{"run", "@", "-c", "standard", "-t", "a", "-p", "2147483648", "--", "true"}, "--priority"},
    {{"run", "@", "-c", "standard", "-t", "a", "-p", "1.5", "--", "true"}, "--priority"},
    {{"run", "@", "-c", "standard", "-t", "a", "--deadline", "5", "--", "true"},
     "--deadline: '5' needs a unit"},
    {{"run", "@", "-c", "standard", "-t", "a", "--bogus", "--", "true"},
     "unknown option '--bogus'"},
    {{"run", "@", "-c", "large", "-t", "a", "--", "true"}, "large"},
    {{"run", "@", "-c", "standard", "-t", "bad name", "--", "true"}, "tenant"},
    {{"run", "@", "-c", "standard", "-t", "a", "-a", "", "--", "true"}, "activation"},
    {{"cancel", "@"}, "cancel: missing TICKET"},
    {{"cancel", "@", "standard.1.2.0000000000000000", "x"}, "ticket 'x': expected CLASS"},
    {{"cancel", "@", "-", "x"}, "unexpected argument 'x' after '-'"},
    {{"explain", "@", "standard.1.2.3"}, "expected CLASS.SLOT.SEQ.INCARNATION"},
    {{"drain"}, "drain: missing NAME"},
    {{"repair", "@"}, "repair: missing --class"},
    {{"repair", "@", "--class", "standard", "--cell", "1"}, "class standard has no cell 1"},
    {{"repair", "@", "--class", "standard", "--cell", "-1"}, "--cell: must not be negative"},
    {{"repair", "@", "--class", "tiny"}, "has no class tiny"},
    {{"status", "@", "--tenants=yes"}, "no argument allowed for option '--tenants'"},
};

/*
 * A full process table is a temporary condition, like a full queue: the
 * commands that queue work exit 75 with its reason, so a retrying script
 * tries again later.
 */
START_TEST(process_table_full) {
  const char *name =
      CLI_SEGMENT("procs", "--class", "standard:cells=1,queue=4", "--class",
                  "small:cells=1,queue=4,mode=worker,payload=64", "--max-processes", "1");
  struct cli_proc holder;
  hold(&holder, name); /* the one entry of the process table */
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "true"), 75);
  assert_error_line(err, "busy", "process table is full");
  ck_assert_msg(strstr(err, "max-processes") != NULL, "no way out named: %s", err);
  ck_assert_int_eq(CLI("submit", name, "-c", "small", "-t", "a", "--wait"), 75);
  assert_error_line(err, "busy", "process table is full");
  ck_assert_int_eq(CLI("worker", name, "-c", "small", "--", "cat"), 75);
  assert_error_line(err, "busy", "process table is full");
  /* Nothing was queued or granted by the refused commands. */
  assert_status(name, "rejected", "0");
  let_go(&holder);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "true"), 0);
}
END_TEST

/* Copy file from to to, with mode. */
static void copy_file(const char *from, const char *to, mode_t mode) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  int o = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  ck_assert_int_ge(in, 0);
  ck_assert_int_ge(o, 0);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    ck_assert_int_eq(write(o, buf, (size_t)n), n);
  ck_assert_int_eq(n, 0);
  close(in);
  ck_assert_int_eq(fchmod(o, mode), 0);
  close(o);
}

/*
 * The system's process table, for run's command: `run NAME ... -- true` as
 * user nobody allowed one process (RLIMIT_NPROC binds a user that is not
 * root), so its fork fails with EAGAIN. Returns run's exit status; stderr in err.
 */
static int run_without_fork(const char *name) {
  /* nobody may not be able to enter the checkout (a home directory, a mkdtemp one): it runs a
   * copy of the binary, from a directory of its own that everyone may enter. */
  char dir[] = "/tmp/shmst-nobody-XXXXXX", bin[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ck_assert_int_eq(chmod(dir, 0755), 0);
  snprintf(bin, sizeof bin, "%s/shmsched", dir);
  copy_file(SHMS_BIN_DIR "/shmsched", bin, 0755);
  int pe[2];
  ck_assert(pipe(pe) == 0);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    struct rlimit one = {1, 1};
    dup2(pe[1], 2);
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setrlimit(RLIMIT_NPROC, &one) != 0 ||
        setuid(65534) != 0)
      _exit(99);
    /* LeakSanitizer checks at exit from a thread of its own, which one process cannot have. */
    setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1", 1);
    execl(bin, "shmsched", "run", name, "-c", "standard", "-t", "a", "--", "true", (char *)NULL);
    _exit(98);
  }
  close(pe[1]);
  cli_slurp(pe[0], err, sizeof err);
  close(pe[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  unlink(bin);
  rmdir(dir);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

START_TEST(system_process_limit) {
  const char *name = CLI_SEGMENT("nproc", "--class", "standard:cells=1,queue=4", "--mode", "0666");
  int rc = run_without_fork(name);
  ck_assert_msg(rc == 75, "exit %d: %s", rc, err);
  assert_error_line(err, "system-error", "cannot start 'true'");
  ck_assert_msg(strstr(err, "try again later") != NULL, "%s", err);
  /* The lease it got was given back. */
  assert_status(name, "cells_available", "1");
  assert_status(name, "granted", "1");
}
END_TEST

START_TEST(usage_errors) {
  const char *name = cli_segment("usage", "standard:cells=1,queue=4", NULL);
  const char *argv[13] = {NULL};
  for (int i = 0; i < 12 && bad_runs[_i].argv[i] != NULL; i++)
    argv[i] = strcmp(bad_runs[_i].argv[i], "@") == 0 ? name : bad_runs[_i].argv[i];
  int rc = harness_cli(out, sizeof out, err, sizeof err, argv);
  ck_assert_msg(rc == 2, "%s: exit %d, stderr %s", bad_runs[_i].needle, rc, err);
  assert_error_line(err, "invalid-argument", bad_runs[_i].needle);
  ck_assert_str_eq(out, "");
  /* Nothing was attempted: no grant, no rejection. */
  assert_status(name, "granted", "0");
  assert_status(name, "rejected", "0");
}
END_TEST

START_TEST(missing_segment) {
  const char *name = harness_name("none");
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "a", "--", "true"), 1);
  assert_error_line(err, "not-found", name);
  ck_assert_int_eq(CLI("cancel", name, "standard.1.2.0000000000000000"), 1);
  assert_error_line(err, "not-found", name);
  ck_assert_int_eq(CLI("explain", name, "standard.1.2.0000000000000000"), 1);
  assert_error_line(err, "not-found", name);
  ck_assert_int_eq(CLI("drain", name), 1);
  assert_error_line(err, "not-found", name);
  ck_assert_int_eq(CLI("repair", name, "--class", "standard"), 1);
  assert_error_line(err, "not-found", name);
}
END_TEST

/*
 * A cell granted to a waiter that has not accepted it (here: stopped) is not
 * leased: status counts it apart, as cells_granted, and explain says granted.
 * Strict hand-off (overtake=0), so that the release grants whenever it comes:
 * within the default bound it would nudge the stopped waiter instead and leave
 * the cell free (docs/protocol.md, "Bounded overtaking").
 */
START_TEST(status_counts_granted_apart) {
  const char *name = cli_segment("granted", "standard:cells=1,queue=4,overtake=0", NULL);
  struct cli_proc holder, q;
  char ticket[SHMS_TICKET_STRLEN];
  hold(&holder, name);
  queue_run(&q, name, "b", ticket, NULL, NULL);
  ck_assert_int_eq(kill(q.pid, SIGSTOP), 0);
  int st;
  ck_assert_int_eq(waitpid(q.pid, &st, WUNTRACED), q.pid);
  ck_assert(WIFSTOPPED(st));
  let_go(&holder); /* its release dispatched: the cell is granted to the stopped waiter */
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  ck_assert_msg(strstr(out, "\nstate: granted\n") != NULL, "%s", out);
  assert_status(name, "cells_leased", "0");
  assert_status(name, "cells_granted", "1");
  assert_status(name, "cells_available", "0");
  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(strstr(out, "\"cells_granted\": 1") != NULL, "%s", out);
  ck_assert_int_eq(kill(q.pid, SIGCONT), 0);
  ck_assert_int_eq(finish(&q), 0);
  assert_status(name, "cells_granted", "0");
  assert_status(name, "cells_available", "1");
}
END_TEST

/*
 * The segment truncated under a running `run` (an operator's mistake, or a
 * full tmpfs): when run next touches it (to release its lease, once its
 * command ended) it says so in one line and exits 74, rather than dying of SIGBUS.
 */
/* How many cgroups of incarnation inc are under ROOT (shm/cgroup.h), whatever their state. */
static int cgroups_of(const char *inc) {
  char root[PATH_MAX];
  if (shms__cgroup_root(root, sizeof root) != 0)
    return 0;
  DIR *d = opendir(root);
  if (d == NULL)
    return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, inc, strlen(inc)) == 0 && e->d_name[strlen(inc)] == '-';
  closedir(d);
  return n;
}

START_TEST(truncated_segment_is_one_line) {
  const char *name = cli_segment("trunc", "standard:cells=1,queue=4", NULL);
  ck_assert_int_eq(CLI("status", name), 0);
  char inc[32] = "";
  const char *at = strstr(out, "\nincarnation: ");
  ck_assert_ptr_nonnull(at);
  ck_assert_int_eq(sscanf(at, "\nincarnation: %31s", inc), 1);
  struct cli_proc holder;
  hold(&holder, name);
  int had_cgroup = cgroups_of(inc); /* a writable cgroup v2 hierarchy here */
  char path[256];
  harness_shm_path(path, sizeof path, name);
  ck_assert_int_eq(truncate(path, 0), 0);
  int rc = finish(&holder);
  ck_assert_msg(rc == 74, "exit %d: %s", rc, perr);
  char needle[160];
  snprintf(needle, sizeof needle, "run: segment '%s' was truncated under this process", name);
  assert_error_line(perr, "incompatible-segment", needle);
  /* Nobody can recover what it left in a segment that no longer validates: it removed its
   * command's cgroup itself. */
  if (had_cgroup)
    ck_assert_int_eq(cgroups_of(inc), 0);
}
END_TEST

/* The same for a segment at a path, and for a plain name in SHMSCHED_DIR: the line names the
 * segment as the user did (the path, or the plain name) and the file by its path. */
static void truncate_under_run(const char *name, const char *path, const char *shown) {
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=1,queue=4"), 0);
  struct cli_proc holder;
  hold(&holder, name);
  ck_assert_int_eq(truncate(path, 0), 0);
  int rc = finish(&holder);
  ck_assert_msg(rc == 74, "exit %d: %s", rc, perr);
  char needle[600];
  snprintf(needle, sizeof needle, "run: segment '%s' was truncated under this process", shown);
  assert_error_line(perr, "incompatible-segment", needle);
  snprintf(needle, sizeof needle, "past the end of %s)", path);
  ck_assert_msg(strstr(perr, needle) != NULL, "'%s' lacks '%s'", perr, needle);
  ck_assert_int_eq(unlink(path), 0);
}

START_TEST(truncated_segment_at_a_path_is_one_line) {
  char dir[64] = "/tmp/shmst-trunc-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, harness_name("trpath"));
  truncate_under_run(path, path, path);
  const char *plain = harness_name("trdir");
  snprintf(path, sizeof path, "%s/%s", dir, plain);
  ck_assert_int_eq(setenv("SHMSCHED_DIR", dir, 1), 0);
  truncate_under_run(plain, path, plain);
  ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- help ------------------------------------------------------------------ */

static const char *const help_commands[][3] = {
    {"run", "--help"},   {"cancel", "--help"}, {"explain", "-h"},
    {"drain", "--help"}, {"repair", "--help"}, {"help", "run"},
};

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

START_TEST(help_lists_defaults) {
  ck_assert_int_eq(CLI("run", "--help"), 0);
  static const char *const needles[] = {"(default 0)",         "(default: no deadline)", "75",
                                        "--release-on-signal", "--print-ticket",         "-- CMD"};
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
    ck_assert_msg(strstr(out, needles[i]) != NULL, "run --help lacks '%s'", needles[i]);
  ck_assert_int_eq(CLI("--help"), 0);
  ck_assert_msg(strstr(out, "  run NAME") && strstr(out, "  cancel NAME TICKET"), "%s", out);
}
END_TEST

static Suite *cli_sched_suite(void) {
  Suite *s = suite_create("cli_sched");
  TCase *tc = harness_tcase("run");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, run_exit_status);
  tcase_add_test(tc, run_crash_releases_by_default);
  tcase_add_test(tc, run_crash_quarantines_by_policy);
  tcase_add_test(tc, run_release_on_signal);
  tcase_add_test(tc, run_forwards_signals);
  suite_add_tcase(s, tc);
  tc = harness_tcase("tickets");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, print_ticket_then_cancel);
  tcase_add_test(tc, cancel_several_tickets);
  tcase_add_test(tc, cancel_outcomes);
  tcase_add_test(tc, explain_queued);
  tcase_add_test(tc, ticket_of_a_held_lease);
  tcase_add_test(tc, signal_cancels_wait);
  tcase_add_test(tc, tenants_take_turns);
  tcase_add_test(tc, status_counts_granted_apart);
  suite_add_tcase(s, tc);
  tc = harness_tcase("failures");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, drain_settles_queued);
  tcase_add_test(tc, queue_full);
  tcase_add_test(tc, duplicate_activation);
  tcase_add_test(tc, class_denied_and_deadline);
  tcase_add_test(tc, process_table_full);
  tcase_add_test(tc, system_process_limit);
  tcase_add_test(tc, truncated_segment_is_one_line);
  tcase_add_test(tc, truncated_segment_at_a_path_is_one_line);
  tcase_add_loop_test(tc, usage_errors, 0, sizeof bad_runs / sizeof bad_runs[0]);
  tcase_add_test(tc, missing_segment);
  suite_add_tcase(s, tc);
  tc = harness_tcase("help");
  tcase_add_loop_test(tc, help_texts, 0, sizeof help_commands / sizeof help_commands[0]);
  tcase_add_test(tc, help_lists_defaults);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(cli_sched_suite()); }

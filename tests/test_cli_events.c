/*
 * `shmsched events` and `explain` of an ended request, end to end through <build>/bin/shmsched.
 * The events are made in this process through the library (the ring does not care who writes);
 * --follow is driven by its stdout pipe: a line read is a line printed, no sleeping.
 */
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

static char out[65536], err[4096];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

static shms_t *segment(const char **name, uint32_t events) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1, .cells = 1, .queue = 4};
  cfg.events = events;
  *name = harness_name("events");
  harness_create(*name, &cfg);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(*name, 0, &h));
  return h;
}

static void done(shms_t *h, const char *name) {
  ck_assert_shms_ok(shms_detach(h));
  harness_remove(name);
}

/* A request of tenant in class c granted from the queue (the cell was held), then released. */
static shms_ticket granted_once(shms_t *h, shms_class_t c, const char *tenant) {
  shms_request r = {.cls = c, .tenant = "holder"};
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  r.tenant = tenant;
  shms_ticket t;
  ck_assert_shms_ok(shms_enqueue(h, &r, &t));
  ck_assert_shms_ok(shms_release(h, &held));
  ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  return t;
}

/* This process's login name (the suite runs as a user with one). */
static const char *my_login(void) {
  struct passwd *pw = getpwuid(geteuid());
  ck_assert_ptr_nonnull(pw);
  return pw->pw_name;
}

static size_t lines(const char *s) {
  size_t n = 0;
  for (; *s != '\0'; s++)
    n += *s == '\n';
  return n;
}

START_TEST(events_prints_each_record_as_a_line_or_as_json) {
  const char *name;
  shms_t *h = segment(&name, 64);
  shms_ticket t = granted_once(h, SHMS_CLASS_STANDARD, "alice");
  granted_once(h, SHMS_CLASS_SMALL, "bob");
  char ticket[SHMS_TICKET_STRLEN];
  shms_ticket_format(&t, ticket);
  ck_assert_int_eq(CLI("events", name), 0);
  ck_assert_uint_eq(lines(out), 2);
  char want[256];
  snprintf(want, sizeof want,
           "Z granted class=standard cell=0 tenant=alice ticket=%s pid=%d uid=%u user=%s waited=",
           ticket, getpid(), (unsigned)geteuid(), my_login());
  ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
  ck_assert_msg(strstr(out, "granted class=small cell=0 tenant=bob") != NULL, "%s", out);
  snprintf(want, sizeof want, "pid=%d uid=%u user=%s waited=", getpid(), (unsigned)geteuid(),
           my_login());
  ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
  ck_assert_int_eq(CLI("events", name, "--class", "small"), 0);
  ck_assert_uint_eq(lines(out), 1);
  ck_assert_ptr_nonnull(strstr(out, "tenant=bob"));
  ck_assert_int_eq(CLI("events", name, "--json", "--kind", "granted,rejected"), 0);
  ck_assert_uint_eq(lines(out), 2);
  snprintf(want, sizeof want,
           "\"kind\":\"granted\",\"class\":\"standard\",\"cell\":0,"
           "\"tenant\":\"alice\",\"ticket\":\"%s\",\"pid\":%d",
           ticket, getpid());
  ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
  ck_assert_msg(out[0] == '{' && strstr(out, "}\n{") != NULL, "not JSON Lines: %s", out);
  /* Whose each request was: this process's uid, and its login name. */
  snprintf(want, sizeof want, "\"pid\":%d,\"uid\":%u,\"user\":\"%s\"", getpid(),
           (unsigned)geteuid(), my_login());
  ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
  ck_assert_int_eq(CLI("events", name, "--kind", "cancelled"), 0);
  ck_assert_str_eq(out, "");
  ck_assert_int_eq(CLI("events", name, "--since", "1h"), 0);
  ck_assert_uint_eq(lines(out), 2);
  done(h, name);
}
END_TEST

START_TEST(events_refuses_bad_input_and_a_segment_without_a_ring) {
  const char *name;
  shms_t *h = segment(&name, 0);
  ck_assert_int_eq(CLI("events", name), 1);
  ck_assert_msg(strstr(err, "no event ring") != NULL, "%s", err);
  done(h, name);
  h = segment(&name, 16);
  ck_assert_int_eq(CLI("events", name, "--kind", "granted,nonsense"), 2);
  ck_assert_msg(strstr(err, "unknown kind 'nonsense'") != NULL, "%s", err);
  ck_assert_int_eq(CLI("events", name, "--since", "5"), 2);
  ck_assert_int_eq(CLI("events", name, "--class", "large"), 2);
  ck_assert_msg(strstr(err, "has no class large") != NULL, "%s", err);
  ck_assert_int_eq(CLI("events", name, "--class", "huge"), 2);
  ck_assert_int_eq(CLI("events"), 2);
  ck_assert_int_eq(CLI("events", name, "extra"), 2);
  done(h, name);
  ck_assert_int_eq(CLI("events", "shmst-no-such-segment"), 1);
}
END_TEST

START_TEST(create_sizes_the_ring_and_refuses_a_bad_size) {
  char seg[64];
  snprintf(seg, sizeof seg, "shmst-%d-ring", getpid());
  ck_assert_int_eq(CLI("create", seg, "--class", "small:cells=1,queue=1", "--events", "100"), 2);
  ck_assert_msg(strstr(err, "events: must be 0 (no event ring) or a power of two") != NULL, "%s",
                err);
  ck_assert_int_eq(CLI("create", seg, "--class", "small:cells=1,queue=1", "--events", "16"), 0);
  shms_t *h;
  shms_config cfg;
  ck_assert_shms_ok(shms_attach(seg, SHMS_ATTACH_OBSERVER, &h));
  ck_assert_shms_ok(shms_get_config(h, &cfg));
  ck_assert_uint_eq(cfg.events, 16);
  ck_assert_shms_ok(shms_detach(h));
  harness_remove(seg);
}
END_TEST

START_TEST(follow_prints_events_as_they_happen_and_stops_when_the_segment_goes) {
  const char *name;
  shms_t *h = segment(&name, 64);
  granted_once(h, SHMS_CLASS_STANDARD, "before");
  struct cli_proc p;
  CLI_SPAWN(&p, "events", name, "--follow", "--kind", "granted,cell-quarantined");
  char line[512];
  cli_read_line(p.out, line, sizeof line); /* what the ring held when it started */
  ck_assert_msg(strstr(line, "tenant=before") != NULL, "%s", line);
  granted_once(h, SHMS_CLASS_STANDARD, "after");
  cli_read_line(p.out, line, sizeof line);
  ck_assert_msg(strstr(line, "granted class=standard cell=0 tenant=after") != NULL, "%s", line);
  shms_request r = {.cls = SHMS_CLASS_SMALL, .tenant = "crash"};
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_quarantine(h, &l, 139));
  cli_read_line(p.out, line, sizeof line);
  ck_assert_msg(strstr(line, "cell-quarantined class=small cell=0 tenant=crash") != NULL &&
                    strstr(line, " code=139") != NULL,
                "%s", line);
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_destroy(name, 0));
  ck_assert_int_eq(cli_reap(&p, 1, out, sizeof out, NULL, err, sizeof err), 0);
}
END_TEST

START_TEST(explain_tells_how_an_ended_request_ended_from_the_ring) {
  const char *name;
  shms_t *h = segment(&name, 64);
  char ticket[SHMS_TICKET_STRLEN];
  shms_ticket t = granted_once(h, SHMS_CLASS_STANDARD, "alice");
  shms_ticket_format(&t, ticket);
  ck_assert_int_eq(CLI("explain", name, ticket), 0);
  ck_assert_msg(strstr(out, "state: ended\noutcome: accepted\ntenant: alice\nevent: granted\n") !=
                    NULL,
                "%s", out);
  /* A cancelled request, its outcome collected and its slot freed. */
  shms_request r = {.cls = SHMS_CLASS_STANDARD, .tenant = "holder"};
  shms_lease held, l;
  ck_assert_shms_ok(shms_acquire(h, &r, &held));
  r.tenant = "bob";
  ck_assert_shms_ok(shms_enqueue(h, &r, &t));
  ck_assert_int_eq(shms_cancel(h, &t), 1);
  ck_assert_int_eq(shms_wait(h, &t, 0, &l), SHMS_ECANCELLED);
  shms_ticket_format(&t, ticket);
  ck_assert_int_eq(CLI("explain", name, ticket, "--json"), 0);
  ck_assert_msg(strstr(out, "\"state\": \"ended\"") != NULL &&
                    strstr(out, "\"outcome\": \"cancelled\"") != NULL &&
                    strstr(out, "\"event\": \"cancelled\"") != NULL,
                "%s", out);
  ck_assert_shms_ok(shms_release(h, &held));
  done(h, name);
  /* Without a ring, an ended request is not found, as before. */
  h = segment(&name, 0);
  t = granted_once(h, SHMS_CLASS_STANDARD, "alice");
  shms_ticket_format(&t, ticket);
  ck_assert_int_eq(CLI("explain", name, ticket), 1);
  ck_assert_msg(strstr(err, "not-found") != NULL, "%s", err);
  done(h, name);
}
END_TEST

/*
 * What an operator asks about is recorded even where the library's fast path records nothing:
 * `run`'s command, started and ended with its status, on a lease taken at once; a drain, a run
 * refused at the door while it lasts, and the resume.
 */
START_TEST(run_drain_and_resume_are_recorded) {
  const char *name;
  shms_t *h = segment(&name, 64);
  ck_assert_int_eq(CLI("run", name, "--class", "standard", "--tenant", "alice", "--", "true"), 0);
  ck_assert_int_eq(
      CLI("run", name, "--class", "standard", "--tenant", "alice", "--", "sh", "-c", "exit 3"), 3);
  ck_assert_int_eq(CLI("drain", name), 0);
  ck_assert_int_ne(CLI("run", name, "--class", "standard", "--tenant", "bob", "--", "true"), 0);
  ck_assert_int_eq(CLI("resume", name), 0);
  ck_assert_int_eq(CLI("events", name), 0);
  ck_assert_uint_eq(lines(out), 7);
  const char *want[] = {"Z lease-started class=standard cell=0 tenant=alice pid=",
                        "Z lease-ended class=standard cell=0 tenant=alice pid=",
                        " exit=0\n",
                        " exit=3\n",
                        "Z drained pid=",
                        "Z rejected class=standard tenant=bob pid=",
                        " reason=shutdown\n",
                        "Z resumed pid="};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    ck_assert_msg(strstr(out, want[i]) != NULL, "'%s' lacks '%s'", out, want[i]);
  /* In order: each run's start before its end, the refusal between the drain and the resume. */
  ck_assert(strstr(out, "lease-started") < strstr(out, "lease-ended"));
  ck_assert(strstr(out, "drained") < strstr(out, "rejected"));
  ck_assert(strstr(out, "rejected") < strstr(out, "resumed"));
  ck_assert_int_eq(CLI("events", name, "--json", "--kind", "lease-ended"), 0);
  ck_assert_uint_eq(lines(out), 2);
  ck_assert_msg(strstr(out, "\"kind\":\"lease-ended\",\"class\":\"standard\",\"cell\":0,"
                            "\"tenant\":\"alice\"") != NULL &&
                    strstr(out, "\"exit\":3,\"signal\":null") != NULL,
                "%s", out);
  ck_assert_int_eq(
      CLI("run", name, "--class", "standard", "--tenant", "carol", "--", "sh", "-c", "kill -9 $$"),
      137);
  ck_assert_int_eq(CLI("events", name, "--kind", "lease-ended", "--json"), 0);
  ck_assert_msg(strstr(out, "\"tenant\":\"carol\"") != NULL &&
                    strstr(out, "\"exit\":null,\"signal\":9") != NULL,
                "%s", out);
  ck_assert_int_eq(CLI("events", name, "--kind", "lease-ended"), 0);
  ck_assert_msg(strstr(out, "tenant=carol") != NULL && strstr(out, " signal=SIGKILL\n"), "%s", out);
  done(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cli_events");
  TCase *tc = harness_tcase("events");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, events_prints_each_record_as_a_line_or_as_json);
  tcase_add_test(tc, events_refuses_bad_input_and_a_segment_without_a_ring);
  tcase_add_test(tc, create_sizes_the_ring_and_refuses_a_bad_size);
  tcase_add_test(tc, follow_prints_events_as_they_happen_and_stops_when_the_segment_goes);
  tcase_add_test(tc, explain_tells_how_an_ended_request_ended_from_the_ring);
  tcase_add_test(tc, run_drain_and_resume_are_recorded);
  suite_add_tcase(s, tc);
  return harness_run(s);
}

/*
 * The operator's view end to end, through <build>/bin/shmsched: status --tenants read as an
 * observer (never registering), status --leases (who holds each cell), and metrics (the
 * Prometheus exposition: checked by promtool and by python3-prometheus-client's parser when
 * they are installed, and served over --textfile and --listen).
 *
 * Synchronisation is by pipes and waitpid only, never by sleeping (cli_proc.h): a holder run
 * keeps a cell with `sh -c 'echo held; read x'`, a queued run with --print-ticket is known
 * queued once its ticket line arrives.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

static char out[262144], err[4096];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

static char pout[16384], perr[4096];

static int finish(struct cli_proc *p) {
  return cli_reap(p, 1, pout, sizeof pout, NULL, perr, sizeof perr);
}

/* Hold a cell of class standard for tenant until finish(): returns once the command runs. */
static void hold(struct cli_proc *p, const char *name, const char *tenant) {
  char line[64];
  CLI_SPAWN(p, "run", name, "--class", "standard", "--tenant", tenant, "--", "sh", "-c",
            "echo held; read x; exit 0");
  cli_read_line(p->out, line, sizeof line);
  ck_assert_str_eq(line, "held");
}

/* A run of tenant queued behind the holders (--print-ticket): returns once it is queued. */
static void queue_run(struct cli_proc *p, const char *name, const char *tenant, char *ticket) {
  CLI_SPAWN(p, "run", name, "--class", "standard", "--tenant", tenant, "--print-ticket", "--",
            "true");
  cli_read_line(p->err, ticket, SHMS_TICKET_STRLEN);
}

static void assert_has(const char *text, const char *needle) {
  ck_assert_msg(strstr(text, needle) != NULL, "lacks '%s':\n%s", needle, text);
}

/* ---- status --tenants: an observer, whatever the process table ------------- */

/*
 * Every entry of the process table is taken (a holder and a queued run, max-processes 2):
 * status --tenants still lists the queued tenant, which it could not if it registered.
 */
START_TEST(tenants_with_a_full_process_table) {
  const char *name =
      CLI_SEGMENT("tfull", "--class", "standard:cells=1,queue=4", "--max-processes", "2");
  struct cli_proc holder, queued;
  char ticket[SHMS_TICKET_STRLEN];
  hold(&holder, name, "h");
  queue_run(&queued, name, "a", ticket);
  ck_assert_int_eq(CLI("status", name, "--tenants"), 0);
  assert_has(out, "\nlive_processes: 2\n");
  assert_has(out, "\ntenants: 1\n");
  assert_has(out, "\ntenant.a: queued=1 active=0 in_ring=yes granted=0 ");
  ck_assert_int_eq(CLI("status", name, "--tenants", "--json"), 0);
  assert_has(out, "\"name\": \"a\"");
  /* cancel would need an entry of the table: let the holder go, and the queued run has it. */
  ck_assert_int_eq(finish(&holder), 0);
  ck_assert_int_eq(finish(&queued), 0);
}
END_TEST

/* The snapshot through the library: an observer handle, figures after grants from the queue. */
START_TEST(tenant_snapshot_figures) {
  const char *name = cli_segment("tsnap", "standard:cells=1,queue=8", NULL);
  struct cli_proc holder, q1, q2;
  char t1[SHMS_TICKET_STRLEN], t2[SHMS_TICKET_STRLEN];
  hold(&holder, name, "h");
  queue_run(&q1, name, "b", t1);
  queue_run(&q2, name, "b", t2);
  shms_t *h;
  ck_assert_int_eq(shms_attach(name, SHMS_ATTACH_OBSERVER, &h), SHMS_OK);
  shms_tenant_stats rows[4];
  uint32_t n = 99;
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, rows, 4, &n), SHMS_OK);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(rows[0].name, "b");
  ck_assert_uint_eq(rows[0].queued, 2);
  ck_assert_uint_eq(rows[0].in_ring, 1);
  /* A count without rows, and the errors. */
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, NULL, 0, &n), SHMS_OK);
  ck_assert_uint_eq(n, 1);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_SMALL, rows, 4, &n), SHMS_EINVAL);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, NULL, 4, &n), SHMS_EINVAL);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, rows, 4, NULL), SHMS_EINVAL);
  /* The holder goes: b's first request is granted from the queue, its figures move. */
  ck_assert_int_eq(finish(&holder), 0);
  ck_assert_int_eq(finish(&q1), 0);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, rows, 4, &n), SHMS_OK);
  if (n == 1) { /* b's second request may be granted and gone too: its record freed */
    ck_assert_str_eq(rows[0].name, "b");
    ck_assert_uint_ge(rows[0].granted, 1);
    ck_assert_uint_ge(rows[0].total_wait_ns, rows[0].max_wait_ns);
  }
  ck_assert_int_eq(finish(&q2), 0);
  shms_detach(h);
}
END_TEST

/* ---- status --leases: who holds what ---------------------------------------- */

/* The "cell.N: ..." line of `status NAME --leases` into line (which must exist). */
static void lease_line(const char *name, unsigned cell, char *line, size_t n) {
  char key[32];
  ck_assert_int_eq(CLI("status", name, "--leases"), 0);
  snprintf(key, sizeof key, "\ncell.%u: ", cell);
  const char *at = strstr(out, key);
  ck_assert_msg(at != NULL, "no %s:\n%s", key, out);
  at++;
  size_t len = strcspn(at, "\n");
  ck_assert_uint_lt(len, n);
  memcpy(line, at, len);
  line[len] = '\0';
}

/*
 * One holder seen running, stopped (SIGSTOP), dead (SIGKILL, before any recovery) and, once
 * check --repair has recovered it, its cell quarantined with the reason and the time; a lease
 * granted from the queue shows its request's ticket.
 */
START_TEST(leases_show_holders) {
  const char *name = cli_segment("leases", "standard:cells=1,queue=4", NULL);
  struct cli_proc holder, queued;
  char line[512], ticket[SHMS_TICKET_STRLEN], want[128];
  hold(&holder, name, "alice");
  lease_line(name, 0, line, sizeof line);
  snprintf(want, sizeof want, "state=leased generation=1 leases=1 pid=%d holder=running ",
           (int)holder.pid);
  ck_assert_msg(strstr(line, want) && strstr(line, " tenant=alice ") && strstr(line, " age_ns="),
                "%s", line);
  ck_assert_msg(strstr(line, "ticket=") == NULL, "a fast-path lease has no ticket: %s", line);
  /* Queued behind it; the holder lets go; the queued run holds the cell under its ticket. */
  CLI_SPAWN(&queued, "run", name, "--class", "standard", "--tenant", "bob", "--print-ticket", "--",
            "sh", "-c", "echo held; read x; exit 0");
  cli_read_line(queued.err, ticket, sizeof ticket);
  ck_assert_int_eq(finish(&holder), 0);
  cli_read_line(queued.out, line, sizeof line);
  ck_assert_str_eq(line, "held");
  lease_line(name, 0, line, sizeof line);
  snprintf(want, sizeof want, " ticket=%s ", ticket);
  ck_assert_msg(strstr(line, want) && strstr(line, " tenant=bob "), "%s", line);
  /* Stopped. */
  ck_assert_int_eq(kill(queued.pid, SIGSTOP), 0);
  siginfo_t si;
  ck_assert_int_eq(waitid(P_PID, (id_t)queued.pid, &si, WSTOPPED | WNOWAIT), 0);
  lease_line(name, 0, line, sizeof line);
  ck_assert_msg(strstr(line, " holder=stopped proc_state=T "), "%s", line);
  ck_assert_int_eq(CLI("status", name, "--leases", "--json"), 0);
  assert_has(out, "\"holder_state\": \"stopped\"");
  assert_has(out, "\"tenant\": \"bob\"");
  /* Dead, not yet recovered: the cell is still leased, its holder dead. */
  ck_assert_int_eq(kill(queued.pid, SIGKILL), 0);
  ck_assert_int_eq(waitid(P_PID, (id_t)queued.pid, &si, WEXITED | WNOWAIT), 0);
  lease_line(name, 0, line, sizeof line);
  ck_assert_msg(strstr(line, "state=leased ") && strstr(line, " holder=dead "), "%s", line);
  /* Recovered: quarantined (on-holder-death=quarantine), with the reason and the time. */
  ck_assert_int_eq(CLI("check", name, "--repair"), 0);
  lease_line(name, 0, line, sizeof line);
  ck_assert_msg(strstr(line, "state=quarantined ") && strstr(line, " reason=owner-lost ") &&
                    strstr(line, " quarantined=20"),
                "%s", line);
  ck_assert_int_eq(CLI("status", name, "--leases", "--json"), 0);
  assert_has(out, "\"leases\": [");
  assert_has(out, "\"state\": \"quarantined\"");
  assert_has(out, "\"reason\": \"owner-lost\"");
  assert_has(out, "\"quarantined_unix_ns\": ");
  cli_reap(&queued, 1, pout, sizeof pout, NULL, perr, sizeof perr);
}
END_TEST

static Suite *cli_view_suite(void) {
  Suite *s = suite_create("cli_view");
  TCase *tc = tcase_create("tenants");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, tenants_with_a_full_process_table);
  tcase_add_test(tc, tenant_snapshot_figures);
  suite_add_tcase(s, tc);
  tc = tcase_create("leases");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, leases_show_holders);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(cli_view_suite()); }

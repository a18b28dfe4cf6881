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
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "harness.h"

#ifndef SHMS_TESTS_DIR
#error "SHMS_TESTS_DIR: the tests' source directory (for metrics_parse.py)"
#endif

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
  assert_has(out, "\nlive_processes: 2\nsupervisor_pid: 0\n");
  assert_has(out, "\ntenants: 2\n");
  assert_has(out, "\ntenant.a: queued=1 active=0 in_ring=yes granted=0 ");
  assert_has(out, "\ntenant.h: queued=0 active=0 in_ring=no granted=1 ");
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
  ck_assert_uint_eq(n, 2); /* b, and h, whose lease was taken on the fast path */
  const shms_tenant_stats *b = strcmp(rows[0].name, "b") == 0 ? &rows[0] : &rows[1];
  ck_assert_str_eq(b->name, "b");
  ck_assert_uint_eq(b->queued, 2);
  ck_assert_uint_eq(b->in_ring, 1);
  ck_assert_str_eq(rows[b == &rows[0] ? 1 : 0].name, "h");
  ck_assert_uint_eq(rows[b == &rows[0] ? 1 : 0].granted, 1);
  /* A count without rows, and the errors. */
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, NULL, 0, &n), SHMS_OK);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_SMALL, rows, 4, &n), SHMS_EINVAL);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, NULL, 4, &n), SHMS_EINVAL);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, rows, 4, NULL), SHMS_EINVAL);
  /* The holder goes: b's first request is granted from the queue, its figures move. */
  ck_assert_int_eq(finish(&holder), 0);
  ck_assert_int_eq(finish(&q1), 0);
  ck_assert_int_eq(shms_tenants_snapshot(h, SHMS_CLASS_STANDARD, rows, 4, &n), SHMS_OK);
  ck_assert_uint_eq(n, 2); /* b's figures stay when its record is freed */
  b = strcmp(rows[0].name, "b") == 0 ? &rows[0] : &rows[1];
  ck_assert_str_eq(b->name, "b");
  ck_assert_uint_ge(b->granted, 1);
  ck_assert_uint_gt(b->total_wait_ns, 0);
  ck_assert_uint_ge(b->total_wait_ns, b->max_wait_ns);
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
/* This process's login name: the runs it starts run as it (the suite's user has one). */
static const char *my_login(void) {
  struct passwd *pw = getpwuid(geteuid());
  ck_assert_ptr_nonnull(pw);
  return pw->pw_name;
}

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
  snprintf(want, sizeof want, " tenant=alice uid=%u user=%s ", (unsigned)geteuid(), my_login());
  ck_assert_msg(strstr(line, want), "'%s' lacks '%s'", line, want);
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
  /* The quarantined cell keeps whose its last lease was. */
  snprintf(want, sizeof want, "\"uid\": %u,\n", (unsigned)geteuid());
  assert_has(out, want);
  snprintf(want, sizeof want, "\"user\": \"%s\",\n", my_login());
  assert_has(out, want);
  assert_has(out, "\"quarantined_unix_ns\": ");
  cli_reap(&queued, 1, pout, sizeof pout, NULL, perr, sizeof perr);
}
END_TEST

/* ---- metrics ------------------------------------------------------------------ */

static char tout[262144];

/* Run argv (PATH looked up) with stdin from in_path (NULL: /dev/null), stdout and stderr into
 * tout. Returns its exit status (127: not found). */
static int tool(const char *const argv[], const char *in_path) {
  int po[2];
  ck_assert(pipe(po) == 0);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    int in = open(in_path != NULL ? in_path : "/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(po[1], 1);
    dup2(po[1], 2);
    close(po[0]);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(po[1]);
  cli_slurp(po[0], tout, sizeof tout);
  close(po[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* text into dir/file; returns its path. */
static const char *save(const char *file, const char *text, char *path, size_t n) {
  cli_path(path, n, file);
  FILE *f = fopen(path, "w");
  ck_assert(f != NULL);
  fputs(text, f);
  ck_assert(fclose(f) == 0);
  return path;
}

/* The exposition in file passes `promtool check metrics` (the Prometheus project's linter). */
static void assert_promtool(const char *path) {
  int rc = tool((const char *const[]){"promtool", "check", "metrics", NULL}, path);
  ck_assert_msg(rc != 127, "promtool is not installed (scripts/setup.sh installs prometheus)");
  ck_assert_msg(rc == 0, "promtool check metrics failed (%d):\n%s", rc, tout);
}

/* Parsed back by python3-prometheus-client: its samples, one per line, into tout. */
static void parse_back(const char *path) {
  int rc = tool((const char *const[]){"/usr/bin/python3", SHMS_TESTS_DIR "/metrics_parse.py", NULL},
                path);
  ck_assert_msg(rc == 0,
                "prometheus_client's parser failed (%d; scripts/setup.sh installs "
                "python3-prometheus-client):\n%s",
                rc, tout);
}

/*
 * A known load: tenant h holds the only cell, tenants x and `a"b\c` (a name that needs escaping)
 * queue behind it filling the queue (2 slots), a third run is refused queue-full. Then the holder
 * goes, and both queued requests are granted from the queue: two waits in the histogram.
 */
START_TEST(metrics_exposition) {
  const char *name = cli_segment("metrics", "standard:cells=1,queue=2", NULL);
  struct cli_proc holder, q1, q2;
  char t1[SHMS_TICKET_STRLEN], t2[SHMS_TICKET_STRLEN], path[512], line[256];
  hold(&holder, name, "h");
  queue_run(&q1, name, "x", t1);
  queue_run(&q2, name, "a\"b\\c", t2);
  ck_assert_int_eq(CLI("run", name, "-c", "standard", "-t", "z", "--", "true"), 75);
  ck_assert_int_eq(CLI("metrics", name, "--tenants"), 0);
  save("m1.prom", out, path, sizeof path);
  snprintf(line, sizeof line,
           "shmsched_rejections_total{segment=\"%s\",class=\"standard\","
           "reason=\"queue-full\"} 1\n",
           name);
  assert_has(out, line);
  snprintf(line, sizeof line, "shmsched_queue_depth{segment=\"%s\",class=\"standard\"} 2\n", name);
  assert_has(out, line);
  snprintf(line, sizeof line,
           "shmsched_tenant_queued{segment=\"%s\",class=\"standard\","
           "tenant=\"a\\\"b\\\\c\"} 1\n",
           name);
  assert_has(out, line);
  /* Whose the held cell's lease is: one series for the one held cell. */
  snprintf(line, sizeof line,
           "shmsched_lease_info{segment=\"%s\",class=\"standard\",cell=\"0\",state=\"leased\","
           "tenant=\"h\",uid=\"%u\",user=\"%s\"} 1\n",
           name, (unsigned)geteuid(), my_login());
  assert_has(out, line);
  assert_promtool(path);
  parse_back(path);
  snprintf(line, sizeof line,
           "shmsched_lease_info{cell=0,class=standard,segment=%s,state=leased,tenant=h,uid=%u,"
           "user=%s} 1\n",
           name, (unsigned)geteuid(), my_login());
  assert_has(tout, line);
  snprintf(line, sizeof line,
           "shmsched_tenant_queued{class=standard,segment=%s,tenant=a\"b\\c} 1\n", name);
  assert_has(tout, line);
  assert_has(tout, "family shmsched_wait_seconds histogram\n");
  /* The holder goes: both queued requests are granted from the queue in turn: two waits. */
  ck_assert_int_eq(finish(&holder), 0);
  ck_assert_int_eq(finish(&q1), 0);
  ck_assert_int_eq(finish(&q2), 0);
  ck_assert_int_eq(CLI("metrics", name), 0);
  save("m2.prom", out, path, sizeof path);
  snprintf(line, sizeof line, "shmsched_wait_seconds_count{segment=\"%s\",class=\"standard\"} 2\n",
           name);
  assert_has(out, line);
  snprintf(line, sizeof line,
           "shmsched_wait_seconds_bucket{segment=\"%s\",class=\"standard\","
           "le=\"+Inf\"} 2\n",
           name);
  assert_has(out, line);
  snprintf(line, sizeof line, "shmsched_grants_total{segment=\"%s\",class=\"standard\"} 3\n", name);
  assert_has(out, line);
  ck_assert_msg(strstr(out, "shmsched_tenant_") == NULL, "tenant series without --tenants");
  ck_assert_msg(strstr(out, "shmsched_lease_info{") == NULL, "a lease series with no lease: %s",
                out);
  assert_promtool(path);
  parse_back(path);
  snprintf(line, sizeof line, "shmsched_wait_seconds_count{class=standard,segment=%s} 2\n", name);
  assert_has(tout, line);
}
END_TEST

/* --tenant-series 1 keeps the busiest tenant and sums the rest as _other; a missing segment is
 * shmsched_up 0 (exit 1, one error line), the others still written. */
START_TEST(metrics_tenant_cap_and_down) {
  const char *name = cli_segment("mcap", "standard:cells=1,queue=8", NULL);
  struct cli_proc holder, q[3];
  char t[3][SHMS_TICKET_STRLEN], path[512], line[256];
  const char *tenants[] = {"p", "q", "_other"};
  hold(&holder, name, "h");
  for (int i = 0; i < 3; i++)
    queue_run(&q[i], name, tenants[i], t[i]);
  ck_assert_int_eq(CLI("metrics", name, "--tenant-series", "1", "no-such-segment-shmst"), 1);
  ck_assert_msg(strncmp(err, "shmsched: not-found: ", 21) == 0 && strchr(err, '\n')[1] == '\0',
                "%s", err);
  assert_has(out, "shmsched_up{segment=\"no-such-segment-shmst\"} 0\n");
  save("cap.prom", out, path, sizeof path);
  assert_promtool(path);
  /* h holds the one grant (on the fast path): the busiest, it is kept; p, q (queued one each)
   * and the tenant named _other are summed. */
  snprintf(line, sizeof line,
           "shmsched_tenant_grants_total{segment=\"%s\",class=\"standard\","
           "tenant=\"h\"} 1\n",
           name);
  assert_has(out, line);
  snprintf(line, sizeof line,
           "shmsched_tenant_queued{segment=\"%s\",class=\"standard\","
           "tenant=\"_other\"} 3\n",
           name);
  assert_has(out, line);
  ck_assert_msg(strstr(out, "tenant=\"q\"") == NULL && strstr(out, "tenant=\"p\"") == NULL, "%s",
                out);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(CLI("cancel", name, t[i]), 0);
    ck_assert_int_eq(finish(&q[i]), 75);
  }
  ck_assert_int_eq(finish(&holder), 0);
  ck_assert_int_eq(CLI("metrics", name, "--tenant-series", "0"), 2);
  ck_assert_int_eq(CLI("metrics", name, "--interval", "1s"), 2);
  ck_assert_int_eq(CLI("metrics", name, "--listen", "1", "--textfile", "x"), 2);
  ck_assert_int_eq(CLI("metrics"), 2);
}
END_TEST

/* --textfile: the file appears whole through a rename, no temporary file is left; a directory
 * that cannot be written is one error line, exit 1, and nothing left behind. */
START_TEST(metrics_textfile) {
  const char *name = cli_segment("mtext", "standard:cells=2,queue=4", NULL);
  char path[512], bad[600];
  cli_path(path, sizeof path, "shmsched.prom");
  ck_assert_int_eq(CLI("metrics", name, "--textfile", path), 0);
  ck_assert_str_eq(out, "");
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0644);
  assert_promtool(path);
  int rc = tool((const char *const[]){"sh", "-c", "ls \"$0\"", cli_dir(), NULL}, NULL);
  ck_assert_int_eq(rc, 0);
  ck_assert_msg(strstr(tout, ".tmp") == NULL, "a temporary file was left: %s", tout);
  /* --interval: written at once (a rename into the directory, which inotify reports), then again
   * every hour, until SIGTERM ends the wait at once. */
  ck_assert_int_eq(unlink(path), 0);
  int in = inotify_init1(IN_CLOEXEC);
  ck_assert(in >= 0 && inotify_add_watch(in, cli_dir(), IN_MOVED_TO) >= 0);
  struct cli_proc every;
  CLI_SPAWN(&every, "metrics", name, "--textfile", path, "--interval", "1h");
  char ev[sizeof(struct inotify_event) + 256];
  ck_assert(read(in, ev, sizeof ev) > 0);
  ck_assert_str_eq(((struct inotify_event *)ev)->name, "shmsched.prom");
  close(in);
  assert_promtool(path);
  ck_assert_int_eq(kill(every.pid, SIGTERM), 0);
  ck_assert_int_eq(finish(&every), 0);
  snprintf(bad, sizeof bad, "%s/no-such-dir/shmsched.prom", cli_dir());
  ck_assert_int_eq(CLI("metrics", name, "--textfile", bad), 1);
  ck_assert_msg(strncmp(err, "shmsched: system-error: metrics: cannot create ", 47) == 0, "%s",
                err);
}
END_TEST

/* A TCP connection to 127.0.0.1:port. */
static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
  return fd;
}

/* Start `metrics NAME --listen 127.0.0.1:0 --timeout timeout`: returns the port it bound. */
static int serve(struct cli_proc *srv, const char *name, const char *timeout) {
  char line[128];
  int port = 0;
  CLI_SPAWN(srv, "metrics", name, "--listen", "127.0.0.1:0", "--timeout", timeout);
  cli_read_line(srv->out, line, sizeof line);
  ck_assert_msg(sscanf(line, "listening on 127.0.0.1:%d", &port) == 1 && port > 0, "%s", line);
  return port;
}

/* Send text on a new connection and read the whole answer (the server closes) into buf. */
static void exchange(int port, const char *text, size_t len, char *buf, size_t n) {
  int fd = dial(port);
  ck_assert(send(fd, text, len, MSG_NOSIGNAL) == (ssize_t)len);
  cli_slurp(fd, buf, n);
  close(fd);
}

/*
 * --listen, scraped by curl; a slow client (half a request, then nothing) does not hold up the
 * next one and is closed at its deadline; garbage, a request past the size cap, another method
 * and another path each get their error status; SIGTERM stops it, exit 0.
 */
START_TEST(metrics_listen) {
  const char *name = cli_segment("mlisten", "standard:cells=2,queue=4", NULL);
  struct cli_proc srv;
  char line[128], url[128], buf[16384];
  int port;
  /* Its deadline (60 s) is far past curl's (15 s): a server that waited for the slow client
   * would fail the scrape. */
  port = serve(&srv, name, "60s");
  int slow = dial(port);
  ck_assert(send(slow, "GET /met", 8, MSG_NOSIGNAL) == 8);
  /* curl scrapes while the slow client holds its connection open. */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
  int rc = tool((const char *const[]){"curl", "-sS", "-i", "--max-time", "15", url, NULL}, NULL);
  ck_assert_msg(rc == 0, "curl failed (%d): %s", rc, tout);
  assert_has(tout, "HTTP/1.1 200 OK\r\n");
  assert_has(tout, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n");
  snprintf(line, sizeof line, "shmsched_up{segment=\"%s\"} 1\n", name);
  assert_has(tout, line);
  static const char garbage[] = "\x01\x02\xff nonsense\r\n\r\n";
  exchange(port, garbage, sizeof garbage - 1, buf, sizeof buf);
  ck_assert_msg(strncmp(buf, "HTTP/1.1 400 ", 13) == 0, "%s", buf);
  static char big[9000];
  memset(big, 'a', sizeof big);
  memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 27);
  exchange(port, big, sizeof big, buf, sizeof buf);
  ck_assert_msg(strncmp(buf, "HTTP/1.1 431 ", 13) == 0, "%s", buf);
  static const char post[] = "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  exchange(port, post, sizeof post - 1, buf, sizeof buf);
  ck_assert_msg(strncmp(buf, "HTTP/1.1 405 ", 13) == 0 && strstr(buf, "Allow: GET, HEAD\r\n"), "%s",
                buf);
  static const char other[] = "GET /other HTTP/1.0\r\n\r\n";
  exchange(port, other, sizeof other - 1, buf, sizeof buf);
  ck_assert_msg(strncmp(buf, "HTTP/1.1 404 ", 13) == 0, "%s", buf);
  static const char head[] = "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  exchange(port, head, sizeof head - 1, buf, sizeof buf);
  ck_assert_msg(strncmp(buf, "HTTP/1.1 200 ", 13) == 0 && strstr(buf, "shmsched_up") == NULL, "%s",
                buf);
  /* Still serving after all that. */
  rc = tool((const char *const[]){"curl", "-sSf", "--max-time", "20", url, NULL}, NULL);
  ck_assert_msg(rc == 0 && strstr(tout, "# TYPE shmsched_wait_seconds histogram\n"), "%d: %s", rc,
                tout);
  ck_assert_int_eq(kill(srv.pid, SIGTERM), 0);
  ck_assert_int_eq(finish(&srv), 0);
  close(slow);
  /* With a short deadline the slow client is closed once it is up: the read sees the end. */
  port = serve(&srv, name, "200ms");
  slow = dial(port);
  ck_assert(send(slow, "GET /met", 8, MSG_NOSIGNAL) == 8);
  ck_assert_int_eq(cli_slurp(slow, buf, sizeof buf), 0);
  close(slow);
  ck_assert_int_eq(kill(srv.pid, SIGINT), 0);
  ck_assert_int_eq(finish(&srv), 0);
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
  tc = tcase_create("metrics");
  tcase_add_unchecked_fixture(tc, cli_left_setup, cli_left_teardown);
  tcase_add_test(tc, metrics_exposition);
  tcase_add_test(tc, metrics_tenant_cap_and_down);
  tcase_add_test(tc, metrics_textfile);
  tcase_add_test(tc, metrics_listen);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(cli_view_suite()); }

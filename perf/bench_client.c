/*
 * client-cost: what one short-lived client costs, by the size of the class it
 * uses. A class of 4 cells and --queue slots, nobody else on it. Each round a
 * fresh process attaches, enqueues, waits (granted at once), releases and
 * detaches through the API; the figure is the time that takes inside the
 * process and the process's peak resident set (ru_maxrss, which counts the
 * pages of the segment it touched). With --cli PATH, each round also runs
 * `PATH run SEGMENT -c standard -t bench -- true` as a whole process: its
 * wall time from fork to reaping, and its peak resident set.
 *
 * Output: `client-cost,qN,api_us,V,us`, `api_rss_kb`, and with --cli `cli_ms`,
 * `cli_rss_kb` (medians over the rounds), where N is --queue.
 * Usage: bench_client [--queue N] [--rounds R] [--cli PATH]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "shmsched.h"

static char segment[SHMS_NAME_MAX + 1]; /* a whole name: shms_name_check reads up to its bound */

static void die_shms(const char *what, int rc) {
  shms_destroy(segment, SHMS_DESTROY_FORCE);
  bu_die_shms(what, rc);
}

/* The client's life, in a fresh process: its duration in ns goes to *out. */
static void client(uint64_t *out) {
  uint64_t t0 = bu_now_ns();
  shms_t *h;
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "bench"};
  shms_ticket t;
  shms_lease l;
  if (shms_attach(segment, 0, &h) != SHMS_OK || shms_enqueue(h, &req, &t) != SHMS_OK ||
      shms_wait(h, &t, UINT64_MAX, &l) != SHMS_OK || shms_release(h, &l) != SHMS_OK ||
      shms_detach(h) != SHMS_OK)
    _exit(1);
  *out = bu_now_ns() - t0;
  _exit(0);
}

/* Reap pid; its peak resident set in kB. */
static long reap(pid_t pid, const char *what) {
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    bu_die("%s failed (status 0x%x)", what, status);
  return ru.ru_maxrss;
}

static void run_cli(const char *cli, uint64_t *ns, uint64_t *rss_kb) {
  uint64_t t0 = bu_now_ns();
  pid_t pid = fork();
  if (pid < 0)
    bu_die("fork failed");
  if (pid == 0) {
    execl(cli, cli, "run", segment, "-c", "standard", "-t", "bench", "--", "true", (char *)NULL);
    _exit(127);
  }
  *rss_kb = (uint64_t)reap(pid, "shmsched run");
  *ns = bu_now_ns() - t0;
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv, "[--queue N] [--rounds R] [--cli PATH]");
  long queue = bu_arg_long("queue", 64);
  long rounds = bu_arg_long("rounds", 20);
  const char *cli = bu_arg_str("cli", NULL);
  bu_args_done();
  if (queue < 1 || queue > (long)SHMS_QUEUE_MAX || rounds < 1)
    bu_die("--queue must be 1..%u and --rounds at least 1", SHMS_QUEUE_MAX);

  snprintf(segment, sizeof segment, "shms-bench-client-%d", (int)getpid());
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] =
      (shms_class_config){.configured = 1, .cells = 4, .queue = (uint32_t)queue};
  int rc = shms_create(segment, &cfg);
  if (rc != SHMS_OK)
    bu_die_shms("shms_create", rc);
  uint64_t *shared = bu_shared(sizeof(uint64_t));
  uint64_t *api_ns = calloc((size_t)rounds, sizeof *api_ns);
  uint64_t *api_rss = calloc((size_t)rounds, sizeof *api_rss);
  uint64_t *cli_ns = calloc((size_t)rounds, sizeof *cli_ns);
  uint64_t *cli_rss = calloc((size_t)rounds, sizeof *cli_rss);
  if (!api_ns || !api_rss || !cli_ns || !cli_rss)
    die_shms("calloc", SHMS_ENOMEM);
  for (long r = 0; r < rounds; r++) {
    pid_t pid = fork();
    if (pid < 0)
      bu_die("fork failed");
    if (pid == 0)
      client(shared);
    api_rss[r] = (uint64_t)reap(pid, "the client");
    api_ns[r] = bu_load64(shared);
    if (cli != NULL)
      run_cli(cli, &cli_ns[r], &cli_rss[r]);
  }
  shms_destroy(segment, SHMS_DESTROY_FORCE);

  char sys[32];
  snprintf(sys, sizeof sys, "q%ld", queue);
  size_t n = (size_t)rounds;
  bu_row("client-cost", sys, "api_us", (double)bu_quantile(api_ns, n, 0.5) / 1e3, "us");
  bu_row("client-cost", sys, "api_rss_kb", (double)bu_quantile(api_rss, n, 0.5), "kB");
  if (cli != NULL) {
    bu_row("client-cost", sys, "cli_ms", (double)bu_quantile(cli_ns, n, 0.5) / 1e6, "ms");
    bu_row("client-cost", sys, "cli_rss_kb", (double)bu_quantile(cli_rss, n, 0.5), "kB");
  }
  free(api_ns);
  free(api_rss);
  free(cli_ns);
  free(cli_rss);
  return 0;
}

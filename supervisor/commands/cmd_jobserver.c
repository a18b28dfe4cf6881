/*
 * shmsched jobserver: run a build tool as a GNU make jobserver client whose
 * tokens are shmsched leases (docs/jobserver.md). This file parses the
 * options, gets the implicit slot's lease as `run` does, and disposes of it;
 * js_tokens.c makes the pipes or FIFO, js_bridge.c keeps a lease behind every
 * token, js_run.c runs the command contained.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../jobserver/js_flags.h"
#include "../jobserver/js_run.h"

static const char help[] =
    "Usage: shmsched jobserver NAME --class CLASS --tenant TENANT [options] -- CMD [ARGS...]\n"
    "\n"
    "Run a build tool (make, cargo, ...) as a client of a GNU make jobserver whose\n"
    "tokens are leases on cells of CLASS for TENANT: builds running at once, each\n"
    "its own tenant, share the class's cells fairly, and none runs more jobs than\n"
    "the leases it holds. CMD's implicit slot is a lease got as run gets one; every\n"
    "token written to the jobserver has a lease behind it. The bridge keeps --spare\n"
    "tokens unread, asks for a lease when the build takes one, and releases the\n"
    "lease of every token written back. MAKEFLAGS and CARGO_MAKEFLAGS carry the\n"
    "jobserver (inherited jobserver words removed); SHMSCHED_SEGMENT, SHMSCHED_CLASS\n"
    "and SHMSCHED_TENANT say where it runs. CMD is contained as run's is (its own\n"
    "process group, and cgroup where cgroup v2 is writable; the bridge is a child\n"
    "subreaper); every lease is released once CMD and all its descendants are gone.\n"
    "Stop signals cancel the wait for the first lease, and are forwarded to CMD's\n"
    "group while it runs. If the bridge is killed, CMD's tree is killed before its\n"
    "leases are handed on.\n"
    "\n"
    "Options:\n"
    "  -c, --class CLASS      tiny, small, standard, large or extra-large (required)\n"
    "  -t, --tenant TENANT    who the build is for, 1..31 graphic ASCII bytes (required)\n"
    "  -p, --priority P       integer; higher first within the tenant's turn (default 0)\n"
    "  -d, --deadline DUR     give up unless the first lease is granted within DUR\n"
    "                         (ms, s, m or h) (default: no deadline)\n"
    "  -s, --style STYLE      auto, fifo (--jobserver-auth=fifo:PATH: make 4.4) or pipe\n"
    "                         (--jobserver-auth=R,W: make 4.2, 4.3, cargo) (default auto:\n"
    "                         fifo for make 4.4+ and ninja 1.13+ by their --version, else\n"
    "                         pipe)\n"
    "  --spare N              unread tokens kept ready for the build, 1..4096 (default 1)\n"
    "  --max N                leases at most, the implicit slot's included, 1..the class's\n"
    "                         cells (default: the class's cells)\n"
    "  --poll DUR             how often unread tokens are counted while some wait unread\n"
    "                         (default 10ms)\n"
    "  -k, --kill-after DUR   from a forwarded signal, or CMD's exit with processes left,\n"
    "                         to SIGKILL of what is left (default 10s)\n"
    "  -v, --verbose          say the jobserver at the start and the figures at the end\n"
    "                         (on stderr) (default: off)\n"
    "  -h, --help             show this help\n"
    "CMD must follow '--'; it is looked up in PATH. A -jN on make's command line makes\n"
    "make ignore the jobserver: the bridge warns.\n"
    "\n"
    "Exit status: CMD's status (128+N if signal N killed it); 75 the scheduler did\n"
    "not grant the first lease (as for run), or the process table is full; 1 the\n"
    "bridge failed otherwise; 2 usage error; 126/127 CMD could not be executed / was\n"
    "not found; 74 the segment was truncated under the bridge.\n"
    "\n"
    "Examples:\n"
    "  shmsched jobserver builds --class standard --tenant ci-1234 -- make all\n"
    "  shmsched jobserver builds -c standard -t pr-42 --style fifo -- cargo build --offline\n"
    "  shmsched jobserver builds -c standard -t nightly -p -5 --max 2 -- make -C docs\n";

enum { OPT_SPARE = 256, OPT_MAX, OPT_POLL };

static const struct option opts[] = {
    {"class", required_argument, NULL, 'c'},
    {"tenant", required_argument, NULL, 't'},
    {"priority", required_argument, NULL, 'p'},
    {"deadline", required_argument, NULL, 'd'},
    {"style", required_argument, NULL, 's'},
    {"spare", required_argument, NULL, OPT_SPARE},
    {"max", required_argument, NULL, OPT_MAX},
    {"poll", required_argument, NULL, OPT_POLL},
    {"kill-after", required_argument, NULL, 'k'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct js_args {
  const char *name;
  const char *cls;
  shms_request req;
  uint64_t deadline_in_ns, kill_after_ns, poll_ns;
  enum js_style style;
  uint32_t spare, max; /* max 0: the class's cells */
  int verbose;
  char **cmd;
};

/* --spare N / --max N: a count in lo..hi. */
static int count_option(const char *opt, uint32_t lo, uint32_t hi, uint32_t *out) {
  char err[256];
  if (cli_parse_u32(optarg, out, err, sizeof err) != 0)
    return cli_usage("jobserver: --%s: %s", opt, err);
  if (*out < lo || *out > hi)
    return cli_usage("jobserver: --%s: must be %u..%u, got %u", opt, lo, hi, *out);
  return -1;
}

/* One option into a; returns -1 to go on, else an exit code. */
static int take_option(int c, char **argv, struct js_args *a) {
  int rc = cli_request_option("jobserver", c, &a->cls, &a->req, &a->deadline_in_ns);
  if (rc != 0)
    return rc;
  char err[256], q[96];
  switch (c) {
  case 's':
    if (js_style_parse(optarg, &a->style) != 0)
      return cli_usage("jobserver: --style: expected auto, fifo or pipe, got '%s'",
                       cli_quote(q, sizeof q, optarg));
    return -1;
  case OPT_SPARE:
    return count_option("spare", 1, SHMS_CELLS_MAX, &a->spare);
  case OPT_MAX:
    return count_option("max", 1, SHMS_CELLS_MAX, &a->max);
  case OPT_POLL:
    if (cli_parse_duration(optarg, &a->poll_ns, err, sizeof err) != 0)
      return cli_usage("jobserver: --poll: %s", err);
    if (a->poll_ns < 1000000ull || a->poll_ns > 1000000000ull)
      return cli_usage("jobserver: --poll: must be 1ms..1s, got '%s'",
                       cli_quote(q, sizeof q, optarg));
    return -1;
  case 'k':
    if (cli_parse_duration(optarg, &a->kill_after_ns, err, sizeof err) != 0)
      return cli_usage("jobserver: --kill-after: %s", err);
    return -1;
  case 'v':
    a->verbose = 1;
    return -1;
  case 'h':
    return cli_help(help);
  default:
    return cli_bad_option("jobserver", c, argv);
  }
}

/* Options before the first "--", NAME among them; CMD after it. Returns -1 to go on. */
static int parse(int argc, char **argv, struct js_args *a) {
  int dashes = cli_dashes(argc, argv);
  int c, rc;
  while ((c = getopt_long(dashes, argv, ":c:t:p:d:s:k:vh", opts, NULL)) != -1)
    if ((rc = take_option(c, argv, a)) >= 0)
      return rc;
  if ((rc = cli_take_name_before_cmd("jobserver", dashes, argv, &a->name)) != 0)
    return rc;
  if ((rc = cli_request_target("jobserver", a->cls, &a->req)) != 0)
    return rc;
  if (shms_tenant_check(a->req.tenant) != SHMS_OK)
    return cli_usage("jobserver: --tenant: %s", shms_last_error_detail());
  if ((rc = cli_take_cmd("jobserver", argc, argv, dashes, &a->cmd)) != 0)
    return rc;
  return -1;
}

/* The first line `cmd0 --version` prints (into buf), or NULL if it prints none. */
static const char *version_line(const char *cmd0, char *buf, size_t n) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  char *argv[] = {(char *)cmd0, "--version", NULL};
  extern char **environ;
  pid_t pid;
  /* RESETIDS: the user's tool runs with the user's own gid, never a setgid front end's. */
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_RESETIDS);
  int rc = posix_spawnp(&pid, cmd0, &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  size_t got = 0;
  ssize_t r;
  while (rc == 0 && got + 1 < n && (r = read(p[0], buf + got, n - 1 - got)) != 0)
    if (r > 0)
      got += (size_t)r;
    else if (errno != EINTR)
      break;
  close(p[0]);
  if (rc == 0)
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
  buf[got] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  return rc == 0 && got > 0 ? buf : NULL;
}

/* Check what depends on the segment; resolve --max and --style. Returns -1 to go on. */
static int check_segment(struct js_args *a, const shms_config *cfg) {
  const shms_class_config *k = &cfg->classes[a->req.cls];
  if (!k->configured)
    return -1; /* the library says so, with its own reason */
  if (k->mode == SHMS_MODE_WORKER)
    return cli_usage("jobserver: class %s is a worker class (mode=worker): a jobserver's tokens "
                     "are leases, it needs a lease class",
                     a->cls);
  if (a->max == 0)
    a->max = k->cells;
  if (a->max > k->cells)
    return cli_usage("jobserver: --max %u: more than class %s's %u cells", a->max, a->cls,
                     k->cells);
  return -1;
}

static void resolve_style(struct js_args *a) {
  char line[256];
  if (a->style == JS_STYLE_AUTO)
    // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): parse set cmd
    a->style = js_style_probe_wanted(a->cmd[0])
                   ? js_style_for_version(a->cmd[0], version_line(a->cmd[0], line, sizeof line))
                   : JS_STYLE_PIPE;
}

/* -jN given to make makes it ignore the jobserver: say so before it runs. */
static void warn_forced_jobs(const struct js_args *a) {
  char what[64], q[96];
  if (js_make_forces_jobs(a->cmd, what, sizeof what))
    fprintf(stderr,
            "shmsched: jobserver: warning: '%s' is given '%s': make then ignores the jobserver "
            "(\"-jN forced in submake\") and runs as many jobs as -j says, without leases; drop "
            "it\n",
            a->cmd[0], cli_quote(q, sizeof q, what));
}

/* Why no first lease: one error line, exit 75 for the scheduler's answers (as run). */
static int no_lease(const struct js_args *a, int rc, int signo) {
  char q[96], why[320], sn[24];
  if (!cli_sched_outcome(rc))
    return cli_sched_fail(rc);
  const char *detail = shms_last_error_detail();
  if (signo != 0 && rc == SHMS_ECANCELLED)
    snprintf(why, sizeof why, "interrupted by %s while waiting: the request was cancelled",
             cli_signal_name(signo, sn, sizeof sn));
  else
    snprintf(why, sizeof why, "%s", detail[0] != '\0' ? detail : shms_strerror(rc));
  cli_fail(rc, "jobserver: %s (class %s, tenant '%s')", why, a->cls,
           cli_quote(q, sizeof q, a->req.tenant));
  return CLI_EXIT_SCHED;
}

/* The implicit slot's lease after CMD's tree is gone: released, or quarantined after a crash
 * in a class that says so (as run). Returns the exit code. */
static int dispose(shms_t *h, const struct js_args *a, const struct contain *c,
                   const shms_config *cfg, const shms_lease *lease, int st) {
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), rc;
  char sn[24];
  if (contain_crashed(c, st) &&
      cfg->classes[a->req.cls].on_command_crash == SHMS_ON_CRASH_QUARANTINE) {
    rc = shms_quarantine(h, lease, code);
    if (rc == SHMS_OK)
      fprintf(stderr,
              "shmsched: jobserver: '%s' crashed (%s): quarantined class %s cell %u "
              "(on-command-crash=quarantine; return it with 'shmsched repair %s --class %s "
              "--cell %u')\n",
              a->cmd[0], cli_signal_name(WTERMSIG(st), sn, sizeof sn), a->cls, lease->cell, a->name,
              a->cls, lease->cell);
  } else {
    rc = shms_release(h, lease);
  }
  if (rc != SHMS_OK)
    cli_sched_fail(rc);
  return code;
}

/* The bridge's books, MAKEFLAGS and the environment; 0, or -1 when out of memory. */
static int prepare(shms_t *h, const struct js_args *a, struct js_tokens *tk, struct js_bridge *b,
                   char **flags, char ***env) {
  char words[sizeof tk->auth + 32];
  snprintf(words, sizeof words, "-j%u %s", a->max, tk->auth);
  if (js_bridge_init(b, h, &a->req, a->cls, tk, a->max, a->spare, a->poll_ns, a->verbose) != 0 ||
      (*flags = js_makeflags(getenv("MAKEFLAGS"), words)) == NULL ||
      (*env = js_run_env(*flags, a->name, a->cls, a->req.tenant)) == NULL)
    return -1;
  if (a->verbose)
    fprintf(stderr, "shmsched: jobserver: class %s, tenant '%s': %s style, MAKEFLAGS='%s'\n",
            a->cls, a->req.tenant, js_style_name(tk->style), *flags);
  return 0;
}

/* Run CMD with the bridge; returns the exit code. The lease is disposed of in every case. */
static int run_build(shms_t *h, const struct js_args *a, const shms_config *cfg,
                     struct js_tokens *tk, const struct run_signals *sigs,
                     const shms_lease *lease) {
  struct js_bridge b;
  struct contain c;
  char *flags = NULL, **env = NULL;
  int st, code;
  if (prepare(h, a, tk, &b, &flags, &env) != 0) {
    cli_fail(SHMS_ENOMEM, "jobserver: out of memory");
    shms_release(h, lease);
    code = CLI_EXIT_FAIL;
  } else if (contain_init(&c, h, a->kill_after_ns, 1) != 0 ||
             js_run_command(&b, a->cmd, env, sigs, &c, &st) != 0) {
    int e = errno;
    cli_fail(SHMS_ESYSTEM, "jobserver: cannot start '%s': %s%s", a->cmd[0], strerror(e),
             e == EAGAIN
                 ? " (the process limit is reached; the lease was released: try again later)"
                 : "");
    shms_release(h, lease);
    code = e == EAGAIN ? CLI_EXIT_SCHED : CLI_EXIT_FAIL;
  } else {
    if (c.tty >= 0)
      close(c.tty);
    js_bridge_end(&b); /* every token's lease, before the implicit slot's */
    code = dispose(h, a, &c, cfg, lease, st);
  }
  if (b.held != NULL)
    js_bridge_end(&b);
  js_run_env_free(env);
  free(flags);
  return code;
}

int cmd_jobserver(int argc, char **argv) {
  struct js_args a = {.kill_after_ns = CONTAIN_KILL_AFTER_NS, .poll_ns = JS_POLL_NS, .spare = 1};
  int rc = parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if (a.deadline_in_ns != 0)
    a.req.deadline_ns = run_monotonic_ns() + a.deadline_in_ns;
  struct run_signals sigs;
  run_signals_block(&sigs);
  shms_t *h;
  if ((rc = cli_attach_to_queue("jobserver", a.name, &h)) != 0)
    return rc;
  shms_config cfg;
  if ((rc = shms_get_config(h, &cfg)) != SHMS_OK || (rc = check_segment(&a, &cfg)) >= 0) {
    shms_detach(h);
    return rc < 0 ? cli_fail_lib(rc) : rc;
  }
  resolve_style(&a);
  warn_forced_jobs(&a);
  struct js_tokens tk;
  char err[PATH_MAX + 128];
  if (js_tokens_open(&tk, a.style, err, sizeof err) != 0) {
    shms_detach(h);
    return cli_fail(SHMS_ESYSTEM, "jobserver: %s", err);
  }
  int fast = cfg.classes[a.req.cls].configured && cfg.classes[a.req.cls].tenant_max_active == 0;
  shms_lease lease;
  shms_ticket ticket;
  int signo, queued;
  rc = run_get_lease(h, &a.req, fast, 0, &sigs, &lease, &ticket, &queued, &signo);
  int code = rc != SHMS_OK ? no_lease(&a, rc, signo) : run_build(h, &a, &cfg, &tk, &sigs, &lease);
  js_tokens_close(&tk);
  shms_detach(h);
  return code;
}

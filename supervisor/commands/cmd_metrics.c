/* shmsched metrics: the Prometheus exposition of segments, once, into a textfile, or over HTTP. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../metrics/metrics.h"
#include "shmsched.h"

#define DEFAULT_TENANT_SERIES 20
#define DEFAULT_TIMEOUT_NS    (5ull * 1000 * 1000 * 1000)

static const char help[] =
    "Usage: shmsched metrics NAME... [--tenants [--tenant-series N]]\n"
    "                        [--textfile PATH [--interval DUR] | --listen ADDR:PORT]\n"
    "\n"
    "Print the segments' figures in the Prometheus text exposition format (0.0.4):\n"
    "shmsched_up, segment info, processes, supervisor, cells by state and by their\n"
    "holders' process state, queue depth and capacity, queued tenants, grants,\n"
    "rejections by reason, cancellations, expirations, revocations, quarantines,\n"
    "recoveries, the queue-wait histogram (shmsched_wait_seconds), the oldest\n"
    "lease's and grant's ages; labels segment and class. Each segment is read as an\n"
    "observer: read-only and unregistered; one that cannot be read shows as\n"
    "shmsched_up 0.\n"
    "\n"
    "Options:\n"
    "  -t, --tenants          add per-tenant series (label tenant) (default: off)\n"
    "  -N, --tenant-series N  at most N tenants per class, the busiest; the rest are\n"
    "                         summed as tenant=\"_other\" (default: 20; implies --tenants)\n"
    "  -f, --textfile PATH    write PATH (for node_exporter's textfile collector)\n"
    "                         through a temporary file and a rename: never half-written\n"
    "  -i, --interval DUR     with --textfile: write it again every DUR until SIGTERM\n"
    "                         or SIGINT (default: once)\n"
    "  -l, --listen ADDR:PORT serve GET /metrics over HTTP until SIGTERM or SIGINT;\n"
    "                         ADDR defaults to 127.0.0.1 (\"9464\", \":9464\",\n"
    "                         \"0.0.0.0:9464\", \"[::1]:9464\"); prints 'listening on\n"
    "                         ADDR:PORT' once bound (port 0: any free port)\n"
    "  -T, --timeout DUR      with --listen: a connection must finish its exchange\n"
    "                         within DUR, or it is closed (default: 5s)\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 written; 1 a segment could not be read (it is still written, as\n"
    "shmsched_up 0) or the textfile could not be written; 2 usage error. Serving\n"
    "(--interval, --listen): 0 once stopped by a signal.\n"
    "\n"
    "Examples:\n"
    "  shmsched metrics jobs\n"
    "  shmsched metrics jobs builds --tenants --tenant-series 5\n"
    "  shmsched metrics jobs --textfile /var/lib/prometheus/node-exporter/shmsched.prom \\\n"
    "      --interval 15s\n"
    "  shmsched metrics jobs --listen 127.0.0.1:9464\n";

/* Write buf to path through path.tmp.PID and a rename. Returns an exit code. */
static int write_textfile(const char *path, const char *buf, size_t len) {
  char tmp[4096], q[96];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp)
    return cli_usage("metrics: --textfile: path too long");
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return cli_fail(errno == EACCES ? SHMS_EPERM : SHMS_ESYSTEM, "metrics: cannot create %s: %s",
                    cli_quote(q, sizeof q, tmp), strerror(errno));
  size_t off = 0;
  while (off < len) {
    ssize_t n = write(fd, buf + off, len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    off += (size_t)n;
  }
  int e = off == len ? 0 : errno;
  if (e == 0 && fsync(fd) != 0)
    e = errno;
  if (close(fd) != 0 && e == 0)
    e = errno;
  if (e == 0 && rename(tmp, path) != 0)
    e = errno;
  if (e != 0) {
    unlink(tmp);
    return cli_fail(e == ENOSPC ? SHMS_ENOSPACE : SHMS_ESYSTEM, "metrics: cannot write %s: %s",
                    cli_quote(q, sizeof q, path), strerror(e));
  }
  return CLI_EXIT_OK;
}

/* One exposition to stdout or the textfile. Returns an exit code. */
static int once(const struct metrics_opts *o, const char *textfile) {
  char *buf;
  size_t len;
  int down = metrics_render(o, &buf, &len);
  if (down < 0)
    return cli_fail(SHMS_ENOMEM, "metrics: out of memory");
  int code = CLI_EXIT_OK;
  if (textfile != NULL)
    code = write_textfile(textfile, buf, len);
  else if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0)
    code = cli_fail(SHMS_ESYSTEM, "metrics: cannot write to stdout: %s", strerror(errno));
  free(buf);
  return code != CLI_EXIT_OK ? code : down > 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* --interval: write the textfile every interval_ns until SIGINT or SIGTERM, waited for with
 * sigtimedwait while blocked, so that one arriving at any moment ends the wait. */
static int every(const struct metrics_opts *o, const char *textfile, uint64_t interval_ns) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, NULL);
  for (;;) {
    once(o, textfile); /* a failure is reported; the next round may succeed */
    uint64_t due = cli_mono_ns() + interval_ns, now;
    while ((now = cli_mono_ns()) < due) {
      struct timespec ts = {(time_t)((due - now) / 1000000000u), (long)((due - now) % 1000000000u)};
      if (sigtimedwait(&stop, NULL, &ts) >= 0)
        return CLI_EXIT_OK;
    }
  }
}

struct args {
  struct metrics_opts o;
  const char *textfile, *listen;
  uint64_t interval_ns, timeout_ns;
};

static int parse_value(const char *opt, const char *v, struct args *a, int c) {
  char why[160];
  int bad = c == 'N'   ? cli_parse_u32(v, &a->o.tenant_series, why, sizeof why)
            : c == 'i' ? cli_parse_duration(v, &a->interval_ns, why, sizeof why)
                       : cli_parse_duration(v, &a->timeout_ns, why, sizeof why);
  if (bad == 0 && c == 'N' && a->o.tenant_series == 0)
    bad = snprintf(why, sizeof why, "must be at least 1");
  return bad ? cli_usage("metrics: %s: %s", opt, why) : 0;
}

static int parse(int argc, char **argv, struct args *a) {
  static const struct option opts[] = {
      {"tenants", no_argument, NULL, 't'},        {"tenant-series", required_argument, NULL, 'N'},
      {"textfile", required_argument, NULL, 'f'}, {"interval", required_argument, NULL, 'i'},
      {"listen", required_argument, NULL, 'l'},   {"timeout", required_argument, NULL, 'T'},
      {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
  static const char *const names[] = {
      ['N'] = "--tenant-series", ['i'] = "--interval", ['T'] = "--timeout"};
  int c, seen_interval = 0, seen_timeout = 0;
  while ((c = getopt_long(argc, argv, ":tN:f:i:l:T:h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help), -1;
    if (c == 't')
      a->o.tenants = 1;
    else if (c == 'f')
      a->textfile = optarg;
    else if (c == 'l')
      a->listen = optarg;
    else if (c == 'N' || c == 'i' || c == 'T') {
      if (parse_value(names[c], optarg, a, c) != 0)
        return CLI_EXIT_USAGE;
      a->o.tenants |= c == 'N';
      seen_interval |= c == 'i';
      seen_timeout |= c == 'T';
    } else
      return cli_bad_option("metrics", c, argv);
  }
  if (a->textfile != NULL && a->listen != NULL)
    return cli_usage("metrics: --textfile and --listen exclude each other");
  if (seen_interval && a->textfile == NULL)
    return cli_usage("metrics: --interval needs --textfile");
  if (seen_timeout && a->listen == NULL)
    return cli_usage("metrics: --timeout needs --listen");
  if (a->textfile != NULL && a->textfile[0] == '\0')
    return cli_usage("metrics: --textfile: empty path");
  if (optind >= argc)
    return cli_usage("metrics: missing segment NAME (see 'shmsched metrics --help')");
  for (int i = optind; i < argc; i++) {
    char q[96];
    if (shms_name_check(argv[i]) != SHMS_OK)
      return cli_usage("metrics: invalid segment name '%s': %s", cli_quote(q, sizeof q, argv[i]),
                       shms_last_error_detail());
  }
  a->o.names = argv + optind;
  a->o.count = argc - optind;
  return 0;
}

int cmd_metrics(int argc, char **argv) {
  struct args a = {.o = {.tenant_series = DEFAULT_TENANT_SERIES}, .timeout_ns = DEFAULT_TIMEOUT_NS};
  int rc = parse(argc, argv, &a);
  if (rc != 0)
    return rc < 0 ? CLI_EXIT_OK : rc;
  if (a.listen != NULL)
    return metrics_serve(a.listen, a.timeout_ns, &a.o);
  if (a.interval_ns != 0)
    return every(&a.o, a.textfile, a.interval_ns);
  a.o.report_errors = 1;
  return once(&a.o, a.textfile);
}
